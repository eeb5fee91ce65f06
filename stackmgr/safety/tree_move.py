"""The destructive step, in one place: move a checked tree to a target state (docs/ARCHITECTURE.md#invariants, 6).

Only from a snapshot that was just checked, only by a two-way `read-tree -m -u` from that snapshot's own index
(which refuses per file if anything moved since the check), never `reset --hard` + `clean`. Ignored and
unprotected files are in neither tree, so they are never touched. What it replaced is kept, so a multi-tree
operation can put an earlier tree back when a later one fails.
"""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.git import ignore, refs
from stackmgr.git.real_index import RealIndexLock, new_marker, write_real_index
from stackmgr.git.repo import Repo, read_changes
from stackmgr.git.tempindex import TempIndex, start_tree_diff
from stackmgr.safety.snapshot import Snapshot
from stackmgr.store.fs import locked, read_or_none
from stackmgr.types import Change, TreeId, show_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from stackmgr.journal.operation import Operation

# Tests set this to change a file between the check and the destructive step (docs/ARCHITECTURE.md#invariants, 6).
before_switch: Callable[[Snapshot], None] | None = None


class Moved:
    """How to put a moved tree back: where it went, and what its index and HEAD were."""

    def __init__(self, snap: Snapshot, target: TreeId, real_index: bytes | None, branch: str | None,
                 journal: _Journal | None = None) -> None:  # fmt: skip
        self.snap = snap
        self.target = target
        self.real_index = real_index
        self.branch = branch
        self.journal = journal  # the move's journal entry: moving back is recorded there


def move_tree(
    snap: Snapshot, target: TreeId, *, index_tree: str, head: str | None, reason: str, op: Operation | None,
    index_bytes: bytes | None = None,
) -> Moved:  # fmt: skip
    """Working tree: from the snapshot's tree to `target`. Real index: `index_tree` (stat data kept where files
    did not change), or exactly `index_bytes` when given (the user's index as it was before a command moved the
    tree away and back: staged and intent-to-add entries as they were). HEAD: detached at `head` when given.
    Raises WorkingTreeMoved with nothing changed when a file
    moved since the check, and StackmgrError, before anything is recorded, when the tree's sparse checkout hides a
    path the move would write. `op`, the operation of the command (None outside one, as in a crash rollback),
    records the move before the first file changes."""
    repo = snap.repo
    with locked(os.path.join(repo.stackmgr_dir, "lock"), f"tree {snap.tree}"):
        # What the switch writes and what the index then differs in from `index_tree`: two diffs, asked together.
        indexing = start_tree_diff(repo, target, index_tree) if target != index_tree else None
        try:
            moving = read_changes(start_tree_diff(repo, snap.tree_id(), target))
            to_index = read_changes(indexing) if indexing is not None else []
        finally:
            if indexing is not None:
                indexing.communicate()  # reaped whatever happened (nothing more when read)
        _refuse_hidden(snap, moving)  # before the lock and the journal: a refusal changes nothing
        if op is not None:  # anchor the state a rollback returns to, before holding the user's index.lock
            op.anchor_before(snap)
        marker = new_marker()
        step = _Journal(op, snap, target, head, marker)  # the move and its lock recorded before the lock exists
        lock = RealIndexLock(repo, marker)  # taken before the first file changes, held until the new index is in place
        work: TempIndex | None = None
        try:
            real_index = read_or_none(os.path.join(repo.git_dir, "index"))
            branch = refs.symbolic_head(repo)
            work = snap.index.freeze("switch")
            if before_switch is not None:
                before_switch(snap)
            # Ask git which of the files the target adds over the index tree are ignored (a force-added file stays
            # tracked) while the working tree switches.
            added = [c.path for c in to_index if c.new_mode == "000000"]
            ignored = ignore.start_ignored(repo, added)
            try:
                step.moving(snap, branch, real_index)  # on disk before git writes the first file
                work.switch(snap.tree_id(), target, moving)
            finally:
                keep = set(ignore.started_answer(ignored)) if ignored is not None else set()
            if ignored is None and added:
                keep = set(ignore.ignored_paths(repo, added))
            try:
                step("switched", state="switched")
                work.install_as(TempIndex(repo))  # the private index describes the new tree, with fresh stat data
                if index_bytes is None:
                    work.retarget(target, index_tree, keep=keep, changes=to_index)
                lock.commit(work if index_bytes is None else index_bytes)
                step("index", lock_released=True)
                if head is not None and (branch is not None or head != snap.head):
                    refs.detach_head(repo, head, reason, expect=snap.head, was=branch)
                step("moved", state="moved")
            except BaseException as exc:
                step.state("moving", durable=True)  # putting back is a switch too: a kill in it, one under way
                _put_back(snap, target, real_index, branch, reason)
                step.state("put-back")
                if isinstance(exc, OSError):
                    why = f"tree {snap.tree}: cannot write its index ({exc.strerror}); put back as it was"
                    raise StackmgrError(why, "free some space or fix permissions, then retry") from None
                raise
        finally:
            lock.release()
            if work is not None:
                work.discard()
    return Moved(snap, target, real_index, branch, step)


