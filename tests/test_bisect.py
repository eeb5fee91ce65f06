"""`stackmgr bisect SERIES -- CMD`: the first patch whose prefix makes CMD fail (or a metric cross a threshold),
each tested prefix captured as `run` captures it, the tree put back as it was at the end."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import Lab, git, git_text, stackmgr_process

GATE = "import sys; sys.exit(1 if 'broken' in open(sys.argv[1]).read() else 0)"


def five_patches_the_third_breaks_the_gate(lab: Lab) -> list[str]:
    """Series S: p1…p5, each adding a file; p3 also breaks src/model.py (the gate)."""
    for n in range(1, 6):
        (lab.tree / f"f{n}.txt").write_text(f"{n}\n")
        if n == 3:
            (lab.tree / "src" / "model.py").write_text("def f():\n    return 'broken'\n")
        if n == 4:
            (lab.tree / "src" / "model.py").write_text("def f():\n    return 'broken again'\n")
        assert lab.sm("save", f"p{n}", "--series", "S", "-m", f"p{n}").code == 0
    assert lab.sm("reset").code == 0
    return [f"p{n}" for n in range(1, 6)]


def test_bisect_finds_the_patch_that_breaks_the_gate_and_puts_the_tree_back(lab: Lab, tmp_path: Path) -> None:
    five_patches_the_third_breaks_the_gate(lab)
    (lab.tree / "notes.txt").write_text("mine, unsaved but preserved below\n")
    assert lab.sm("save", "notes", "-m", "notes").code == 0  # the tree is dirty, and preserved
    before, head = lab.worktree_id(), git_text(lab.tree, "rev-parse", "HEAD")
    branch = git_text(lab.tree, "symbolic-ref", "HEAD")
    gate = [sys.executable, "-c", GATE, str(lab.tree / "src" / "model.py")]
    done = stackmgr_process(lab.store, "--json", "bisect", "S", "--", *gate)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["first_bad"] == "p3" and found["base_fails"] is False
    assert [(t["patches"], t["failed"]) for t in found["tested"]] == [(5, True), (2, False), (3, True)]
    assert lab.worktree_id() == before  # the tree as it was, HEAD and its branch too
    assert git_text(lab.tree, "rev-parse", "HEAD") == head and git_text(lab.tree, "symbolic-ref", "HEAD") == branch
    runs = {k["run"]["name"].rsplit("-", 1)[1]: k for k in json.loads(lab.sm("links", "--json").out)["links"]}
    assert sorted(runs) == ["2", "3", "5"] and runs["3"]["run"]["name"].startswith("bisect-S-20")
    assert runs["3"]["patch"] == "p3" and runs["3"]["gates"][0]["status"] == "fail"


def test_bisect_of_a_series_that_passes_says_so(lab: Lab) -> None:
    five_patches_the_third_breaks_the_gate(lab)
    done = stackmgr_process(lab.store, "bisect", "S", "--", sys.executable, "-c", "pass")
    assert done.returncode == 1 and "every patch passes" in done.stdout


def test_bisect_by_a_metric_threshold(lab: Lab, tmp_path: Path) -> None:
    five_patches_the_third_breaks_the_gate(lab)
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["out"]\n')  # under [trees.vllm]
    bench = ("import json, os, sys; os.chdir(sys.argv[1]); os.makedirs('out', exist_ok=True); "
             "slow = 'broken' in open('src/model.py').read(); "
             "json.dump({'output_throughput': 60.0 if slow else 100.0}, open('out/b.json', 'w'))")  # fmt: skip
    done = stackmgr_process(lab.store, "--json", "bisect", "S", "--metric", "output_throughput", "--threshold", "90",
                            "--", sys.executable, "-c", bench, str(lab.tree))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["first_bad"] == "p3"


def test_bisect_refuses_unsaved_work_and_runs_nothing(lab: Lab, tmp_path: Path) -> None:
    five_patches_the_third_breaks_the_gate(lab)
    (lab.tree / "wip.txt").write_text("unsaved\n")
    marker = tmp_path / "ran"
    done = stackmgr_process(lab.store, "bisect", "S", "--", "touch", str(marker))
    assert done.returncode == 1 and "wip.txt" in done.stderr and not marker.exists()
    assert stackmgr_process(lab.store, "bisect", "S", "--metric", "x", "--", "true").returncode == 2


def test_a_test_that_says_nothing_stops_the_bisect_and_puts_the_tree_back(lab: Lab) -> None:
    """Interrupted (130), skipped (125, as git bisect has it) or killed (137): no patch is blamed."""
    five_patches_the_third_breaks_the_gate(lab)
    before = lab.worktree_id()
    done = stackmgr_process(lab.store, "bisect", "S", "--", sys.executable, "-c", "raise SystemExit(125)")
    assert done.returncode == 3 and "bisect stopped" in done.stderr and "no patch is blamed" in done.stderr
    assert lab.worktree_id() == before


@pytest.mark.regression("bisect put the tree back with the user's staged changes unstaged")
def test_bisect_puts_the_index_back_exactly_staged_unstaged_and_intent_to_add(lab: Lab) -> None:
    five_patches_the_third_breaks_the_gate(lab)
    (lab.tree / "staged.txt").write_text("staged, new\n")
    (lab.tree / "README").write_text("hello\nstaged edit\n")
    git(lab.tree, "add", "staged.txt", "README")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 'unstaged'\n")  # not staged
    (lab.tree / "later.txt").write_text("intent to add\n")
    git(lab.tree, "add", "-N", "later.txt")
    (lab.tree / "loose.txt").write_text("untracked\n")
    assert lab.sm("save", "mine", "-m", "all of it").code == 0  # preserved, as bisect requires

    def index_views() -> tuple[bytes, ...]:
        return (git(lab.tree, "diff", "--cached", "--binary", "--full-index"), git(lab.tree, "ls-files", "-s"),
                git(lab.tree, "diff", "--binary", "--full-index"), git(lab.tree, "status", "--porcelain=v2"))
    before, tree_before = index_views(), lab.worktree_id()
    assert b".A" in before[3] and b"staged.txt" in before[0] and b"later.txt" not in before[0]
    gate = [sys.executable, "-c", "import sys; sys.exit(1 if 'broken' in open(sys.argv[1]).read() else 0)",
            str(lab.tree / "f3.txt")]  # fmt: skip
    done = stackmgr_process(lab.store, "bisect", "S", "--", *gate)
    assert done.returncode == 1, done.stderr  # every patch passes: f3.txt never says broken
    after = index_views()
    assert after[0] == before[0]  # what was staged is staged
    assert after[1] == before[1]  # the same entries, stage numbers and blobs
    assert after[2] == before[2]  # what was not staged is still not
    assert after[3] == before[3]  # intent-to-add still intent-to-add
    assert lab.worktree_id() == tree_before


@pytest.mark.regression("bisect of a series holding a do-not-revive lane said to pass --override, which it lacked")
def test_bisect_of_a_series_with_a_do_not_revive_lane_takes_the_override_it_asks_for(lab: Lab) -> None:
    five_patches_the_third_breaks_the_gate(lab)
    (lab.store / "results").mkdir(exist_ok=True)
    (lab.store / "results" / "p4.log").write_text("broke it again\n")
    log = str(lab.store / "results" / "p4.log")
    linked = lab.sm("link", "p4", log, "--verdict", "rejected", "--do-not-revive", "--lesson", "no")
    assert linked.code == 0, linked.err
    before = lab.worktree_id()
    gate = [sys.executable, "-c", GATE, str(lab.tree / "src" / "model.py")]
    refused = lab.sm("bisect", "S", "--", *gate)
    assert refused.code == 1 and "pass --override" in refused.err and lab.worktree_id() == before
    done = stackmgr_process(lab.store, "--json", "bisect", "S", "--override", "find the gate's culprit", "--", *gate)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["first_bad"] == "p3" and lab.worktree_id() == before
    assert "find the gate's culprit" in lab.sm("show", "p4").out, "the override is recorded"


@pytest.mark.regression("every bisect named its runs bisect-SERIES-K: --amends bisect-S-3 picked one of several")
def test_each_bisect_names_its_runs_apart_from_every_other_bisect(lab: Lab) -> None:
    five_patches_the_third_breaks_the_gate(lab)
    gate = [sys.executable, "-c", GATE, str(lab.tree / "src" / "model.py")]
    for _ in range(2):
        assert stackmgr_process(lab.store, "bisect", "S", "--", *gate).returncode == 0
    names = [k["run"]["name"] for k in json.loads(lab.sm("links", "--json").out)["links"]]
    assert len(names) == 6 and len(set(names)) == 6, names
    assert all(re.fullmatch(r"bisect-S-\d{8}T\d{6}(-2)?-[235]", n) for n in names), names
    third = [n for n in names if n.endswith("-3")]
    assert len({n.rsplit("-", 1)[0] for n in third}) == 2
    done = lab.sm("link", "p3", "--amends", third[0], "--verdict", "rejected", "--lesson", "breaks the gate")
    assert done.code == 0, done.err


@pytest.mark.regression("bisect --metric never tested the base: it blamed the first patch when the base already failed")
def test_bisect_by_a_metric_tests_the_base_before_blaming_the_first_patch(lab: Lab) -> None:
    five_patches_the_third_breaks_the_gate(lab)
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["out"]\n')  # under [trees.vllm]
    slow = ("import json, os, sys; os.chdir(sys.argv[1]); os.makedirs('out', exist_ok=True); "
            "json.dump({'output_throughput': 60.0}, open('out/b.json', 'w'))")  # fmt: skip
    args = ("--json", "bisect", "S", "--metric", "output_throughput", "--threshold", "90", "--")
    done = stackmgr_process(lab.store, *args, sys.executable, "-c", slow, str(lab.tree))
    found = json.loads(done.stdout)
    assert done.returncode == 1 and found["base_fails"] is True and found["base_tested"] is True, done.stderr
    links = json.loads(lab.sm("links", "--json").out)["links"]
    assert len(links) == len(found["tested"]) + 1  # the base's run: recorded as the series' baseline
    (base,) = [k for k in links if k["id"] == found["base"]["link"]]
    assert base["run"]["baseline_of"] == "S" and base["run"]["name"].endswith("-base"), base
    assert found["base"]["failed"] is True and found["base"]["detail"] == "output_throughput 60 (1 run) < 90"
    text = stackmgr_process(lab.store, *args[1:], sys.executable, "-c", slow, str(lab.tree))
    assert text.returncode == 1 and "S: the base already fails, before p1" in text.stdout
    assert "  0 patches, the base: FAILS (output_throughput 60 (1 run) < 90); lnk-" in text.stdout
    only_p1 = slow.replace("os.makedirs", "os.path.exists('f1.txt') or sys.exit(0); os.makedirs")  # none at the base
    done = stackmgr_process(lab.store, *args, sys.executable, "-c", only_p1, str(lab.tree))
    found = json.loads(done.stdout)
    assert done.returncode == 0 and found["first_bad"] == "p1" and found["base_tested"] is False, done.stderr
    text = stackmgr_process(lab.store, *args[1:], sys.executable, "-c", only_p1, str(lab.tree))
    assert "S: first bad patch: p1 (the base itself was not tested)" in text.stdout


SPEED_BENCH = """
import json, os, sys
tree, seen = sys.argv[1], sys.argv[2]
path = os.path.join(tree, 'speed.txt')
speed = float(open(path).read()) if os.path.exists(path) else 100
with open(seen, 'a') as f:
    f.write(f'{speed:g}\\n')
