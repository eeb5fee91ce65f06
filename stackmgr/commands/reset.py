"""`stackmgr reset`: the guarded reset (docs/ARCHITECTURE.md#invariants), and the recovery snapshots of `--force`.

The target is `--to REV`, else the base of the applied series, else HEAD. Every tree is checked before any is
touched; anything unpreserved (changes, local commits the move would orphan, unmerged or staged-only state)
makes it refuse. `--force` first stores the working tree (untracked files included) and the index as a commit
under `refs/stackmgr/recovery/`, then resets; `stackmgr recover ID` brings it back.
"""

from __future__ import annotations

import os

from stackmgr.errors import NotPreserved, StackmgrError
from stackmgr.git import refs
from stackmgr.journal.operation import operation
from stackmgr.safety import tree_move
from stackmgr.safety.assessment import counted, file_lines, staged_hint
from stackmgr.safety.preserved import assess
from stackmgr.safety.recovery import drop_recovery, store_recovery
from stackmgr.safety.snapshot import Snapshot, take_snapshot
from stackmgr.store.applied import Applied, applied_result, clear_applied, load_applied, record_applied
from stackmgr.store.config import Store, TreeConfig
from stackmgr.types import CommitId


class ResetOutcome:
    def __init__(self, tree: str, target: str, moved: bool, recovery: str | None, files: int) -> None:
        self.tree = tree
        self.target = target
        self.moved = moved
        self.recovery = recovery  # short id of the recovery snapshot, when --force stored one
        self.files = files
        self.branch: str | None = None  # the branch HEAD is back on (the one before the first `apply`)
        self.branch_moved: tuple[str, str] | None = None  # (that branch, its commit): it moved, HEAD stays detached
        self.branch_elsewhere: str | None = None  # that branch, checked out in another worktree: HEAD stays detached


class _Planned:
    def __init__(self, config: TreeConfig, snap: Snapshot, target: CommitId, blockers: list[tuple[bytes, str]]):
        self.config = config
        self.snap = snap
        self.target = target
        self.blockers = blockers


def reset_trees(store: Store, names: tuple[str, ...], *, to: str | None, force: bool) -> list[ResetOutcome]:
    configs = [store.tree(n) for n in names] if names else [store.tree(n) for n in sorted(store.trees)]
    with operation(store, " ".join(("reset", *names, *(["--to", to] if to else []), *(["--force"] if force else [])))):
        planned: list[_Planned] = []
        try:
            for config in configs:
                if not names and not _exists(config):
                    continue
                planned.append(_plan(store, config, to))
            refused = [p for p in planned if p.blockers]
            if refused and not force:
                hint = staged_hint([b for p in refused for b in p.blockers], "save them (`stackmgr save NAME`), or "
                                   "`--force` to set them aside in a recovery snapshot")  # fmt: skip
                raise NotPreserved(_refusal(refused), hint, _refused_files(refused))
            # A later tree refusing (a file changed since the check) makes the journal put earlier ones back.
            done = [_reset_one(store, p, force) for p in planned]
            return done
        finally:
            for p in planned:
                p.snap.release()


def _exists(config: TreeConfig) -> bool:
    return os.path.isdir(config.path)


def _plan(store: Store, config: TreeConfig, to: str | None) -> _Planned:
    snap = take_snapshot(config.name, config.path, store.max_untracked_bytes, find_special=False, freeze=True,
                         results=config.results, held=applied_result(store, config.name))
    try:
        return _Planned(config, snap, *_target_and_blockers(store, config, snap, to))
    except BaseException:
        snap.release()  # its frozen index copy: the caller releases only the snapshots it was handed
        raise


