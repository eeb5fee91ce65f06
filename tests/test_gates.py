"""Gates a lab declares (`[gates.NAME]` in stackmgr.toml: a metric bound, a regex on the log, a command run on the
result) are computed by every `run` and recorded in its link; a result is valid only when every gate passes, and
only a valid result can promote its patch. `[metrics.NAME] direction` says which way a metric is better; a metric
whose direction nobody knows is shown without better or worse."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from stackmgr.evidence import metrics
from stackmgr.evidence.metrics import Metric
from stackmgr.store.config import load_store
from tests.conftest import Lab, link_records, one_line_error

BENCH = """\
import json, os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
json.dump({"model_id": "m", "output_throughput": float(os.environ.get("TPUT", "900")),
           "quality_cosine": float(os.environ.get("COSINE", "0.999"))}, open(os.path.join(out, "bench.json"), "w"))
print(os.environ.get("SAY", "all good"), flush=True)
"""

CHECK = """\
import json, os, sys, time
if os.environ.get("SLOW"):
    time.sleep(30)
doc = json.load(open(os.path.join(os.environ["STACKMGR_RESULT_DIRS"].split(os.pathsep)[0], "bench.json")))
log = open(os.environ["STACKMGR_LOG"]).read()
print("cosine", doc["quality_cosine"], "log", log.strip())
sys.exit(0 if doc["quality_cosine"] > 0.9 else 1)
"""


@pytest.fixture
def bench(lab: Lab, tmp_path: Path) -> Path:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    script = tmp_path / "bench.py"
    script.write_text(BENCH)
    (tmp_path / "check.py").write_text(CHECK)
    return script


def configure(lab: Lab, shared: str = "", local: str = "") -> None:
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + shared)
    mine = lab.store / "stackmgr.local.toml"
    mine.write_text(mine.read_text() + local)


def bench_run(lab: Lab, script: Path, tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch,
              **env: str) -> dict[str, Any]:  # fmt: skip
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / f"out-{name}"
    done = lab.sm("run", "--name", name, "--result-dir", str(out), "--", sys.executable, str(script), str(out))
    assert done.code == 0, done.err
    (record,) = [r for r in link_records(lab, "fix") if r.get("run", {}).get("name") == name]
    return record


def gates_of(record: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {g["name"]: (g["status"], g.get("detail", "")) for g in record.get("gate", [])}


QUALITY = '\n[gates.quality]\nmetric = "quality_cosine"\nmin = 0.99\n'


def test_a_failing_metric_gate_makes_the_run_invalid_and_its_promotion_refused(
        lab: Lab, bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    configure(lab, QUALITY)
    record = bench_run(lab, bench, tmp_path, "skip-layers", monkeypatch, COSINE="0.73")
    assert gates_of(record) == {"exit": ("pass", "exit 0"), "quality": ("fail", "quality_cosine 0.73 < min 0.99")}
    listed = lab.sm("links")
    assert "INVALID (gate quality: fail)" in listed.out, listed.out
    assert "INVALID (gate quality: fail)" in lab.sm("show", "fix").out
    shown = json.loads(lab.sm("show", "fix", "--json").out)
    (mine,) = [k for k in shown["links"] if k["id"] == record["id"]]
    assert (mine["valid"], mine["invalid"], mine["usable"]) == (False, "gate quality: fail", False)
    before = sorted(p.name for p in (lab.store / "links" / "fix").iterdir())
    done = lab.sm("link", "fix", "--amends", "skip-layers", "--verdict", "promoted")
    one_line_error(done, 2)
    assert done.err.startswith(f"stackmgr: cannot promote {record['id']}: gate quality failed "
                               "(quality_cosine 0.73 < min 0.99)"), done.err  # fmt: skip
    assert "--gate quality=pass:" in done.err  # how to override: a gate checked by hand, recorded as such
    assert sorted(p.name for p in (lab.store / "links" / "fix").iterdir()) == before  # nothing written
    overridden = lab.sm("link", "fix", "--amends", "skip-layers", "--verdict", "promoted",
                        "--gate", "quality=pass:reviewed by hand, 0.73 is fine for this model")  # fmt: skip
    assert overridden.code == 0, overridden.err


def test_a_passing_metric_gate_leaves_the_run_valid_and_promotable(
        lab: Lab, bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    configure(lab, QUALITY + '\n[gates.fast]\nmetric = "output_throughput"\nmin = 150\nmax = 5000\n')
    record = bench_run(lab, bench, tmp_path, "good", monkeypatch)
    assert gates_of(record)["quality"] == ("pass", "quality_cosine 0.999 >= min 0.99")
    assert gates_of(record)["fast"] == ("pass", "output_throughput 900 within [150, 5000]")
    assert "INVALID" not in lab.sm("links").out
    assert lab.sm("link", "fix", "--amends", "good", "--verdict", "promoted").code == 0


def test_a_metric_gate_on_a_metric_the_run_did_not_write_is_an_error(
        lab: Lab, bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    configure(lab, '\n[gates.json]\nmetric = "json_valid_rate"\nmin = 1\n')
    record = bench_run(lab, bench, tmp_path, "r", monkeypatch)
    assert gates_of(record)["json"] == ("error", "the run wrote no metric json_valid_rate")


def test_log_regex_gates_must_match_or_must_not(
        lab: Lab, bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    configure(lab, '\n[gates.no-oom]\nlog_regex = "CUDA out of memory"\nmust = "not-match"\n'
                   '\n[gates.served]\nlog_regex = "all (good|fine)"\nmust = "match"\n')  # fmt: skip
    good = bench_run(lab, bench, tmp_path, "good", monkeypatch)
    assert gates_of(good)["no-oom"][0] == "pass" and gates_of(good)["served"][0] == "pass"
    oom = bench_run(lab, bench, tmp_path, "oom", monkeypatch, SAY="RuntimeError: CUDA out of memory")
    assert gates_of(oom)["no-oom"] == ("fail", "the log matches /CUDA out of memory/")
    assert gates_of(oom)["served"] == ("fail", "the log does not match /all (good|fine)/")
    assert lab.sm("link", "fix", "--amends", "oom", "--verdict", "promoted").code == 2


def test_a_bad_gate_in_the_config_is_refused_before_the_command_runs(
        lab: Lab, bench: Path, tmp_path: Path) -> None:  # fmt: skip
    configure(lab, '\n[gates.quality]\nmetric = "quality_cosine"\nmin = "high"\n')
    marker = tmp_path / "ran"
    done = lab.sm("run", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    one_line_error(done, 3)
    assert "stackmgr.toml: [gates.quality] min must be a number" in done.err, done.err
    assert not marker.exists() and not (lab.store / "links" / "fix").exists()


def test_a_command_gate_from_this_machines_config_runs_on_the_result(
        lab: Lab, bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    check = tmp_path / "check.py"
    configure(lab, local=f'\n[gates.judge]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(check))}]\n'
                         'timeout_s = 20\n')  # fmt: skip
    good = bench_run(lab, bench, tmp_path, "good", monkeypatch)
    assert gates_of(good)["judge"] == ("pass", "exit 0: cosine 0.999 log all good")
    bad = bench_run(lab, bench, tmp_path, "bad", monkeypatch, COSINE="0.5")
    assert gates_of(bad)["judge"] == ("fail", "exit 1: cosine 0.5 log all good")
    assert lab.sm("link", "fix", "--amends", "bad", "--verdict", "promoted").code == 2


def test_a_command_gate_that_runs_past_its_time_is_stopped_and_an_error(
        lab: Lab, bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    check = tmp_path / "check.py"
    configure(lab, local=f'\n[gates.judge]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(check))}]\n'
                         'timeout_s = 0.5\n')  # fmt: skip
    slow = bench_run(lab, bench, tmp_path, "slow", monkeypatch, SLOW="1")
    assert gates_of(slow)["judge"] == ("error", "stopped after 0.5 s")


def test_a_command_gate_from_the_shared_config_is_not_run_until_this_machine_declares_it(
        lab: Lab, bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    canary = tmp_path / "pwned"
    configure(lab, f'\n[gates.judge]\ncommand = ["touch", {json.dumps(str(canary))}]\n')
    record = bench_run(lab, bench, tmp_path, "r", monkeypatch)
    assert not canary.exists()  # a pulled config runs no code
    status, detail = gates_of(record)["judge"]
    assert status == "not-run" and "stackmgr.local.toml" in detail
    assert "INVALID (gate judge: not-run)" in lab.sm("links").out
    configure(lab, local=f'\n[gates.judge]\ncommand = ["touch", {json.dumps(str(canary))}]\n')  # accepted here
    accepted = bench_run(lab, bench, tmp_path, "r2", monkeypatch)
    assert canary.exists() and gates_of(accepted)["judge"] == ("pass", "exit 0")


def test_a_direction_from_the_config_decides_better_and_worse(
        lab: Lab, bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    configure(lab, '\n[metrics.quality_cosine]\ndirection = "lower"\n')
    first = bench_run(lab, bench, tmp_path, "one", monkeypatch, COSINE="0.9")
    assert {m["name"]: m.get("direction", "") for m in first["metric"]} == {
        "output_throughput": "higher", "quality_cosine": "lower"}  # fmt: skip
    store = load_store(str(lab.store))
    cosine = Metric("quality_cosine", 0.9, "", "higher")
    assert metrics.direction_of(store, cosine) == "lower"  # the config's word over what a record says
    assert metrics.change(0.1, metrics.direction_of(store, cosine)) == "worse"
    second = bench_run(lab, bench, tmp_path, "two", monkeypatch, COSINE="0.8")
    compared = json.loads(lab.sm("compare", first["id"], second["id"], "--json").out)
    (row,) = [r for g in compared["groups"] for r in g["metrics"] if r["name"] == "quality_cosine"]
    assert row["direction"] == "lower" and row["values"][1]["change"] == "better"  # 0.8 after 0.9: lower is better


def test_a_metric_nobody_gave_a_direction_is_shown_without_better_or_worse(
        lab: Lab, bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    record = bench_run(lab, bench, tmp_path, "one", monkeypatch)
    assert {m["name"]: m.get("direction", "") for m in record["metric"]} == {
        "output_throughput": "higher", "quality_cosine": ""}  # fmt: skip
    assert metrics.direction_of(load_store(str(lab.store)), Metric("quality_cosine", 1.0, "", "")) == ""
    assert metrics.change(0.5, "") == "" and metrics.change(0.0, "") == "same"
    assert metrics.direction_for("mean_ttft_ms", "ms") == "lower" and metrics.direction_for("x_latency", "") == "lower"
    assert metrics.direction_for("decode_throughput", "") == "higher"
    assert metrics.direction_for("foo", "tok/s") == "higher"


def test_a_direction_declared_after_the_runs_reaches_every_view_of_their_records(
        lab: Lab, bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Runs recorded quality_cosine with no direction; the lab then declares it: compare, links and the report judge
    the old records by the declaration, never by a default."""
    first = bench_run(lab, bench, tmp_path, "one", monkeypatch, COSINE="0.9")
    second = bench_run(lab, bench, tmp_path, "two", monkeypatch, COSINE="0.8")
    compared = json.loads(lab.sm("compare", first["id"], second["id"], "--json").out)
    (row,) = [r for g in compared["groups"] for r in g["metrics"] if r["name"] == "quality_cosine"]
    assert row["direction"] == "" and row["values"][1]["change"] == ""  # nobody said which way is better
    site = tmp_path / "site"
    assert lab.sm("report", "-o", str(site)).code == 0
    page = next(p for p in site.rglob("*.html") if 'title="which way is better' in p.read_text())
    assert 'title="which way is better (? unknown)">?</td>' in page.read_text()
    configure(lab, '\n[metrics.quality_cosine]\ndirection = "higher"\n')
    compared = json.loads(lab.sm("compare", first["id"], second["id"], "--json").out)
    (row,) = [r for g in compared["groups"] for r in g["metrics"] if r["name"] == "quality_cosine"]
    assert row["direction"] == "higher" and row["values"][1]["change"] == "worse"  # 0.8 after 0.9
    listed = json.loads(lab.sm("links", "--json").out)
    assert {m["direction"] for k in listed["links"] for m in k["metrics"] if m["name"] == "quality_cosine"} == {
        "higher"}  # fmt: skip
    assert lab.sm("report", "-o", str(tmp_path / "site2")).code == 0
    page = tmp_path / "site2" / page.relative_to(site)
    assert 'title="which way is better (? unknown)">↑</td>' in page.read_text()


