"""What is at a path that should have been a store, said honestly (docs/FORMATS.md#store-layout): a store that
does not exist, a directory that is not one, a source checkout given where a store was meant, no store found
from the current directory. `stackmgr init` is suggested only where nothing would be turned into a store by
mistake: a path that does not exist yet, or an empty directory; never a source tree."""

from __future__ import annotations

import os

from stackmgr.errors import UsageProblem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def find_store_root(explicit: str | None, cwd: str | None, is_store: Callable[[str], bool]) -> str:
    """--store, then STACKMGR_STORE, then the first directory upward holding a store config (`is_store`)."""
    given = explicit or os.environ.get("STACKMGR_STORE")
    if given:
        root = os.path.abspath(os.path.expanduser(given))
        if not is_store(root):
            raise not_a_store(root, is_store, by_env=not explicit)
        return root
    found = walk_up(cwd or os.getcwd(), is_store)
    if found is None:
        raise no_store_found(cwd or os.getcwd())
    return found


def walk_up(start: str, is_store: Callable[[str], bool]) -> str | None:
    """The first directory from `start` upward holding a store config; None when none does."""
    here = os.path.abspath(start)
    while True:
        if is_store(here):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _enclosing(start: str, is_store: Callable[[str], bool]) -> tuple[str, str] | None:
    """("store", DIR) when `start` is inside a store, ("tree", TOP) when inside a git checkout that is none;
    whichever comes first walking up. None when neither."""
    here = start
    while True:
        if is_store(here):
            return "store", here
        if os.path.lexists(os.path.join(here, ".git")):
            return "tree", here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def not_a_store(root: str, is_store: Callable[[str], bool], by_env: bool = False) -> UsageProblem:
    """The error for `--store ROOT` (or STACKMGR_STORE=ROOT, `by_env`) where ROOT holds no store config."""
    via = " (STACKMGR_STORE)" if by_env else ""
    give = "set STACKMGR_STORE to" if by_env else "give --store"
    if not os.path.lexists(root):
        near = _store_nearby(root, is_store)
        if near is not None:  # a typo of a store beside it: never offer to make a second store there
            return UsageProblem(f"store {root}{via} does not exist, but {near} beside it is a store",
                                f"did you mean it? {give} {near}; `stackmgr init {root}` makes a new store")
        return UsageProblem(f"store {root}{via} does not exist",
                            f"`stackmgr init {root}` creates a new store there, or {give} an existing store's "
                            "directory")  # fmt: skip
    if not os.path.isdir(root):
        return UsageProblem(f"store {root}{via} is not a directory", f"{give} the store's directory")
    what = f"{root}{via} is not a stackmgr store (no stackmgr.toml)"
    around = _enclosing(os.path.dirname(root), is_store)
    if os.path.lexists(os.path.join(root, ".git")):
        around = "tree", root
    if around is not None and around[0] == "store":
        return UsageProblem(f"{what}: it is inside the store {around[1]}", f"{give} {around[1]}")
    if around is not None:
        return UsageProblem(f"{what}: {around[1]} looks like a source tree (a git checkout)",
                            f"trees are registered in a store with `stackmgr tree add NAME {around[1]}`; {give} "
                            "the store's directory")  # fmt: skip
    try:
        empty = not os.listdir(root)
    except OSError:
        empty = False
    if empty:
        return UsageProblem(what, f"`stackmgr init {root}` makes this empty directory a store")
    return UsageProblem(what, f"{give} the directory that holds the store's stackmgr.toml")


def _store_nearby(root: str, is_store: Callable[[str], bool]) -> str | None:
    """A store in ROOT's parent directory whose name is close to ROOT's (a typo), else None."""
    import difflib

    parent, name = os.path.split(os.path.normpath(root))
    try:
        with os.scandir(parent or ".") as entries:
            names = [e.name for _, e in zip(range(5000), entries, strict=False) if e.is_dir()]
    except OSError:
        return None
    for close in difflib.get_close_matches(name, names, n=3, cutoff=0.75):
        if is_store(os.path.join(parent, close)):
            return os.path.join(parent, close)
    return None


def no_store_found(cwd: str) -> UsageProblem:
    """The error when no store is found from `cwd` upward (and neither --store nor STACKMGR_STORE was given)."""
    what = "no stackmgr store here or in any parent directory"
    found = _enclosing(os.path.abspath(cwd), lambda _directory: False)
    if found is not None:
        return UsageProblem(f"{what}: {found[1]} is a source tree (a git checkout), not a store",
                            f"pass --store STORE or set STACKMGR_STORE, and register the tree there with "
                            f"`stackmgr tree add NAME {found[1]}` (a new store goes in a directory of its own: "
                            "`stackmgr init DIR` outside the tree)")  # fmt: skip
    return UsageProblem(what, "pass --store DIR or set STACKMGR_STORE, or run `stackmgr init DIR` to create one")
