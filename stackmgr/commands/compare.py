"""`stackmgr compare LINK|PATCH…`: results side by side, each against the first of its run configuration.

Results are grouped by run configuration (`evidence.compare.run_config`: model, request rate, concurrency,
prompts); results of different configurations are never ranked against each other. In a group, each result is
one column, and the first is the reference the others' deltas are taken from, better or worse by each metric's
direction. What a column is depends on how it was named:

- a PATCH means its current links (not amended): those of one configuration are repeats of one measurement,
  one column, mean ± stdev over them;
- a link id (or a run's name) is that one result, its own column, even beside other links of the same patch:
  naming two runs is asking to see them side by side, not averaged (a column's label is then its link id
  where its patch's name alone would not tell the columns apart);
- a link named twice (by id and through its patch) counts once, where it was first named.

A run that failed (its `exit` gate `fail` or `error`, or a `[run]` exit code other than 0) or was tainted (a
measured tree changed while it ran) is not a measurement of the patch: it is never averaged in, never a column
and never a reference, however it was named; nor is, among a PATCH's links, one measured without the patch (a
baseline linked to it: named by itself, it is a column), nor one whose evidence is broken (an artifact changed or
missing). Each is listed under its configuration's group as left out, with why (`exit 3`, `tainted`, `measured
without the patch`, `broken: …`); `show PATCH` still shows its numbers.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any

from stackmgr.errors import UsageProblem
from stackmgr.evidence.compare import CONFIG_KEYS, left_out_why, run_config
from stackmgr.evidence.metrics import change
from stackmgr.evidence.reading import find_links, find_ref, load_links
from stackmgr.evidence.records import Link
from stackmgr.evidence.states import effective
from stackmgr.store.config import Store
from stackmgr.store.names import valid_name


@dataclass
class Result:
    """One column: the current links of one patch measured with one configuration, or one link named by id."""

    patch: str
    links: list[Link] = field(default_factory=list)
    named: str = ""  # the link id when the column is one link named by id (or run name), "" for a patch
    label: str = ""  # what the table's header calls it: the patch, or the link id where the patch is ambiguous


@dataclass
class Cell:
    mean: float
    stdev: float | None  # None for a single run
    n: int
    delta: float | None = None  # mean minus the reference's mean; None in the reference column
    delta_pct: float | None = None  # None also when the reference is 0
    change: str | None = None  # better / worse / same, by the metric's direction


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


def resolve(store: Store, targets: list[str]) -> list[tuple[Link, bool]]:
    """The links named, each with whether it was named by itself: a link id (`lnk-` optional) or a run's name is
    that link (True), a patch name its current links (not amended), oldest first (False). A link named twice
    counts where it was named first."""
    chosen: list[tuple[Link, bool]] = []
    for target in targets:
        name = target[: -len(".patch")] if target.endswith(".patch") else target
        by_id = find_links(store, {target, f"lnk-{target}"})
        if by_id:
            chosen.append((by_id.get(target) or by_id[f"lnk-{target}"], True))
        elif valid_name(name) and (own := load_links(store, name)):
            chosen.extend((link, False) for link in effective(own))
        elif (named := find_ref(store, target)) is not None:  # `stackmgr run --name`: the latest of a name
            chosen.append((named, True))
        elif valid_name(name) and os.path.isfile(os.path.join(store.patches_dir, name + ".patch")):
            raise UsageProblem(f"patch {name} has no links yet", f"record one with `stackmgr link {name} ARTIFACT…`")
        else:
            shown = target.encode("unicode_escape").decode("ascii")[:80]
            raise UsageProblem(f"no link or patch named '{shown}'",
                               "give link ids (`stackmgr links`) or patch names (`stackmgr series`)")  # fmt: skip
    first: dict[str, tuple[Link, bool]] = {}
    for link, alone in chosen:
        first.setdefault(link.id, (link, alone))
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
    return Cell(mean, stdev, len(values))


def _rows(results: list[Result], headline: str | None) -> list[Row]:
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
        ref = cells[0]
        for cell in cells[1:]:
            if cell is not None and ref is not None:
                delta = cell.mean - ref.mean
                cell.change = change(delta, direction)
                cell.delta = delta if math.isfinite(delta) else None  # two values near the float limit
                pct = delta / abs(ref.mean) * 100 if ref.mean else math.inf
                cell.delta_pct = pct if math.isfinite(pct) else None
        rows.append(Row(name, unit, direction, cells))
    return rows


class Comparison:
    """The groups `compare` shows, each with its results in the order named and its metric rows."""

    def __init__(self, store: Store, targets: list[str]) -> None:
        self.headline = store.headline()
        groups: dict[tuple[tuple[str, str], ...], Group] = {}
        from stackmgr.evidence.states import ArtifactHashes

        hashes = ArtifactHashes(store)  # a result whose files changed or went (broken) is no measurement to show
        for link, alone in resolve(store, targets):
            config = run_config(store, link)
            group = groups.setdefault(tuple(sorted(config.items())), Group(config, []))
            why = left_out_why(link, alone)
            if any(hashes.sha256(a.path) != a.sha256 for a in link.artifacts):
                why = ", ".join(filter(None, [why, "broken: an artifact changed or is missing (`stackmgr verify`)"]))
            if why is not None:
                group.left_out.append((link, why))
                continue
            named = link.id if alone else ""
            result = None if alone else next((r for r in group.results if r.patch == link.patch and not r.named),
                                             None)  # fmt: skip
            if result is None:
                result = Result(link.patch, named=named)
                group.results.append(result)
            result.links.append(link)
        for group in groups.values():
            for r in group.results:
                shared = sum(other.patch == r.patch for other in group.results) > 1
                r.label = r.named if r.named and shared else r.patch
            group.rows = _rows(group.results, self.headline)
        self.groups = list(groups.values())
        hashes.save()

    def to_json(self) -> dict[str, Any]:
        return {"schema": 1, "headline": self.headline, "groups": [{
            "config": {key: group.config.get(key) for key in CONFIG_KEYS},
            "results": [{"patch": r.patch, "links": [link.id for link in r.links], "n": len(r.links),
                         "reference": i == 0, "label": r.label} for i, r in enumerate(group.results)],
            "left_out": [{"link": link.id, "patch": link.patch, "why": why} for link, why in group.left_out],
            "metrics": [{"name": row.name, "unit": row.unit, "direction": row.direction, "values": [
                {"patch": r.patch, "mean": c.mean if c else None, "stdev": c.stdev if c else None,
                 "n": c.n if c else 0, "delta": c.delta if c else None, "delta_pct": c.delta_pct if c else None,
                 "change": c.change if c else None} for r, c in zip(group.results, row.cells, strict=True)]}
                for row in group.rows],
        } for group in self.groups]}  # fmt: skip