def test_bisect_by_a_threshold_on_a_metric_of_unknown_direction_is_refused_with_what_to_declare(
        lab: Lab, bench: Path, tmp_path: Path) -> None:  # fmt: skip
    out = tmp_path / "out"
    done = lab.sm("bisect", "S", "--metric", "quality_cosine", "--threshold", "0.9", "--result-dir", str(out), "--",
                  sys.executable, str(bench), str(out))  # fmt: skip
    assert done.code == 2, done
    assert "which way quality_cosine is better is not known" in done.err
    assert '[metrics.quality_cosine] direction = "higher"' in done.err


def test_a_malformed_metric_direction_from_a_pull_stops_run_but_no_reader(
        lab: Lab, bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A teammate pushes `[metrics.quality_cosine] direction = "up"`: `run` refuses before the command runs and
    says what is wrong; `links`, `show` and `compare` still read the records (by their own directions)."""
    record = bench_run(lab, bench, tmp_path, "one", monkeypatch)
    configure(lab, '\n[metrics.quality_cosine]\ndirection = "up"\n')
    marker = tmp_path / "ran"
    done = lab.sm("run", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    one_line_error(done, 3)
    assert "[metrics.quality_cosine] direction must be" in done.err and not marker.exists()
    for view in (("links",), ("show", "fix"), ("compare", record["id"])):
        shown = lab.sm(*view)
        assert shown.code == 0, (view, shown.err)
