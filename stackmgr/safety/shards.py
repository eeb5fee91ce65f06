"""`check`'s fast path over a large store: the patch index's post-images, sharded by path.

The full index (preserved.PatchIndex, one record per patch file) costs time in proportion to the store: loading
5,000 records and stat-ing 5,000 files is several times a `git status`. `check` only needs the entries for the
paths that changed in the tree, so the index is also written as SHARDS small files keyed by a hash of the path
(`.stackmgr/cache/lookup-NN.marshal`), each entry (mode, blob, patch file, that file's stat signature). A check
then loads the shards of its changed paths and re-validates only the owners it relies on (lstat against the
signature).

When the fast path cannot answer, the full assessment runs (and rebuilds the shards): a shard or meta file of
another generation, another object store for the tree, an owner file changed, or something unpreserved while
`patches/` (or a kept-versions directory) changed since the shards were made, or some patch awaits a retry.
Otherwise an "unpreserved" stands without stat-ing every patch file (that would make `check` grow with the
store): a patch edited in place, without a rename, is only picked up by the next full assessment (`status`, or
any write to `patches/`). That errs on the safe side only: the owners of a "preserved" answer are always
re-checked, so an edit can make `check` report work unpreserved that is saved, never the reverse. Always safe
to delete.
"""

from __future__ import annotations

import os
import time
from binascii import crc32

from stackmgr.safety.assessment import Assessment, conflicted_patches, owners, shown_name
from stackmgr.store.fs import read_cache, write_cache
from stackmgr.store.names import VERSIONS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.safety.preserved import PatchIndex
    from stackmgr.safety.snapshot import Snapshot
    from stackmgr.store.config import Store

SHARDS = 64
VERSION = 4


def _dir(store: Store) -> str:
    return os.path.join(store.state_dir, "cache")


def shard_of(path: bytes) -> int:
    return crc32(path) % SHARDS


def dirs_signature(store: Store) -> list[object]:
    """mtimes of `patches/`, `patches/.versions/` and each kept-versions directory: a patch file added, removed
    or renamed into place (every stackmgr write, git checkout, most editors) changes one of them."""
    sig: list[object] = []
    top = store.patches_dir
    kept = os.path.join(top, VERSIONS)
    for directory in (top, kept):
        try:
            sig.append(os.stat(directory).st_mtime_ns)
        except OSError:
            sig.append(None)
    try:
        names = sorted(os.listdir(kept))
    except OSError:
        names = []
    for name in names:
        try:
            sig.append((name, os.stat(os.path.join(kept, name)).st_mtime_ns))
        except OSError:
            sig.append((name, None))
    return sig


def write(store: Store, idx: PatchIndex, dirs: list[object] | None) -> None:
    """The shards, then the meta file that names their generation (unique per writer: a reader that meets shards
    of two writers falls back). Per tree, the object store its patches were verified in ("mixed" when they
    differ: no fast path there). `dirs` is `dirs_signature` taken *before* the records were brought up to date
    (so a patch published meanwhile makes it differ), or None when they were not: then no "unpreserved" is ever
    answered from these shards."""
    shards: list[dict[tuple[str, bytes], list[tuple[str, str, str, list[int]]]]] = [{} for _ in range(SHARDS)]
    retry = False
    objects: dict[str, object] = {}
    for filename, rec in idx.records.items():
        retry = retry or bool(rec.get("retry"))
        if rec["tree"] is None or not rec["entries"]:
            continue
        seen = objects.setdefault(rec["tree"], rec.get("objects"))
        if seen != rec.get("objects"):
            objects[rec["tree"]] = "mixed"
        for path, mode, blob in rec["entries"]:
            shards[shard_of(path)].setdefault((rec["tree"], path), []).append((mode, blob, filename, rec["sig"]))
    directory = _dir(store)
    generation = f"{os.getpid()}-{time.time_ns()}"
    for n, shard in enumerate(shards):
        write_cache(os.path.join(directory, f"lookup-{n:02d}.marshal"), {"generation": generation, "entries": shard})
    write_cache(os.path.join(directory, "lookup-meta.marshal"), {"version": VERSION, "generation": generation,
                "dirs": dirs, "objects": objects, "retry": retry,
                "conflicted": conflicted_patches(idx.records)})  # fmt: skip


def needs_write(store: Store, dirs: list[object]) -> bool:
    meta = read_cache(os.path.join(_dir(store), "lookup-meta.marshal"))
    return not (isinstance(meta, dict) and meta.get("version") == VERSION and meta.get("dirs") == dirs)


def quick_assess(store: Store, snap: Snapshot, objects: object) -> Assessment | None:
    """The answer from the shards, or None when only the full assessment can give it."""

    directory = _dir(store)
    meta = read_cache(os.path.join(directory, "lookup-meta.marshal"))
    if not (isinstance(meta, dict) and meta.get("version") == VERSION):
        return None
    if meta["objects"].get(snap.tree) not in (None, objects):
        return None
    loaded: dict[int, dict[tuple[str, bytes], list[tuple[str, str, str, list[int]]]]] = {}
    result = Assessment()
    owners_seen: dict[str, bool] = {}
    for change in snap.changes:
        n = shard_of(change.path)
        if n not in loaded:
            shard = read_cache(os.path.join(directory, f"lookup-{n:02d}.marshal"))
            if not (isinstance(shard, dict) and shard.get("generation") == meta["generation"]):
                return None
            loaded[n] = shard["entries"]
        found = owners(loaded[n].get((snap.tree, change.path), ()), change.new_mode, change.new_blob,
                       change.old_blob)  # fmt: skip
        owned = [(e[2], e[3]) for e in found]
        for filename, sig in owned:
            if filename not in owners_seen:
                owners_seen[filename] = _unchanged(store, filename, sig)
            if not owners_seen[filename]:
                return None
        if owned:
            result.preserved[change.path] = sorted({shown_name(f) for f, _ in owned})
        else:
            result.unpreserved.append(change)
    if result.unpreserved and (meta["retry"] or meta["dirs"] is None or meta["dirs"] != dirs_signature(store)):
        return None
    result.conflicted = meta.get("conflicted") or []
    return result


def _unchanged(store: Store, filename: str, sig: list[int]) -> bool:
    try:
        st = os.lstat(os.path.join(store.patches_dir, filename))
    except OSError:
        return False
    from stat import S_ISREG

    return S_ISREG(st.st_mode) and [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino] == sig
