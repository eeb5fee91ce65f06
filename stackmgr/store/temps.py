"""Temp files a killed command left in the store.

Every store write goes through a temp file beside its target (store/fs.py: `.NAME.<pid>.<n>.tmp`; caches:
`NAME.<pid>.tmp`), renamed over it or removed; a process killed in between leaves it behind. Under the store
lock, one whose pid is no longer a running process is litter: `sweep` removes it. Each mutating command sweeps
the directories written most (`QUICK`: a few `listdir`s); after an interrupted operation, and in `recover`, the
whole store is swept; `lint` reports what is left (`stale`).
"""

from __future__ import annotations

import os

from stackmgr.store.fs import process_alive

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.store.config import Store

OWNED = ("patches", "series", "links", "artifacts")  # and the state directory, wherever it is
QUICK = ("", "patches", "series")
STATE_QUICK = ("", "ops", "cache")


def _pid_of(name: str, state: bool) -> int | None:
    """The writer's pid in a temp file's name, or None when the name is not one of ours. `state`: a folder of
    `.stackmgr/`, where caches are written too (elsewhere a name like `NAME.<pid>.tmp` may be the user's)."""
    if not name.endswith(".tmp"):
        return None
    parts = name[:-4].split(".")
    if name.startswith(".") and len(parts) >= 4 and parts[-1].isdigit() and parts[-2].isdigit():
        return int(parts[-2])  # .NAME.<pid>.<n>.tmp
    if state and len(parts) >= 2 and parts[-1].isdigit() and parts[0]:
        return int(parts[-1])  # NAME.<pid>.tmp (caches)
    return None


def _folders(store: Store, deep: bool) -> list[str]:
    """The folders to look in: `QUICK`, or (deep) the store's top and every folder below the ones stackmgr owns
    (`patches/`, `series/`, `links/`, `artifacts/`, `.stackmgr/`), never the user's own folders in the store."""
    if not deep:
        return [os.path.join(store.root, d) for d in QUICK] + [os.path.join(store.state_dir, d) for d in STATE_QUICK]
    found = [store.root]
    for owned in [*(os.path.join(store.root, d) for d in OWNED), store.state_dir]:
        for dirpath, dirs, _files in os.walk(owned):
            dirs[:] = [d for d in dirs if d != ".git"]
            found.append(dirpath)
    return found


def stale(store: Store, deep: bool = True) -> list[str]:
    """Temp files (paths) whose writer is gone."""
    litter = []
    state_dir = store.state_dir
    for folder in _folders(store, deep):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        state = folder == state_dir or folder.startswith(state_dir + os.sep)
        for name in names:
            pid = _pid_of(name, state)
            if pid is not None and not process_alive(pid):
                path = os.path.join(folder, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    litter.append(path)
    return sorted(litter)


def sweep(store: Store, deep: bool = False) -> list[str]:
    """Remove the temp files killed writers left (the caller holds the store lock); the paths removed."""
    removed = []
    for path in stale(store, deep):
        try:
            os.unlink(path)
        except OSError:
            continue
        removed.append(path)
    return removed
