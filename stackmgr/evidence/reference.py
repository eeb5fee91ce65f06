"""The baseline runs a series' results are judged against: `baseline_runs`, the one rule `compare` (by default)
and the report ask.

They are the series' latest valid baseline (evidence/baselines.latest_baseline) with every current baseline of
that series measured at the same base (evidence.link_state.measured_state) with the same run configuration
(evidence.compare.run_config) and usable today (evidence.link_state): repeats of one measurement, judged together
(evidence.stats.judge), oldest first. [] for a series with no valid baseline.
"""

from __future__ import annotations

from stackmgr.evidence.baselines import baselines, latest_baseline
from stackmgr.evidence.compare import run_config
from stackmgr.evidence.link_state import link_state, measured_state
from stackmgr.evidence.records import Link
from stackmgr.evidence.states import Evidence
from stackmgr.store.config import Store


def baseline_runs(store: Store, series: str, ev: Evidence) -> list[Link]:
    """The runs of `series`' latest valid baseline: it and every baseline alike to it, oldest first."""
    latest = latest_baseline(store, series, ev)
    if latest is None:
        return []
    state, config = measured_state(latest), run_config(store, latest)
    return [b for b in baselines(store, series) if b.id == latest.id or (measured_state(b) == state
            and run_config(store, b) == config and link_state(ev, b).usable)]  # fmt: skip


def reference_label(series: str, runs: int) -> str:
    """The reference column's title: `baseline of S (4 runs)`."""
    return f"baseline of {series} ({runs} run{'' if runs == 1 else 's'})"
