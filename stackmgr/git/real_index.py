"""The user's real index, written only by git's lock-file convention: `index.lock` taken exclusively before a
working tree is touched, filled from a temporary index, synced and renamed into place.

Every `index.lock` stackmgr takes has a second name, its marker `.git/stackmgr/<pid>.<12 hex>.index-lock`, made
first (the journal records the marker's name before the lock exists) and linked to `index.lock` (`link` fails
when the file exists, as O_EXCL does). The marker holds the inode for as long as the lock is ours, so after a kill
the lock is recognised exactly (same file as a marker of a dead stackmgr) and removed; another git's lock never is.
"""

from __future__ import annotations

import os
import time

from stackmgr.errors import StackmgrError
from stackmgr.store.fs import process_alive

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.git.repo import Repo
    from stackmgr.git.tempindex import TempIndex

MARK_SUFFIX = ".index-lock"


def new_marker() -> str:
    """The name of the marker of an index.lock about to be taken (unique; its pid says whose it is)."""
    return f"{os.getpid()}.{os.urandom(6).hex()}{MARK_SUFFIX}"


class RealIndexLock:
    """The user's `index.lock`, taken by git's own convention (exclusive: another git at work makes this fail)
    before a working tree is touched, and held until the new index is renamed into place (`commit`) or dropped.
    `marker`: the name the journal recorded for it (a new one when None)."""

    def __init__(self, repo: Repo, marker: str | None = None) -> None:
        self.real = os.path.join(repo.git_dir, "index")
        self.path = self.real + ".lock"
        os.makedirs(repo.stackmgr_dir, exist_ok=True)
        self.marker: str | None = os.path.join(repo.stackmgr_dir, marker or new_marker())
        self.fd = os.open(self.marker, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        delay = 0.01
        try:
            while True:  # an IDE's `git status` holds it for a moment: retry with backoff (never remove it)
                try:
                    self._take()
                    return
                except FileExistsError:
                    if delay > 1.0:
                        raise StackmgrError(
                            f"{self.path} exists: another git command is running in {repo.top}",
                            "wait for it to finish (remove the file only if no git is running)",
                        ) from None
                    time.sleep(delay)
                    delay *= 2
        except BaseException:
            self.release()
            raise

    def _take(self) -> None:
        if self.marker is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            return
        try:
            os.link(self.marker, self.path)
        except FileExistsError:
            raise
        except OSError:  # no hard links on this filesystem: git's own O_EXCL create (unmarked)
            os.close(self.fd)
            os.unlink(self.marker)
            self.fd, self.marker = -1, None
            self._take()

    def commit(self, source: TempIndex | bytes) -> None:
        """The new index, from a temporary index or as bytes (an index file as it was), renamed into place."""
        if isinstance(source, bytes):
            data = source
        else:
            with open(source.path, "rb") as src:
                data = src.read()
        os.write(self.fd, data)
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        os.replace(self.path, self.real)
        if self.marker is not None:
            os.unlink(self.marker)
            self.marker = None

    def release(self) -> None:
        """Drop the lock if it is still held (after `commit` there is nothing left to drop)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            if self.marker is None and os.path.exists(self.path):
                os.unlink(self.path)
        if self.marker is not None:
            if _same(self.path, self.marker):
                os.unlink(self.path)
            _unlink(self.marker)
            self.marker = None


def write_real_index(repo: Repo, source: TempIndex) -> None:
    """Replace the user's index with a copy of `source` (lock, fill, sync, rename)."""
    lock = RealIndexLock(repo)
    try:
        lock.commit(source)
    finally:
        lock.release()


def drop_own_lock(repo: Repo, recorded: str) -> None:
    """After a kill: remove the index.lock the journal recorded (`mark:<marker>`, or the `dev:ino` older records
    hold) if it is that very file, and its marker. A lock of anyone else stays."""
    path = os.path.join(repo.git_dir, "index.lock")
    if recorded.startswith("mark:"):
        marker = os.path.join(repo.stackmgr_dir, os.path.basename(recorded[5:]))
        if _same(path, marker):
            os.unlink(path)
        _unlink(marker)
        return
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if recorded != "-" and f"{st.st_dev}:{st.st_ino}" == recorded:
        os.unlink(path)


def drop_dead_locks(repo: Repo) -> None:
    """Remove the index.lock of a stackmgr that died holding it (its marker names a pid that is gone, and is the
    same file), and the markers dead ones left."""
    try:
        names = os.listdir(repo.stackmgr_dir)
    except FileNotFoundError:
        return
    for name in names:
        pid = name.split(".", 1)[0]
        if not name.endswith(MARK_SUFFIX) or not pid.isdigit() or process_alive(int(pid)):
            continue
        marker = os.path.join(repo.stackmgr_dir, name)
        path = os.path.join(repo.git_dir, "index.lock")
        if _same(path, marker):
            os.unlink(path)
        _unlink(marker)


def _same(path: str, other: str) -> bool:
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
