"""`stackmgr run --repeat N -- CMD`: N records of one measured state, one run group, the medians said at the end."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

from tests.conftest import Lab

BENCH = """
import json, os, sys
out, seen = sys.argv[1], sys.argv[2]
with open(seen, 'a') as f:
    f.write('x\\n')
k = len(open(seen).read().split())
if k == int(os.environ.get('FAIL_AT', '0')):
    sys.exit(4)
os.makedirs(out, exist_ok=True)
json.dump({'output_throughput': 100.0 + k}, open(os.path.join(out, 'b.json'), 'w'))
"""


def setup(lab: Lab, tmp_path: Path) -> list[str]:
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["out"]\n')  # under [trees.vllm]
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    script = tmp_path / "bench.py"
    script.write_text(BENCH)
    return [sys.executable, str(script), str(lab.tree / "out"), str(tmp_path / "seen")]


def records(lab: Lab) -> list[dict]:  # type: ignore[type-arg]
    found = [tomllib.loads(p.read_text()) for p in (lab.store / "links").glob("*/*.toml")]
    return sorted(found, key=lambda r: r["run"]["repeat"])


def test_run_repeat_makes_n_records_of_one_group_and_says_the_median(lab: Lab, tmp_path: Path) -> None:
    command = setup(lab, tmp_path)
    done = lab.sm("run", "--repeat", "3", "--name", "qps4", "--", *command)
    assert done.code == 0, done.err
    made = records(lab)
    assert [r["run"]["repeat"] for r in made] == [1, 2, 3]
    assert {r["run"]["group"] for r in made} == {"qps4"}
    assert [r["run"]["name"] for r in made] == ["qps4-1", "qps4-2", "qps4-3"]
    assert "output_throughput: median 102 (n=3)" in done.err


def test_run_repeat_without_a_name_groups_the_runs_all_the_same(lab: Lab, tmp_path: Path) -> None:
    command = setup(lab, tmp_path)
    assert lab.sm("run", "--repeat", "2", "--", *command).code == 0
    made = records(lab)
    assert len(made) == 2 and made[0]["run"]["group"] == made[1]["run"]["group"] != ""
    assert [r["run"].get("name", "") for r in made] == ["", ""]


def test_run_repeat_stops_at_the_first_failing_run(lab: Lab, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    command = setup(lab, tmp_path)
    monkeypatch.setenv("FAIL_AT", "2")
    done = lab.sm("run", "--repeat", "4", "--", *command)
    assert done.code == 4, done.err
    assert len(records(lab)) == 2 and "stopped after run 2 of 4" in done.err


def test_run_repeat_must_be_a_positive_number(lab: Lab, tmp_path: Path) -> None:
    command = setup(lab, tmp_path)
    assert lab.sm("run", "--repeat", "0", "--", *command).code == 2
    assert lab.sm("run", "--repeat", "x", "--", *command).code == 2
    assert not (tmp_path / "seen").exists()


def test_two_run_groups_of_one_tree_are_compared_as_two_columns_an_a_a_check(lab: Lab, tmp_path: Path) -> None:
    """`run --repeat 4 --name aa1` then `--name aa2` on one unchanged tree: `compare aa1 aa2` judges group against
    group (pyperf compares two result files), and one tree against itself is no significant change."""
    from tests.test_ab import bench, two_patches_the_second_faster

    two_patches_the_second_faster(lab)
    for group in ("aa1", "aa2"):
        done = lab.sm("run", "--repeat", "4", "--name", group, "--", *bench(tmp_path, lab))
        assert done.code == 0, done.err
    found = json.loads(lab.sm("compare", "aa1", "aa2", "--json").out)
    (group,) = found["groups"]
    assert [r["label"] for r in group["results"]] == ["aa1", "aa2"]
    assert [len(r["links"]) for r in group["results"]] == [4, 4]
    (tput,) = [m for m in group["metrics"] if m["name"] == "output_throughput"]
    assert tput["values"][1]["verdict"] in ("no significant change", "faster"), tput  # drift of 0.1% a run
    assert abs(tput["values"][1]["effect"]) < 0.01
    shown = lab.sm("compare", "aa1", "aa2")
    assert shown.code == 0 and "aa1" in shown.out and "aa2" in shown.out, shown


def test_an_undeclared_result_directory_is_warned_of_only_when_check_would_count_it(lab: Lab, tmp_path: Path) -> None:
    """`--result-dir results` inside the tree: declared nowhere, it is work for `check` unless .gitignore covers
    it (as on the GPU machine, where `results/` was ignored and every run still warned)."""
    script = tmp_path / "w.py"
    script.write_text("import json, os, sys\nos.makedirs(sys.argv[1], exist_ok=True)\n"
                      "json.dump({'output_throughput': 1.0}, open(os.path.join(sys.argv[1], 'r.json'), 'w'))\n")
    (lab.tree / "fix.txt").write_text("x\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    argv = ["--result-dir", str(lab.tree / "results"), "--", sys.executable, str(script), str(lab.tree / "results")]
    warned = lab.sm("run", *argv)
    assert warned.code == 0 and "results/ is in tree vllm but not declared a results directory" in warned.err
    (lab.tree / ".git" / "info" / "exclude").write_text("results/\n")
    quiet = lab.sm("run", *argv)
    assert quiet.code == 0 and "not declared a results directory" not in quiet.err, quiet.err


def test_a_group_of_baseline_runs_named_in_compare_is_its_column_never_dropped(lab: Lab, tmp_path: Path) -> None:
    """`run --repeat 4 --name base` at the series' base, `--name fast` with the patches: `compare base fast` and
    `compare --baseline base fast` judge fast against base; a group named alone is judged against the baseline."""
    from tests.test_ab import leave_out_bench, three_patches_the_middle_one_fast

    three_patches_the_middle_one_fast(lab)
    assert lab.sm("pop", "-a").code == 0  # the base: these runs are the baseline of S
    assert lab.sm("run", "--repeat", "4", "--name", "low", "--", *leave_out_bench(tmp_path, lab)).code == 0
    assert lab.sm("push", "-a").code == 0
    assert lab.sm("run", "--repeat", "4", "--name", "high", "--", *leave_out_bench(tmp_path, lab)).code == 0
    for args in (("low", "high"), ("--baseline", "low", "high")):
        (group,) = json.loads(lab.sm("compare", *args, "--json").out)["groups"]
        assert [r["label"] for r in group["results"]] == ["low (baseline)", "high"], args
        assert group["left_out"] == [], args
        (tput,) = [m for m in group["metrics"] if m["name"] == "output_throughput"]
        assert tput["values"][1]["verdict"] == "faster", (args, tput)
    (alone,) = json.loads(lab.sm("compare", "high", "--json").out)["groups"]
    assert [r["label"] for r in alone["results"]] == ["baseline of S (4 runs)", "high"]
