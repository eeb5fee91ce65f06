"""`stackmgr ablate SERIES -- CMD`: which patch of a stack did it. Every prefix (or, with --leave-one-out, the
stack without each patch) measured N times, the states taken in turn; each patch's contribution judged as compare
judges, shown as a waterfall; the tree put back exactly as it was."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Lab
from tests.test_ab import leave_out_bench, three_patches_the_middle_one_fast, tree_state


def records(lab: Lab) -> list[dict[str, Any]]:
    return [tomllib.loads(p.read_text()) for p in (lab.store / "links").glob("*/*.toml")]


def test_ablate_attributes_the_gain_to_the_patch_that_made_it_and_puts_the_tree_back(lab: Lab,
                                                                                     tmp_path: Path) -> None:
    three_patches_the_middle_one_fast(lab)  # p1 speed.txt (100, as the base), p2 +20%, p3 notes
    before = tree_state(lab)
    done = lab.sm("ablate", "S", "-n", "4", "--json", "--", *leave_out_bench(tmp_path, lab))
    assert done.code == 0, done.err
    found = json.loads(done.out)
    assert [s["label"] for s in found["states"]] == ["0", "1", "2", "3"]
    verdicts = {s["patch"]: s["verdict"] for s in found["steps"]}
    assert verdicts == {"p1": "no significant change", "p2": "faster", "p3": "no significant change"}
    (p2,) = [s for s in found["steps"] if s["patch"] == "p2"]
    assert 0.19 < p2["effect"] < 0.21 and p2["ci"][0] > 0
    assert tree_state(lab) == before
    # the states in turn, round after round: base, p1, p1+p2, p1+p2+p3
    rounds = ["", "speed.txt", "fast.txt,speed.txt", "fast.txt,notes.txt,speed.txt"]
    assert (tmp_path / "seen").read_text().split("\n")[:-1] == rounds * 4
    made = records(lab)
    assert len(made) == 16
    assert sum(r["run"].get("baseline_of") == "S" for r in made) == 4  # the base's runs: the series' baseline
    names = sorted(r["run"]["name"].rsplit("-", 1)[1] for r in made)
    assert names[:4] == ["0.1", "0.2", "0.3", "0.4"]


def test_ablate_shows_a_waterfall_with_bars(lab: Lab, tmp_path: Path) -> None:
    three_patches_the_middle_one_fast(lab)
    done = lab.sm("ablate", "S", "-n", "4", "--", *leave_out_bench(tmp_path, lab))
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert lines[0].startswith("S on tree vllm: each prefix against the one below; 4 states × 4 runs, runs ablate-S-")
    assert lines[1] == "  output_throughput"
    assert lines[2].startswith("  base ") and "(n=4)" in lines[2]
    (p2,) = [line for line in lines if line.startswith("  + p2")]
    assert "faster" in p2 and p2.rstrip().endswith("+" * 24), p2  # the largest step: the whole bar


@pytest.mark.slow
def test_ablate_leave_one_out_measures_each_patch_against_the_whole_stack(lab: Lab, tmp_path: Path) -> None:
    three_patches_the_middle_one_fast(lab)
    before = tree_state(lab)
    done = lab.sm("ablate", "S", "-n", "4", "--leave-one-out", "--json", "--", *leave_out_bench(tmp_path, lab))
    assert done.code == 0, done.err
    found = json.loads(done.out)
    assert [s["label"] for s in found["states"]] == ["all", "without-p1", "without-p2", "without-p3"]
    assert [s["patches"] for s in found["states"]][2] == ["p1", "p3"]
    verdicts = {s["patch"]: s["verdict"] for s in found["steps"]}
    assert verdicts == {"p1": "no significant change", "p2": "faster", "p3": "no significant change"}
    assert tree_state(lab) == before


def test_ablate_leave_one_out_of_a_patch_another_needs_runs_nothing(lab: Lab, tmp_path: Path) -> None:
    three_patches_the_middle_one_fast(lab, p3_needs_p2=True)
    before = tree_state(lab)
    done = lab.sm("ablate", "S", "--leave-one-out", "--", *leave_out_bench(tmp_path, lab))
    assert done.code == 3 and "the stack without p2 cannot be built" in done.err, done.err
    assert not (tmp_path / "seen").exists() and not records(lab)
    assert tree_state(lab) == before


def test_ablate_refuses_unsaved_work_and_a_series_that_is_not_there(lab: Lab, tmp_path: Path) -> None:
    three_patches_the_middle_one_fast(lab)
    (lab.tree / "wip.txt").write_text("unsaved\n")
    done = lab.sm("ablate", "S", "--", *leave_out_bench(tmp_path, lab))
    assert done.code == 1 and "wip.txt" in done.err and not (tmp_path / "seen").exists()
    (lab.tree / "wip.txt").unlink()
    missing = lab.sm("ablate", "nope", "--", *leave_out_bench(tmp_path, lab))
    assert missing.code == 2 and "nope" in missing.err


def test_a_state_whose_runs_fail_a_gate_is_left_unjudged_the_others_judged(lab: Lab, tmp_path: Path) -> None:
    """The top patch breaks a quality gate (its state's runs are all invalid): the other steps are judged, its
    step says why it is not, as compare leaves invalid runs out."""
    three_patches_the_middle_one_fast(lab)
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + '\n[gates.notes]\nlog_regex = "BROKEN"\nmust = "not-match"\n')
    bench = leave_out_bench(tmp_path, lab)
    script = Path(bench[1])  # the bench says BROKEN in its log where p3's notes.txt is
    script.write_text(script.read_text() + "if os.path.exists(os.path.join(tree, 'notes.txt')):\n    print('BROKEN')\n")
    done = lab.sm("ablate", "S", "-n", "4", "--json", "--", *bench)
    assert done.code == 0, done.err
    steps = {s["patch"]: s for s in json.loads(done.out)["steps"]}
    assert steps["p2"]["verdict"] == "faster"
    assert steps["p3"]["verdict"] is None and "INVALID (gate notes: fail)" in steps["p3"]["why"], steps["p3"]


def test_effect_bars_scale_to_the_largest_effect_and_say_the_verdict() -> None:
    from stackmgr.output import effect_bar

    assert effect_bar(0.20, "faster", 0.20, 10) == "+" * 10
    assert effect_bar(-0.10, "slower", 0.20, 10) == "-" * 5
    assert effect_bar(0.001, "no significant change", 0.20, 10) == "·"
    assert effect_bar(0.05, "higher", 0.20, 8) == "~~"
    assert effect_bar(None, "too few runs", 0.2) == "" and effect_bar(0.1, "faster", 0.0) == ""
