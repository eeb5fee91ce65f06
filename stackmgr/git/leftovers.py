"""What a git killed together with stackmgr leaves in a tree's `.git/stackmgr/`: a lock on the snapshot index,
scratch indexes (`<purpose>-<n>.<pid>.index`, `frozen.<pid>.index`, with their locks) and folders (`import.<pid>/`)
of processes that are gone, and locks on stackmgr's own refs. Removed by the next look at
the tree (every snapshot, under the tree lock) and by `recover` (`sweep_tree`); never anything a live process
holds."""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.git.repo import common_dir
from stackmgr.store.fs import locked, process_alive


def sweep_tree(path: str) -> None:
    """The user's `index.lock` a dead stackmgr took (by its marker) and everything below, for the tree at `path`,
    under its tree lock (a tree missing here is skipped)."""
    from stackmgr.git.real_index import drop_dead_locks
    from stackmgr.git.repo import open_repo

    try:
        repo = open_repo(path)
    except StackmgrError:
        return
    with locked(os.path.join(repo.stackmgr_dir, "lock"), f"the tree at {path}"):
        drop_dead_locks(repo)  # the user's index.lock, when it is the very file a dead stackmgr took
        drop_dead_lock(os.path.join(repo.stackmgr_dir, "index.lock"))
        drop_dead_scratch_indexes(repo.stackmgr_dir)
        drop_dead_ref_locks(repo.git_dir)


def drop_dead_ref_locks(git_dir: str) -> None:
    """Locks a git killed while moving stackmgr's own refs left (`refs/stackmgr/…/*.lock`: journal anchors,
    recovery snapshots): that ref could not be updated again. The caller holds the store or tree lock."""
    try:
        common = common_dir(git_dir)  # a linked worktree: refs live in the main repository
    except OSError:
        common = git_dir
    for dirpath, _dirs, files in os.walk(os.path.join(common, "refs", "stackmgr")):
        for name in files:
            if name.endswith(".lock"):
                drop_stale_lock(os.path.join(dirpath, name))


def drop_killed_git_locks(git_dir: str, since: int, names: tuple[str, ...] = ("HEAD.lock",)) -> None:
    """The locks (`HEAD.lock`: `symbolic-ref`, `update-ref --no-deref`) a git killed while an operation moved this
    git dir's HEAD or index left: made since the operation started (`since`, seconds) and held by no running
    process. Left there, every later move fails with git's "Unable to create HEAD.lock". An older lock is not
    this operation's: it stays, for its owner."""
    for name in names:
        lock = os.path.join(git_dir, name)
        try:
            made = os.lstat(lock).st_mtime
        except FileNotFoundError:
            continue
        if made >= since - 1 and not git_at_work(git_dir):
            drop_stale_lock(lock)


def git_at_work(git_dir: str) -> bool:
    """Whether a running git has its working directory in or under the repository of `git_dir` (a git holds a ref's
    lock with no file open while its reference-transaction hook runs); True when /proc cannot tell."""
    if not os.path.isdir("/proc/self"):
        return True
    git_dir = os.path.realpath(git_dir)
    top = os.path.dirname(git_dir) if os.path.basename(git_dir) == ".git" else git_dir
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:
                if f.read().strip() != b"git":
                    continue
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:  # gone meanwhile, or another user's
            continue
        if cwd in (top, git_dir) or cwd.startswith((top + os.sep, git_dir + os.sep)):
            return True
    return False


def drop_stale_lock(lock: str) -> bool:
    """Remove a git lock file no running process holds open; False when one may (or /proc cannot tell). One made
    a moment ago is given the rest of a second first: a git closes it just before renaming it into place."""
    import time

    try:
        age = time.time() - os.lstat(lock).st_mtime
    except FileNotFoundError:
        return True
    if age < 1 and held_open(lock) is False:
        time.sleep(1 - age)
        if not os.path.lexists(lock):
            return True
    if held_open(lock) is not False:
        return False
    try:
        os.unlink(lock)
    except FileNotFoundError:
        pass
    return True


def drop_dead_lock(lock: str) -> None:
    """The lock a git killed with stackmgr left on the snapshot index. The caller holds the tree lock, so no
    stackmgr is at work on it; left there, `git status` could no longer refresh the index's stat data and every
    move would refuse on stat alone. A git still running (its stackmgr killed alone) keeps its lock."""
    if os.path.lexists(lock) and held_open(lock) is not True:
        try:
            os.unlink(lock)
        except FileNotFoundError:
            pass


def drop_dead_scratch_indexes(stackmgr_dir: str) -> None:
    """Scratch and frozen indexes (`<name>.<pid>.index`, and their `.lock`) and scratch folders (`<name>.<pid>/`)
    whose process is gone."""
    try:
        names = os.listdir(stackmgr_dir)
    except FileNotFoundError:
        return
    for name in names:
        parts = name.split(".")
        if len(parts) == 2 and parts[1].isdigit() and os.path.isdir(os.path.join(stackmgr_dir, name)):
            if not process_alive(int(parts[1])):  # a scratch folder (`import.<pid>/`: its indexes and diffs)
                import shutil  # rarely: it costs `check`'s start-up a dozen modules

                shutil.rmtree(os.path.join(stackmgr_dir, name), ignore_errors=True)
            continue
        pid = parts[-2 if parts[-1] == "index" else -3] if len(parts) >= 3 and parts[-1] in ("index", "lock") else ""
        if pid.isdigit() and not process_alive(int(pid)):
            try:
                os.unlink(os.path.join(stackmgr_dir, name))
            except FileNotFoundError:
                pass


def held_open(path: str) -> bool | None:
    """Whether a running process has `path` open (Linux `/proc`); None when that cannot be told."""
    if not os.path.isdir("/proc/self/fd"):
        return None
    target = os.path.realpath(path)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone meanwhile, or another user's (who cannot write in this worktree)
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return True
            except OSError:
                continue
    return False
