"""`series` (list), `series NAME` (show) and the edits `series new|add|remove|move`, each one journaled operation."""

from __future__ import annotations

import os
from typing import Any

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.journal.operation import operation
from stackmgr.store.config import Store
from stackmgr.store.names import patch_file
from stackmgr.store.position import Position
from stackmgr.store.series import SeriesFile, list_series, no_series, series_path


def series_rows(store: Store) -> list[dict[str, Any]]:
    """Per series: its patch count and how many patch files are missing, or why it could not be read."""
    rows: list[dict[str, Any]] = []
    applied = applied_in(store)
    for name in list_series(store):
        try:
            series = SeriesFile.load(store, name)
        except StackmgrError as exc:  # one broken file must not hide the others
            rows.append({"name": name, "patches": None, "missing": None, "error": str(exc)})
            continue
        rows.append({"name": name, "patches": len(series.entries), "missing": len(series.missing_patches()),
                     "error": None, "applied": [{"tree": p.tree, "applied": len(p.in_series), "of": p.total,
                                                 "top": p.top} for p in applied.get(name, [])]})  # fmt: skip
    return rows


def empty_trees(store: Store, name: str, rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The trees series NAME records a base for (its base lines, docs/FORMATS.md#series-file) and lists no patch
    of: each with that base and why it is empty (`series S` says it; `apply S` gives the base)."""
    series = SeriesFile.load(store, name)
    listed = {row["tree"] for row in rows}
    history = [ln.text for ln in series.lines if ln.entry is None and ln.text.startswith("# ")]
    upstream = [text for text in history if text.endswith(")") and "  (already upstream in " in text]
    found = []
    for tree, (commit, _lineno) in series.base_lines().items():
        if tree in listed:
            continue
        here = sum(text.endswith(f"(already upstream in {commit[:12]})") for text in upstream)
        n = here or len(upstream)
        patches = f"{n} patch{'es' if n != 1 else ''}"
        why = (f"every patch was found upstream by `rebase --onto {commit[:12]}` ({patches})" if here else
               f"every patch was found upstream by a rebase ({patches})" if upstream else
               f"it lists no patch of tree {tree}")  # fmt: skip
        found.append({"tree": tree, "base": commit, "why": why})
    return found


def applied_in(store: Store) -> dict[str, list[Position]]:
    """Series name -> the positions of the trees that have patches of it applied (store/position.py)."""
    from stackmgr.store.applied import load_applied
    from stackmgr.store.position import applied_position

    found: dict[str, list[Position]] = {}
    for tree in sorted(load_applied(store)):
        position = applied_position(store, tree)
        if position is not None and position.series and position.count:
            found.setdefault(position.series, []).append(position)
    return found


def patch_rows(store: Store, name: str) -> list[dict[str, Any]]:
    """Each patch of series NAME: position, tree, subject, +/-, guards, whether its file exists and parses,
    whether it is applied (and the top applied one) in the tree the series is applied in, its verdict (the lane's
    status: evidence/revival.lane_of) and the headline metric of its latest result a view may quote."""
    from stackmgr.safety.preserved import PatchIndex

    series = SeriesFile.load(store, name)
    index = PatchIndex.load(store)
    stacks = applied_in(store).get(name, [])
    held = {(p.tree, patch) for p in stacks for patch in p.stack}
    tops = {(p.tree, p.top) for p in stacks}
    verdicts = _verdicts(store, [e.name for e in series.entries])
    rows: list[dict[str, Any]] = []
    for n, entry in enumerate(series.entries, start=1):
        is_file = os.path.isfile(os.path.join(store.patches_dir, entry.patch))
        rec = index.record(entry.patch, retry=True) if is_file else None  # a tree placed since: looked at again
        files, plus, minus = (rec.get("stat") or (0, 0, 0)) if rec else (0, 0, 0)
        rows.append({
            "position": n, "patch": entry.name, "file": entry.patch, "exists": rec is not None,
            "tree": rec["tree"] if rec else None, "subject": rec["subject"] if rec else None,
            "files": files, "insertions": plus, "deletions": minus, "guards": entry.guards,
            "error": rec["error"] if rec else None,
            "size": os.lstat(os.path.join(store.patches_dir, entry.patch)).st_size if rec else None,
            "applied": rec is not None and (rec["tree"], entry.name) in held,
            "top": rec is not None and (rec["tree"], entry.name) in tops, **verdicts[entry.name],
        })  # fmt: skip
    index.save()
    return rows


def _verdicts(store: Store, names: list[str]) -> dict[str, dict[str, Any]]:
    """Per patch: its verdict (`lane_of`'s status: promoted, rejected, experimental, unlinked), whether a
    do-not-revive lane names it, and the headline metric of its latest result that measured it and still holds
    (`quoted_results`), or None."""
    from stackmgr.evidence.link_state import link_state, quoted_results
    from stackmgr.evidence.metrics import lead
    from stackmgr.evidence.reading import load_links
    from stackmgr.evidence.revival import DeadLanes, lane_of
    from stackmgr.evidence.states import Evidence, effective

    ev = Evidence.gather(store)
    dead = DeadLanes(store)
    headline = store.headline()
    found: dict[str, dict[str, Any]] = {}
    for name in names:
        try:
            links = load_links(store, name) if os.path.isdir(os.path.join(store.links_dir, name)) else []
        except StackmgrError:  # a record that cannot be read: `show NAME` names it; the listing goes on
            found[name] = {"verdict": "unreadable", "do_not_revive": False, "metric": None}
            continue
        judged = {link.id: link_state(ev, link) for link in links}
        lane = lane_of(ev, name, links, {lid: j.freshness for lid, j in judged.items()}, dead)
        quoted = quoted_results(effective(links), judged)
        metric = lead(quoted[-1].metrics, headline) if quoted else None
        found[name] = {"verdict": lane.status, "do_not_revive": lane.do_not_revive,
                       "metric": {"name": metric.name, "value": metric.value, "unit": metric.unit}
                       if metric is not None else None}  # fmt: skip
    ev.save()
    return found


def refuse_conflicted_rows(store: Store, rows: list[dict[str, Any]]) -> None:
    """After the listing: a patch of it left mid-merge is the command's failure (exit 3), named with its hint."""
    from stackmgr.store.conflicts import refuse_conflicted
    from stackmgr.store.fs import read_or_none

    for row in rows:
        if row["error"] and row["error"].startswith("unresolved merge conflict"):
            data = read_or_none(os.path.join(store.patches_dir, row["file"])) or b""
            refuse_conflicted(data, f"patches/{row['file']}")


def new_series(store: Store, name: str, description: str = "") -> None:
    """Create an empty series; refuse a name already taken (even by a file that does not parse)."""
    _check_description(description)
    with operation(store, f"series new {name}"):
        if os.path.lexists(series_path(store, name)):  # checked before parsing: a broken file exists too
            raise UsageProblem(f"series {name} already exists", f"see `stackmgr series {name}`")
        series = SeriesFile.load_or_new(store, name)
        series.describe(description)
        series.write()


def describe_series(store: Store, name: str, description: str) -> None:
    """Replace the series' description (its leading `## ` lines; "" removes it), every other line kept."""
    _check_description(description)
    with operation(store, f"series describe {name}"):
        series = SeriesFile.load(store, name)
        series.describe(description)
        series.write()


def _check_description(text: str) -> None:
    if len(text) > 2000 or any((ord(c) < 32 and c not in "\n\t") or ord(c) == 127 for c in text):
        raise UsageProblem("a series description is text of at most 2000 characters, without control characters",
                           "e.g. `stackmgr series describe S -m \"what these patches are for\"`")  # fmt: skip


def add_patches(
    store: Store, name: str, patches: tuple[str, ...], position: int | None, override: str | None,
) -> None:  # fmt: skip
    """Insert PATCHES at POSITION (1 = first; None: append) in series NAME, created when missing. Every patch
    file must exist; a do-not-revive lane is refused unless `override` says why (evidence/revival.py)."""
    with operation(store, f"series add {name}"):
        series = SeriesFile.load_or_new(store, name)
        at = (position - 1) if position else len(series.entries)
        files = []
        for patch in patches:
            files.append(patch_file(store, patch) + ".patch")
        _guard_revival(store, name, files, override)
        for offset, filename in enumerate(files):
            series.insert(filename, at + offset)
        series.write()


def _guard_revival(store: Store, series: str, files: list[str], override: str | None) -> None:
    from stackmgr.evidence.revival import guard_revival
    from stackmgr.store.fs import read_or_none

    named = []
    for filename in files:
        data = read_or_none(os.path.join(store.patches_dir, filename))  # never through a link out of patches/
        if data is not None:
            named.append((filename[: -len(".patch")], data))
    guard_revival(store, named, override, f"series add {series}")


def remove_patches(store: Store, name: str, patches: tuple[str, ...]) -> None:
    """Take PATCHES out of series NAME; the patch files stay."""
    with operation(store, f"series remove {name}"):
        series = SeriesFile.load(store, name)
        for patch in patches:
            series.remove(patch)
        series.write()


def move_patch(store: Store, name: str, patch: str, position: int) -> int:
    """Move PATCH to POSITION (1 = first) in series NAME; the position it now has (past the end: the last)."""
    with operation(store, f"series move {name}"):
        series = SeriesFile.load(store, name)
        series.move(patch, position - 1)
        series.write()
    return min(position, len(series.entries))


def delete_series(store: Store, name: str) -> int:
    """Delete series NAME (`series rm`): its file only; the patch files stay, as `series remove` leaves them, and
    `stackmgr undo` brings the file back. Refused while a tree has patches of it applied; a tree whose current
    series it is with none applied forgets it. Returns how many patches it listed."""
    from stackmgr.store.applied import clear_applied, load_applied
    from stackmgr.store.names import refuse_linked_dirs

    with operation(store, f"series rm {name}") as op:
        refuse_linked_dirs(store.root, ("series",))  # nothing removed through a link a pull made
        if not os.path.lexists(series_path(store, name)):
            raise no_series(store, name)
        listed = SeriesFile.load_or_new(store, name).entries if os.path.isfile(series_path(store, name)) else []
        current = {tree: applied for tree, applied in load_applied(store).items() if applied.series == name}
        users = sorted(tree for tree, applied in current.items() if applied.patches)
        if users:
            raise StackmgrError(f"series {name} has patches applied to tree {users[0]}; nothing changed",
                                f"`stackmgr pop -a -t {users[0]}` (or `stackmgr reset {users[0]}`) first")
        for tree in current:  # current with none applied (popped, reset to its base): forgotten with it
            clear_applied(store, tree)
        path = series_path(store, name)
        op.file_replacing(path)
        os.unlink(path)
        op.file_replaced(path)
    return len(listed)