k = len(open(seen).read().split())
os.makedirs(os.path.join(tree, 'out'), exist_ok=True)
json.dump({'output_throughput': speed * (1 + 0.001 * k)}, open(os.path.join(tree, 'out', 'b.json'), 'w'))
"""


def test_bisect_repeat_finds_the_regression_of_a_stack_that_first_goes_up(lab: Lab, tmp_path: Path) -> None:
    """The lab's H100 stack: bf16 +35%, then the 'optimization' that costs 90%, then two more patches. Each
    prefix runs 4 times and fails only when significantly worse than the base (measured first): p2 is blamed,
    the prefix above the base passes, and the tree ends as it started."""
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["out"]\n')
    (lab.tree / ".git" / "info" / "exclude").write_text("out/\n")
    for name, speed in (("bf16", "135"), ("sdpa", "10"), ("sync", "10.2"), ("skip", "9")):
        (lab.tree / "speed.txt").write_text(speed + "\n")
        assert lab.sm("save", name, "--series", "S", "-m", name).code == 0
    assert lab.sm("reset").code == 0
    script = tmp_path / "bench.py"
    script.write_text(SPEED_BENCH)
    done = lab.sm("--json", "bisect", "S", "--metric", "output_throughput", "--repeat", "4", "--", sys.executable,
                  str(script), str(lab.tree), str(tmp_path / "seen"))  # fmt: skip
    assert done.code == 0, done.err
    found = json.loads(done.out)
    assert found["first_bad"] == "sdpa" and found["repeat"] == 4, found
    details = {t["top"]: (t["failed"], t["detail"]) for t in found["tested"]}
    assert details["bf16"][0] is False and "faster" in details["bf16"][1]
    failed, detail = details["sdpa"]
    assert failed is True and "slower" in detail and "(n=4) vs the base 100" in detail, detail
    assert found["base"]["detail"] == "the reference (4 runs)"
    seen = (tmp_path / "seen").read_text().split()
    assert seen[:4] == ["100"] * 4 and len(seen) == 4 * (1 + len(found["tested"]))
    assert lab.worktree_id() == git_text(lab.tree, "rev-parse", "HEAD^{tree}")  # back at the base, as it started
    compared = lab.sm("compare", found["tested"][0]["link"], "--json")  # a tested prefix's runs: a run group
    assert compared.code == 0, compared.err


def test_bisect_metric_alone_needs_repeats(lab: Lab) -> None:
    done = lab.sm("bisect", "S", "--metric", "output_throughput", "--", "true")
    assert done.code == 2 and "--repeat N" in done.err, done.err


def speed_series(lab: Lab, tmp_path: Path, series: str, speeds: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """Series `series` of patches each setting speed.txt (SPEED_BENCH's throughput), the tree reset; the argv
    (`-- CMD…`) of the bench."""
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["out"]\n')
    (lab.tree / ".git" / "info" / "exclude").write_text("out/\n")
    for name, speed in speeds:
        (lab.tree / "speed.txt").write_text(speed + "\n")
        assert lab.sm("save", name, "--series", series, "-m", name).code == 0
    assert lab.sm("reset").code == 0
    script = tmp_path / "bench.py"
    script.write_text(SPEED_BENCH)
    return ("--", sys.executable, str(script), str(lab.tree), str(tmp_path / "seen"))


def test_bisect_regression_blames_the_step_down_even_when_the_stack_ends_above_the_base(lab: Lab,
                                                                                        tmp_path: Path) -> None:
    """As on the H100: bf16 +83%, then manual attention -37% (still above the fp32 base), then a sync -9%. Against
    the base nothing fails; against the prefix below, manual-attn is the first step down."""
    argv = speed_series(lab, tmp_path, "S", (("bf16", "183"), ("manual", "115"), ("sync", "105")))
    against_base = json.loads(lab.sm("--json", "bisect", "S", "--metric", "output_throughput", "--repeat", "4",
                                     *argv).out)  # fmt: skip
    assert against_base["first_bad"] is None  # 105 is not worse than 100
    done = lab.sm("--json", "bisect", "S", "--metric", "output_throughput", "--repeat", "4", "--regression", *argv)
    assert done.code == 0, done.err
    found = json.loads(done.out)
    assert found["first_bad"] == "manual", found
    assert [t["failed"] for t in found["tested"]] == [False, True, True]
    assert "vs the prefix below 18" in found["tested"][1]["detail"] and "slower" in found["tested"][1]["detail"]
    refused = lab.sm("bisect", "S", "--regression", *argv)
    assert refused.code == 2 and "--metric M and --repeat N" in refused.err


def test_bisect_regression_with_no_step_down_says_what_more_runs_could_change(lab: Lab, tmp_path: Path) -> None:
    """Every step up: nothing is blamed (exit 1), and the line points at --repeat, not at --regression itself."""
    argv = speed_series(lab, tmp_path, "U", (("p1", "110"), ("p2", "120"), ("p3", "130")))
    done = lab.sm("bisect", "U", "--metric", "output_throughput", "--repeat", "4", "--regression", *argv)
    assert done.code == 1, done.err
    assert done.out.splitlines()[-1] == ("U: no step is significantly worse than the prefix below with 4 runs each; "
                                         "one measured worse without significance (above) may still be a regression: "
                                         "a larger --repeat narrows the intervals")  # fmt: skip
