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
    assert lines[0].startswith("p2 on tree vllm (S): A = 1 patch, top p1, B = 2 patches, top p2; runs ab-p2-")
    assert lines[1].startswith("  output_throughput: A 100.1 → B 110.22 (n=1+1)  +10.1%") and "too few runs" in lines[1]
    assert lines[1].endswith("too few runs  " + "·" * 16), lines[1]  # a bar, no verdict: dots
    assert (tmp_path / "seen").read_text().split() == ["100", "110"]


def test_a_failing_run_stops_ab_and_the_tree_is_back(lab: Lab, tmp_path: Path) -> None:
    two_patches_the_second_faster(lab)
    before = tree_state(lab)
    (tmp_path / "seen.fail").write_text("3\n")  # the third run (A2) fails
    done = lab.sm("ab", "p2", "--", *bench(tmp_path, lab))
    assert done.code == 3 and "ab stopped: run A2 (ab-p2-" in done.err and ") failed (exit 1)" in done.err, done.err
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


# speed.txt's number, 20% more when fast.txt is there; the tree's files it saw noted outside the tree.
LEAVE_OUT_BENCH = """
import json, os, sys
tree, seen = sys.argv[1], sys.argv[2]
speed = float(open(os.path.join(tree, 'speed.txt')).read()) if os.path.exists(os.path.join(tree, 'speed.txt')) else 100
speed *= 1.2 if os.path.exists(os.path.join(tree, 'fast.txt')) else 1
files = sorted(n for n in os.listdir(tree) if n.endswith('.txt'))
with open(seen, 'a') as f:
    f.write(','.join(files) + '\\n')
k = len(open(seen).read().split())
os.makedirs(os.path.join(tree, 'out'), exist_ok=True)
json.dump({'output_throughput': speed * (1 + 0.001 * k)}, open(os.path.join(tree, 'out', 'b.json'), 'w'))
"""


