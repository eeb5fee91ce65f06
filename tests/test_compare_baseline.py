"""`compare PATCH…` measures against the series' baseline by default: the latest valid baseline of the series the
compared patches belong to (evidence/baselines.latest_baseline), with every current baseline of that series at the
same base and run configuration, is the reference column `baseline of S (n runs)`; `--no-baseline` turns it off,
`--baseline REF` names another reference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Lab
from tests.test_baselines import bench_run, popped  # noqa: F401  (the fixture)

BASE = ["100.0", "101.0", "99.5", "100.4"]
FAST = ["110.0", "111.2", "109.5", "110.7"]


@pytest.fixture
def measured(lab: Lab, popped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:  # noqa: F811
    """Series S (fix, probe): four baseline runs at its base, four runs of the whole series (linked to probe)."""
    for i, tput in enumerate(BASE):
        assert bench_run(lab, popped, tmp_path, name=f"base{i}", tput=tput, monkeypatch=monkeypatch).code == 0
    assert lab.sm("push", "-a").code == 0
    for i, tput in enumerate(FAST):
        assert bench_run(lab, popped, tmp_path, name=f"full{i}", tput=tput, monkeypatch=monkeypatch).code == 0
    return lab


def _group(lab: Lab, *args: str) -> dict[str, Any]:
    done = lab.sm("--json", "compare", *args)
    assert done.code == 0, done.err
    (group,) = json.loads(done.out)["groups"]
    return dict(group)


def test_a_patch_is_judged_against_all_the_series_baseline_runs_by_default(measured: Lab) -> None:
    group = _group(measured, "probe")
    ref, mine = group["results"]
    assert (ref["label"], ref["n"], ref["reference"], ref["patch"]) == ("baseline of S (4 runs)", 4, True, "fix")
    assert ref["baseline_of"] == "S" and "baseline_of" not in mine
    assert (mine["patch"], mine["n"], mine["reference"]) == ("probe", 4, False)
    (tput,) = [m["values"] for m in group["metrics"] if m["name"] == "output_throughput"]
    assert (tput[0]["median"], tput[0]["verdict"]) == (100.2, None)
    assert (tput[1]["median"], tput[1]["verdict"]) == (110.35, "faster")
    assert group["left_out"] == []
    shown = measured.sm("compare", "probe").out
    assert "baseline of S (4 runs) (reference): " in shown
    line = next(s for s in shown.splitlines() if s.lstrip().startswith("output_throughput"))
    assert line.rstrip().endswith("faster") and "(n=4)" in line


def test_the_first_patch_s_baseline_records_are_its_reference_not_left_out(measured: Lab) -> None:
    group = _group(measured, "fix")  # fix has no result of its own: only the baselines filed with it
    (ref,) = group["results"]
    assert (ref["label"], ref["n"], ref["reference"]) == ("baseline of S (4 runs)", 4, True)
    assert group["left_out"] == []


def test_no_baseline_turns_the_reference_off(measured: Lab) -> None:
    group = _group(measured, "--no-baseline", "probe")
    (mine,) = group["results"]
    assert (mine["patch"], mine["n"], mine["reference"]) == ("probe", 4, True)
    left = _group(measured, "--no-baseline", "fix", "probe")
    assert {x["why"] for x in left["left_out"]} == {"measured without the patch"}


def test_a_named_baseline_wins_over_the_series_one(measured: Lab) -> None:
    group = _group(measured, "--baseline", "full0", "probe")
    labels = [r["label"] for r in group["results"]]
    assert labels[0] == "full0" and group["results"][0]["reference"] and group["results"][0]["n"] == 1
    assert not any(label.startswith("baseline of") for label in labels)


def test_an_unknown_baseline_is_refused_in_one_line(measured: Lab) -> None:
    done = measured.sm("compare", "--baseline", "nosuch", "probe")
    assert done.code == 2 and len(done.err.strip().splitlines()) <= 2, done.err


def test_bisect_s_step_says_the_value_its_threshold_and_that_it_is_one_run() -> None:
    from stackmgr.commands.bisect import _judge
    from stackmgr.evidence.metrics import Metric

    tput = [Metric("output_throughput", 60.0, "tok/s", "higher")]
    assert _judge(0, tput, "output_throughput", 90.0) == (True, "output_throughput 60 (1 run) < 90")
    assert _judge(0, tput, "output_throughput", 50.0) == (False, "output_throughput 60 (1 run) >= 50")
    ttft = [Metric("mean_ttft_ms", 60.0, "ms", "lower")]
    assert _judge(0, ttft, "mean_ttft_ms", 50.0) == (True, "mean_ttft_ms 60 (1 run) > 50")
    assert _judge(3, [], None, None) == (True, "exit 3")
