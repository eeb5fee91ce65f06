"""A measured patch version by its content: a record names each patch it measured by the name it had then and
the sha256 of its bytes; the bytes are found wherever the store keeps them now, whatever the patch is called
(a rename keeps a patch's bytes and moves its kept versions, `patches/.versions/NAME/`, with it)."""

from __future__ import annotations

import os
from weakref import WeakKeyDictionary

from stackmgr.evidence import artifacts
from stackmgr.safety.preserved import PatchIndex
from stackmgr.store.config import Store
from stackmgr.store.names import VERSIONS, valid_name


def version_file(store: Store, name: str, sha256: str, index: PatchIndex | None = None) -> str | None:
    """The store-relative path of a file holding version `sha256` of the patch measured as `name`:
    patches/NAME.patch or its kept version, else any patch file or kept version with exactly those bytes (the
    patch renamed since); None when the store holds them nowhere."""
    for rel in (f"patches/{name}.patch", f"patches/{VERSIONS}/{name}/{sha256[:12]}.patch"):
        if artifacts.read_kept(store, rel, sha256) is not None:  # the bytes its sha256 names, wherever kept
            return rel
    for other in _kept_holding(store, sha256, index):
        rel = f"patches/{VERSIONS}/{other}/{sha256[:12]}.patch"
        if other != name and artifacts.read_kept(store, rel, sha256) is not None:
            return rel
    holder = _file_with(store, sha256, index)
    return f"patches/{holder}.patch" if holder is not None else None


def current_name(store: Store, name: str, sha256: str, index: PatchIndex | None = None) -> str | None:
    """The name the patch measured as `name` at version `sha256` goes by now: `name` while patches/NAME.patch
    exists; else the patch whose file is that version, or whose kept versions hold it (renamed since); None when
    no patch of the store is it (dropped)."""
    index = index or PatchIndex.load(store)
    if index.sha256(f"{name}.patch")[0] is not None:
        return name
    holder = _file_with(store, sha256, index)
    if holder is not None:
        return holder
    for other in _kept_holding(store, sha256, index):
        if index.sha256(f"{other}.patch")[0] is not None:
            return other
    return None


_BY_SHA: WeakKeyDictionary[PatchIndex, dict[str, str]] = WeakKeyDictionary()


def _file_with(store: Store, sha256: str, index: PatchIndex | None) -> str | None:
    """The name of a patch whose file is byte for byte version `sha256` (every file looked at once per index: a
    command judging many records asks for many)."""
    index = index or PatchIndex.load(store)
    if index not in _BY_SHA:
        try:
            files = sorted(f for f in os.listdir(store.patches_dir) if f.endswith(".patch"))
        except OSError:
            files = []
        by_sha: dict[str, str] = {}
        for f in files:
            sha = index.sha256(f)[0]
            if sha is not None:
                by_sha.setdefault(sha, f[: -len(".patch")])
        _BY_SHA[index] = by_sha
    return _BY_SHA[index].get(sha256)


_KEPT: WeakKeyDictionary[PatchIndex, dict[str, list[str]]] = WeakKeyDictionary()


def _kept_holding(store: Store, sha256: str, index: PatchIndex | None) -> list[str]:
    """The patch names whose kept versions (`patches/.versions/NAME/<sha256[:12]>.patch`) include one by that
    prefix, in name order: every folder listed once per index (a command judging many records asks for many)."""
    index = index or PatchIndex.load(store)
    if index not in _KEPT:
        kept = os.path.join(store.patches_dir, VERSIONS)
        by_prefix: dict[str, list[str]] = {}
        try:
            folders = sorted(n for n in os.listdir(kept) if valid_name(n))
        except OSError:
            folders = []
        for name in folders:
            try:
                files = os.listdir(os.path.join(kept, name))
            except OSError:  # not a folder, or gone
                continue
            for f in files:
                if f.endswith(".patch"):
                    by_prefix.setdefault(f[: -len(".patch")], []).append(name)
        _KEPT[index] = by_prefix
    return _KEPT[index].get(sha256[:12], [])