def three_patches_the_middle_one_fast(lab: Lab, p3_needs_p2: bool = False) -> None:
    """Series S, all applied: p1 (speed.txt), p2 (fast.txt: 20% faster), p3 (notes.txt, or an edit of fast.txt)."""
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["out"]\n')
    (lab.tree / ".git" / "info" / "exclude").write_text("out/\n")
    (lab.tree / "speed.txt").write_text("100\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    (lab.tree / "fast.txt").write_text("on\n")
    assert lab.sm("save", "p2", "--series", "S", "-m", "p2").code == 0
    (lab.tree / ("fast.txt" if p3_needs_p2 else "notes.txt")).write_text("on\nnotes\n")
    assert lab.sm("save", "p3", "--series", "S", "-m", "p3").code == 0


def leave_out_bench(tmp_path: Path, lab: Lab) -> list[str]:
    script = tmp_path / "bench.py"
    script.write_text(LEAVE_OUT_BENCH)
    return [sys.executable, str(script), str(lab.tree), str(tmp_path / "seen")]


def test_ab_leave_out_measures_the_whole_stack_without_the_patch_and_puts_the_tree_back(lab: Lab,
                                                                                        tmp_path: Path) -> None:
    three_patches_the_middle_one_fast(lab)
    before = tree_state(lab)
    done = lab.sm("ab", "p2", "--leave-out", "-n", "4", "--json", "--", *leave_out_bench(tmp_path, lab))
    assert done.code == 0, done.err
    found = json.loads(done.out)
    assert found["leave_out"] is True
    assert found["a"]["patches"] == ["p1", "p3"] and found["b"]["patches"] == ["p1", "p2", "p3"]
    (headline,) = found["metrics"]
    assert headline["verdict"] == "faster" and 0.19 < headline["effect"] < 0.21
    # A held p1 and p3 (no fast.txt), B all three, in turn
    assert (tmp_path / "seen").read_text().split() == ["notes.txt,speed.txt", "fast.txt,notes.txt,speed.txt"] * 4
    assert tree_state(lab) == before
    made = records(lab)
    assert {r["patch"]["name"] for r in made} == {"p2"}  # both sides are p2's evidence: A measured without it
    a_stacks = [[n for n, _ in s["patches"]] if isinstance(s["patches"][0], list) else s["patches"]
                for r in made if r["run"]["group"].endswith("-A") for s in r["stack"]]
    assert all("p2" not in str(stack) and "p3" in str(stack) for stack in a_stacks)
    listing = lab.sm("links")
    assert "WITHOUT THE PATCH" in listing.out, listing


def test_ab_leave_out_of_a_patch_the_one_above_needs_stops_before_any_run(lab: Lab, tmp_path: Path) -> None:
    three_patches_the_middle_one_fast(lab, p3_needs_p2=True)
    before = tree_state(lab)
    done = lab.sm("ab", "p2", "--leave-out", "--", *leave_out_bench(tmp_path, lab))
    assert done.code == 3, done.err
    assert "the stack without p2 cannot be built" in done.err and "`stackmgr ab p2`" in done.err, done.err
    assert not (tmp_path / "seen").exists()
    assert tree_state(lab) == before
    assert not list((lab.store / "links").glob("*/*.toml"))


def test_ab_leave_out_of_a_patch_not_applied_is_refused(lab: Lab, tmp_path: Path) -> None:
    three_patches_the_middle_one_fast(lab)
    assert lab.sm("pop", "p1").code == 0
    done = lab.sm("ab", "p2", "--leave-out", "--", *leave_out_bench(tmp_path, lab))
    assert done.code == 2 and "p2 is not applied" in done.err and "stackmgr push p2" in done.err, done.err
    assert not (tmp_path / "seen").exists()


def test_ab_judges_each_side_against_the_series_baseline_too(lab: Lab, tmp_path: Path) -> None:
    three_patches_the_middle_one_fast(lab)
    assert lab.sm("pop", "-a").code == 0
    base = lab.sm("run", "--repeat", "4", "--name", "base", "--", *leave_out_bench(tmp_path, lab))
    assert base.code == 0, base.err
    assert lab.sm("push", "-a").code == 0
    done = lab.sm("ab", "p2", "-n", "4", "--", *leave_out_bench(tmp_path, lab))
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    at = lines.index("  against the baseline of S (4 runs):")
    assert lines[at + 1].startswith("    A: baseline 100 → A 100.") and "no significant change" in lines[at + 1], lines
    assert lines[at + 2].startswith("    B: baseline 100 → B 120.") and lines[at + 2].endswith("faster"), lines
    found = json.loads(lab.sm("ab", "p2", "-n", "1", "--json", "--", *leave_out_bench(tmp_path, lab)).out)
    assert len(found["baseline"]["links"]) == 4 and found["baseline"]["b"]["n_a"] == 4


def test_runs_that_fail_a_gate_are_recorded_said_and_left_out_of_the_judgement(lab: Lab, tmp_path: Path) -> None:
    """The lab's 'looks fast in raw metrics' case: B's numbers fail the quality gate; ab says so and judges without
    them, as compare does."""
    two_patches_the_second_faster(lab)
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + '\n[gates.cap]\nmetric = "output_throughput"\nmax = 105\n')
    done = lab.sm("ab", "p2", "-n", "2", "--", *bench(tmp_path, lab))
    assert done.code == 0, done.err
    assert done.err.startswith("stackmgr: warning: with -n 2, no step can be judged (the rank test needs 4 runs")
    assert "  B: 2 runs not valid, left out: INVALID (gate cap: fail)" in done.out.splitlines(), done.out
    assert "  no metric both sides have in a valid run: nothing to judge" in done.out.splitlines(), done.out
    found = json.loads(lab.sm("ab", "p2", "-n", "1", "--json", "--", *bench(tmp_path, lab)).out)
    assert found["metrics"] == [] and len(found["b"]["not_valid"]) == 1 and found["a"]["not_valid"] == []


