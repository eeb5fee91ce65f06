"""The reference `compare` measures against when none is named: the baseline of the compared patches' series.

For the first patch named (in the order named) whose series (store.series.series_listing, each series of it in
turn) has a valid baseline, the reference is that series' baseline runs (evidence/reference.baseline_runs): one
column `baseline of S (n runs)`. None where no patch was named, or no series of one has a valid baseline.
"""

from __future__ import annotations

from stackmgr.errors import StackmgrError
from stackmgr.evidence.records import Link
from stackmgr.evidence.reference import baseline_runs
from stackmgr.evidence.states import Evidence
from stackmgr.store.config import Store


def series_reference(store: Store, ev: Evidence, patches: list[str]) -> tuple[str, list[Link]] | None:
    """(series, its baseline runs) for the first of `patches` (named as patches, in order) whose series has a
    valid baseline; None for none."""
    from stackmgr.store.series import series_listing

    tried: set[str] = set()
    for patch in dict.fromkeys(patches):
        try:
            listed = series_listing(store, patch)
        except StackmgrError:  # a series that cannot be read: no default reference from it
            continue
        for series in listed:
            if series not in tried and (runs := baseline_runs(store, series, ev)):
                return series, runs
            tried.add(series)
    return None
