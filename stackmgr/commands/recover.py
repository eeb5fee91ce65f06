"""`stackmgr recover [ID]`: list the recovery snapshots `reset --force` stored, and restore one.

A recovery snapshot is a commit under `refs/stackmgr/recovery/<12 hex>` in its tree: its tree is the working tree
at the time (untracked files included), its first parent the HEAD of then, its second (when there was one) the
index (docs/FORMATS.md#state-in-each-tree). Restoring needs the tree to be fully preserved now, and keeps the
ref: nothing is ever consumed.
"""

from __future__ import annotations

import os

from stackmgr.commands.reset import RECOVERY_PREFIX
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git import refs
from stackmgr.git.repo import open_repo
from stackmgr.journal.operation import operation
from stackmgr.safety import tree_move
from stackmgr.safety.assessment import refuse_unpreserved
from stackmgr.safety.preserved import assess
from stackmgr.safety.snapshot import take_snapshot
from stackmgr.store.applied import clear_applied
from stackmgr.store.config import Store


class Recovery:
    def __init__(self, tree: str, ref: str, commit: str, stamp: int, message: str) -> None:
        self.tree = tree
        self.ref = ref
        self.commit = commit
        self.id = commit[:12]
        self.time = stamp
        trailers = dict(line.split(": ", 1) for line in message.splitlines() if line.startswith("Stackmgr-"))
        self.files = int(trailers.get("Stackmgr-Files", "0") or 0)
        self.branch = trailers.get("Stackmgr-Branch", "(detached)")
        self.head = trailers.get("Stackmgr-Head", "")

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "tree": self.tree, "time": self.time, "files": self.files, "branch": self.branch,
                "head": self.head, "commit": self.commit}  # fmt: skip


def list_recoveries(store: Store) -> list[Recovery]:
    found: list[Recovery] = []
    for name, config in sorted(store.trees.items()):
        if not os.path.isdir(config.path):
            continue
        repo = open_repo(config.path)
        for ref, commit, stamp, message in refs.refs_under(repo, RECOVERY_PREFIX):
            rec = Recovery(name, ref, commit, stamp, message)
            # linked worktrees share refs: each snapshot belongs to the tree its trailer names
            if f"Stackmgr-Tree: {name}\n" in message + "\n" and rec.commit not in {r.commit for r in found}:
                found.append(rec)
    return sorted(found, key=lambda r: -r.time)


def find(store: Store, wanted: str) -> Recovery:
    wanted = wanted.lower()
    if len(wanted) < 4 or any(c not in "0123456789abcdef" for c in wanted):
        raise UsageProblem(f"'{wanted}' is not a recovery id", "ids are the 12 hex digits `stackmgr recover` lists")
    hits = [r for r in list_recoveries(store) if r.commit.startswith(wanted)]
    if not hits:
        raise UsageProblem(f"no recovery snapshot {wanted}", "list them with `stackmgr recover`")
    if len(hits) > 1:
        raise UsageProblem(f"recovery id {wanted} is ambiguous", "give more of its 12 hex digits")
    return hits[0]


def restore(store: Store, wanted: str) -> Recovery:
    """Put a recovery snapshot back: its working tree, its index, and HEAD (re-attached to its branch when
    that branch still points where it did)."""
    rec = find(store, wanted)
    config = store.tree(rec.tree)
    with operation(store, f"recover {rec.id}"):
        snap = take_snapshot(rec.tree, config.path, store.max_untracked_bytes, find_special=False, freeze=True)
        try:
            if snap.operation:
                raise StackmgrError(f"tree {rec.tree} is in the middle of {snap.operation}", "finish or abort it first")
            refuse_unpreserved(rec.tree, assess(store, snap).blockers(snap),
                               "save them first, so restoring cannot lose them")  # fmt: skip
            repo = snap.repo
            parents = refs.commit_parents(repo, rec.commit)
            index_tree = repo.tree_of(parents[1] if len(parents) > 1 else parents[0])
            tree_move.move_tree(snap, repo.tree_of(rec.commit), index_tree=index_tree, head=parents[0],
                               reason=f"stackmgr recover {rec.id}", op=store.journal)  # fmt: skip
            if rec.branch.startswith("refs/heads/") and repo.ref_commit(rec.branch) == parents[0]:
                refs.attach_head(snap.repo, rec.branch, f"stackmgr recover {rec.id}")
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


def finish_interrupted(store: Store) -> Interrupted | None:
    """`recover` first rolls back an interrupted operation, if one stands (or marks done one that completed)."""
    from stackmgr.journal.rollback import recover_interrupted

    rolled = recover_interrupted(store)
    if rolled is None:
        return None
    return Interrupted(rolled.command, rolled.id, rolled.state == "rolled-back")
