"""`stackmgr compare LINK|PATCH…`: results side by side, each against the first of its run configuration.

Results are grouped by run configuration (`evidence.compare.run_config`: model, request rate, concurrency,
prompts); results of different configurations are never ranked against each other. In a group, each result is
one column showing the median of its runs, and the first is the reference each other is judged against
(evidence.stats.judge: the effect with its 95% interval, p and `faster` / `slower` / `no significant change` /
`too few runs`, floored by `--min-effect`); where a column and the reference are single runs whose JSON holds
per-request samples, a latency metric is judged on them (evidence.compare.request_samples): its median, effect,
interval and p describe the two runs' requests, but the verdict is `too few runs` whatever they say, since a shift
of one whole run (clocks, temperature) moves every request of it alike and the requests cannot tell it from a
change. What a column is depends on how it was named:

- a PATCH means its current links (not amended): those of one configuration are repeats of one measurement,
  one column, their median;
- a link id (or a run's name) is that one result, its own column, even beside other links of the same patch:
  naming two runs is asking to see them side by side, not averaged (a column's label is then its link id
  where its patch's name alone would not tell the columns apart);
- a run group (`run --repeat --name NAME`'s NAME, `ab`'s `PREFIX-A`) is its runs, one column, their median: two
  groups of one tree are two columns (an A/A check);
- a link named twice (by id and through its patch) counts once, where it was first named.

Repeats are repeats of one measured state (`evidence.link_state.measured_state`: per tree, the snapshot id the
record keeps): a patch's links measured on different trees (the patch alone, the patch with another saved change)
are columns apart, each labelled with what its tree held (`p1 on p1+p2`), patches by the name they go by now
(evidence.versions.current_name) and, where the columns differ by a patch's version, that version (`p2@1a2b3c`:
the first hex of its sha256). A column whose result is not fresh says its state (`stale`,
evidence.link_state `word`). A run name two runs were given is refused (evidence.reading.find_ref).

A result is a measurement of its patch as `evidence.link_state` says (`usable`): a run that failed (a `[run]` exit
code other than 0, or its `exit` gate `fail` or `error`) or was tainted (a measured tree changed while it ran) is
never averaged in and never a reference; among a PATCH's links it is left out, as is one measured without the
patch (a baseline linked to it: named by itself, it is a column) or one whose evidence is broken (an artifact
changed or missing). Each is listed under its configuration's group as left out, with why (`exit 3`, `tainted`,
`measured without the patch`, `broken: …`). A failed or tainted run the user named by itself is shown: a column,
marked (`FAILED (exit 3)`, `TAINTED`; `marked` in `--json`), never the reference. A column named by a run's name
is titled by that name.

A difference within REL_TOL of the larger value (float rounding of a mean, not a measurement) is no change:
shown `same`, its delta 0.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from stackmgr.errors import UsageProblem
from stackmgr.evidence.compare import CONFIG_KEYS, request_samples, run_config
from stackmgr.evidence.link_state import WHOLE_NOT, measured_state, run_mark
from stackmgr.evidence.metrics import change, verdict_words
from stackmgr.evidence.reading import find_links, find_ref, load_links
from stackmgr.evidence.records import Link
from stackmgr.evidence.ref_names import run_group
from stackmgr.evidence.states import effective
from stackmgr.evidence.stats import Judgement, judge
from stackmgr.safety.preserved import PatchIndex
from stackmgr.store.config import Store
from stackmgr.store.names import valid_name

REL_TOL = 1e-9  # a difference this small against the larger value is float rounding, not a change


@dataclass
class Result:
    """One column: the current links of one patch measured with one configuration, or one link named by id."""

    patch: str
    links: list[Link] = field(default_factory=list)
    named: str = ""  # the link id when the column is one link named by id (or run name), "" for a patch
    label: str = ""  # what the table's header calls it: the patch, or the link id where the patch is ambiguous
    given: str = ""  # the run name (or run group) the user named it by, "" otherwise
    state: tuple[tuple[str, str], ...] = ()  # its measured state (evidence.link_state.measured_state)
    marked: str = ""  # a failed or tainted run named by itself: why ("exit 3", "tainted"); never the reference
    mark: str = ""  # how the text view marks it: "FAILED (exit 3)", "TAINTED"
    title: str = ""  # what the column's line calls it: its patch now, what its tree held, its state if not fresh
    word: str = "fresh"  # its result's state (evidence.link_state `word`): a label says one not fresh
    baseline: str = ""  # the series whose baseline runs the column is (the default reference), "" otherwise


@dataclass
class Cell:
    mean: float
    stdev: float | None  # None for a single run
    n: int
    delta: float | None = None  # mean minus the reference's mean; None in the reference column
    delta_pct: float | None = None  # None also when the reference is 0
    change: str | None = None  # better / worse / same: the sign of the means' difference, not a verdict
    median: float = 0.0  # of the runs' values
    samples: str = "runs"  # what was judged: the runs' values, or a single run's per-request values ("requests")
    n_samples: int = 0  # how many values were judged
    values: list[float] = field(default_factory=list, repr=False)  # the values judged
    judged: Judgement | None = None  # against the reference (evidence.stats.judge); None in the reference


@dataclass
class Row:
    name: str
    unit: str
    direction: str
    cells: list[Cell | None]  # one per result of the group, None where that result lacks the metric


@dataclass
class Group:
    config: dict[str, str]
    results: list[Result]
    rows: list[Row] = field(default_factory=list)
    left_out: list[tuple[Link, str]] = field(default_factory=list)  # failed or tainted runs, with why
    environment_differs: list[str] = field(default_factory=list)  # from the configuration's first group's

    @property
    def reference(self) -> int | None:
        """The index of the column the others are compared with: the first that is a measurement."""
        return next((i for i, r in enumerate(self.results) if not r.marked), None)


def resolve(store: Store, targets: list[str]) -> list[tuple[Link, bool, str]]:
    """The links named, each with whether it was named by itself and the run name it was named by: a link id
    (`lnk-` optional) or a run's name is that link (True), a patch name its current links (not amended), oldest
    first (False). A link named twice counts where it was named first, but a failed or tainted run named by itself
    anywhere counts as named by itself (it is shown, marked)."""
    chosen: list[tuple[Link, bool, str]] = []
    for target in targets:
        name = target[: -len(".patch")] if target.endswith(".patch") else target
        by_id = find_links(store, {target, f"lnk-{target}"})
        if by_id:
            chosen.append((by_id.get(target) or by_id[f"lnk-{target}"], True, ""))
        elif valid_name(name) and (own := load_links(store, name)):
            chosen.extend((link, False, "") for link in effective(own))
        elif (named := find_ref(store, target)) is not None:  # `stackmgr run --name`: the latest of a name
            chosen.append((named, True, target))
        elif group := run_group(store, target):  # `run --repeat`'s group: its runs, one column
            chosen.extend((link, False, target) for link in group)
        elif valid_name(name) and os.path.isfile(os.path.join(store.patches_dir, name + ".patch")):
            raise UsageProblem(f"patch {name} has no links yet", f"record one with `stackmgr link {name} ARTIFACT…`")
        else:
            from stackmgr.evidence.ref_names import unknown_ref
            from stackmgr.store.names import patch_names

            shown = target.encode("unicode_escape").decode("ascii")[:80]
            raise unknown_ref(store, target, f"no link or patch named '{shown}'", "give link ids (`stackmgr links`) "
                              "or patch names (`stackmgr series`)", also=patch_names(store))  # fmt: skip
    first: dict[str, tuple[Link, bool, str]] = {}
    for link, alone, given in chosen:
        had = first.setdefault(link.id, (link, alone, given))
        if alone and not had[1] and run_mark(link):  # a failed run named by itself is shown, wherever named first
            first[link.id] = (link, alone, given)
    return list(first.values())


def _cell(values: list[float]) -> Cell:
    """Mean and sample stdev; values near the float limit (metrics are finite) are scaled so neither overflows."""
    try:
        mean, stdev = statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None
    except OverflowError:
        mean, stdev = math.inf, None
    if not math.isfinite(mean) or (stdev is not None and not math.isfinite(stdev)):
        scale = max(abs(v) for v in values)
        scaled = [v / scale for v in values]
        mean = statistics.fmean(scaled) * scale
        stdev = statistics.stdev(scaled) * scale if len(values) > 1 else None
    return Cell(mean, stdev, len(values), values=values)


def _rows(results: list[Result], headline: str | None, reference: int | None, min_effect: float,
          per_request: list[dict[str, list[float]]]) -> list[Row]:  # fmt: skip
    """One row per metric; each cell judged against the reference's (evidence.stats.judge) on the runs' values,
    or on per-request values where the cell and the reference are single runs that both hold them."""
    if not results:  # every run of the group left out
        return []
    names: dict[str, tuple[str, str]] = {}  # name -> (unit, direction) of its first appearance
    for result in results:
        for link in result.links:
            for m in link.metrics:
                names.setdefault(m.name, (m.unit, m.direction))
    order = sorted(names, key=lambda n: n != headline)  # the headline first, the rest as they appear
    rows = []
    for name in order:
        unit, direction = names[name]
        cells: list[Cell | None] = []
        for result in results:
            values = [m.value for link in result.links for m in link.metrics if m.name == name]
            cells.append(_cell(values) if values else None)
        ref = cells[reference] if reference is not None else None
        for i, cell in enumerate(cells):
            if cell is None:
                continue
            cell.median, cell.n_samples = _median(cell.values), cell.n
            if ref is None or i == reference or reference is None:
                continue
            _delta(cell, ref, direction)
            mine, theirs = per_request[i].get(name), per_request[reference].get(name)
            a, b = (theirs, mine) if mine and theirs else (ref.values, cell.values)
            cell.judged = judge(a, b, direction=direction, min_effect=min_effect, words=verdict_words(name, unit))
            if mine and theirs:  # one run a side: its requests cannot tell a change from a shift of the whole run
                cell.judged = replace(cell.judged, verdict="too few runs")
                cell.median, ref.median = cell.judged.median_b, cell.judged.median_a  # what was judged: requests
        _mark_requests(cells, reference, per_request, name)
        rows.append(Row(name, unit, direction, cells))
    return rows


def _mark_requests(cells: list[Cell | None], reference: int | None, per_request: list[dict[str, list[float]]],
                   name: str) -> None:  # fmt: skip
    """Cells judged on per-request values say so (`samples` "requests", `n_samples` the requests), the reference
    too where some cell was judged against its requests."""
    if reference is None or cells[reference] is None:
        return
    theirs = per_request[reference].get(name)
    for i, cell in enumerate(cells):
        mine = per_request[i].get(name)
        if cell is not None and i != reference and mine and theirs:
            cell.samples, cell.n_samples = "requests", len(mine)
            ref = cells[reference]
            assert ref is not None
            ref.samples, ref.n_samples = "requests", len(theirs)


def _median(values: list[float]) -> float:
    """The median, halves added (values near the float limit stay finite)."""
    ordered, mid = sorted(values), len(values) // 2
    return ordered[mid] if len(values) % 2 else ordered[mid - 1] / 2 + ordered[mid] / 2


def _delta(cell: Cell, ref: Cell, direction: str) -> None:
    """The cell against the reference; within REL_TOL of the larger value: the same (float rounding)."""
    delta = cell.mean - ref.mean
    if abs(delta) <= REL_TOL * max(abs(cell.mean), abs(ref.mean)):
        cell.delta, cell.delta_pct, cell.change = 0.0, 0.0, "same"
        return
    cell.change = change(delta, direction)
    cell.delta = delta if math.isfinite(delta) else None  # two values near the float limit
    pct = delta / abs(ref.mean) * 100 if ref.mean else math.inf
    cell.delta_pct = pct if math.isfinite(pct) else None


Named = dict[tuple[str, str], str]  # (name measured as, sha256) -> the name it goes by now


def _measured(link: Link, now: Named) -> list[tuple[str, str]]:
    """(name now, sha256) of what the link's own tree held when measured, its own patch first."""
    entry = next((s for s in link.stack if s.tree == link.tree), None)
    held = [(now.get((n, h), n), h) for n, h in entry.patches] if entry is not None else []
    return [(now.get((link.patch, link.sha256), link.patch), link.sha256), *held]


