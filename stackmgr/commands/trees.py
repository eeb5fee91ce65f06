"""`trees` (the registered trees, one row each) and `tree add NAME PATH` (register one)."""

from __future__ import annotations

import os
from typing import Any

from stackmgr.commands.status import status_reports
from stackmgr.errors import UsageProblem
from stackmgr.git.repo import discover_toplevel
from stackmgr.journal.operation import operation
from stackmgr.store.config import Store, add_tree
from stackmgr.store.names import check_name


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
    """Register the git working tree at PATH (any directory in it) as NAME; its top level, as registered."""
    check_name("tree", name)
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise UsageProblem(f"{path} is not a directory", "give the path of a git working tree")
    top = discover_toplevel(path)
    with operation(store, f"tree add {name}"):
        add_tree(store, name, top)
    return top