def _refuse_hidden(snap: Snapshot, moving: list[Change]) -> None:
    """git records a path that the tree's sparse checkout hides without writing it: the move would report success
    with the change only in the index. Refuse, naming the paths and how to widen the checkout."""
    hidden = snap.index.hidden_paths(moving)
    if not hidden:
        return
    from stackmgr.errors import listed
    from stackmgr.output import plural

    dirs = sorted({show_path(os.path.dirname(p) or p) for p in hidden})
    raise StackmgrError(
        f"tree {snap.tree}: its sparse checkout hides {plural(len(hidden), 'path')} the move writes, which git "
        "would not write; nothing changed",
        f"widen it with `git sparse-checkout add {' '.join(dirs[:3])}` and retry",
        listed([show_path(p) for p in hidden]),
    )


class _Journal:
    """The move's entry in the operation journal (when a command records one): its steps and state. It is recorded,
    durably, before the index.lock is taken (`planned`, naming the lock's marker) and again before git writes the
    first file (`moving`: a rollback then rebuilds every path the move touches)."""

    def __init__(self, op: Operation | None, snap: Snapshot, target: str, head: str | None, marker: str) -> None:
        self.op = op
        self.move = self.op.tree_planned(snap, target, head, marker) if self.op else None

    def moving(self, snap: Snapshot, branch: str | None, real_index: bytes | None) -> None:
        if self.op is not None and self.move is not None:
            self.op.tree_moving(self.move, snap, branch, real_index)

    def __call__(self, label: str, state: str | None = None, lock_released: bool = False) -> None:
        if self.op is not None and self.move is not None:
            self.op.tree_progress(self.move, label, state, lock_released)

    def state(self, state: str, durable: bool = False) -> None:
        if self.move is not None:
            self.move.state = state
            if durable and self.op is not None:
                try:
                    self.op.save(durable=True)
                except OSError:  # a full disk must not stop the putting back this state is written for
                    pass


def _put_back(snap: Snapshot, target: TreeId, real_index: bytes | None, branch: str | None, reason: str) -> None:
    """After a failure past the switch: the working tree, index and HEAD as they were before it."""
    repo = snap.repo
    TempIndex(repo).switch(target, snap.tree_id())  # the private index describes what the switch just wrote
    real = os.path.join(repo.git_dir, "index")
    if real_index is not None and read_or_none(real) != real_index:
        restore_index(repo, real_index)
    if branch is not None and refs.symbolic_head(repo) != branch:
        refs.attach_head(repo, branch, reason + ": put back")


def real_index(repo: Repo) -> bytes | None:
    """The bytes of the tree's real index now (None: it has none)."""
    return read_or_none(os.path.join(repo.git_dir, "index"))


def restore_index(repo: Repo, data: bytes) -> None:
    """The real index replaced by `data` (git's lock-file convention)."""
    back = TempIndex(repo, f"back.{os.getpid()}.index")
    with open(back.path, "wb") as f:
        f.write(data)
    try:
        write_real_index(repo, back)
    finally:
        back.discard()


def move_back(moved: Moved, reason: str) -> None:
    """Undo `move_tree`: the working tree back to the checked snapshot, the index bytes and HEAD as they were."""
    snap, repo = moved.snap, moved.snap.repo
    with locked(os.path.join(repo.stackmgr_dir, "lock"), f"tree {snap.tree}"):
        if moved.journal is not None:  # a switch again: a kill in it leaves a move under way
            moved.journal.state("moving", durable=True)
        private = TempIndex(repo)
        private.switch(moved.target, snap.tree_id())
        snap.index.install_as(private)
        real = os.path.join(repo.git_dir, "index")
        if moved.real_index is not None:
            restore_index(repo, moved.real_index)
        elif os.path.exists(real):
            os.unlink(real)
        if moved.branch is not None:
            refs.attach_head(repo, moved.branch, reason)
        else:
            refs.detach_head(repo, snap.head, reason)
        if moved.journal is not None:
            moved.journal.state("put-back")
