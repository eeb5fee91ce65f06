"""`stackmgr ab PATCH -- CMD`: CMD run on the tree without and with PATCH, alternating A B A B…, each run recorded
as `run` records it, judged by evidence/stats.judge, the tree put back exactly as it was."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Lab, git_text

# A vllm-bench-like command: its throughput is speed.txt's number (10% higher with p2), a little drift per run;
# it notes the speed it saw in a file outside the tree (the order the runs ran in), and fails on FAIL_AT.
BENCH = """
import json, os, sys
tree, seen = sys.argv[1], sys.argv[2]
speed = float(open(os.path.join(tree, 'speed.txt')).read())
with open(seen, 'a') as f:
    f.write(f'{speed:g}\\n')
k = len(open(seen).read().split())
if os.path.exists(seen + '.fail') and int(open(seen + '.fail').read()) == k:
    sys.exit(1)
os.makedirs(os.path.join(tree, 'out'), exist_ok=True)
json.dump({'output_throughput': speed * (1 + 0.001 * k)}, open(os.path.join(tree, 'out', 'b.json'), 'w'))
"""


def two_patches_the_second_faster(lab: Lab) -> None:
    """Series S: p1 (speed 100), p2 (speed 110), both applied; results under out/."""
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["out"]\n')  # under [trees.vllm]
    (lab.tree / ".git" / "info" / "exclude").write_text("out/\n")  # the bench's output is not the tree's state
    (lab.tree / "speed.txt").write_text("100\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    (lab.tree / "speed.txt").write_text("110\n")
    assert lab.sm("save", "p2", "--series", "S", "-m", "p2").code == 0


def tree_state(lab: Lab) -> tuple[str, str, str, Any]:
    applied = json.loads(lab.sm("status", "--json").out)
    return (lab.worktree_id(), git_text(lab.tree, "rev-parse", "HEAD"), git_text(lab.tree, "symbolic-ref", "-q",
            "HEAD"), applied)  # fmt: skip


def bench(tmp_path: Path, lab: Lab) -> list[str]:
    script = tmp_path / "bench.py"
    script.write_text(BENCH)
    return [sys.executable, str(script), str(lab.tree), str(tmp_path / "seen")]


def records(lab: Lab) -> list[dict[str, Any]]:
    found = [tomllib.loads(p.read_text()) for p in (lab.store / "links").glob("*/*.toml")]
    return sorted(found, key=lambda r: (r["run"]["group"][-1], r["run"]["repeat"]))


@pytest.mark.slow
def test_ab_of_a_faster_patch_says_faster_and_leaves_the_tree_as_it_was(lab: Lab, tmp_path: Path) -> None:
    two_patches_the_second_faster(lab)
    before = tree_state(lab)
    done = lab.sm("ab", "p2", "--json", "--", *bench(tmp_path, lab))
    assert done.code == 0, done.err
    found = json.loads(done.out)
    headline = found["metrics"][0]
    assert headline["name"] == "output_throughput" and headline["verdict"] == "faster"
    assert (headline["n_a"], headline["n_b"]) == (5, 5) and 0.09 < headline["effect"] < 0.11
    assert headline["ci"][0] > 0 and headline["p"] < 0.05
    assert tree_state(lab) == before  # tree id, HEAD, branch and the applied state
    # A B A B…: the tree held p1 alone, then p1+p2, in turn
    assert (tmp_path / "seen").read_text().split() == ["100", "110"] * 5
    made = records(lab)
    assert [r["patch"]["name"] for r in made] == ["p1"] * 5 + ["p2"] * 5
    assert [r["id"] for r in made if r["patch"]["name"] == "p1"] == found["a"]["links"]
    assert [r["id"] for r in made if r["patch"]["name"] == "p2"] == found["b"]["links"]
    assert [r["run"]["repeat"] for r in made] == [1, 2, 3, 4, 5] * 2
    in_time = sorted(made, key=lambda r: r["created"])
    assert [r["run"]["name"].rsplit("-", 1)[1] for r in in_time] == [f"{s}{i}" for i in range(1, 6) for s in "AB"]
    names = [r["run"]["name"] for r in made]
    assert names[0].startswith("ab-p2-") and names[0].endswith("-A1") and names[5].endswith("-B1")


def test_ab_says_each_metric_of_b_against_a_in_one_line(lab: Lab, tmp_path: Path) -> None:
    two_patches_the_second_faster(lab)
    done = lab.sm("ab", "p2", "-n", "1", "--", *bench(tmp_path, lab))
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert lines[0].startswith("p2 on tree vllm (S): A = 1 patch(es), top p1, B = 2 patch(es), top p2; runs ab-p2-")
    assert lines[1].startswith("  output_throughput: A 100.1 → B 110.22 (n=1+1)  +10.1%") and "too few runs" in lines[1]
    assert (tmp_path / "seen").read_text().split() == ["100", "110"]


def test_a_failing_run_stops_ab_and_the_tree_is_back(lab: Lab, tmp_path: Path) -> None:
    two_patches_the_second_faster(lab)
    before = tree_state(lab)
    (tmp_path / "seen.fail").write_text("3\n")  # the third run (A2) fails
    done = lab.sm("ab", "p2", "--", *bench(tmp_path, lab))
    assert done.code == 3 and "ab stopped" in done.err and "A2" in done.err, done.err
    assert "the tree is back as it was" in done.err
    assert tree_state(lab) == before
    assert len(list((lab.store / "links").glob("*/*.toml"))) == 3  # the runs so far stay recorded


def test_ab_refuses_unsaved_work_or_a_patch_not_in_the_series_and_runs_nothing(lab: Lab, tmp_path: Path) -> None:
    two_patches_the_second_faster(lab)
    (lab.tree / "wip.txt").write_text("unsaved\n")
    done = lab.sm("ab", "p2", "--", *bench(tmp_path, lab))
    assert done.code == 1 and "wip.txt" in done.err and not (tmp_path / "seen").exists()
    (lab.tree / "wip.txt").unlink()
    done = lab.sm("ab", "nope", "--", *bench(tmp_path, lab))
    assert done.code == 2 and "nope" in done.err and not (tmp_path / "seen").exists()
    assert not (lab.store / "links").exists() or not list((lab.store / "links").glob("*/*.toml"))


def test_ab_takes_its_results_where_result_dir_says_as_run_does(lab: Lab, tmp_path: Path) -> None:
    """Seen on a real GPU: a tree that declares no results directory gave `ab` runs with no metrics. --result-dir
    (as `run --result-dir`) names where CMD writes; without it the output says what to do."""
    two_patches_the_second_faster(lab)
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text().replace('results = ["out"]\n', ""))
    blind = lab.sm("ab", "p2", "-n", "1", "--", *bench(tmp_path, lab))
    assert blind.code == 0 and "nothing to judge" in blind.out and "--result-dir DIR" in blind.out, blind.out
    seen = lab.sm("ab", "p2", "-n", "1", "--result-dir", str(lab.tree / "out"), "--", *bench(tmp_path, lab))
    assert seen.code == 0, seen.err
    assert seen.out.splitlines()[1].startswith("  output_throughput: A "), seen.out