def _target_and_blockers(
    store: Store, config: TreeConfig, snap: Snapshot, to: str | None
) -> tuple[CommitId, list[tuple[bytes, str]]]:
    if snap.operation:
        raise StackmgrError(f"tree {config.name} is in the middle of {snap.operation}", "finish or abort it first")
    applied = load_applied(store).get(config.name)
    if to is not None:
        target = snap.repo.resolve_commit(to)
    elif applied is not None and snap.repo.has_commit(applied.base) and not _switched_to_a_branch(snap, applied.base):
        target = CommitId(applied.base)
    else:
        target = snap.head
    blockers = assess(store, snap).blockers(snap)
    if target != snap.head:
        orphans = refs.unreachable_after_move(snap.repo, target)
        if orphans and not snap.local_commits:
            blockers.append((b"HEAD", f"{len(orphans)} commit(s) no ref would reach after the move, "
                                      f"{orphans[0][:12]}: keep with `git branch NAME`"))  # fmt: skip
    return target, blockers


def _switched_to_a_branch(snap: Snapshot, base: str) -> bool:
    """HEAD left the applied base for a branch since (`git switch main`): the reset stays on that branch, at
    HEAD, as `git reset --hard` does, never detaching the user from it."""
    return snap.head != base and refs.symbolic_head(snap.repo) is not None


def _refusal(refused: list[_Planned]) -> str:
    """`reset refused, nothing changed: tree vllm has changes no patch preserves (2 paths)`; its files follow, one
    per line (`_refused_files`), as every refusal lists them."""
    parts = [f"tree {p.config.name} has changes no patch preserves ({counted(p.blockers)})" for p in refused]
    return "reset refused, nothing changed: " + "; ".join(parts)


def _refused_files(refused: list[_Planned]) -> list[str]:
    """Each refused tree's files, one per line; prefixed by the tree when several trees refused."""
    if len(refused) == 1:
        return file_lines(refused[0].blockers)
    return file_lines([(p.config.name.encode() + b": " + path, why) for p in refused for path, why in p.blockers])


def _reset_one(store: Store, p: _Planned, force: bool) -> ResetOutcome:
    snap = p.snap
    target_tree = snap.repo.tree_of(p.target)
    worth_keeping = p.blockers or snap.changes or snap.local_commits or p.target != snap.head
    applied = load_applied(store).get(p.config.name)
    recovery = store_recovery(snap, applied) if force and worth_keeping else None
    moved = snap.tree_id() != target_tree or p.target != snap.head
    try:
        tree_move.move_tree(snap, target_tree, index_tree=target_tree, head=p.target if p.target != snap.head else None,
                           reason=f"stackmgr reset to {p.target[:12]}", op=store.journal)  # fmt: skip
    except BaseException:
        if recovery is not None:  # the tree was not changed (or was put back): the snapshot is not needed
            drop_recovery(snap, recovery)
        raise
    outcome = ResetOutcome(p.config.name, p.target, moved, recovery, len(snap.changes))
    if applied is not None and applied.branch:
        _back_to_branch(p, applied.branch, outcome)
    if applied is not None and applied.series and p.target == applied.base:  # it stays current, none of it
        # applied: push goes on (a measured state's residue is gone with the rest; one of no series is forgotten)
        pending = [*applied.names, *applied.pending]
        kept = Applied(applied.series, applied.base, [], target_tree, pending=pending, guards=applied.guards)
        kept.branch = "" if outcome.branch else None  # back on it: nothing more to remember; else still
        record_applied(store, p.config.name, kept)
    else:
        clear_applied(store, p.config.name)
    return outcome


def _back_to_branch(p: _Planned, branch: str, outcome: ResetOutcome) -> None:
    """HEAD back on the branch it was on before the first `apply` detached it, as `git bisect reset` does, when
    that branch still points at the commit the reset left HEAD on; else it stays detached (the branch is never
    moved) and the outcome says where the branch is now. The journal's record of the move has HEAD detached
    before it: an undo detaches it again."""
    repo = p.snap.repo
    if refs.symbolic_head(repo) is not None:
        return
    at = repo.ref_commit(branch)
    short = branch.removeprefix("refs/heads/")
    if at == p.target and refs.branch_checked_out_elsewhere(repo, branch):
        outcome.branch_elsewhere = short
    elif at == p.target:
        refs.attach_head(repo, branch, f"stackmgr reset: back to {short}")
        outcome.branch = short
    elif at is not None:
        outcome.branch_moved = (short, at)
