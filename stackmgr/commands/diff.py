"""`stackmgr diff [PATCH] [-z]`: a patch's diff as saved, or what a tree holds on top of its applied patches
(quilt's `diff [-z]`, StGit's `stg show`/`stg diff`).

- no PATCH: the top applied patch of the tree's current series (store/position.py);
- PATCH: the diff part of `patches/PATCH.patch`, byte for byte (binary hunks and CRLF lines included), applied or
  not; read by the store's one rule for a patch by name, never through a link out of `patches/`;
- `unsaved`: the tree's snapshot (untracked files included, as `save` takes them) diffed from the state its
  applied patches built (else from HEAD): what the next `save`/`refresh` would take. Read-only: the snapshot lives
  in stackmgr's private index; the user's index, HEAD and files are not touched.
"""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git.repo import diffstat
from stackmgr.safety.snapshot import take_snapshot
from stackmgr.store import patchfile
from stackmgr.store.applied import applied_result, load_applied
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none
from stackmgr.store.names import patch_file
from stackmgr.store.position import applied_position
from stackmgr.store.tree_paths import tree_to_act_on


class Shown:
    """What `diff` shows: the diff's bytes, whose they are (a patch, or the tree's unsaved changes) and, for the
    unsaved changes, what they are on top of (`on`: a position line or "HEAD")."""

    def __init__(self, data: bytes, tree: str | None, patch: str | None, on: str = "") -> None:
        self.data = data
        self.tree = tree
        self.patch = patch
        self.on = on

    @property
    def unsaved(self) -> bool:
        return self.patch is None

    def stat(self, cwd: str) -> bytes:
        """git's diffstat of these bytes (empty for an empty diff)."""
        return diffstat(cwd, self.data)

    def totals(self, stat: bytes) -> tuple[int, int, int]:
        """(files, insertions, deletions) from this diff's `stat`."""
        return patchfile.stat_totals(b"\n" + stat + b"\n" + self.data) if self.data else (0, 0, 0)


def _tree(store: Store, wanted: str | None) -> str:
    """The tree: `-t`, else the default tree (store/tree_paths.py), preferring the one with a current series."""
    current = [t for t in sorted(load_applied(store)) if t in store.trees]
    return tree_to_act_on(store, wanted, prefer=(current,))


def saved_patch(store: Store, name: str) -> Shown:
    """The diff part of patches/NAME.patch as it is in the store."""
    name = patch_file(store, name)
    data = read_or_none(os.path.join(store.patches_dir, name + ".patch")) or b""  # never through a link
    header = patchfile.parse_header(data, f"patches/{name}.patch")
    diff = patchfile.diff_part(data)
    if not diff:
        raise StackmgrError(f"patches/{name}.patch holds no diff", "see `stackmgr lint`")
    return Shown(diff, header.tree, name)


def top_patch(store: Store, wanted: str | None) -> Shown:
    """The top applied patch of the tree's current series; refused (exit 3) when none is applied."""
    tree = _tree(store, wanted)
    where = applied_position(store, tree)
    if where is None or where.top is None:
        said = f" ({where.summary()})" if where is not None else ""
        raise StackmgrError(f"tree {tree} has no patch applied{said}",
                            "`stackmgr diff PATCH` shows a saved patch, `stackmgr diff -z` the changes not saved "
                            "yet; `stackmgr push` or `stackmgr apply SERIES` applies patches")  # fmt: skip
    return saved_patch(store, where.top)


def unsaved_changes(store: Store, wanted: str | None) -> Shown:
    """The tree's changes on top of what its applied patches built (nothing applied: on top of HEAD)."""
    tree = _tree(store, wanted)
    config = store.tree(tree)
    held = applied_result(store, tree)
    snap = take_snapshot(tree, config.path, store.max_untracked_bytes, find_special=False, freeze=True,
                         results=config.results, held=held)  # fmt: skip
    try:
        where = applied_position(store, tree)
        if held is not None and where is not None and snap.repo.has_object(held[1]):
            start, on = held[1], where.summary()
        else:
            start, on = snap.head, "HEAD"
        data = snap.repo.diff_trees(start, snap.tree_id())
    finally:
        snap.release()
    return Shown(data, tree, None, on)


def shown(store: Store, patch: str | None, tree: str | None, unsaved: bool) -> Shown:
    """`diff`, `diff PATCH`, `diff -z`."""
    if unsaved and patch is not None:
        raise UsageProblem(
            "give PATCH or -z, not both",
            "`stackmgr diff PATCH` shows a saved patch, `stackmgr diff -z` what is not saved yet",
        )
    if patch is not None:
        saved = saved_patch(store, patch)
        if tree is not None and tree != saved.tree:
            raise UsageProblem(f"patch {saved.patch} is for tree {saved.tree}, not {tree}", "drop -t")
        return saved
    return unsaved_changes(store, tree) if unsaved else top_patch(store, tree)
