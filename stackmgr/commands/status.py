"""Per-tree reports (what changed, what is preserved, what is unprotected), read by `status` and by
`check` (commands/check.py) and `trees` (commands/trees.py)."""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.git.repo import read_changes, read_numstat
from stackmgr.safety.snapshot import Snapshot, StartedSnapshot, special_files
from stackmgr.store.fs import read_or_none, sha256_hex
from stackmgr.types import show_path

TYPE_CHECKING = False  # mypy treats this as true; `typing` stays out of `check`'s start-up
if TYPE_CHECKING:
    from typing import Any

    from stackmgr.safety.assessment import Assessment
    from stackmgr.store.config import Store, TreeConfig
    from stackmgr.store.position import Position

JSON_SCHEMA = 1


class TreeReport:
    def __init__(
        self,
        name: str,
        path: str,
        state: str,  # "ok" | "missing" | "error" | "no path" (none on this machine)
        error: str | None = None,
        snapshot: Snapshot | None = None,
        assessment: Assessment | None = None,
    ) -> None:
        self.name = name
        self.path = path
        self.state = state
        self.error = error
        self.snapshot = snapshot
        self.assessment = assessment
        self.numstat: dict[bytes, tuple[int, int] | None] = {}
        self.applied: dict[str, Any] | None = None  # the applied series and whether the tree still matches it
        self.warnings: list[str] = []

    @property
    def blockers(self) -> list[tuple[bytes, str]]:
        if self.snapshot is None or self.assessment is None:
            return []
        return self.assessment.blockers(self.snapshot)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "path": self.path, "state": self.state, "error": self.error}
        snap, found = self.snapshot, self.assessment
        if snap is None or found is None:
            return out
        changes = []
        stack = set(self.applied["patches"]) if self.applied else set()  # the applied position's patches
        for c in snap.changes:
            stat = self.numstat.get(c.path)
            changes.append({
                "path": show_path(c.path), "kind": c.kind, "mode": c.new_mode, "blob": c.new_blob,
                "added": stat[0] if stat else None, "deleted": stat[1] if stat else None,
                "binary": c.path in self.numstat and stat is None,
                "preserved_by": found.preserved.get(c.path, []),
            })  # fmt: skip
        out.update(
            head=snap.head, operation=snap.operation, changes=changes,
            unpreserved=[{"path": show_path(p), "why": why} for p, why in self.blockers],
            unprotected=[{"path": show_path(u.path), "reason": u.reason, "size": u.size} for u in snap.unprotected],
            patches=[{"name": n, "present": hit, "total": total, "applied": n in stack}
                     for n, (hit, total) in sorted(found.presence.items())],
            applied=self.applied, warnings=self.warnings,
        )  # fmt: skip
        return out


def select_trees(store: Store, names: tuple[str, ...]) -> list[TreeConfig]:
    return [store.tree(n) for n in names] if names else [store.tree(n) for n in sorted(store.trees)]


def start_report(store: Store, config: TreeConfig, *, full: bool, explicit: bool) -> TreeReport | StartedSnapshot:
    """Start one tree's snapshot (git runs while the caller goes on), or the report of a tree that cannot be looked
    at. A missing tree is reported, not fatal, unless it was asked for by name."""
    if not os.path.isdir(config.path):
        place = f"`stackmgr tree set {config.name} PATH` says where it is on this machine"
        if explicit:
            raise StackmgrError(f"tree {config.name}: {config.path} does not exist", place)
        return TreeReport(config.name, config.path, "missing", f"{config.path} does not exist; {place}")
    try:
        # status writes the tree id; from its own frozen copy of the index, since another stackmgr's snapshot
        # may be refreshing the shared private index by then (check needs no tree id, and no copy)
        held = None
        if config.results:  # what the applied series holds in the result directories is work all the same
            from stackmgr.store.applied import applied_result

            held = applied_result(store, config.name)
        return StartedSnapshot(config.name, config.path, store.max_untracked_bytes, find_special=False, freeze=full,
                               results=config.results, held=held)  # fmt: skip (special files: finish_report)
    except StackmgrError as exc:
        if explicit:
            raise
        return TreeReport(config.name, config.path, "error", str(exc))


def finish_report(store: Store, config: TreeConfig, started: TreeReport | StartedSnapshot, *, full: bool,
                  explicit: bool) -> TreeReport:  # fmt: skip
    """Read the started snapshot and judge it against the store's patches."""
    if isinstance(started, TreeReport):
        return started
    from stackmgr.safety.preserved import assess  # loaded while git's status runs

    try:
        snap = started.finish()
    except StackmgrError as exc:
        if explicit:
            raise
        return TreeReport(config.name, config.path, "error", str(exc))
    try:
        # +/- per change, counted on the files as they are (a moment after the snapshot: for display only)
        numstat = snap.repo.start_worktree_numstat(snap.head, snap.index.path) if full and snap.changes else None
        if full:  # FIFOs and sockets, looked for while git counts lines
            snap.unprotected.extend(special_files(snap.repo))
        report = TreeReport(config.name, config.path, "ok", snapshot=snap, assessment=assess(store, snap, full=full))
        if numstat is not None:
            report.numstat = read_numstat(numstat)
        if full:
            report.applied = _applied(store, snap)
            if snap.repo.config_bool("core.fileMode") is False:
                report.warnings.append("core.fileMode is false in this tree: git, and so stackmgr, cannot see mode "
                                       "changes such as chmod +x; they are neither saved nor listed")  # fmt: skip
    finally:
        snap.release()
    return report


