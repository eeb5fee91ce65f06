"""The user's real index, written only by git's lock-file convention: `index.lock` taken with O_EXCL before a
working tree is touched, filled from a temporary index, synced and renamed into place."""

from __future__ import annotations

import os
import time

from stackmgr.errors import StackmgrError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.git.repo import Repo
    from stackmgr.git.tempindex import TempIndex


class RealIndexLock:
    """The user's `index.lock`, taken by git's own convention (O_EXCL: another git at work makes this fail) before
    a working tree is touched, and held until the new index is renamed into place (`commit`) or dropped."""

    def __init__(self, repo: Repo) -> None:
        self.real = os.path.join(repo.git_dir, "index")
        self.path = self.real + ".lock"
        delay = 0.01
        while True:  # an IDE's `git status` holds it for a moment: retry with backoff (never remove it)
            try:
                self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
                return
            except FileExistsError:
                if delay > 1.0:
                    raise StackmgrError(
                        f"{self.path} exists: another git command is running in {repo.top}",
                        "wait for it to finish (remove the file only if no git is running)",
                    ) from None
                time.sleep(delay)
                delay *= 2

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

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            if os.path.exists(self.path):
                os.unlink(self.path)


def write_real_index(repo: Repo, source: TempIndex) -> None:
    """Replace the user's index with a copy of `source` (lock, fill, sync, rename)."""
    lock = RealIndexLock(repo)
    try:
        lock.commit(source)
    finally:
        lock.release()
