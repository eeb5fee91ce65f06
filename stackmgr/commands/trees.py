"""`trees` (the registered trees, one row each), `tree add NAME PATH` (register one), `tree set NAME PATH` (where it
lives on this machine) and `tree rm NAME` (forget it)."""

from __future__ import annotations

import os
from typing import Any

from stackmgr.commands.status import status_reports
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git.repo import discover_toplevel
from stackmgr.journal.operation import operation
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none
from stackmgr.store.names import check_name
from stackmgr.store.tree_paths import add_tree, remove_tree, set_tree_path


def tree_rows(store: Store) -> list[dict[str, Any]]:
    """Per registered tree: name, path, state, error, HEAD and the counts (None where it could not be looked at)."""
    rows: list[dict[str, Any]] = []
    for r in status_reports(store, (), full=False):
        snap = r.snapshot
        rows.append({
            "name": r.name, "path": r.path, "state": r.state, "error": r.error,
            "head": snap.head if snap else None, "changes": len(snap.changes) if snap else None,
            "unpreserved": len(r.blockers) if snap else None,
            "unprotected": len(snap.unprotected) if snap else None,
        })  # fmt: skip
    return rows


def register_tree(store: Store, name: str, path: str) -> str:
    """Register the git working tree at PATH (any directory in it) as NAME, its path on this machine; its top
    level, as registered."""
    check_name("tree", name)
    top = _top(path)
    _refuse_taken(store, name, top)
    with operation(store, f"tree add {name}"):
        add_tree(store, name, top)
    return top


def set_tree(store: Store, name: str, path: str | None) -> str:
    """`tree set NAME PATH`: where tree NAME lives on this machine; its top level. Without PATH: the shared
    config's default path, accepted for this machine (it is never used until someone here says so)."""
    if path is None:
        if not store.knows(name):
            store.tree(name)
        if name not in store.suggested:
            raise UsageProblem(f"the shared config suggests no path for tree {name}",
                               f"say where your checkout is: `stackmgr tree set {name} PATH`")  # fmt: skip
        path = os.path.normpath(os.path.join(store.root, os.path.expanduser(store.suggested[name])))
    top = _top(path)
    _refuse_taken(store, name, top)
    with operation(store, f"tree set {name}"):
        set_tree_path(store, name, top)
    return top


def forget_tree(store: Store, name: str) -> str:
    """`tree rm NAME`: refused while patches of the store belong to the tree (they would name no tree). Forgets its
    name in the shared config and its path on this machine; says what it did, in one line. Another machine that
    placed the tree keeps it (registered, checked, guarded) when a pull brings this: only a `tree rm` there forgets
    it there."""
    if not store.knows(name):
        store.tree(name)
    holding = []
    for filename in sorted(os.listdir(store.patches_dir)) if os.path.isdir(store.patches_dir) else []:
        if filename.endswith(".patch"):
            try:
                head = (read_or_none(os.path.join(store.patches_dir, filename)) or b"")[: 64 * 1024]
            except StackmgrError:
                continue  # a link out of patches/ or a special file: no patch of any tree
            if f"\nStackmgr-Tree: {name}\n".encode() in head:
                holding.append(filename[: -len(".patch")])
    if holding:
        from stackmgr.errors import listed
        from stackmgr.output import plural

        raise UsageProblem(f"{plural(len(holding), 'patch', 'patches')} of tree {name} would name a tree the store "
                           "no longer knows",
                           f"keep the tree (`stackmgr tree set {name} PATH` moves it), or drop them first",
                           listed(holding))  # fmt: skip
    placed = store.tree(name).path if name in store.local_paths else None
    with operation(store, f"tree rm {name}"):
        remove_tree(store, name)
    if placed is not None:
        return f"tree {name} is no longer registered (its checkout {placed} is untouched)"
    return (f"tree {name} is no longer in the shared config; it had no path on this machine. A machine that placed "
            f"it keeps it registered and guarded until `stackmgr tree rm {name}` there")


def _refuse_taken(store: Store, name: str, top: str) -> None:
    """One checkout is one tree: two names for it would list its changes twice and move it twice."""
    real = os.path.realpath(top)
    for other, config in sorted(store.trees.items()):
        if other != name and os.path.realpath(config.path) == real:
            raise UsageProblem(f"{top} is already tree {other}",
                               f"use that name, or `stackmgr tree set {other} PATH` to point it elsewhere first")


def _top(path: str) -> str:
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise UsageProblem(f"{path} is not a directory", "give the path of a git working tree")
    return discover_toplevel(path)