def _applied(store: Store, snap: Snapshot) -> dict[str, Any] | None:
    """The series applied to the tree (its applied position, store/position.py), and what drifted since (paths
    whose content differs from its result)."""
    from stackmgr.safety.residue import held, holds
    from stackmgr.store.position import applied_position

    where = applied_position(store, snap.tree)
    if where is None:
        return None
    applied = where.applied
    drift: list[str] = []
    residue = held(store, snap, applied.residue, applied.residue_tree) if applied.residue else {}
    if snap.tree_id() not in (applied.result_tree, applied.residue_tree if applied.residue else ""):
        if snap.repo.has_object(applied.result_tree):
            moved = read_changes(snap.index.start_diff_raw(applied.result_tree))
            on_top = {c.path for c in moved if holds(residue, c.path, c.new_mode, c.new_blob)}
            drift = [show_path(c.path) for c in moved if c.path not in on_top]
            drift += [show_path(p) for p in residue or {} if p not in {c.path for c in moved}]  # taken off since
        else:
            drift = ["(the series' result is no longer in the repository)"]
    from stackmgr.commands.bisect_state import killed_trees

    walked = snap.tree in killed_trees(store)  # a killed bisect, ab or ablate's step: not an edit; recover, not push
    edited = _series_edits(store, where) if applied.series and not walked else []
    measured = {"link": applied.link, "patch": applied.link_patch or None, "residue": applied.residue or None,
                "residue_kept": residue is not None, "tree": applied.residue_tree,
                "not_in_series": where.not_in_series} if applied.link else None
    return {"series": applied.series, "base": applied.base, "patches": where.stack, "in_series": len(where.in_series),
            "top": where.top, "total": where.total, "series_patches": where.names, "in_order": where.in_order,
            "not_in_series": where.not_in_series, "renamed": where.renamed,
            "upstream": [n for n in where.not_in_series if n in where.upstream], "position": where.summary(),
            "to_do": "a bisect, ab or ablate was interrupted here; `stackmgr recover` puts the tree back as it was"
            if walked else None if where.in_order or not applied.series or applied.link else where.what_to_do(),
            "result_tree": applied.result_tree, "matches": not drift and not edited, "drift": drift,
            "series_edited": edited, "measured": measured, "interrupted": walked,
            "head_moved": snap.head != applied.base}  # fmt: skip


def _series_edits(store: Store, where: Position) -> list[str]:
    """How the series file and its patches differ from the stack that was applied (quilt: "The series file no
    longer matches the applied patches"): what the position says differs (entries gone, listed between or
    before applied ones, reordered), appended for this tree, or files rewritten."""
    applied = where.applied
    edits = where.differs() if not applied.link else [e for e in where.differs() if "no longer in" not in e]
    if where.unreadable:
        return edits
    # After the last applied one, for this tree, not left to push: appended since (not for a measured state
    # rebuilt by `apply --link`: the series' later patches may have been there when it was measured).
    last = max((where.names.index(n) for n in where.in_series), default=-1)
    for name in where.names[last + 1 :] if not applied.link else []:
        if name not in applied.pending:
            edits.append(f"{name} appended")
    for (old, digest), name in zip(applied.patches, where.stack, strict=True):
        try:
            data = read_or_none(os.path.join(store.patches_dir, name + ".patch"))
        except StackmgrError:  # a link out of patches/, a special file: not the patch that was applied
            edits.append(f"{name}.patch replaced by something that is not a patch file")
            continue
        if data is not None and sha256_hex(data) != digest and old == name:
            edits.append(f"{name}.patch rewritten")
    return edits


def status_reports(store: Store, names: tuple[str, ...], *, full: bool = True) -> list[TreeReport]:
    """A report per tree (those named, else all); a tree with no path on this machine is one that says so."""
    configs = select_trees(store, names)
    started = []  # every tree's git at work before the first is read: trees are looked at side by side
    try:
        for cfg in configs:
            started.append(start_report(store, cfg, full=full, explicit=bool(names)))
    except BaseException:
        for begun in started:
            if isinstance(begun, StartedSnapshot):
                begun.abandon()
        raise
    reports = [finish_report(store, cfg, begun, full=full, explicit=bool(names))
               for cfg, begun in zip(configs, started, strict=True)]  # fmt: skip
    if not names:
        reports += [TreeReport(name, "", "no path", _no_path(store, name)) for name in store.unplaced]
        reports.sort(key=lambda r: r.name)
    return reports


def _no_path(store: Store, name: str) -> str:
    if name in store.suggested:  # a default from the shared config is never used unaccepted (docs/SECURITY.md)
        shown = store.suggested[name].encode("unicode_escape").decode("ascii")[:200]
        return (f"no path on this machine (the shared config suggests {shown}): `stackmgr tree set {name}` "
                "accepts it, `stackmgr tree set {name} PATH` gives yours").replace("{name}", name)
    return f"no path on this machine: `stackmgr tree set {name} PATH`"


def status_json(reports: list[TreeReport]) -> dict[str, Any]:
    return {"schema": JSON_SCHEMA, "trees": [r.to_json() for r in reports]}


def rebases_in_progress(store: Store) -> list[str]:
    """The series a rebase has stopped (or is running) on: their state files (docs/FORMATS.md#rebase-state)."""
    try:
        names = os.listdir(os.path.join(store.state_dir, "rebase"))
    except OSError:
        return []
    return sorted(n[: -len(".json")] for n in names if n.endswith(".json"))


def interrupted(store: Store) -> str | None:
    """For `check` and `status`: the line about an interrupted operation, if one stands (journal.operation)."""
    from stackmgr.journal.record import interrupted_name

    if interrupted_name(store) is None:  # the common answer, without loading the journal
        from stackmgr.commands.bisect_state import killed_message

        return killed_message(store)
    from stackmgr.journal.operation import pending_message

    return pending_message(store)