def _on(link: Link, now: Named, versioned: set[str]) -> str:
    """What the link's own tree held when measured, for a column's label: `p1+p2`, `p1+residue`; a patch whose
    version tells the columns apart with it (`p2@1a2b3c`: the first hex of its measured version's sha256)."""
    entry = next((s for s in link.stack if s.tree == link.tree), None)
    if entry is None:
        return "?"
    names = [_at(n, h, versioned) for n, h in _measured(link, now)[1:]]
    return "+".join(names + (["residue"] if entry.residue else [])) or "base"


def _at(name: str, sha256: str, versioned: set[str]) -> str:
    return f"{name}@{sha256[:6]}" if name in versioned else name


def _label(r: Result, results: list[Result], now: Named, memo: dict[str, dict[int, str]]) -> str:
    """The column's title: its run name, else its patch by the name it goes by now (with its link id where that
    alone would not tell the columns apart, or what its tree held where two measured states are two columns),
    and its state where its result is not fresh (`stale`). Sets `title`, what the column's line says it is."""
    own = now.get((r.patch, r.links[0].sha256), r.patch)
    state = f" ({r.word})" if r.word not in ("fresh", "failed", "tainted") else ""
    r.title = own + state
    if r.given:
        return r.given + state
    if r.named:
        return (r.named if sum(other.patch == r.patch for other in results) > 1 else own) + state
    if r.patch not in memo:  # each patch's columns labelled once per group (a patch may have hundreds)
        memo[r.patch] = _held_labels([o for o in results if o.patch == r.patch and not o.named and not o.given
                                      and not o.baseline], own, now)  # fmt: skip
    labels = memo[r.patch]
    if len(labels) < 2:
        return own + state
    label = labels[id(r)]
    if sum(other == label for other in labels.values()) > 1:  # same patches, another tree id
        label += f" ({dict(r.state).get(r.links[0].tree, '')[:12]})"
    r.title = label + state
    return label + state


