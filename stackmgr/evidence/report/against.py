"""A patch against its series' baseline runs, as the index and the patch page show it: `Against`.

The baseline runs are evidence/reference.baseline_runs (the latest valid baseline and those alike to it); the
patch's side is its results that measured it and hold (evidence.link_state.quoted_results) with the baseline's run
configuration and environment, and, as one `compare` column, the latest one's measured state and environment (the
others are counted in the label, never pooled). The metric is the headline (`[evidence] headline`) where both sides
have it, else the first metric of the latest baseline run the patch's results have. With 2 runs or more a side the
sides are judged as `compare` judges them (evidence.stats.judge: median, effect [95% interval], verdict); with
fewer, the plain delta of the medians and how many runs, never a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median

from stackmgr.evidence.environment import environment_key, what_differs
from stackmgr.evidence.link_state import LinkState, measured_state, quoted_results
from stackmgr.evidence.metrics import Metric, verdict_words
from stackmgr.evidence.records import Link
from stackmgr.evidence.reference import reference_label
from stackmgr.evidence.states import effective
from stackmgr.evidence.stats import Judgement, judge
from stackmgr.output import plural

REPEATS = 2  # runs a side from which the report judges (below it: the plain delta, never a verdict)


@dataclass
class Against:
    series: str
    metric: Metric  # its name, unit and direction; its value is the patch's median
    runs: int  # the patch's runs
    base_runs: int
    base_median: float
    judged: Judgement | None  # None for fewer than REPEATS runs a side
    other_env: list[str] = field(default_factory=list)  # what differs, for each result left out by environment
    others: int = 0  # the other patches its latest result measured with it (a prefix: those below it)
    other_states: int = 0  # its results of other measured states, left out (compare shows each as a column)

    @property
    def label(self) -> str:
        """`baseline of S (4 runs)`, and what else the reader must know: the other patches the results measured
        with it (the effect is theirs too), the results left out for another environment."""
        said = reference_label(self.series, self.base_runs)
        if self.others:
            said += f"; measured with {plural(self.others, 'other patch', 'other patches')} applied"
        if self.other_states:
            said += (f"; {plural(self.other_states, 'result')} of other measured trees left out (`stackmgr compare` "
                     "shows each)")  # fmt: skip
        if self.other_env:
            said += (f"; {plural(len(self.other_env), 'result')} measured in another environment left out "
                     f"({self.other_env[0]})")  # fmt: skip
        return said


def against(links: list[Link], series: list[str], base_runs: dict[str, list[Link]], judged: dict[str, LinkState],
            config_of: Callable[[Link], dict[str, str]], headline: str | None) -> Against | None:  # fmt: skip
    """The patch (its `links`, in `series`) against the first of its series with baseline runs; None where no
    result of it has a metric of them in their configuration."""
    good = quoted_results(effective(links), judged)
    for name in series:
        runs = base_runs.get(name) or []
        if not runs:
            continue
        wanted, env = config_of(runs[-1]), environment_key(runs[-1])
        alike = [k for k in good if config_of(k) == wanted]
        mine = [k for k in alike if not what_differs(environment_key(k), env)]  # as compare groups them
        other_env = ["; ".join(differs) for k in alike if (differs := what_differs(environment_key(k), env))]
        if mine:  # one measurement, as compare's column: the latest result's measured state and environment
            latest = mine[-1]
            state, own = measured_state(latest), environment_key(latest)
            other_env += ["; ".join(d) for k in mine if (d := what_differs(environment_key(k), own))]
            others = len([k for k in mine if measured_state(k) != state])
            mine = [k for k in mine if measured_state(k) == state and not what_differs(environment_key(k), own)]
        theirs = {m.name for k in runs for m in k.metrics}
        ours = [m for k in mine for m in k.metrics if m.name in theirs]
        if not ours:
            continue
        metric = next((m for m in ours if m.name == headline), None) or next(
            (m for m in runs[-1].metrics if any(o.name == m.name for o in ours)), ours[0]
        )
        a = [m.value for k in runs for m in k.metrics if m.name == metric.name]
        b = [m.value for m in ours if m.name == metric.name]
        verdict = judge(a, b, direction=metric.direction, words=verdict_words(metric.name, metric.unit)) \
            if min(len(a), len(b)) >= REPEATS else None  # fmt: skip
        shown = Metric(metric.name, median(b), metric.unit, metric.direction)
        found = Against(name, shown, len(b), len(a), median(a), verdict, other_env, _others(mine[-1]))
        found.other_states = others
        return found
    return None


def _others(link: Link) -> int:
    """How many patches but its own the result's measured tree held (its tree's chain)."""
    entry = next((s for s in link.stack if s.tree == link.tree), None)
    return len([n for n, _ in entry.patches if n != link.patch]) if entry is not None else 0
