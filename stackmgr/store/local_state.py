"""Where a store keeps the state that steers commands (journal, locks, applied series, caches): where a `git pull`
cannot write it (docs/SECURITY.md).

A store inside a git repository keeps it in that repository's git directory, as git keeps its own state:
`<git dir>/stackmgr-store/` for a store at the top of its repository, `<git dir>/stackmgr-stores/<rel>/` (the
store's path in the repository, `/` written `%2F`) for one below it. A store in no repository keeps `.stackmgr/`:
nothing but this machine writes there. Stores made before this moved their `.stackmgr/` on first use: every file
of it that git does not track goes (one rename when none is tracked); a tracked file is never read, and `lint`
names it.

Plain functions on `os` only: this runs on `check`'s start-up path (a few `lstat`s, no git but on the move).
"""

from __future__ import annotations

import os

LEGACY = ".stackmgr"  # the state directory in the store's own folder: stores in no git repository, and old ones
IN_GIT = "stackmgr-store"
NESTED = "stackmgr-stores"  # <git dir>/stackmgr-stores/REL/: the state of a store below its repository's top
LOCAL_FILE = "stackmgr.local.toml"


def git_dir_of(root: str) -> tuple[str, str] | None:
    """(git directory, path of `root` relative to its work tree's top) of the repository `root` is in, or None.
    Found as git finds it, by walking up to the first `.git` directory or `gitdir:` file (never below `root`:
    git never checks out a `.git`, so nothing a pull brings can name one)."""
    here = os.path.abspath(root)
    rel: list[str] = []
    while True:
        dot = os.path.join(here, ".git")
        try:
            st = os.stat(dot)
        except OSError:
            st = None
        if st is not None:
            if os.path.isdir(dot):
                return dot, "/".join(reversed(rel))
            found = _gitdir_file(dot)
            if found is not None:
                return found, "/".join(reversed(rel))
        parent, name = os.path.split(here)
        if parent == here:
            return None
        rel.append(name)
        here = parent


def _gitdir_file(path: str) -> str | None:
    """The directory a `.git` file names (`gitdir: PATH`, a linked worktree's or a submodule's)."""
    try:
        with open(path, "rb") as f:
            data = f.read(4096)
    except OSError:
        return None
    if not data.startswith(b"gitdir: "):
        return None
    target = os.fsdecode(data[8:].strip())
    target = os.path.normpath(os.path.join(os.path.dirname(path), target))
    return target if os.path.isdir(target) else None


def state_dir_for(root: str) -> tuple[str, bool, bool]:
    """(the store's state directory, whether it is in a git directory, whether the store is below the top of its
    repository: its state is then kept by its path, see `claim`)."""
    found = git_dir_of(root)
    if found is None:
        return os.path.join(root, LEGACY), False, False
    git_dir, rel = found
    if not rel:
        return os.path.join(git_dir, IN_GIT), True, False
    # stores below the top in a folder of their own: never inside a top store's state (`ops/`, `cache/`)
    return os.path.join(git_dir, NESTED, rel.replace("%", "%25").replace("/", "%2F")), True, True


def claim(root: str, state_dir: str) -> None:
    """A store below its repository's top keeps its state by its path in the repository: a store deleted and made
    again there (a new directory, `rm -rf store && stackmgr init store`) must not inherit the old one's journal or
    applied series. The state directory names the store directory it belongs to (`store`: device and inode);
    another one's state is removed, or set aside with a note when it holds an interrupted operation."""
    try:
        st = os.stat(root)
    except OSError:
        return
    mine = f"{st.st_dev}:{st.st_ino}\n".encode()
    stamp = os.path.join(state_dir, "store")
    try:
        with open(stamp, "rb") as f:
            if f.read(64) == mine:
                return
    except FileNotFoundError:  # a new state directory, or one just moved from the store's old `.stackmgr/`
        _stamp(stamp, mine)
        return
    except OSError:
        return
    if os.path.exists(os.path.join(state_dir, "ops", "CURRENT")):
        aside = f"{state_dir}.before-{os.getpid()}"
        try:
            os.rename(state_dir, aside)
        except OSError:
            return
        import sys

        sys.stderr.write(f"stackmgr: note: the state of an earlier store at {root} (an interrupted operation) is "
                         f"kept in {aside}\n")  # fmt: skip
    else:
        import shutil

        shutil.rmtree(state_dir, ignore_errors=True)
    _stamp(stamp, mine)


