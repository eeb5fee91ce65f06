"""`series` (list), `series NAME` (show) and the edits `series new|add|remove|move`, each one journaled operation."""

from __future__ import annotations

import os
from typing import Any

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.journal.operation import operation
from stackmgr.store.config import Store
from stackmgr.store.names import patch_file
from stackmgr.store.series import SeriesFile, list_series, series_path


def series_rows(store: Store) -> list[dict[str, Any]]:
    """Per series: its patch count and how many patch files are missing, or why it could not be read."""
    rows: list[dict[str, Any]] = []
    for name in list_series(store):
        try:
            series = SeriesFile.load(store, name)
        except StackmgrError as exc:  # one broken file must not hide the others
            rows.append({"name": name, "patches": None, "missing": None, "error": str(exc)})
            continue
        rows.append({"name": name, "patches": len(series.entries), "missing": len(series.missing_patches()),
                     "error": None})  # fmt: skip
    return rows


def patch_rows(store: Store, name: str) -> list[dict[str, Any]]:
    """Each patch of series NAME: position, tree, subject, +/-, guards, and whether its file exists and parses."""
    from stackmgr.safety.preserved import PatchIndex

    series = SeriesFile.load(store, name)
    index = PatchIndex.load(store)
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
        })  # fmt: skip
    index.save()
    return rows


def refuse_conflicted_rows(store: Store, rows: list[dict[str, Any]]) -> None:
    """After the listing: a patch of it left mid-merge is the command's failure (exit 3), named with its hint."""
    from stackmgr.store.conflicts import refuse_conflicted
    from stackmgr.store.fs import read_or_none

    for row in rows:
        if row["error"] and row["error"].startswith("unresolved merge conflict"):
            data = read_or_none(os.path.join(store.patches_dir, row["file"])) or b""
            refuse_conflicted(data, f"patches/{row['file']}")


def new_series(store: Store, name: str) -> None:
    """Create an empty series; refuse a name already taken (even by a file that does not parse)."""
    with operation(store, f"series new {name}"):
        if os.path.lexists(series_path(store, name)):  # checked before parsing: a broken file exists too
            raise UsageProblem(f"series {name} already exists", f"see `stackmgr series {name}`")
        SeriesFile.load_or_new(store, name).write()


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
            import difflib

            names = list_series(store)
            close = [n for n in names if n.lower() == name.lower()] or difflib.get_close_matches(name, names, n=1)
            raise UsageProblem(f"no series named '{name}'",
                               f"did you mean {close[0]}?" if close else "list them with `stackmgr series`")
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
