"""Link records as rows of plain tuples, what `.stackmgr/cache/` keeps of them (evidence/reading.py): whole
(`to_row`/`from_row`) or in brief (`Brief`: what a listing needs).

Plain functions of one record: a worker process can make a row as well as the command itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stackmgr.evidence.compare import run_config
from stackmgr.evidence.metrics import Gate, Metric, directed
from stackmgr.evidence.records import Artifact, Link, StackEntry, measured_versions
from stackmgr.store.config import Store


@dataclass(slots=True)
class Brief:
    """A record as `links` lists it and states judge it: everything but its stack (of which the measured patch
    versions and whether it measured its patch are kept), its run table (name, taint, exit code and the run
    configuration kept) and its metrics' sources."""

    id: str
    created: str
    author: str
    patch: str
    tree: str
    sha256: str
    patch_id: str
    artifacts: list[Artifact]
    gates: list[Gate]
    metric_rows: tuple[tuple[str, float, str, str], ...]  # (name, value, unit, direction)
    verdict: str
    lesson: str
    do_not_revive: bool
    amends: str
    baseline: str
    run_name: str
    tainted: bool
    exit_code: int | None
    config: tuple[tuple[str, str], ...]  # evidence.compare.run_config, in CONFIG_KEYS order
    file: str
    edited: bool  # changed after it was written
    measured: tuple[tuple[str, str], ...] = ()  # records.measured_versions: what freshness is judged by
    measures_patch: bool = True  # records.measured_patch, as Link.measures_patch
    baseline_series: str = ""  # as Link.baseline_series

    @property
    def metrics(self) -> list[Metric]:
        return [Metric(*row) for row in self.metric_rows]

    def metric(self, name: str) -> Metric | None:
        return next((Metric(*row) for row in self.metric_rows if row[0] == name), None)

    def has_metric(self, name: str) -> bool:
        return any(row[0] == name for row in self.metric_rows)


def to_row(k: Link) -> tuple[Any, ...]:
    return (k.id, k.created, k.author, k.patch, k.tree, k.sha256, k.patch_id,
            tuple((s.tree, s.base, tuple(s.patches), s.series, s.residue, s.snapshot, tuple(s.present),
                   s.residue_patch) for s in k.stack),
            tuple((a.path, a.sha256, a.size, a.anchor, a.origin, a.label) for a in k.artifacts),
            tuple((m.name, m.value, m.unit, m.direction, tuple(m.source.items())) for m in k.metrics),
            tuple((g.name, g.status, g.detail) for g in k.gates),
            k.verdict, k.lesson, k.do_not_revive, k.amends, k.baseline, k.run, k.edited)  # fmt: skip


def from_row(r: tuple[Any, ...], path: str) -> Link:
    return Link(r[0], r[1], r[2], r[3], r[4], r[5], r[6],
                [StackEntry(s[0], s[1], [tuple(p) for p in s[2]], s[3], s[4], s[5], [tuple(p) for p in s[6]], s[7])
                 for s in r[7]],
                [Artifact(*a) for a in r[8]], [Metric(m[0], m[1], m[2], m[3], dict(m[4])) for m in r[9]],
                [Gate(*g) for g in r[10]], r[11], r[12], r[13], r[14], r[15], r[16], path, r[17])  # fmt: skip


def brief_row(k: Link, store: Store) -> tuple[Any, ...]:
    exit_code = k.run.get("exit_code")
    config = tuple(run_config(store, k).items())
    return (k.id, k.created, k.author, k.patch, k.tree, k.sha256, k.patch_id,
            tuple((a.path, a.sha256, a.size, a.anchor, a.origin, a.label) for a in k.artifacts),
            tuple((g.name, g.status, g.detail) for g in k.gates),
            tuple((m.name, m.value, m.unit, directed(m, {})) for m in k.metrics),  # as recorded, when it says
            k.verdict, k.lesson, k.do_not_revive, k.amends, k.baseline, str(k.run.get("name", "")),
            bool(k.run.get("tainted", False)), exit_code if isinstance(exit_code, int) else None, config,
            k.edited, tuple(measured_versions(k.stack)), k.measures_patch, k.baseline_series)  # fmt: skip


def brief_from_row(r: tuple[Any, ...], path: str) -> Brief:
    return Brief(r[0], r[1], r[2], r[3], r[4], r[5], r[6], [Artifact(*a) for a in r[7]], [Gate(*g) for g in r[8]],
                 r[9], r[10], r[11], r[12], r[13], r[14], r[15], r[16], r[17], r[18], path, r[19],
                 r[20], r[21], r[22])  # fmt: skip
