"""Results kept in the store by content (docs/FORMATS.md#store-layout): `artifacts/sha256/<2 hex>/<62 hex>`, the
file's sha256 as its name. A file linked from outside the store is copied there (so it travels with the store to
every clone), and so is a measured tree's residue. Written once: the same bytes are the same file, whoever links
them; a big one is a git LFS object where the store is set up for it."""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.store import lfs
from stackmgr.store.config import Store
from stackmgr.store.fs import sha256_hex

DIRECTORY = "artifacts/sha256"


def path_of(sha256: str) -> str:
    """The store-relative path of the kept file with this sha256."""
    return f"{DIRECTORY}/{sha256[:2]}/{sha256[2:]}"


def keep(store: Store, data: bytes, sha256: str | None = None) -> str:
    """Keep `data` in the store by content; its store-relative path. A file already there with those bytes is
    left as it is (one whose bytes differ, damaged, is replaced: its name says what it must hold)."""
    digest = sha256 or sha256_hex(data)
    rel = path_of(digest)
    full = os.path.join(store.root, rel)
    try:
        with open(full, "rb") as f:
            if sha256_hex(f.read()) == digest:
                return rel
    except OSError:
        pass
    try:
        os.makedirs(os.path.dirname(full), exist_ok=True)
        store.write_file(full, data)
    except OSError as exc:
        raise StackmgrError(f"cannot keep a copy in {os.path.dirname(rel)}/: {exc.strerror}",
                            "free some space or check the store's permissions; nothing was linked",
                            ) from None  # fmt: skip
    lfs.track(store, [rel])
    return rel


def read_kept(store: Store, rel: str, sha256: str) -> bytes | None:
    """The bytes of the store file `rel` when their sha256 is `sha256` (a kept file, a patch version), else None."""
    try:
        with open(os.path.join(store.root, rel), "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data if sha256_hex(data) == sha256 else None
