"""The operation journal: every mutating command leaves the old state or the new one, and can be undone.

A command that changes the store or a tree runs inside `operation(store, command)`, which holds the store lock.
Nothing is recorded until the first change; from then on:

- `.stackmgr/ops/<ms time>-<12 hex>/op` is the record (a small tab-separated text file, rewritten atomically):
  the command, its state, every store file it replaced (the old bytes kept under `files/`, hard-linked: the live
  path gets a new inode by rename, so the backup is the only name of the old one) and every tree it moved (the
  checked snapshot, the target, HEAD and branch before and after, the real index before under `index/`);
- `.stackmgr/ops/CURRENT` names the operation in progress. It is written before the first change and removed
  once the record says `done`, so a command that finds it while holding the store lock knows its writer died;
- SIGINT, SIGTERM and SIGHUP are blocked from the first change to the end: a Ctrl-C there lets the operation
  finish and is reported afterwards (exit 130). SIGKILL cannot be blocked: `rollback.roll_back` handles that.

`STACKMGR_CRASH_AT=<command>:<n>` kills the process (SIGKILL) at its n-th journal step (`<command>:<n>:INT`
sends SIGINT to its process group instead, as a terminal's Ctrl-C does), and
`STACKMGR_TRACE_STEPS=<file>` appends each step's name to a file: the crash tests walk every step with them.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # `signal` imports enum (start-up cost)
import os
import time

from stackmgr.errors import DiskError, StackmgrError
from stackmgr.journal.record import (
    ANCHOR_PREFIX,
    CURRENT,
    FileChange,
    Record,
    TreeMove,
    interrupted_name,
    newest_done,
    op_names,
    ops_dir,
    read_record,
    recorded_name,
    remove_current,
    stat_key,
    store_file,
)  # fmt: skip
from stackmgr.journal.shared_index import keep_shared_indexes
from stackmgr.store.fs import atomic_write, locked, read_or_none
from stackmgr.store.temps import sweep

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.safety.snapshot import Snapshot
    from stackmgr.store.config import Store

_DEFERRED = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)


class Interrupted(StackmgrError):
    """Ctrl-C arrived while the operation was changing things; it was finished first (exit 130)."""

    exit_code = 130


def pending_message(store: Store) -> str | None:
    """For `check` and `status`: a line about an operation that was interrupted, if any. One that is running now
    (its command holds the store lock) is not reported: each state it passes through is preserved, and a
    snapshot waits for the tree lock, so the tree is read between its steps."""
    name = interrupted_name(store)
    if name is None:
        return None
    import fcntl

    try:
        fd = os.open(store.lock_path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        fd = -1
    try:
        if fd >= 0:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            name = interrupted_name(store)  # again, under the lock: the operation may have just finished
            if name is None:
                return None
    except BlockingIOError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)
    try:
        command = read_record(store, name).command
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        command = "an operation"
    return f"`{command}` (op {name.split('-', 1)[-1]}) was interrupted; `stackmgr recover` rolls it back"


class Operation:
    """One mutating command, recorded from its first change (see the module docstring)."""

    def __init__(self, store: Store, command: str) -> None:
        self.store = store
        self.command = command
        self.kind = command.split(" ", 1)[0]
        self.record: Record | None = None
        self.dir = ""
        self._mask: object = None
        self._steps = 0
        self._marked = 0  # CURRENT: 0 not written, 1 written, 2 written and synced
        self.anchored: list[tuple[str, str]] = []  # (top, tree) of before-anchors made
        self.undoes = "-"

    # -- recording ---------------------------------------------------------------------------------------------

    def begin(self) -> Record:
        if self.record is not None:
            return self.record
        self._mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, _DEFERRED)
        # The name orders the journal (`undo` reverts the newest): it must come after every name there, even when
        # the operation before began in the same millisecond or the clock stepped back (the random id would
        # decide). The store lock is held, so no other operation is naming itself meanwhile.
        started = time.time_ns() // 1_000_000
        names = op_names(self.store)
        if names and int(names[-1][:13]) >= started:
            started = int(names[-1][:13]) + 1
        name = f"{started:013d}-{os.urandom(6).hex()}"
        self.dir = os.path.join(ops_dir(self.store), name)
        os.makedirs(os.path.join(self.dir, "files"))
        self.record = Record(name, self.command, started // 1000)
        self.record.undoes = self.undoes
        return self.record  # written, with the CURRENT marker, by the first change it records

    def _announce(self, durable: bool) -> None:
        """Write the record, then (once, or again to make it durable) the CURRENT marker naming it."""
        self.save(durable=durable)
        if self._marked < (2 if durable else 1):
            atomic_write(os.path.join(ops_dir(self.store), CURRENT), self.record_name().encode() + b"\n",
                         durable=durable)  # fmt: skip
            self._marked = 2 if durable else 1

    def save(self, durable: bool = False) -> None:
        """Write the record. Unsynced until a tree is about to move: survives a killed process either way; a
        power cut in a store-only operation costs at most a patch file no series names yet."""
        assert self.record is not None
        atomic_write(os.path.join(self.dir, "op"), self.record.render(), durable=durable)

    def record_name(self) -> str:
        assert self.record is not None
        return self.record.name

    def step(self, label: str) -> None:
        """A point where the state on disk is consistent with the record; tests kill the process here."""
        self._steps += 1
        trace = os.environ.get("STACKMGR_TRACE_STEPS")
        if trace:
            with open(trace, "a", encoding="utf-8") as f:
                f.write(f"{self.kind}:{self._steps}:{label}\n")
        crash = os.environ.get("STACKMGR_CRASH_AT", "")
        if crash == f"{self.kind}:{self._steps}":
            os.kill(os.getpid(), 9)
        elif crash == f"{self.kind}:{self._steps}:INT":  # Ctrl-C as a terminal sends it: to the process group
            os.killpg(0, _signal.SIGINT)

    def file_replacing(self, path: str) -> None:
        """Before a store file is replaced or removed: keep what is there now (once per operation)."""
        self.files_replacing([path])

    def files_replacing(self, paths: list[str]) -> None:
        """Before several store files are replaced or removed: keep what is there now, recorded in one write."""
        new = []
        for path in paths:
            rel = recorded_name(self.store, path)
            if rel is None:
                continue
            record = self.begin()
            if any(f.path == rel for f in record.files) or rel in new:
                continue
            existed = os.path.lexists(path)
            if existed:
                backup = os.path.join(self.dir, "files", rel)
                os.makedirs(os.path.dirname(backup), exist_ok=True)
                try:
                    os.link(path, backup, follow_symlinks=False)
                except OSError:  # another filesystem, or links not allowed: a copy does the same
                    with open(path, "rb") as src:
                        atomic_write(backup, src.read())
            record.files.append(FileChange(rel, existed, "?"))  # "?": not replaced yet
            new.append(rel)
        if new:
            self._announce(durable=False)
            for rel in new:
                self.step(f"write {rel}")

    def file_replaced(self, path: str) -> None:
        """After the rename: what the operation left there, so a rollback can tell a later edit from it."""
        self.files_replaced([path])

    def files_replaced(self, paths: list[str]) -> None:
        if self.record is None:
            return
        wanted = {recorded_name(self.store, p): p for p in paths}
        changed = False
        for f in self.record.files:
            if f.path in wanted and f.after == "?":
                f.after = stat_key(wanted[f.path])
                changed = True
        if changed:
            self.save()

    def tree_planned(self, snap: Snapshot, target: str, head: str | None, marker: str) -> TreeMove:
        """Before a move takes the user's index.lock: the move and the lock's marker, on disk (a kill from here on
        leaves a record that `check` reports and a rollback that removes exactly that lock)."""
        record = self.begin()
        move = TreeMove(tree=snap.tree, path=snap.repo.top, before=snap.tree_id(), target=target,
                        head_before=snap.head, head_after=head or snap.head, lock=f"mark:{marker}",
                        state="planned")  # fmt: skip
        record.trees.append(move)
        self._announce(durable=True)
        return move

    def tree_moving(self, move: TreeMove, snap: Snapshot, branch: str | None, real_index: bytes | None) -> None:
        """Right before git starts writing the working tree: the branch and the real index's bytes kept, and the
        state `moving` on disk (the switch may be under way from now until `switched` is recorded)."""
        move.branch = branch or "-"
        if real_index is not None:
            os.makedirs(os.path.dirname(saved := os.path.join(self.dir, "index", snap.tree)), exist_ok=True)
            try:  # git replaces the index by rename, never in place: a hard link keeps these bytes
                os.link(os.path.join(snap.repo.git_dir, "index"), saved)
                if read_or_none(saved) != real_index:  # it changed between the read and the link
                    os.unlink(saved)
                    raise OSError
            except OSError:
                atomic_write(saved, real_index)
            keep_shared_indexes(snap.repo.git_dir, os.path.join(self.dir, "shared-index", snap.tree))
            move.index = "saved"
        move.state = "moving"
        self.save(durable=True)  # before the first file of a tree changes, the record is on disk
        self.step(f"move {snap.tree}")

    def anchor_before(self, snap: Snapshot) -> None:
        """`git gc` must not take the state a rollback goes back to: a ref to it before the move starts."""
        from stackmgr.git import refs

        record = self.begin()
        refs.update_refs(snap.repo, [(f"{ANCHOR_PREFIX}{record.id}/{snap.tree}/before", snap.tree_id())],
                        f"stackmgr {record.command}")  # fmt: skip
        self.anchored.append((snap.repo.top, snap.tree))

    def tree_progress(self, move: TreeMove, label: str, state: str | None = None, lock_released: bool = False) -> None:
        """A step of a move. Written out: the end of git's switch (a path holding neither its old nor its new version
        after that was edited by someone, not half-written by git) and the release of the index.lock; after a crash
        every other state is checked against the tree itself."""
        if state is not None:
            move.state = state
        if lock_released:  # renamed into place: the lock is gone, and its marker with it
            move.lock = "-"
        if lock_released or state == "switched":
            self.save()
        self.step(f"{label} {move.tree}")

    def note_tree(self, tree: str, snapshot: str, head: str) -> None:
        """A tree the operation looked at without moving it (shown by `log`)."""
        if self.record is not None and all(n[0] != tree for n in self.record.notes):
            self.record.notes.append((tree, snapshot, head))

    # -- ending ------------------------------------------------------------------------------------------------

    def finish(self) -> None:
        record = self.record
        if record is None:
            return
        for f in record.files:
            f.after = stat_key(store_file(self.store, f.path))
        try:
            if record.trees:  # (rollback.py is not imported by a save: it costs several ms of start-up)
                from stackmgr.journal.rollback import anchor_moves

                anchor_moves(self.store, record)
        except StackmgrError as exc:  # the operation itself is complete: say so rather than fail it
            os.write(2, f"stackmgr: note: could not anchor the snapshots for `undo`: {exc.message}\n".encode())
        record.state = "done"
        self.save(durable=bool(record.trees))  # a power cut must not make a finished move look interrupted
        self.step("finish")
        remove_current(self.store)

    def release_signals(self) -> bool:
        """Unblock the deferred signals; True when a Ctrl-C arrived meanwhile (consumed here). A pending SIGTERM
        or SIGHUP is delivered when they unblock and ends the process with its usual status."""
        if self._mask is None:
            return False
        interrupted = _signal.SIGINT in _signal.sigpending()
        if interrupted:
            _signal.sigtimedwait([_signal.SIGINT], 0)
        _signal.pthread_sigmask(_signal.SIG_SETMASK, self._mask)
        self._mask = None
        return interrupted


def _untouched(store: Store, directory: str, change: FileChange) -> bool:
    """A store file the operation was about to replace, still as it was (never renamed over), with no temp file."""
    if change.after != "?":
        return False
    path = store_file(store, change.path)
    folder, base = os.path.split(path)
    try:
        if any(n.startswith(f".{base}.") and n.endswith(".tmp") for n in os.listdir(folder)):
            return False
    except FileNotFoundError:
        pass
    if not change.existed:
        return not os.path.lexists(path)
    try:
        return os.path.samefile(path, os.path.join(directory, "files", change.path))
    except OSError:
        return False


def _mark_failure_after_undo(store: Store, command: str) -> None:
    """A command failed (nothing it did stands) right after an undo: say so on the undo's record, so the next
    `undo` does not take that undo for the last thing the user did and redo it. Written only then: a failure
    after any other operation changes nothing on disk."""
    newest = newest_done(store)
    if newest is None or newest.undoes == "-":
        return
    newest.failed_after = (int(time.time()), command)
    try:
        atomic_write(os.path.join(ops_dir(store), newest.name, "op"), newest.render())
    except (OSError, StackmgrError):
        pass  # best effort: the command's own error is what the user must see


class operation:  # lower-case: used like a function, `with operation(store, "apply S") as op:`
    """Hold the store lock, finish off an operation a killed command left (rolling it back), then record this
    one. On an error after a change, everything it changed is put back before the error is reported."""

    def __init__(self, store: Store, command: str) -> None:
        self.store = store
        self.op = Operation(store, command)
        self.lock = locked(store.lock_path, "the store")

    def __enter__(self) -> Operation:
        self.store.changing()  # says which store, when STACKMGR_STORE beat the one in sight (store/config.py)
        self.lock.__enter__()
        try:
            interrupted = interrupted_name(self.store) is not None
            if interrupted:
                from stackmgr.journal.rollback import roll_back_interrupted

                roll_back_interrupted(self.store, announce=True)
            sweep(self.store, deep=interrupted)  # temp files killed writers left (a few listdirs; all after a kill)
        except BaseException:
            self.lock.__exit__(None, None, None)
            raise
        self.store.journal = self.op  # store writes (Store.write_file, Store.publish) are recorded by it
        return self.op

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self.store.journal = None
        op = self.op
        try:
            if op.record is not None:
                if exc is None:
                    op.finish()
                else:
                    self._roll_back(exc)
            if exc is not None and op.kind not in ("undo", "redo"):
                _mark_failure_after_undo(self.store, op.command)
        finally:
            interrupted = op.release_signals()
            self.lock.__exit__(None, None, None)
        if interrupted and exc is None:
            raise Interrupted(f"interrupted: `{op.command}` had started changing things and was completed first",
                              "`stackmgr undo` reverts it")  # fmt: skip

    def _roll_back(self, exc: BaseException) -> None:
        from stackmgr.journal.rollback import forget_unmoved, roll_back

        op = self.op
        assert op.record is not None
        # Here, unlike after a crash, a tree whose move did not finish was never changed or was put back already.
        op.record.trees = [t for t in op.record.trees if t.state == "moved"]
        moved = {t.tree for t in op.record.trees}
        try:
            forget_unmoved(op.record, [(top, tree) for top, tree in op.anchored if tree not in moved])
            if not op.record.trees and all(_untouched(self.store, op.dir, f) for f in op.record.files):
                # Nothing had changed: no record to rewrite (on a full disk that write would fail), no trace left.
                remove_current(self.store)
                import shutil

                shutil.rmtree(op.dir, ignore_errors=True)
                return
            for note in roll_back(self.store, op.record, op.dir):
                import sys

                sys.stderr.write(f"stackmgr: note: {note}\n")
            if not op.record.trees and all(f.after == "?" for f in op.record.files):
                import shutil  # nothing had changed after all: leave no trace

                shutil.rmtree(op.dir, ignore_errors=True)
        except StackmgrError as failed:
            first = exc.message if isinstance(exc, StackmgrError) else repr(exc)
            hint = failed.hint or "then run `stackmgr recover`"
            if isinstance(failed, DiskError):  # its "nothing was changed" is not so here: the rest is put back later
                hint = "free some space there, then run `stackmgr recover`"
            raise StackmgrError(f"{first}; putting back what `{op.command}` changed failed too: {failed.message}",
                                hint) from None  # fmt: skip
