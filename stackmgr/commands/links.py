"""`show PATCH` and `links`: a patch's links, and links across the store, with what each is worth today.

`links` lists current records: one that a later record amends (`link --amends`: a draft completed, a result
corrected) is replaced by it, as an amended commit is by its amendment, so it is left out unless asked for
(`show_amended`, `links --all`), and then said to be "amended by" the record that replaces it; `--json` lists
every record, each with its `amended_by`. Sorted by a metric, results are ordered by run configuration first
(`evidence.compare.run_config`, kept in the brief rows), the metric by its direction within each: results of
different configurations are never ranked against each other.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from typing import Any, cast

from stackmgr.evidence.compare import CONFIG_KEYS, result_config, run_config
from stackmgr.evidence.environment import summary
from stackmgr.evidence.link_state import interruption, link_mark, link_state
from stackmgr.evidence.metrics import Metric, lead
from stackmgr.evidence.reading import find_links, load_briefs, load_links
from stackmgr.evidence.records import Link
from stackmgr.evidence.rows import Brief
from stackmgr.evidence.states import Evidence
from stackmgr.store import patchfile
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none
from stackmgr.store.names import patch_file
from stackmgr.store.patchfile import PatchHeader, parse_header


def amended_by(links: list[Link] | list[Brief]) -> dict[str, str]:
    """{id: the id of the latest record that amends it} over records read oldest first."""
    return {link.amends: link.id for link in links if link.amends}


def link_json(ev: Evidence, link: Link, state: str, baseline: Link | None, replaced_by: str | None,
              config: dict[str, str]) -> dict[str, Any]:  # fmt: skip
    """One link as `show --json` and `links --json` give it (docs/FORMATS.md#json-output)."""
    base = {m.name: m.value for m in baseline.metrics} if baseline is not None else {}
    judged = link_state(ev, link)  # failed, tainted, usable: evidence/link_state.py
    recorded = link.run.get("config")  # typed as the run recorded it (`run.config`); else the text compare groups by
    typed = {k: v for k, v in result_config(recorded).items() if isinstance(v, str | int | float)
             and not isinstance(v, bool)} if isinstance(recorded, dict) else {}  # fmt: skip
    return {
        "id": link.id, "state": state, "created": link.created, "author": link.author, "patch": link.patch,
        "tree": link.tree, "amends": link.amends or None, "amended_by": replaced_by, "baseline": link.baseline or None,
        "config": {key: typed.get(key, config.get(key)) for key in CONFIG_KEYS},
        "metrics": [{"name": m.name, "value": m.value, "unit": m.unit, "direction": m.direction,
                     "source": m.source or None,
                     "delta": (m.value - base[m.name]) if m.name in base else None} for m in link.metrics],
        "gates": [{"name": g.name, "status": g.status, "detail": g.detail} for g in link.gates],
        "verdict": {"status": link.verdict, "lesson": link.lesson, "do_not_revive": link.do_not_revive},
        "artifacts": [{"path": a.path, "sha256": a.sha256, "size": a.size, "ok": ev.hashes.sha256(a.path) == a.sha256,
                       "origin": a.origin or None} for a in link.artifacts],
        "stack": [{"tree": s.tree, "base": s.base, "snapshot": s.snapshot or None, "series": s.series,
                   "residue": s.residue, "residue_patch": s.residue_patch or None,
                   "patches": [{"name": n, "sha256": h} for n, h in s.patches],
                   "present": [{"name": n, "sha256": h} for n, h in s.present]} for s in link.stack],
        "measured_current_version": ev.sha256_of(link.patch) == link.sha256, "measured_patch": link.measures_patch,
        "run": link.run or None, "failed": judged.failed or None, "usable": judged.usable,
        "valid": judged.valid, "invalid": judged.invalid or None,  # every gate passed (evidence/gates.py)
        "measures": judged.measures, "mark": judged.mark or None,
    }  # fmt: skip


def measured_lines(ev: Evidence, link: Link) -> list[str]:
    """How `show` says what a result was measured on: per tree, its HEAD, the patches and residue that rebuild
    it and the snapshot id; and whether the patch's current version is the one measured."""
    lines = []
    for s in link.stack:
        parts = [f"{s.tree} {s.base[:12]}"] + ([", ".join(n for n, _ in s.patches)] if s.patches else [])
        parts += ["residue"] if s.residue else []
        proof = f" = tree {s.snapshot[:12]}" if s.snapshot else " (recorded before snapshot ids: not rebuildable)"
        lines.append("measured on " + " + ".join(parts) + proof)
    now = ev.sha256_of(link.patch)
    version = "this version of the patch" if now == link.sha256 else \
        f"an older version of the patch (sha256 {link.sha256[:12]}; now {now[:12] if now else 'gone'})"  # fmt: skip
    if link.baseline_series:
        version = f"without the patch: the base of series {link.baseline_series}, its baseline"
    elif not link.measures_patch:
        version = f"without the patch: its changes were not in tree {link.tree}'s measured state (a baseline?)"
    rebuild = f"; `stackmgr apply --link {link.id}` rebuilds it" if any(s.snapshot for s in link.stack) else ""
    lines.append(f"measured {version}{rebuild}")
    if link.run:
        r = link.run
        name = f" {r['name']}" if r.get("name") else ""
        taint = f"; TAINTED: {', '.join(r.get('changed_trees', []))} changed while it ran" if link.tainted else ""
        taint += f"; {interruption(r)}" if r.get("interrupted") else ""  # by the signal the record names
        lines.append(f"run{name}: `{shlex.join(map(str, r.get('command', [])))}` exit {r.get('exit_code')}, "
                     f"{r.get('duration_s')} s on {r.get('host', '?')}, {r.get('start', '')[:19]}Z{taint}")  # fmt: skip
        lines += summary(r)  # the environment it ran in, in one line (evidence/environment.py)
    return lines


def _has_metric(link: Link | Brief, name: str) -> bool:
    return link.has_metric(name) if isinstance(link, Brief) else any(m.name == name for m in link.metrics)


def metric_of(link: Link | Brief, name: str) -> Metric | None:
    """The link's metric of that name, if it has one."""
    return link.metric(name) if isinstance(link, Brief) else next((m for m in link.metrics if m.name == name), None)


def shown_metric(link: Link | Brief, metric: str | None, headline: str | None) -> Metric | None:
    """The one metric a listing shows: `--metric`'s, else the headline (`[evidence] headline`) when the link has
    it, else its first, as recorded."""
    if metric:
        return metric_of(link, metric)
    if isinstance(link, Brief):
        return (link.metric(headline) if headline else None) or (Metric(*link.metric_rows[0]) if link.metric_rows
                                                                 else None)  # fmt: skip
    return lead(link.metrics, headline)


class PatchView:
    """What `show PATCH` shows: the header, the diffstat, every link with its state and its artifacts checked."""

    def __init__(self, store: Store, patch: str) -> None:
        name = patch_file(store, patch)
        path = os.path.join(store.patches_dir, name + ".patch")
        data = read_or_none(path) or b""  # never through a link out of patches/
        self.name = name
        self.header: PatchHeader = parse_header(data, f"patches/{name}.patch")
        self.stat = patchfile.stat_part(data).decode("utf-8", "replace").rstrip()
        self.ev = ev = Evidence.gather(store)
        self.links = links = load_links(store, name)
        self.by_id = {link.id: link for link in links}  # and the baselines, which may be other patches' records
        self.by_id.update(find_links(store, {lk.baseline for lk in links if lk.baseline} - set(self.by_id)))
        self.states = {link.id: ev.state(link) for link in links}
        from stackmgr.evidence.revival import lane_of, overrides

        self.lane = lane_of(ev, name, links, self.states)  # status and do-not-revive, as the guard sees them
        self.status = self.lane.status
        self.record = ev.index.record(name + ".patch") or {}
        self.do_not_revive = self.lane.do_not_revive
        self.amended_by = amended_by(links)
        self.store = store
        self.overrides = overrides(store, name)  # do-not-revive lanes brought back anyway, with the reason

    def baseline_metrics(self, link: Link) -> dict[str, float]:
        return {m.name: m.value for m in self.by_id[link.baseline].metrics} if link.baseline in self.by_id else {}

    def artifact_ok(self, recorded: str, sha256: str) -> bool:
        """Whether the artifact still has the bytes the link recorded."""
        return self.ev.hashes.sha256(recorded) == sha256

    def to_json(self) -> dict[str, Any]:
        name, header, rec = self.name, self.header, self.record
        return {"schema": 1, "patch": {
            "name": name, "tree": header.tree, "base": header.base, "sha256": rec.get("sha256"),
            "patch_id": self.ev.patch_id(name + ".patch"), "status": self.status, "do_not_revive": self.do_not_revive,
            "subject": header.subject, "description": header.body, "stat": rec.get("stat")},
            "links": [link_json(self.ev, link, self.states[link.id], self.by_id.get(link.baseline),
                                self.amended_by.get(link.id), run_config(self.store, link)) for link in self.links],
            "overrides": [{"reason": o.reason, "author": o.author, "at": o.at, "command": o.command,
                           "lanes": list(o.lanes), "sha256": o.sha256, "patch_id": o.patch_id or None}
                          for o in self.overrides]}  # fmt: skip

    def save(self) -> None:
        """Keep what was learned (patch index, artifact hashes) for the next command; best effort."""
        self.ev.save()


Listed = Link | Brief


def config_order(config: dict[str, str]) -> tuple[Any, ...]:
    """How run configurations are ordered: by model, request rate, concurrency, prompts (numbers as numbers,
    a key not recorded after those that are); a result with none recorded after every configuration."""
    def one(key: str) -> tuple[int, float, str]:
        value = config.get(key)
        if value is None:
            return (2, 0.0, "")
        try:
            return (0, float(value), value)
        except ValueError:
            return (1, 0.0, value)

    return (not config, *(one(key) for key in CONFIG_KEYS))


Configured = Callable[[Listed], dict[str, str]]


def _sort_key(sort_by: str, metric: str | None, direction: str = "higher",
              config: Configured | None = None) -> Callable[[tuple[Listed, str]], Any]:  # fmt: skip
    """`links --sort`: date, patch, state, or the metric: by run configuration first (`config`), then best first
    by the metric's direction (largest, or smallest for a lower-is-better one; links without it last), failed
    and tainted runs and runs measured without the patch (`link_state.link_mark`) after the rest of their
    configuration."""
    if sort_by == "metric":
        sign = 1.0 if direction == "lower" else -1.0
        group = config or (lambda _: {})
        orders: dict[tuple[tuple[str, str], ...], tuple[Any, ...]] = {}  # a few configurations, many links

        def order(link: Listed) -> tuple[Any, ...]:
            seen = group(link)
            key = tuple(seen.items())
            if key not in orders:
                orders[key] = config_order(seen)
            return orders[key]

        return lambda r: (order(r[0]), bool(link_mark(r[0])),  # failed, tainted, a baseline: after the patch's own
                          (1, 0.0) if (m := metric_of(r[0], str(metric))) is None else (0, sign * m.value))  # fmt: skip
    keys: dict[str, Callable[[tuple[Listed, str]], Any]] = {
        "date": lambda r: (r[0].created, r[0].id), "patch": lambda r: (r[0].patch, r[0].created),
        "state": lambda r: (r[1], r[0].created),
    }  # fmt: skip
    return keys[sort_by]


class LinkTable:
    """What `links` lists: the links that pass the filters, with their states, in `sort_by` order; in brief
    (reading.Brief) unless `whole` (`--json` gives every field, and every record: amended ones too). Records
    that a later one amends are left out unless `show_amended` (counted in `hidden`)."""

    def __init__(
        self, store: Store, tree: str | None, series: str | None, verdict: str | None, stale: bool,
        metric: str | None, sort_by: str, whole: bool = False, show_amended: bool = False,
    ) -> None:  # fmt: skip
        from stackmgr.store.series import SeriesFile

        self.ev = ev = Evidence.gather(store)
        self.store = store
        links: list[Link] | list[Brief] = load_links(store) if whole else load_briefs(store)
        if tree and not store.knows(tree) and all(k.tree != tree for k in links):  # a tree forgotten: its links
            from stackmgr.store.suggest import unknown_tree

            raise unknown_tree(tree, [*store.trees, *store.unplaced], "see `stackmgr trees`")
        self.amended_by = replaced = amended_by(links)
        ev.hashes.first_hashing(a.path for link in links for a in link.artifacts)  # a fresh clone's: at once
        self.hidden = 0  # amended records that passed the filters, left out
        wanted = set(SeriesFile.load(store, series).patch_names()) if series else None
        rows: list[tuple[Listed, str]] = []
        for link in links:
            if (tree and link.tree != tree) or (wanted is not None and link.patch not in wanted):
                continue
            if (verdict and link.verdict != verdict) or (metric and not _has_metric(link, metric)):
                continue
            if link.id in replaced and not (show_amended or whole):
                self.hidden += 1
                continue
            state = ev.state(link)
            if stale and state in ("fresh", "equivalent"):
                continue
            rows.append((link, state))
        found = (m for link, _ in rows if metric and (m := metric_of(link, metric)) is not None)
        direction = next((m.direction for m in found), "higher")
        self._configs: dict[str, dict[str, str]] = {}
        if sort_by != "date":  # records are read oldest first
            rows.sort(key=_sort_key(sort_by, metric, direction, self.config))
        self.rows = rows
        self.headline = store.headline()  # the metric shown when no --metric is given
        self.by_id = {link.id: link for link in links}

    def config(self, link: Listed) -> dict[str, str]:
        """The run configuration of a listed record: kept in its brief, or read for a whole record (once)."""
        if isinstance(link, Brief):
            return dict(link.config)
        if link.id not in self._configs:
            self._configs[link.id] = run_config(self.store, link)
        return self._configs[link.id]

    def to_json(self) -> dict[str, Any]:
        whole = [(cast(Link, link), state) for link, state in self.rows]  # read whole for --json
        by_id = cast(dict[str, Link], self.by_id)
        return {"schema": 1, "links": [link_json(self.ev, link, state, by_id.get(link.baseline),
                                                 self.amended_by.get(link.id), self.config(link))
                                       for link, state in whole]}  # fmt: skip

    def save(self) -> None:
        """Keep what was learned (patch index, artifact hashes) for the next command; best effort."""
        self.ev.save()
