"""Does a series meet its target (`[targets]` of stackmgr.toml, store/targets_config.py)? The one answer `status`,
`show`, `links` and the report give, in one line:

    target replay: output_throughput >= 150 not reached: best valid 107.77 tok/s (lnk-…, run qps1); 1 result
    above it is not valid (exit 1)

The results of a series are the current records (none amends them) of its patches, baselines left out
(evidence/baselines.py): a baseline measured none of the series. A result counts (is valid) when it is a
measurement of its patch (`link_state(...).measures`: its run neither failed nor was tainted, every gate it
records passed (evidence/gates.py), its evidence whole, the patch in the measured tree).
Valid results that repeat one measurement (one measured state, one run configuration: `run --repeat`) count as
one, by their median; of those the closest (by the target's OP) is named, so one lucky run of twenty never
reaches a target alone. The invalid results past the target are counted, with why each is not valid, so a number
that only looks good is never taken for one that is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stackmgr import output
from stackmgr.errors import StackmgrError
from stackmgr.evidence.baselines import is_baseline_of
from stackmgr.evidence.compare import run_config
from stackmgr.evidence.link_state import link_state, measured_state
from stackmgr.evidence.metrics import Metric
from stackmgr.evidence.reading import load_links, reader
from stackmgr.evidence.records import Link, measured_versions
from stackmgr.evidence.states import Evidence, effective
from stackmgr.store.config import Store
from stackmgr.store.series import SeriesFile
from stackmgr.store.targets_config import Target, all_targets, targets


class TargetCheck:
    """A series' target and how its results stand against it. `best`: the closest valid result and its value;
    `past`: the invalid results that meet it, each with why it is not valid."""

    def __init__(self, series: str, target: Target | None, problem: str = "", best: tuple[Link, Metric] | None = None,
                 past: list[tuple[Link, str]] | None = None) -> None:  # fmt: skip
        self.series = series
        self.target = target
        self.problem = problem  # the target cannot be read, or the series cannot: said instead of an answer
        self.base_unit = ""
        self.best = best
        self.past = past or []
        self.runs = 0  # the runs whose median `best` is (repeats of one measured state and configuration)
        self.base = ""  # a relative bound's baseline, in words: `baseline of S (run group base, 5 runs, median …)`
        self.part = ""  # `, with 1 of 4 patches of S (top fast)`: the best result measured part of the series

    @property
    def met(self) -> bool:
        return self.target is not None and self.best is not None and self.target.met_by(self.best[1].value)

    @property
    def line(self) -> str:
        if self.target is None or self.problem:
            return self.problem if self.target is None else f"target {self.series}: {self.target.text}: {self.problem}"
        head = f"target {self.series}: {self.target.text}"
        if self.target.relative is not None:
            head += f" (= {output.quantity(self.target.threshold, self.base_unit)}; the {self.base})"
        if self.best is not None and self.met:
            return f"{head} reached: {_result(*self.best, self.runs)}{self.part}"
        none = f"no valid result has {self.target.metric}"
        said = f"best valid {_result(*self.best, self.runs)}{self.part}" if self.best else none
        if self.past:
            why = "; ".join(dict.fromkeys(w for _, w in self.past))
            side = "above" if self.target.higher else "below"
            said += (f"; {output.plural(len(self.past), 'result')} {side} it "
                     f"{'is' if len(self.past) == 1 else 'are'} not valid ({why})")  # fmt: skip
        return f"{head} not reached: {said}"

    def to_json(self) -> dict[str, Any]:
        return {"series": self.series, "target": self.target.text if self.target else None, "met": self.met,
                "best": self.best[0].id if self.best else None, "value": self.best[1].value if self.best else None,
                "runs": self.runs, "note": self.target.note if self.target else "",
                "baseline": self.base or None,
                "not_valid": [k.id for k, _ in self.past], "line": self.line}  # fmt: skip


def check_target(store: Store, series: str, evidence: Evidence | None = None) -> TargetCheck | None:
    """Whether `series` meets its (first) target, and which result comes closest; None when it has no target."""
    found = check_targets(store, series, evidence)
    return found[0] if found else None


def check_targets(store: Store, series: str, evidence: Evidence | None = None) -> list[TargetCheck]:
    """Each bound of `series` (`[targets]`, in the order written) and how its results stand against it."""
    bounds = all_targets(store).get(series) or []
    if not bounds:
        return []
    problem, names, found = "", [], []
    ev = evidence
    try:
        names = SeriesFile.load(store, series).patch_names()
    except StackmgrError as exc:
        problem = exc.message
    if not problem:
        try:
            ev = evidence or Evidence.gather(store)
            parsed = reader(store)
            found = effective([k for name in names for k in load_links(store, name, parsed)])
            parsed.save()
        except StackmgrError as exc:  # a damaged record from a pull: said here, never stopping `status`
            problem = f"cannot be judged: {exc.message}"
    out = []
    for target in bounds:
        if isinstance(target, StackmgrError):
            out.append(_unreadable(series, target))
        elif problem or ev is None:
            out.append(TargetCheck(series, target, problem))
        else:
            out.append(_check(store, series, target, names, found, ev))
    return out


def _unreadable(series: str, target: StackmgrError) -> TargetCheck:
    return TargetCheck(series, None, f"{target.message} ({target.hint})" if target.hint else target.message)


def _check(store: Store, series: str, target: Target, names: list[str], found: list[Link], ev: Evidence,
           ) -> TargetCheck:  # fmt: skip
    base = ""
    if target.relative is not None:  # against the series' baseline runs (evidence/reference.py), by their median
        from stackmgr.evidence.reference import baseline_runs

        runs = baseline_runs(store, series, ev)
        values = [m for k in runs for m in k.metrics if m.name == target.metric]
        if not values:
            return TargetCheck(series, target, f"no valid baseline of {series} has {target.metric}")
        from statistics import median

        target = Target(series, target.text, target.metric, target.op, target.at(median(m.value for m in values)),
                        target.relative, target.note)  # fmt: skip
        base = baseline_words(series, runs, values[-1].name)
    valid: dict[object, list[tuple[Link, Metric]]] = {}  # repeats of one measurement (same state and config)
    past: list[tuple[Link, str]] = []
    for k in sorted(found, key=lambda k: (k.created, k.id)):
        m = next((m for m in k.metrics if m.name == target.metric), None)
        if m is None or is_baseline_of(k, series, set(names)):
            continue
        why = _why_not(ev, k)
        if why is None:
            valid.setdefault((measured_state(k), tuple(sorted(run_config(store, k).items()))), []).append((k, m))
        elif target.met_by(m.value):
            past.append((k, why))
    medians = [_median_of(runs) for runs in valid.values()]  # a measurement's number: its runs' median
    best = (max if target.higher else min)(medians, key=lambda km: km[1].value, default=None)
    check = TargetCheck(series, target, best=best[:2] if best else None, past=past)
    check.runs = best[2] if best else 0
    if best:  # a prefix's result counts for the series, and says so: the whole stack may be far from it
        held = [n for n, _ in measured_versions(best[0].stack) if n in names]
        if len(held) < len(names):
            check.part = f", with {len(held)} of {output.plural(len(names), 'patch', 'patches')} of {series}" + \
                (f" (top {held[-1]})" if held else "")  # fmt: skip
    check.base = base
    if base:
        check.base_unit = next((m.unit for k in found for m in k.metrics if m.name == target.metric and m.unit), "")
    return check


def baseline_words(series: str, runs: list[Link], metric: str) -> str:
    """A series' baseline by its run group and role, never by link ids alone: `baseline of S (run group base,
    5 runs, median 11158 tok/s)`; `(run base-1, …)` for one run; the median of `metric` over its runs."""
    from statistics import median

    values = [m for k in runs for m in k.metrics if m.name == metric]
    groups: dict[str, int] = {}  # each run group among the runs, the latest first, and the runs of none
    single: list[str] = []
    for k in reversed(runs):
        if group := str(k.run.get("group") or ""):
            groups[group] = groups.get(group, 0) + 1
        else:
            single.append(str(k.run.get("name") or "") or k.id)
    parts = [f"run group {output.show_text(g)}" + (f" ({n})" if len(groups) + bool(single) > 1 else "")
             for g, n in list(groups.items())[:3]]  # fmt: skip
    if len(groups) > 3:
        parts.append(f"{len(groups) - 3} more run groups")
    if single:
        names = ", ".join(output.show_text(n) for n in single[:3]) + (f" and {len(single) - 3} more" if
                                                                        len(single) > 3 else "")  # fmt: skip
        parts.append(f"run{'s' if len(single) > 1 else ''} {names}")
    said = [", ".join(parts), output.plural(len(runs), "run")]
    if values:
        said.append(f"median {output.quantity(median(m.value for m in values), values[-1].unit)}")
    return f"baseline of {series} ({', '.join(p for p in said if p)})"


def _median_of(runs: list[tuple[Link, Metric]]) -> tuple[Link, Metric, int]:
    """(the latest run, the metric at the runs' median, how many runs): one noisy run of twenty never reaches a
    target alone."""
    from statistics import median

    link, m = runs[-1]
    return link, Metric(m.name, median(r[1].value for r in runs), m.unit, m.direction), len(runs)


def targets_of(store: Store, series: Iterable[str] | None = None, evidence: Evidence | None = None,
               ) -> list[TargetCheck]:  # fmt: skip
    """`check_target` of each series named (default: every series with a target), in name order."""
    declared = targets(store)
    if not declared:
        return []
    wanted = sorted(set(declared) & set(series)) if series is not None else sorted(declared)
    ev = evidence or (Evidence.gather(store) if wanted else None)
    return [c for s in wanted for c in check_targets(store, s, ev)]


def patch_targets(store: Store, patch: str, evidence: Evidence) -> list[TargetCheck]:
    """The targets of the series that list `patch` (`show`); none when the config declares no target, and none
    said for a series that cannot be read (its own commands say why)."""
    if not targets(store):
        return []
    from stackmgr.store.series import series_listing

    try:
        listing = series_listing(store, patch)
    except StackmgrError:
        return []
    return targets_of(store, listing, evidence)


def _why_not(ev: Evidence, link: Link) -> str | None:
    """Why a result of the series is not valid (`exit 1`, `tainted`, …), or None when it is."""
    state = link_state(ev, link)
    return None if state.measures else (state.left_out_why() or "not valid")


def _result(link: Link, metric: Metric, runs: int = 1) -> str:
    """`107.77 tok/s (lnk-…, run qps1)`; for repeats `median 130 tok/s of 20 runs (lnk-… the latest, run f20-20)`."""
    name = link.run.get("name")
    named = f", run {output.show_text(name)}" if isinstance(name, str) and name else ""
    if runs > 1:
        return f"median {output.quantity(metric.value, metric.unit)} of {runs} runs ({link.id} the latest{named})"
    return f"{output.quantity(metric.value, metric.unit)} ({link.id}{named})"
