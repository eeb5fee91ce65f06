"""The residue of a measured state (docs/FORMATS.md#applied-state): what `apply --link` put on top of the patches
that is in no saved patch, kept by content under `artifacts/`.

A change counts as preserved by it only while the store can reproduce it exactly: the residue's file is still
in `artifacts/` with the bytes its sha256 names, and the path has, byte for byte, the mode and content the
measured state gives it (full blob ids: a lookup). An edit made since, however small, is the user's: not
preserved, so `check` says so and `reset` refuses."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # `typing` stays out of `check`'s start-up
if TYPE_CHECKING:
    from stackmgr.safety.assessment import Assessment
    from stackmgr.safety.snapshot import Snapshot
    from stackmgr.store.config import Store


def held(store: Store, snap: Snapshot, residue: str, residue_tree: str) -> dict[bytes, tuple[str, str]] | None:
    """path -> (mode, blob) of each path the residue gives (mode 000000: it deletes the path), or None when it
    cannot be reproduced here (its artifact missing or damaged, the measured tree not in the repository)."""
    if not residue or not residue_tree:
        return None
    from stackmgr.errors import StackmgrError
    from stackmgr.store.fs import sha256_hex
    from stackmgr.store.patchfile import post_images

    rel = residue  # artifacts/sha256/<2 hex>/<62 hex>: named by the sha256 of its bytes
    named = os.path.basename(os.path.dirname(rel)) + os.path.basename(rel)
    if not rel.startswith("artifacts/sha256/") or ".." in rel.split("/"):
        return None
    from stackmgr.store.inside import read_inside

    try:
        data = read_inside(store.root, rel)  # no symlink, no special file: only what artifacts/ keeps
    except (OSError, StackmgrError):
        return None
    if sha256_hex(data) != named:
        return None
    try:
        paths = [im.path for im in post_images(data, rel)]
    except (StackmgrError, ValueError, IndexError):
        return None
    repo = snap.repo
    if not paths or not repo.has_object(residue_tree):
        return None
    there = repo.blob_entries(residue_tree, paths)  # the measured state: what the residue leaves
    return {p: there.get(p, ("000000", "")) for p in paths}


def holds(entries: dict[bytes, tuple[str, str]] | None, path: bytes, mode: str, blob: str) -> bool:
    """The residue gives `path` exactly this mode and blob (or deletes it, as the tree has)."""
    want = (entries or {}).get(path)
    return want is not None and want[0] == mode and (mode == "000000" or want[1] == blob)


def count_residue(store: Store, snap: Snapshot, result: Assessment) -> Assessment:
    """Move the unpreserved changes the tree's recorded residue holds exactly into `result.preserved`."""
    if not result.unpreserved:
        return result
    from stackmgr.store.applied import applied_residue

    found = applied_residue(store, snap.tree)
    if found is None:
        return result
    entries = held(store, snap, found[0], found[1])
    if not entries:
        return result
    owner = f"residue of {found[2]}"
    left = []
    for change in result.unpreserved:
        if holds(entries, change.path, change.new_mode, change.new_blob):
            result.preserved[change.path] = [owner]
        else:
            left.append(change)
    result.unpreserved = left
    return result
