"""`stackmgr recover [ID]`: list the recovery snapshots `reset --force` stored (safety/recovery.py), and restore
one. Restoring needs the tree to be fully preserved now, and keeps the ref: nothing is ever consumed.
"""

from __future__ import annotations

from stackmgr.errors import StackmgrError
from stackmgr.git import refs
from stackmgr.journal.operation import operation
from stackmgr.safety import tree_move
from stackmgr.safety.assessment import refuse_unpreserved
from stackmgr.safety.preserved import assess
from stackmgr.safety.recovery import Recovery, find, give_back_raw, list_recoveries
from stackmgr.safety.snapshot import take_snapshot
from stackmgr.store.applied import applied_result, clear_applied, record_applied
from stackmgr.store.config import Store

__all__ = ["Recovery", "finish_interrupted", "list_recoveries", "restore"]


def restore(store: Store, wanted: str) -> Recovery:
    """Put a recovery snapshot back: its working tree, its index, and HEAD (re-attached to its branch when
    that branch still points where it did)."""
    rec = find(store, wanted)
    config = store.tree(rec.tree)
    with operation(store, f"recover {rec.id}"):
        snap = take_snapshot(rec.tree, config.path, store.max_untracked_bytes, find_special=False, freeze=True,
                             results=config.results, held=applied_result(store, rec.tree))
        try:
            if snap.operation:
                raise StackmgrError(f"tree {rec.tree} is in the middle of {snap.operation}", "finish or abort it first")
            refuse_unpreserved(rec.tree, assess(store, snap).blockers(snap),
                               "save them first, so restoring cannot lose them")  # fmt: skip
            repo = snap.repo
            parents = refs.commit_parents(repo, rec.commit)
            index_tree = repo.tree_of(rec.index_parent(parents))
            target = repo.tree_of(rec.commit)
            tree_move.move_tree(snap, target, index_tree=index_tree, head=parents[0],
                               reason=f"stackmgr recover {rec.id}", op=store.journal)  # fmt: skip
            if rec.raw in parents:  # the bytes that were on disk, where git's checkout converted them
                give_back_raw(repo, rec.raw, target)
            if rec.branch.startswith("refs/heads/") and repo.ref_commit(rec.branch) == parents[0]:
                refs.attach_head(snap.repo, rec.branch, f"stackmgr recover {rec.id}")
            if rec.applied is not None and rec.applied.base == parents[0]:  # the work goes back onto its series
                record_applied(store, rec.tree, rec.applied)
            else:
                clear_applied(store, rec.tree)  # the tree holds the snapshot now, not the series applied before
        finally:
            snap.release()
    return rec


class Interrupted:
    """An operation that was interrupted, found (and dealt with) by `recover`."""

    def __init__(self, command: str, op_id: str, rolled_back: bool) -> None:
        self.command = command
        self.id = op_id
        self.rolled_back = rolled_back  # False: it had completed, and is marked done


def finish_interrupted(store: Store) -> tuple[Interrupted | None, list[str]]:
    """`recover` first rolls back an interrupted operation, if one stands (or marks done one that completed),
    then removes the temp files killed commands left anywhere in the store (store/temps.py) and in its trees'
    `.git/stackmgr/`, settles the logs of killed runs and the rebases killed mid-way. Returns the operation and
    what to tell the user of the rest."""
    from stackmgr.commands.bisect_state import settle_killed_bisects
    from stackmgr.commands.rebase_state import settle_killed_rebases
    from stackmgr.commands.run import settle_killed_logs
    from stackmgr.git.leftovers import sweep_tree
    from stackmgr.journal.rollback import recover_interrupted
    from stackmgr.store.fs import locked
    from stackmgr.store.temps import sweep

    rolled = recover_interrupted(store)
    with locked(store.lock_path, "the store"):
        sweep(store, deep=True)
    for tree in store.trees.values():
        sweep_tree(tree.path)
    notes = [*settle_killed_logs(store), *settle_killed_rebases(store), *settle_killed_bisects(store)]
    if rolled is None:
        return None, notes
    return Interrupted(rolled.command, rolled.id, rolled.state == "rolled-back"), notes
