"""Trees built in throwaway indexes, never touching a working tree: what patches make of a base, a tree with a
few entries changed. For verification (preserved.py), rollback (undo.py), lint, export and interdiff."""

from __future__ import annotations

import os

from stackmgr.git import tempindex
from stackmgr.git.runner import run, zsplit
from stackmgr.types import TreeId

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from stackmgr.git.repo import Repo


def apply_to_entries(
    repo: Repo, before: Sequence[tuple[str, str, bytes]], patch_path: str
) -> tuple[dict[bytes, tuple[str, str]] | None, str]:
    """Apply a patch file strictly to an index holding only `before` (mode, blob, path): the files it touches
    at its base. Returns what that index then holds, path -> (mode, blob), or (None, git's complaint)."""
    index = tempindex.scratch_index(repo, "verify")
    try:
        info = b"".join(f"{mode} {blob}\t".encode() + path + b"\0" for mode, blob, path in before)
        run(repo.top, ["update-index", "-z", "--index-info"], index=index, stdin=info)
        ok, err = tempindex.apply_to_index(repo.top, index, patch_path)
        if not ok:
            return None, err.splitlines()[0] if err else "does not apply"
        entries = {}
        for rec in zsplit(run(repo.top, ["ls-files", "-s", "-z"], index=index)):
            meta, path = rec.split(b"\t", 1)
            mode, blob, _stage = meta.decode().split(" ")
            entries[path] = (mode, blob)
        return entries, ""
    finally:
        if os.path.exists(index):
            os.unlink(index)


def tree_from_patches(repo: Repo, base: str, patch_files: Sequence[str]) -> tuple[TreeId | None, str]:
    """Apply patch files in order to `base` in a scratch index; (tree id, "") or (None, what failed)."""
    index = tempindex.scratch_index(repo, "rebuild")
    try:
        run(repo.top, ["read-tree", base], index=index)
        for patch in patch_files:
            ok, err = tempindex.apply_to_index(repo.top, index, patch)
            if not ok:
                return None, f"{os.path.basename(patch)}: {err.splitlines()[0] if err else 'does not apply'}"
        return repo.write_tree(index), ""
    finally:
        if os.path.exists(index):
            os.unlink(index)


def tree_with_entries(repo: Repo, base: str, entries: dict[bytes, tuple[str, str] | None]) -> TreeId:
    """Tree `base` with some paths set to (mode, blob), or removed where None (a scratch index; no file touched)."""
    index = tempindex.scratch_index(repo, "compose")
    try:
        run(repo.top, ["read-tree", base], index=index)
        gone = b"".join(b"0 " + b"0" * 40 + b"\t" + path + b"\0" for path, e in entries.items() if e is None)
        put = b"".join(f"{e[0]} {e[1]}\t".encode() + path + b"\0" for path, e in entries.items() if e is not None)
        run(repo.top, ["update-index", "-z", "--index-info"], index=index, stdin=gone + put)
        return repo.write_tree(index)
    finally:
        if os.path.exists(index):
            os.unlink(index)
