"""`[targets]` per series in stackmgr.toml (`replay = "output_throughput >= 150"`): `status`, `show`, `links` and
the report say in one line whether a valid result of the series meets it and which comes closest, and name the
results past it that are not valid. The target is read by a small grammar (METRIC OP NUMBER), never evaluated."""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import pytest

from stackmgr.errors import StackmgrError
from stackmgr.store.targets_config import parse_target
from tests.conftest import Lab

BENCH = """\
import json, os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
json.dump({"model_id": "m", "request_rate": os.environ.get("RATE", "inf"),
           "output_throughput": float(os.environ["TPUT"])}, open(os.path.join(out, "b.json"), "w"))
sys.exit(int(os.environ.get("EXIT", "0")))
"""


@pytest.fixture
def targeted(lab: Lab, tmp_path: Path) -> Path:
    """Series replay (patch fix, applied) with a throughput target; a bench script outside the tree."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "replay", "-m", "fix").code == 0
    with (lab.store / "stackmgr.toml").open("a") as config:
        config.write('\n[targets]\nreplay = "output_throughput >= 150"\n')
    script = tmp_path / "bench.py"
    script.write_text(BENCH)
    return script


def bench(lab: Lab, script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, tput: str,
          exit_code: str = "0") -> str:  # fmt: skip
    out = tmp_path / f"out-{name}"
    monkeypatch.setenv("TPUT", tput)
    monkeypatch.setenv("EXIT", exit_code)
    monkeypatch.setenv("RATE", name)  # each named run its own configuration (qps1, qps3: request rates)
    done = lab.sm("--json", "run", "--name", name, "--result-dir", str(out), "--", sys.executable, str(script),
                  str(out))  # fmt: skip
    assert done.code == int(exit_code), done.err
    found = re.search(r"recorded (lnk-[0-9a-f]{12})", done.err)
    assert found is not None, done.err
    return found.group(1)


def target_lines(lab: Lab) -> dict[str, list[str]]:
    views = {"status": lab.sm("status"), "show": lab.sm("show", "fix"), "links": lab.sm("links")}
    assert all(v.code == 0 for v in views.values()), {k: v.err for k, v in views.items()}
    return {k: [line.strip() for line in v.out.splitlines() if line.strip().startswith("target ")]
            for k, v in views.items()}  # fmt: skip


def test_a_target_not_reached_names_the_closest_valid_result_and_the_invalid_ones_past_it(
        lab: Lab, targeted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    none_yet = "target replay: output_throughput >= 150 not reached: no valid result has output_throughput"
    assert target_lines(lab) == {"status": [none_yet], "show": [none_yet], "links": [none_yet]}
    valid = bench(lab, targeted, tmp_path, monkeypatch, "qps1", "107.77")
    bench(lab, targeted, tmp_path, monkeypatch, "qps2", "200", exit_code="1")  # past the target, but failed
    line = (f"target replay: output_throughput >= 150 not reached: best valid 107.77 tok/s ({valid}, run qps1); "
            "1 result above it is not valid (exit 1)")  # fmt: skip
    assert target_lines(lab) == {"status": [line], "show": [line], "links": [line]}
    (said,) = json.loads(lab.sm("status", "--json").out)["targets"]
    assert said["series"] == "replay" and said["met"] is False and said["best"] == valid
    assert said["line"] == line and len(said["not_valid"]) == 1
    for view in (("show", "fix"), ("links",), ("links", "--series", "replay")):  # every view's JSON says it too
        assert json.loads(lab.sm(*view, "--json").out)["targets"] == [said], view
    bench(lab, targeted, tmp_path, monkeypatch, "qps4", "300")  # then its JSON gate is found failing
    done = lab.sm("link", "fix", "--amends", "qps4", "--gate", "json=fail:3/8")
    assert done.code == 0, done.err
    line = (f"target replay: output_throughput >= 150 not reached: best valid 107.77 tok/s ({valid}, run qps1); "
            "2 results above it are not valid (exit 1; invalid: gate json: fail)")  # fmt: skip
    assert target_lines(lab)["links"] == [line]


def test_a_target_met_by_a_valid_result_says_so(
    lab: Lab, targeted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench(lab, targeted, tmp_path, monkeypatch, "qps1", "107.77")
    best = bench(lab, targeted, tmp_path, monkeypatch, "qps3", "160.5")
    line = f"target replay: output_throughput >= 150 reached: 160.5 tok/s ({best}, run qps3)"
    assert target_lines(lab) == {"status": [line], "show": [line], "links": [line]}
    assert json.loads(lab.sm("status", "--json").out)["targets"][0]["met"] is True
    assert lab.sm("report", "-o", str(tmp_path / "site")).code == 0
    assert html.escape(line, quote=False) in (tmp_path / "site" / "index.html").read_text()


def test_a_baseline_never_meets_the_target_of_its_series(
    lab: Lab, targeted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert lab.sm("pop", "-a").code == 0
    bench(lab, targeted, tmp_path, monkeypatch, "base", "500")  # the bare base: no result of the series
    none_yet = "target replay: output_throughput >= 150 not reached: no valid result has output_throughput"
    assert target_lines(lab)["show"] == [none_yet]


def test_a_target_is_read_by_its_grammar_and_never_evaluated(lab: Lab, targeted: Path) -> None:
    assert parse_target("replay", " output_throughput>=150 ").op == ">="
    assert parse_target("replay", "mean_ttft_ms < 40.5").threshold == 40.5
    for bad in (
        "__import__('os').system('x') >= 1",
        "output_throughput => 150",
        "output_throughput >= nan",
        "output_throughput >= 1e999",
        "output_throughput >= 150 tok/s",
        "output_throughput",
        150,
    ):
        with pytest.raises(StackmgrError, match="METRIC OP NUMBER"):
            parse_target("replay", bad)
    (lab.store / "stackmgr.toml").write_text(
        (lab.store / "stackmgr.toml").read_text().replace(">= 150", "=> 150"))  # fmt: skip
    done = lab.sm("status")
    assert done.code == 0  # status still reports the trees; the target is named as unreadable
    assert 'target replay: "output_throughput => 150" is not METRIC OP NUMBER' in done.out


def test_a_damaged_record_from_a_pull_is_said_in_the_target_line_and_status_still_answers(
        lab: Lab, targeted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A teammate's record whose artifact path climbs out of the store: `status` (what one reads before a reset)
    still answers, exit 0, its target line saying why it cannot be judged; nothing outside is read."""
    good = bench(lab, targeted, tmp_path, monkeypatch, "qps1", "107.77")
    (record,) = (lab.store / "links" / "fix").glob(f"*{good}.toml")
    forged = record.read_text().replace(good, "lnk-0badc0ffee11").replace('name = "qps1"', 'name = "evil"')
    forged += f'\n[[artifact]]\npath = "../../../../etc/passwd"\nsha256 = "{"0" * 64}"\nsize = 7\norigin = "x"\n'
    record.with_name(record.name.replace(good, "lnk-0badc0ffee11")).write_text(forged)
    done = lab.sm("status")
    assert done.code == 0, done.err
    (line,) = [t.strip() for t in done.out.splitlines() if t.strip().startswith("target ")]
    assert line.startswith("target replay: output_throughput >= 150: cannot be judged: "), line


def test_repeats_reach_a_target_by_their_median_never_by_their_luckiest_run(
        lab: Lab, targeted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Five runs of one state, one of them past 150: the measurement is their median (120), not reached."""
    out = tmp_path / "out"
    for k, tput in enumerate(("118", "121", "155", "120", "119"), 1):
        monkeypatch.setenv("TPUT", tput)
        monkeypatch.setenv("EXIT", "0")
        done = lab.sm("run", "--name", f"r-{k}", "--result-dir", str(out), "--", sys.executable, str(targeted),
                      str(out))  # fmt: skip
        assert done.code == 0, done.err
    (line,) = target_lines(lab)["status"]
    assert line.startswith("target replay: output_throughput >= 150 not reached: best valid median 120 tok/s of 5 "
                           "runs (lnk-"), line  # fmt: skip
    assert line.endswith("the latest, run r-5)"), line
    (said,) = json.loads(lab.sm("status", "--json").out)["targets"]
    assert (said["met"], said["value"], said["runs"]) == (False, 120.0, 5)