def _held_labels(twins: list[Result], own: str, now: Named) -> dict[int, str]:
    """id(result) -> `P on p1+p2`: what each column of one patch held, a patch's version named where it tells
    the columns apart."""
    versions: dict[str, set[str]] = {}
    for o in twins:
        for name, sha in _measured(o.links[0], now):
            versions.setdefault(name, set()).add(sha)
    versioned = {name for name, shas in versions.items() if len(shas) > 1}
    return {id(o): f"{_at(own, o.links[0].sha256, versioned)} on {_on(o.links[0], now, versioned)}" for o in twins}


def _names_now(store: Store, index: PatchIndex, results: list[Result]) -> Named:
    """Each measured patch version of the columns' links by the name it goes by now (evidence.versions)."""
    from stackmgr.evidence.versions import current_name

    now: Named = {}
    for r in results:
        for link in r.links:
            entry = next((s for s in link.stack if s.tree == link.tree), None)
            for key in [(link.patch, link.sha256)] + (list(entry.patches) if entry is not None else []):
                if key not in now:
                    now[key] = current_name(store, key[0], key[1], index) or key[0]
    return now


class Comparison:
    """The groups `compare` shows, each with its results in the order named and its metric rows."""

    def __init__(self, store: Store, targets: list[str], min_effect: float = 0.01, across_env: bool = False,
                 baseline: str | None = None, series_baseline: bool = True) -> None:  # fmt: skip
        from stackmgr.commands.compare_reference import series_reference
        from stackmgr.evidence.environment import Groups
        from stackmgr.evidence.link_state import link_state
        from stackmgr.evidence.reference import reference_label
        from stackmgr.evidence.states import Evidence

        self.headline = store.headline()
        groups: dict[tuple[tuple[tuple[str, str], ...], int], Group] = {}
        envs = Groups(across_env)  # results measured in environments that differ are apart (evidence/environment.py)
        ev = Evidence.gather(store)
        named = resolve(store, [baseline, *targets] if baseline else targets)  # a named reference comes first
        groups_named = {given for k, alone, given in named if not alone and given}
        found = (series_reference(store, ev, [k.patch for k, alone, given in named  # a group alone: vs the baseline
                                              if not alone and (not given or len(groups_named) == 1)])
                 if series_baseline and not baseline else None)  # fmt: skip
        of, base_ids = (found[0], {k.id for k in found[1]}) if found else ("", set())
        if found:  # the series' baseline runs are the reference: first, never left out as measured without
            named = [(k, False, "") for k in found[1]] + [x for x in named if x[0].id not in base_ids]
        for link, alone, given in named:
            config = run_config(store, link)
            at, differs = envs.place(config, link)
            group = groups.setdefault((tuple(sorted(config.items())), at),
                                      Group(config, [], environment_differs=differs))  # fmt: skip
            state = link_state(ev, link)
            is_base = link.id in base_ids
            why = None if is_base else state.left_out_why(alone or bool(given))  # a group named: its baselines too
            shown = alone and why is not None and state.freshness not in WHOLE_NOT  # named by itself: shown, marked
            if why is not None and not shown:
                group.left_out.append((link, why))
                continue
            measured = measured_state(link)
            result = None if alone else next((r for r in group.results if r.patch == link.patch and not r.named
                                              and r.state == measured and r.baseline == (of if is_base else "")
                                              and r.given == given), None)  # fmt: skip
            if result is None:
                result = Result(link.patch, named=link.id if alone else "", given=given, state=measured,
                                word="fresh" if is_base else state.word, baseline=of if is_base else "")  # fmt: skip
                if shown:
                    result.marked, result.mark = str(why), state.run_problem
                group.results.append(result)
            result.links.append(link)
        now = _names_now(store, ev.index, [r for group in groups.values() for r in group.results])
        for group in groups.values():
            memo: dict[str, dict[int, str]] = {}
            for r in group.results:
                r.label = _label(r, group.results, now, memo) if not r.baseline else reference_label(of, len(r.links))
                r.title = r.label if r.baseline else r.title
            per_request = [request_samples(store, r.links[0]) if len(r.links) == 1 else {} for r in group.results]
            group.rows = _rows(group.results, self.headline, group.reference, min_effect, per_request)
        self.groups = list(groups.values())
        ev.save()

    def to_json(self) -> dict[str, Any]:
        return {"schema": 1, "headline": self.headline, "groups": [{
            "config": {key: group.config.get(key) for key in CONFIG_KEYS},
            "results": [{"patch": r.patch, "links": [link.id for link in r.links], "n": len(r.links),
                         "reference": i == group.reference, "label": r.label, "marked": r.marked or None,
                         **({"baseline_of": r.baseline} if r.baseline else {})}
                        for i, r in enumerate(group.results)],
            "left_out": [{"link": link.id, "patch": link.patch, "why": why} for link, why in group.left_out],
            **({"environment_differs": group.environment_differs} if group.environment_differs else {}),
            "metrics": [{"name": row.name, "unit": row.unit, "direction": row.direction, "values": [
                {"patch": r.patch, "mean": c.mean if c else None, "stdev": c.stdev if c else None,
                 "n": c.n if c else 0, "delta": c.delta if c else None, "delta_pct": c.delta_pct if c else None,
                 "change": c.change if c else None, **_judged(c)}
                for r, c in zip(group.results, row.cells, strict=True)]}
                for row in group.rows],
        } for group in self.groups]}  # fmt: skip


def _judged(c: Cell | None) -> dict[str, Any]:
    """The statistics of a value entry (docs/FORMATS.md): median, samples, n_samples, and against the reference
    effect, ci_low, ci_high, p, verdict (`null` in the reference's entry and where the result lacks the metric)."""
    j = c.judged if c else None
    return {"median": c.median if c else None, "samples": c.samples if c else None, "n_samples": c.n_samples if c
            else 0, "effect": j.effect if j else None, "ci_low": j.ci_low if j else None, "ci_high": j.ci_high if j
            else None, "p": j.p if j else None, "verdict": j.verdict if j else None}  # fmt: skip
