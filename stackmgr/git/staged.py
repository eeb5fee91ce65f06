"""What the user's real index holds against HEAD (`diff-index --cached HEAD`), asked of git only when something it
depends on changed since the last answer.

Every snapshot needs it, and on a tree the size of vLLM it costs `check` a git start and a read of HEAD's trees
beside `git status`, which on a small machine shares the cores with it. The answer depends on the index file, on
HEAD and the ref it names, on replace refs (and core.useReplaceRefs: the config files' stat data, as for
core.autocrlf); git rewrites each of them by renaming a new file into place.
The key is their stat data (`store.fs.stat_key`), taken *before* git is asked: an answer is reused only while
every one of those files is as it was when the answer's question was put, so a change during or after that run
makes the next snapshot ask again; files younger than 2 seconds leave it uncached. Repositories whose
refs are not plain files (reftable) are always asked.
"""

from __future__ import annotations

import os
import time

from stackmgr.git.runner import start
from stackmgr.store.fs import read_cache, stat_key, write_cache

TYPE_CHECKING = False  # mypy treats this as true; `collections.abc` stays out of `check`'s start-up
if TYPE_CHECKING:
    from stackmgr.git.process import Process
    from stackmgr.git.repo import Repo

_ARGS = ["--no-optional-locks", "diff-index", "--cached", "-r", "-z", "--raw", "--no-renames", "--full-index",
         "HEAD"]  # fmt: skip


class StagedChanges:
    """Started with the snapshot's `git status`; `output(head)` gives diff-index's raw bytes and exit code."""

    def __init__(self, repo: Repo, config: list[object]) -> None:
        """`config`: the stat data of the git config files (core.useReplaceRefs changes the answer)."""
        self.repo = repo
        self.cache = os.path.join(repo.stackmgr_dir, "staged.cache")
        self.asked_at = time.time_ns()
        self.key = _key(repo, config, self.asked_at)
        cached = read_cache(self.cache) if self.key is not None else None
        self.known = cached if isinstance(cached, list) and len(cached) == 3 and cached[0] == self.key else None
        self.proc: Process | None = None if self.known is not None else self._start()

    def _start(self) -> Process:
        return start(self.repo.top, _ARGS)

    def output(self, head: str) -> tuple[int, bytes]:
        """(exit code, raw output) against HEAD `head` (the commit `git status` read)."""
        if self.known is not None:
            if self.known[1] == head:
                return 0, self.known[2]
            self.proc = self._start()  # HEAD moved under an unchanged key: never happens with plain ref files
        assert self.proc is not None
        out, _ = self.proc.communicate()
        code = self.proc.wait()
        if code == 0 and self.key is not None and self.known is None:
            write_cache(self.cache, [self.key, head, out])
        return code, out


def _key(repo: Repo, config: list[object], asked_at: int) -> list[object] | None:
    """Stat data of every file the answer depends on (store.fs.stat_key), or None when they cannot all be named
    or one is too young to trust."""
    git_dir = repo.git_dir
    try:
        common = repo.common_dir
    except OSError:
        return None
    if os.path.exists(os.path.join(common, "reftable")):
        return None
    try:
        with open(os.path.join(git_dir, "HEAD"), "rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    files = [os.path.join(git_dir, "index"), os.path.join(git_dir, "HEAD"), os.path.join(common, "packed-refs"),
             os.path.join(common, "refs", "replace")]  # fmt: skip
    if head.startswith(b"ref: "):
        ref = head[5:].strip().decode("utf-8", "surrogateescape")
        if not ref.startswith("refs/") or ".." in ref.split("/"):
            return None
        files.append(os.path.join(git_dir if ref.startswith(("refs/bisect/", "refs/worktree/")) else common, ref))
    env = [os.environ.get(k) for k in ("GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE")]
    files_key = stat_key(files, asked_at)
    return None if files_key is None else [env, head, config, *files_key]