def _stamp(stamp: str, mine: bytes) -> None:
    try:
        os.makedirs(os.path.dirname(stamp), exist_ok=True)
        with open(stamp, "wb") as f:
            f.write(mine)
    except OSError:
        pass


def move_legacy_state(root: str, state_dir: str) -> None:
    """First use of an old store in a git repository: its `.stackmgr/` moves to `state_dir`. A tracked file there
    came by git and stays behind, unread; the rest moves, in one rename when nothing is tracked, else each file
    linked into a new directory published by one rename (a move killed halfway leaves the old folder whole)."""
    legacy = os.path.join(root, LEGACY)
    try:
        if not os.path.isdir(legacy) or os.path.islink(legacy) or os.path.lexists(state_dir):
            return
    except OSError:
        return
    from stackmgr.git.tracked import tracked_under

    tracked = tracked_under(root, [LEGACY])
    if tracked is None:
        return  # git cannot say what is tracked: nothing moves, nothing old is read
    os.makedirs(os.path.dirname(state_dir), exist_ok=True)
    if not tracked:
        try:
            os.rename(legacy, state_dir)
        except OSError:
            return  # another stackmgr moved it first, or another file system: a fresh state
        for rel in tracked_under(root, [LEGACY]) or []:  # a pull that landed meanwhile: what it brought goes
            try:
                os.unlink(os.path.join(state_dir, os.path.relpath(rel, LEGACY)))
            except OSError:
                pass
        return
    keep = {os.path.normpath(p) for p in tracked}
    tmp = f"{state_dir}.{os.getpid()}.moving"
    for folder, dirs, files in os.walk(legacy):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        for name in files:
            src = os.path.join(folder, name)
            rel = os.path.relpath(src, root)
            if rel in keep or os.path.islink(src):
                continue
            dst = os.path.join(tmp, os.path.relpath(src, legacy))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:
                continue  # a cache or log lost: rebuilt; the journal is on the same file system as its store
    try:
        os.makedirs(tmp, exist_ok=True)
        os.rename(tmp, state_dir)
    except OSError:
        pass


def local_config_tracked(root: str, state_dir: str) -> bool:
    """Whether the store's git repository tracks `stackmgr.local.toml`: then a pull wrote it (git overwrites an
    ignored file with a tracked one), and its tree paths are not this machine's. Asked of git only when the file
    or the repository's index changed since the last answer (kept in the state directory)."""
    from stackmgr.store.fs import read_cache, write_cache

    local = os.path.join(root, LOCAL_FILE)
    found = git_dir_of(root)
    if found is None:
        return False
    key: list[list[int] | None] = []
    for path in (local, os.path.join(found[0], "index")):
        try:
            st = os.lstat(path)
        except OSError:
            key.append(None)
            continue
        key.append([st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns])
    if key[0] is None:
        return False
    cache = os.path.join(state_dir, "cache", "local-tracked.marshal")
    cached = read_cache(cache)
    if isinstance(cached, list) and len(cached) == 2 and cached[0] == key:
        return bool(cached[1])
    from stackmgr.git.tracked import tracked_under

    tracked = tracked_under(root, [LOCAL_FILE])
    if tracked is None:
        return False  # git itself will not read this repository (safe.directory): no pull of it either
    write_cache(cache, [key, bool(tracked)])
    return bool(tracked)
