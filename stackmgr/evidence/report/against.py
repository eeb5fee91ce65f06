"""A patch against its series' baseline runs, as the index and the patch page show it: `Against`.

The baseline runs are evidence/reference.baseline_runs (the latest valid baseline and those alike to it); the
patch's side is its results that measured it and hold (evidence.link_state.quoted_results) with the baseline's
run configuration. The metric is the headline (`[evidence] headline`) where both sides have it, else the first
metric of the latest baseline run the patch's results have. With 2 runs or more a side the sides are judged as
`compare` judges them (evidence.stats.judge: median, effect [95% interval], verdict); with fewer, the plain
delta of the medians and how many runs, never a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import median

from stackmgr.evidence.link_state import LinkState, quoted_results
from stackmgr.evidence.metrics import Metric
from stackmgr.evidence.records import Link
from stackmgr.evidence.reference import reference_label
from stackmgr.evidence.states import effective
from stackmgr.evidence.stats import Judgement, judge

REPEATS = 2  # runs a side from which the report judges (below it: the plain delta, never a verdict)


@dataclass
class Against:
    series: str
    metric: Metric  # its name, unit and direction; its value is the patch's median
    runs: int  # the patch's runs
    base_runs: int
    base_median: float
    judged: Judgement | None  # None for fewer than REPEATS runs a side

    @property
    def label(self) -> str:
        return reference_label(self.series, self.base_runs)


def against(links: list[Link], series: list[str], base_runs: dict[str, list[Link]], judged: dict[str, LinkState],
            config_of: Callable[[Link], dict[str, str]], headline: str | None) -> Against | None:  # fmt: skip
    """The patch (its `links`, in `series`) against the first of its series with baseline runs; None where no
    result of it has a metric of them in their configuration."""
    good = quoted_results(effective(links), judged)
    for name in series:
        runs = base_runs.get(name) or []
        if not runs:
            continue
        wanted = config_of(runs[-1])
        mine = [k for k in good if config_of(k) == wanted]
        theirs = {m.name for k in runs for m in k.metrics}
        ours = [m for k in mine for m in k.metrics if m.name in theirs]
        if not ours:
            continue
        metric = next((m for m in ours if m.name == headline), None) or next(
            (m for m in runs[-1].metrics if any(o.name == m.name for o in ours)), ours[0]
        )
        a = [m.value for k in runs for m in k.metrics if m.name == metric.name]
        b = [m.value for m in ours if m.name == metric.name]
        verdict = judge(a, b, direction=metric.direction) if min(len(a), len(b)) >= REPEATS else None
        shown = Metric(metric.name, median(b), metric.unit, metric.direction)
        return Against(name, shown, len(b), len(a), median(a), verdict)
    return None
