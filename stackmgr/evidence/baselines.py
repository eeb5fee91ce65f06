"""Baselines of a series (docs/FORMATS.md#link-record): what `run` records on a tree whose series is applied to
0 patches. Such a record is an ordinary link record filed with the series' first patch of the tree, measured
without it (every reader shows it as `baseline`, `WITHOUT THE PATCH`), whose `[run]` table says
`baseline_of = "S"`. A record is believed to be one only when its measured state agrees: its tree's `[[stack]]`
entry has series S applied and none of S's patches in the chain that rebuilds it (a record arrives by `git pull`
like any file: the key alone proves nothing).

`latest_baseline` is the one rule for "the baseline of series S" that `compare`, `ab` and the report use by
default: the latest valid one: `link_state(...).usable` (its run neither failed nor was tainted, every gate it
records passed (evidence/gates.py), its evidence whole).
"""

from __future__ import annotations

from stackmgr.errors import StackmgrError
from stackmgr.evidence.link_state import link_state
from stackmgr.evidence.reading import load_links, reader
from stackmgr.evidence.records import Link
from stackmgr.evidence.states import Evidence, effective
from stackmgr.store.config import Store
from stackmgr.store.series import SeriesFile


def baseline_of(link: Link) -> str:
    """The series whose base `link` measured, as its record says (`[run] baseline_of`), or "" for none."""
    value = link.run.get("baseline_of", "")
    return value if isinstance(value, str) else ""


def is_baseline_of(link: Link, series: str, patches: set[str]) -> bool:
    """Whether `link` is a baseline of `series` (whose patch names are `patches`): it says so, and its measured
    state agrees (the series applied, none of its patches in the chain, its own patch not measured)."""
    if not series or link.baseline_series != series:
        return False
    entry = next(s for s in link.stack if s.tree == link.tree)
    return not any(n in patches for n, _ in entry.patches)


def baselines(store: Store, series: str) -> list[Link]:
    """Every current baseline of `series` (no later record amends it), oldest first; [] for a series that
    cannot be read or has no patch."""
    try:
        names = SeriesFile.load(store, series).patch_names()
    except StackmgrError:
        return []
    parsed = reader(store)
    found = [k for name in names for k in load_links(store, name, parsed)]
    parsed.save()
    return sorted((k for k in effective(found) if is_baseline_of(k, series, set(names))),
                  key=lambda k: (k.created, k.id))  # fmt: skip


def latest_baseline(store: Store, series: str, evidence: Evidence | None = None) -> Link | None:
    """The latest valid baseline of `series`, or None: what `compare`, `ab` and the report compare a result of
    the series with when no baseline is named."""
    ev = evidence or Evidence.gather(store)
    return next((k for k in reversed(baselines(store, series)) if _valid(ev, k)), None)


def _valid(ev: Evidence, link: Link) -> bool:
    """Whether a baseline counts: usable today (evidence/link_state.py, gates included)."""
    return link_state(ev, link).usable
