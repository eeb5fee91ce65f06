"""Patches a rebase would rewrite under another series: refused, or (`rebase --own-copy`) given to the rebased series
as copies of its own, so every other series that lists a patch keeps building exactly what it built before."""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.store.config import Store
from stackmgr.store.names import valid_name


def shared_with(store: Store, series: str, files: list[str]) -> dict[str, list[str]]:
    """patch file -> the other series that also list it."""
    from stackmgr.store.series import series_listing

    found: dict[str, list[str]] = {}
    for filename in dict.fromkeys(files):  # an unreadable series is refused: it may list one of them
        others = [other for other in series_listing(store, filename) if other != series]
        if others:
            found[filename] = others
    return found


def refuse_shared(store: Store, series: str, files: list[str]) -> None:
    shared = shared_with(store, series, files)
    if shared:
        first, users = next(iter(shared.items()))
        more = f" (and {', '.join(list(shared)[1:])})" if len(shared) > 1 else ""
        raise StackmgrError(
            f"patch {first}{more} is also in series {', '.join(users)}: rebasing {series} would change what "
            f"{users[0]} builds; nothing changed",
            f"`--own-copy` gives series {series} its own copies (`{copy_name(store, series, first)}`) and leaves "
            f"{users[0]} as it is",
        )


def own_copies(store: Store, series: str, files: list[str]) -> dict[str, str]:
    """shared patch file -> the name of the rebased series' own copy (`NAME--SERIES.patch`, or with -2, -3…)."""
    taken: set[str] = set()
    copies = {}
    for filename in shared_with(store, series, files):
        copies[filename] = copy_name(store, series, filename, taken)
        taken.add(copies[filename])
    return copies


def copy_name(store: Store, series: str, filename: str, taken: set[str] | None = None) -> str:
    stem = filename[: -len(".patch")] if filename.endswith(".patch") else filename
    for n in range(1, 1000):
        name = f"{stem[:150]}--{series[:40]}" + (f"-{n}" if n > 1 else "")
        if not valid_name(name):
            name = f"{series[:40]}-copy" + (f"-{n}" if n > 1 else "")
        candidate = name + ".patch"
        if candidate not in (taken or set()) and not os.path.lexists(os.path.join(store.patches_dir, candidate)):
            return candidate
    raise StackmgrError(f"no free name for series {series}'s copy of {filename}", "rename some patches first")
