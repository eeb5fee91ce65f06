"""What a switch needs before it writes: room on the tree's file system (asked before `read-tree -m -u`, which on a
full disk writes some files and then fails, leaving the tree half-switched: git writes the index last), and no
file in the way that the old tree does not hold."""

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


def things_in_the_way(repo: Repo, changes: list[Change]) -> list[bytes]:
    """Files on disk that moving the working tree along `changes` (old tree → new tree) would overwrite or delete
    although the old tree does not hold them: ignored or untracked files at paths the new tree adds, below
    directories it turns into files, or standing where it needs a directory. git's two-way merge treats ignored
    files as expendable; they are never stackmgr's to destroy."""
    removed = {c.path for c in changes if c.new_mode == "000000"}
    top = os.fsencode(repo.top)
    found: list[bytes] = []
    seen: set[bytes] = set()  # parents already looked at (400 new files share a few directories)
    for c in changes:
        if c.old_mode != "000000":
            continue
        full = os.path.join(top, c.path)
        if os.path.lexists(full):
            found += (
                _unheld_below(top, c.path, removed) if os.path.isdir(full) and not os.path.islink(full) else [c.path]
            )
        parent = os.path.dirname(c.path)
        while parent and parent not in seen:
            seen.add(parent)
            here = os.path.join(top, parent)
            if os.path.lexists(here) and (os.path.islink(here) or not os.path.isdir(here)) and parent not in removed:
                found.append(parent)
            parent = os.path.dirname(parent)
    return sorted(set(found))


def _unheld_below(top: bytes, directory: bytes, removed: set[bytes]) -> list[bytes]:
    """Files under `directory` that the old tree does not hold (and so nothing has saved)."""
    out = []
    for dirpath, _dirs, files in os.walk(os.path.join(top, directory)):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), top)
            if rel not in removed:
                out.append(rel)
    return out

