"""Is there room on a tree's file system for a switch? Asked before `read-tree -m -u`, which on a full disk writes
some files and then fails, leaving the tree half-switched (git writes the index last)."""

from __future__ import annotations

import os

from stackmgr.errors import DiskError
from stackmgr.git.runner import run
from stackmgr.types import GITLINK_MODE, Change

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.git.repo import Repo


def room_for_switch(repo: Repo, changes: list[Change], index: str) -> None:
    """Refuse (DiskError, before a file changes) a switch the tree's file system has no room for: on a full disk
    `read-tree -u` writes some files and then fails, leaving a half-switched tree. Asked of the file system first;
    only when it has less than 256 MiB free are the sizes of the blobs to write asked of git."""
    import errno

    try:
        fs = os.statvfs(repo.top)
    except OSError:
        return
    if fs.f_flag & os.ST_RDONLY:
        raise DiskError(errno.EROFS, index)
    free = fs.f_bavail * fs.f_frsize
    if free >= 256 << 20:
        return
    blobs = [c.new_blob for c in changes if c.new_mode not in ("000000", GITLINK_MODE)]
    sizes = run(repo.top, ["cat-file", "--batch-check=%(objectsize)"], stdin="".join(b + "\n" for b in blobs).encode())
    block = max(fs.f_frsize, 4096)
    need = sum(-(-int(n) // block) * block for n in sizes.split() if n.isdigit()) + 2 * _size(index) + 2 * block
    if need > free:
        raise DiskError(errno.ENOSPC, repo.top)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