def test_run_repeat_leaves_invalid_runs_out_of_its_median_and_says_so(lab: Lab, tmp_path: Path) -> None:
    two_patches_the_second_faster(lab)
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + '\n[gates.cap]\nmetric = "output_throughput"\nmax = 105\n')
    done = lab.sm("run", "--repeat", "2", "--", *bench(tmp_path, lab))
    assert done.code == 0, done.err
    assert "2 runs not valid, left out: INVALID (gate cap: fail)" in done.err and "median" not in done.err, done.err
    assert done.err.count("is not valid: gate cap fail (output_throughput 110.") == 2, done.err  # each run says it


def test_show_and_compare_fold_a_run_group_into_one_block_and_one_name(lab: Lab, tmp_path: Path) -> None:
    """A hundred runs of one `ab` or `run --repeat` stay readable: `show` gives their group in a few lines (median
    and range of each metric), `compare` names the group with its count instead of every link id."""
    two_patches_the_second_faster(lab)
    done = lab.sm("--json", "run", "--repeat", "3", "--name", "g", "--", *bench(tmp_path, lab))
    assert done.code == 0, done.err
    ids = [k["id"] for k in json.loads(lab.sm("show", "p2", "--json").out)["links"]]
    assert len(ids) == 3
    shown = lab.sm("show", "p2")
    assert shown.code == 0, shown.err
    block = shown.out.split("links (3):\n")[1].splitlines()
    assert block[0].endswith(f"run group g: 3 runs ({ids[0]} … {ids[-1]}) · experimental · fresh"), block[0]
    assert block[1].split() == ["output_throughput", "110.22", "tok/s", "↑", "median", "of", "3", "(110.11", "–",
                                "110.33)"]  # fmt: skip
    assert block[2] == "      6 artifacts (sha ok) · each run: `show --json`"
    assert not any(i in shown.out for i in ids[1:-1])  # every run: `show --json`
    compared = lab.sm("compare", "p2", "--no-baseline")
    assert compared.code == 0, compared.err
    assert "  p2 (reference): run group g (3 runs)" in compared.out.splitlines(), compared.out
    listed = lab.sm("links").out.splitlines()  # a RUN column: which run wrote each record
    assert listed[0].split()[:5] == ["DATE", "LINK", "PATCH", "TREE", "RUN"]
    assert [line.split()[4] for line in listed[1:4]] == ["g-1", "g-2", "g-3"], listed


def test_show_counts_only_a_groups_valid_runs_in_its_median_and_says_which_are_left_out(lab: Lab,
                                                                                       tmp_path: Path) -> None:
    """As compare and `run --repeat` judge them: a run that failed a gate is in the group's count, not its median."""
    two_patches_the_second_faster(lab)
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + '\n[gates.cap]\nmetric = "output_throughput"\nmax = 110.2\n')
    assert lab.sm("run", "--repeat", "3", "--name", "g", "--", *bench(tmp_path, lab)).code == 0  # 110.11, .22, .33
    block = lab.sm("show", "p2").out.split("links (3):\n")[1].splitlines()
    assert "run group g: 3 runs" in block[0] and block[0].endswith("2 left out: invalid: gate cap: fail"), block[0]
    assert block[1].split()[:7] == ["output_throughput", "110.11", "tok/s", "↑", "median", "of", "1"], block[1]


def test_the_reports_best_result_of_a_run_group_is_its_median_not_its_luckiest_run(lab: Lab, tmp_path: Path) -> None:
    two_patches_the_second_faster(lab)
    assert lab.sm("run", "--repeat", "3", "--name", "g", "--", *bench(tmp_path, lab)).code == 0  # 110.11, .22, .33
    assert lab.sm("report", "-o", str(tmp_path / "site")).code == 0
    index = (tmp_path / "site" / "index.html").read_text()
    row = index[index.index('href="patches/p2.html"') :]
    assert "110.22" in row[:3000] and "110.33" not in row[:3000], row[:3000]
