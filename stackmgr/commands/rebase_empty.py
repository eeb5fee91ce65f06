"""A series with no patch of the tree left keeps its base (docs/FORMATS.md#series-file, the base line): a rebase
that finds every patch upstream records `onto` there, a rebase of a series with a base line moves the line with
its patches, and a rebase of an empty series only moves its base."""

from __future__ import annotations

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git.repo import open_repo
from stackmgr.journal.operation import operation
from stackmgr.store.config import Store
from stackmgr.store.plan import TreePlan
from stackmgr.store.series import SeriesFile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.commands.rebase_state import State


def keep_base(series: SeriesFile, state: State) -> None:
    """After the rewrite: the base line says `onto` when every patch was upstream (the series is left empty), or
    when the series already had a line for the tree (it moves with the patches, never disagreeing with them)."""
    every = all(step["outcome"] == "already upstream" for step in state["steps"])
    if every or state["tree"] in series.base_lines():
        series.set_base(state["tree"], state["onto"])


def move_base(store: Store, series: str, plan: TreePlan, onto: str) -> State:
    """Rebase a series with no patch of the tree: only its base line moves (no patch to carry). The state a
    finished rebase reports."""
    repo = open_repo(store.tree(plan.tree).path)
    try:
        new_base = repo.resolve_commit(onto)
    except StackmgrError:
        raise UsageProblem(f"{onto} is not a commit of tree {plan.tree}", "fetch it, or name another") from None
    with operation(store, f"rebase {series} --onto {new_base[:12]}"):
        sf = SeriesFile.load(store, series)
        sf.set_base(plan.tree, new_base)
        sf.write()
    return {"series": series, "tree": plan.tree, "onto": new_base, "worktree": None, "steps": [], "copies": {}}
