"""Results kept in the store by content (docs/FORMATS.md#store-layout): `artifacts/sha256/<2 hex>/<62 hex>`, the
file's sha256 as its name. A file linked from outside the store is copied there (so it travels with the store to
every clone), and so is a measured tree's residue. Written once: the same bytes are the same file, whoever links
them; a big one is a git LFS object where the store is set up for it.

A path a link record names is read only inside the store (docs/SECURITY.md): opened through store/inside.py (no
absolute path, no `..`, no symbolic link on the way, a regular file only) and hashed a block at a time."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO

from stackmgr.errors import StackmgrError
from stackmgr.store import lfs
from stackmgr.store.config import Store
from stackmgr.store.fs import discard, sha256_hex, write_temp_from
from stackmgr.store.inside import OutsideStore, is_link_inside, open_inside, relative_parts

DIRECTORY = "artifacts/sha256"
BLOCK = 1 << 20  # a file is hashed and copied this much at a time


def path_of(sha256: str) -> str:
    """The store-relative path of the kept file with this sha256."""
    return f"{DIRECTORY}/{sha256[:2]}/{sha256[2:]}"


def keep(store: Store, data: bytes, sha256: str | None = None) -> str:
    """Keep `data` in the store by content; its store-relative path. A file already there with those bytes is
    left as it is (one whose bytes differ, damaged, is replaced: its name says what it must hold)."""
    digest = sha256 or sha256_hex(data)
    rel = path_of(digest)
    full = os.path.join(store.root, rel)
    if _holds(store, rel, digest):
        return rel
    try:
        store.makedirs(os.path.dirname(full))
        store.write_file(full, data)
    except OSError as exc:
        raise _keep_error(rel, exc) from None
    lfs.track(store, [rel])
    return rel


def keep_file(store: Store, path: str) -> tuple[str, str, int]:
    """Keep the regular file at `path` in the store by content, read a block at a time (a log of any size takes
    little memory): its store-relative path, sha256 and size. A symbolic link there is never followed. The
    bytes kept are those hashed: a file still being written is kept as it was when copied."""
    with open_regular(path) as f:
        digest, size = hash_file(f)
        rel = path_of(digest)
        full = os.path.join(store.root, rel)
        if _holds(store, rel, digest):
            return rel, digest, size
        f.seek(0)
        copied, size = hashlib.sha256(), 0

        def blocks() -> Iterator[bytes]:
            nonlocal size
            while block := f.read(BLOCK):
                copied.update(block)
                size += len(block)
                yield block

        try:
            store.makedirs(os.path.dirname(full))
        except OSError as exc:
            raise _keep_error(rel, exc) from None
        tmp = write_temp_from(full, blocks())
    if copied.hexdigest() != digest:  # it changed between the two reads: what was copied is what is kept
        digest = copied.hexdigest()
        rel = path_of(digest)
        full = os.path.join(store.root, rel)
        try:
            if _holds(store, rel, digest):
                discard(tmp)
                return rel, digest, size
            store.makedirs(os.path.dirname(full))
        except (OSError, StackmgrError) as exc:
            discard(tmp)
            if not isinstance(exc, OSError):
                raise
            raise _keep_error(rel, exc) from None
    store.publish(tmp, full)
    lfs.track(store, [rel])
    return rel, digest, size


def open_regular(path: str) -> BinaryIO:
    """`path` opened for reading if it is a regular file: a symbolic link is not followed (OSError ELOOP), and
    anything else (a FIFO, a device) is refused without blocking on it."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return os.fdopen(fd, "rb")


def kept_already(store: Store, path: str) -> bool:
    """Whether the store keeps the bytes of the file at `path` under `artifacts/` (hashed a block at a time)."""
    with open_regular(path) as f:
        digest = hash_file(f)[0]
    return _holds(store, path_of(digest), digest)


def hash_file(f: BinaryIO) -> tuple[str, int]:
    """sha256 and size of what is left to read of `f`, read a block at a time."""
    digest = hashlib.sha256()
    size = 0
    while block := f.read(BLOCK):
        digest.update(block)
        size += len(block)
    return digest.hexdigest(), size


def _holds(store: Store, rel: str, sha256: str) -> bool:
    """Whether the kept file `rel` is there with the bytes its sha256 names (read a block at a time)."""
    try:
        with open_kept(store.root, rel) as f:
            return hash_file(f)[0] == sha256
    except (OSError, OutsideStore):
        return False


def outside(recorded: str) -> str:
    """Why a path a record names is never read ("is outside the store: …"), or "" for a store-relative one."""
    if os.path.isabs(recorded):
        return "is outside the store: never read (only files in the store are evidence)"
    try:
        relative_parts(recorded)
    except OutsideStore:
        return "leaves the store: never read (only files in the store are evidence)"
    return ""


def refusal(root: str, rel: str) -> str:
    """Why `open_kept` refused the store path `rel`, as the rest of a sentence that begins with the path."""
    link = is_link_inside(root, rel)
    if link == rel:
        return "is a symbolic link: not followed"
    if link is not None:
        return f"is reached through a symbolic link ({link}): not followed"
    return "is not a regular file: not read"


def open_kept(root: str, rel: str) -> BinaryIO:
    """The store file `root/rel` opened for reading without leaving the store (store/inside.py): OutsideStore for
    an absolute path, `..`, a symbolic link on the way or anything but a regular file; OSError as `open`."""
    return os.fdopen(open_inside(root, rel), "rb")


def read_limited(root: str, rel: str, limit: int) -> bytes | None:
    """The bytes of the store file `rel` when it can be read inside the store and holds at most `limit` bytes,
    else None (a bigger file is not read at all)."""
    try:
        with open_kept(root, rel) as f:
            if os.fstat(f.fileno()).st_size > limit:
                return None
            data = f.read(limit + 1)
    except (OSError, OutsideStore):
        return None
    return data if len(data) <= limit else None


def _keep_error(rel: str, exc: OSError) -> StackmgrError:
    return StackmgrError(f"cannot keep a copy in {os.path.dirname(rel)}/: {exc.strerror}",
                         "free some space or check the store's permissions; nothing was linked")  # fmt: skip


def read_kept(store: Store, rel: str, sha256: str) -> bytes | None:
    """The bytes of the store file `rel` when their sha256 is `sha256` (a kept file, a patch version), else None;
    hashed a block at a time first, read whole only when it is what was asked for."""
    try:
        with open_kept(store.root, rel) as f:
            if hash_file(f)[0] != sha256:
                return None
            f.seek(0)
            data = f.read()
    except (OSError, OutsideStore):
        return None
    return data if sha256_hex(data) == sha256 else None
