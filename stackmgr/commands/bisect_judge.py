"""How `bisect --repeat N` judges a tested prefix from its N runs (a single run is judged in bisect.py, `_judge`):

- by exit code (no --metric): the prefix fails when any of its runs failed (a flaky failure is a failure);
- with `--metric M --threshold X`: the median of M over its valid runs, worse than X by M's direction;
- with `--metric M` alone: the prefix against the series' base, measured first N times, by evidence/stats.judge:
  it fails only when it is significantly worse (`slower`/`worse`: p < 0.05, the interval excluding 0, the effect
  past --min-effect), never on one noisy pair, so a stack that goes up and down before the regression is
  bisected right as long as every prefix from the regression on stays worse than the base;
- with `--regression` (`regression`): each prefix against the one below, every prefix measured (no halving can
  answer a question that is not monotone), the first significantly worse step blamed.
"""

from __future__ import annotations

from statistics import median
from typing import TYPE_CHECKING, Any

from stackmgr.commands.repeat import values_by_metric
from stackmgr.commands.run import RunOutcome
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence.metrics import verdict_words
from stackmgr.evidence.stats import Judgement, judge

if TYPE_CHECKING:
    from stackmgr.store.config import Store


class Tested:
    def __init__(self, count: int, patch: str, failed: bool, link: str, detail: str) -> None:
        self.count = count  # patches applied
        self.patch = patch  # the top one
        self.failed = failed
        self.link = link
        self.detail = detail  # exit code, or the metric's value


class Bisected:
    def __init__(self, first_bad: str | None, tested: list[Tested], base_fails: bool, *, base_tested: bool = False,
                 blamed_first: bool = False) -> None:  # fmt: skip
        self.first_bad = first_bad  # None: the whole series passes
        self.tested = tested
        self.base_fails = base_fails
        self.base_tested = base_tested  # the base was run (when the first patch is blamed) and judged
        self.blamed_first = blamed_first
        self.base: Tested | None = None  # that run, recorded as a baseline of the series


class NoMetric(StackmgrError):
    """The test wrote no metric M: a prefix's test says nothing (the bisect stops), the base's is left out."""


def unknown_direction(metric: str, what: str) -> UsageProblem:
    return UsageProblem(f"{what}: which way {metric} is better is not known, so 'worse' means nothing",
                        f'declare it in stackmgr.toml: [metrics.{metric}] direction = "higher" (or "lower")')


def judge_repeats(outcomes: list[RunOutcome], metric: str | None, threshold: float | None,
                  base: list[RunOutcome] | None, min_effect: float = 0.01) -> tuple[bool, str]:  # fmt: skip
    """(failed, what decided it in words) for one prefix's runs; `base`: the base's runs, when judged against it."""
    n = len(outcomes)
    if metric is None:
        codes = [o.exit_code for o in outcomes if o.exit_code != 0]
        return bool(codes), f"exit {codes[0]} in {len(codes)} of {n} runs" if codes else f"exit 0 ({n} runs)"
    found = values_by_metric(outcomes).get(metric)
    if not found:
        raise NoMetric(f"no valid run of the {n} wrote metric {metric}",
                       "check --metric, and that its results land in a --result-dir or declared results")
    direction, values = found
    if direction not in ("higher", "lower"):
        raise unknown_direction(metric, "--metric")
    if threshold is not None:
        value, lower = median(values), direction == "lower"
        failed_t = value > threshold if lower else value < threshold
        op = (">" if failed_t else "<=") if lower else ("<" if failed_t else ">=")
        return failed_t, f"{metric} median {value:g} (n={len(values)}) {op} {threshold:g}"
    theirs = values_by_metric(base or []).get(metric)
    if not theirs:
        raise NoMetric(f"no valid run of the base wrote metric {metric}: nothing to judge against",
                       "check --metric, or give --threshold X")  # fmt: skip
    j = judge(theirs[1], values, direction=direction, min_effect=min_effect, words=verdict_words(metric, ""))
    return j.verdict in ("slower", "worse"), said(j, metric, "the base")


def said(j: Judgement, metric: str, against: str) -> str:
    """`output_throughput 10 (n=5) vs the base 100 (n=5): -90.0% [-90.5%, -89.6%] p=0.0079 slower`."""
    effect = f" {j.effect * 100:+.1f}%" if j.effect is not None else ""
    ci = f" [{j.ci_low * 100:+.1f}%, {j.ci_high * 100:+.1f}%]" if j.ci_low is not None and j.ci_high is not None \
        else ""  # fmt: skip
    p = f" p={j.p:.2g}" if j.p is not None and j.verdict != "too few runs" else ""
    return f"{metric} {j.median_b:g} (n={j.n_b}) vs {against} {j.median_a:g} (n={j.n_a}):{effect}{ci}{p} {j.verdict}"


def regression(store: Store, series: str, argv: list[str], *, metric: str, repeat: int, min_effect: float,
               **where: Any) -> Bisected:
    """`bisect --regression`: the first patch whose prefix is significantly worse than the prefix below it. That
    is no monotone question (a stack may go up, down, up), so no prefix can be skipped: every prefix is measured
    `repeat` times, in turn, as `ablate` measures them, and each step judged; the first worse step is blamed."""
    from stackmgr.commands.ablate import ablate
    done = ablate(store, series, argv, runs=repeat, metric=metric, min_effect=min_effect, **where)
    tested = [Tested(k, step.patch, bool(step.judged and step.judged.verdict in ("slower", "worse")),
                     f"{done.prefix}-{k}", said(step.judged, metric, "the prefix below") if step.judged else
                     "no valid runs to judge") for k, step in enumerate(done.steps, 1)]  # fmt: skip
    found = Bisected(next((t.patch for t in tested if t.failed), None), tested, False)
    found.base = Tested(0, "", False, f"{done.prefix}-0", f"the reference of the first patch ({repeat} runs)")
    found.base_tested = True
    return found
