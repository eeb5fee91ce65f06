"""`stackmgr undo [OP]`, `redo`, `log` and `gc`: the operation journal read back. `undo` walks back one step at a
time, reverting the newest operation not undone yet (its store files and its trees, through journal/rollback.py),
and `redo` walks forward again (journal/walk.py reads where the walk stands); each is an operation itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git import refs
from stackmgr.git.repo import open_repo
from stackmgr.journal.operation import Operation, operation
from stackmgr.journal.record import (
    ANCHOR_PREFIX,
    STATE,
    Record,
    interrupted_name,
    op_names,
    ops_dir,
    read_record,
    stat_key,
    store_file,
)  # fmt: skip
from stackmgr.journal.rollback import file_back, forced_reset, tree_back
from stackmgr.journal.walk import step_of, walk
from stackmgr.safety.recovery import give_back_raw_of, list_recoveries
from stackmgr.store.config import Store
from stackmgr.store.fs import locked, read_or_none


def log_names(store: Store) -> list[str]:
    """Operation directory names, oldest first."""
    return op_names(store)


def log_records(store: Store) -> list[Record]:
    records = []
    for name in reversed(log_names(store)):
        try:
            records.append(read_record(store, name))
        except FileNotFoundError:
            continue  # killed before it recorded its first change: nothing to show
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            records.append(Record(name, "(unreadable record)", int(name[:13]) // 1000, "unreadable"))
    return records


class Undone:
    """What one step of `undo` or `redo` did: the record it reverted, its own record, the step (the operation
    that first did it, and its command), `verb` (`undo` or `redo`), why it chose that one when the newest thing
    in the journal is not it: the command that failed after an undo (`failed`), or the interrupted command that
    was rolled back since (`rolled_back`); the recovery snapshots that an undo of `tree add`/`tree set` named
    explicitly leaves out of `recover`'s list (`hidden`); and how many steps are left to undo and to redo."""

    def __init__(self, record: Record, mine: Record | None, failed: str | None, rolled_back: str | None,
                 hidden: int) -> None:  # fmt: skip
        self.record = record
        self.mine = mine
        self.failed = failed
        self.rolled_back = rolled_back
        self.hidden = hidden
        self.verb = "undo"
        self.step = record.id
        self.command = record.command
        self.undo_left = 0
        self.redo_left = 0


def undo(store: Store, wanted: str | None, steps: int = 1) -> list[Undone]:
    """Walk back `steps` steps through the journal (docs/FORMATS.md#operation-journal): each reverts the newest
    operation not undone yet (its store files and its trees) and is an operation itself, which `redo` reverts.
    A command that failed, or was interrupted and rolled back, did nothing (as in git and jj): the walk passes
    over it, and the first step says so. `undo OP` reverts that operation instead (an undo: redoes it). An undo
    of `tree add`/`tree set` that would take recovery snapshots out of `recover`'s list is refused unless that
    operation is named. Several steps are all done or, where one is refused, none: the steps before it are
    put back."""
    if wanted is not None and steps != 1:
        raise UsageProblem("`undo OP` reverts one operation; -n walks back from the newest",
                           "use one of them")  # fmt: skip
    _enough(store, steps, "undo")
    return _steps(store, steps, lambda: _undo_one(store, wanted))


def unsaved_after(store: Store, done: list[Undone]) -> list[str]:
    """After an undo of a `save` or `refresh` (the patch file goes back; the tree keeps its edits): the trees whose
    edits no patch holds now, one line each, so the walk back is never taken for a loss of work."""
    if not any(d.verb == "undo" and d.command.split()[:1] in (["save"], ["refresh"]) for d in done):
        return []
    from stackmgr.commands.check import check
    from stackmgr.types import show_path

    notes = []
    for report in check(store, ()).unsafe:
        paths = sorted({path for path, _why in report.blockers})
        if paths:
            shown = ", ".join(show_path(p) for p in paths[:3]) + (" …" if len(paths) > 3 else "")
            notes.append(f"tree {report.name} keeps its edits; {len(paths)} path{'s' if len(paths) != 1 else ''} "
                         f"no patch preserves now ({shown}): `stackmgr redo`, or `stackmgr save NAME`")  # fmt: skip
    return notes


def redo(store: Store, steps: int = 1) -> list[Undone]:
    """Walk forward `steps` steps: each redoes the step the newest standing undo took back (reverting that
    undo, as an operation of its own). A new operation (not an undo or redo) clears what could be redone."""
    _enough(store, steps, "redo")
    return _steps(store, steps, lambda: _redo_one(store))


def _enough(store: Store, steps: int, verb: str) -> None:
    """`-n N` with fewer steps to walk: refused before any is taken (with none, the first step says why)."""
    if steps == 1:
        return
    where = walk(log_records(store))
    have = len(where.undo if verb == "undo" else where.redo)
    if 0 < have < steps:
        raise StackmgrError(f"only {have} step{'s' if have != 1 else ''} to {verb}, not {steps}; nothing changed",
                            f"`stackmgr {verb} -n {have}` walks all of them")  # fmt: skip


def _steps(store: Store, steps: int, one: Callable[[], Undone]) -> list[Undone]:
    done: list[Undone] = []
    try:
        for _ in range(steps):
            done.append(one())
    except StackmgrError as exc:
        if not done:
            raise
        left = _put_back(store, [d.mine for d in done if d.mine is not None])
        after = "except what the notes above name" if left else "nothing changed"
        error = StackmgrError(f"{exc.message} (step {len(done) + 1} of {steps}; the step"
                              f"{'s' if len(done) != 1 else ''} before it put back: {after})", exc.hint)  # fmt: skip
        error.exit_code = exc.exit_code
        raise error from None
    return done


def _put_back(store: Store, records: list[Record]) -> bool:
    """Roll back steps of this command that completed, newest first (their records say `rolled-back`); True
    when something written since was left as it is (each said in a note)."""
    import sys

    from stackmgr.journal.rollback import roll_back

    left = False
    with locked(store.lock_path, "the store"):
        for record in reversed(records):
            for note in roll_back(store, record, os.path.join(ops_dir(store), record.name)):
                sys.stderr.write(f"stackmgr: note: {note}\n")
                left = True
    return left


def _undo_one(store: Store, wanted: str | None) -> Undone:
    with operation(store, "undo") as op:
        records = log_records(store)
        where = walk(records)
        failed = None if wanted is not None else failed_after_undo(records)
        if wanted is not None:
            record = _pick(store, wanted)
        elif where.undo:
            record = where.undo[-1].record
        else:
            raise StackmgrError("nothing to undo: " + ("every operation recorded is undone already" if where.redo
                                                       else "no operation is recorded"),
                                "`stackmgr redo` redoes the last one undone" if where.redo
                                else "`stackmgr log` lists what was recorded")  # fmt: skip
        rolled_back = None if wanted is not None or failed is not None else _rolled_back_since(records)
        hidden = _hidden_recoveries(store, record)
        if hidden and wanted is None:
            why = f"`{rolled_back}` was interrupted and rolled back, so " if rolled_back else ""
            raise StackmgrError(
                f"not undone: {why}the last operation that took effect is `{record.command}` (op {record.id}), and "
                f"undoing it would take {hidden} recovery snapshot{'s' if hidden != 1 else ''} of tree "
                f"{record.command.split()[2]} out of `stackmgr recover`'s list; nothing changed",
                f"`stackmgr undo {record.id}` does it anyway (the snapshots stay in that repository)")  # fmt: skip
        verb = "redo" if record.undoes != "-" and record.command.startswith("undo ") else "undo"
        done = _revert(store, op, record, verb, records)
        done.failed, done.rolled_back, done.hidden = failed, rolled_back, hidden
    return _left(store, done)


def _redo_one(store: Store) -> Undone:
    with operation(store, "redo") as op:
        records = log_records(store)
        where = walk(records)
        if not where.redo:
            new = where.cleared_by
            why = "no undo stands to be redone" if new is None else (
                f"`{new.command}` (op {new.id}) ran after the last undo, and a new operation clears what could be "
                "redone")  # fmt: skip
            raise StackmgrError(f"nothing to redo: {why}",
                                "`stackmgr undo` walks back; `stackmgr log` lists every operation")  # fmt: skip
        done = _revert(store, op, where.redo[-1].record, "redo", records)
    return _left(store, done)


def _revert(store: Store, op: Operation, record: Record, verb: str, records: list[Record]) -> Undone:
    """Revert `record` (its store files and its trees) inside `op`, recorded as `VERB ID (CMD)`: ID the operation
    that first did the step, so `log` reads as a history of it."""
    step, command = step_of(record, records)
    changed = _changed_since(store, record)
    if changed:
        raise StackmgrError(f"cannot {verb} `{command}` (op {step}): {changed[0]} changed since",
                            "undo the later operations first (`stackmgr log` lists them)")  # fmt: skip
    op.command = f"{verb} {step} ({command})"
    op.undoes = record.id
    op.begin()  # recorded even where there is nothing to put back: the walk goes on past it
    directory = os.path.join(ops_dir(store), record.name)
    for move in reversed(record.trees):
        if move.state == "moved":
            tree_back(store, move, directory, record, after_only=True)
            if forced_reset(record):
                give_back_raw_of(store, move.tree, move.before)  # the bytes on disk, past git's conversions
    for change in reversed(record.files):
        file_back(store, change.path, change.existed, directory)
    done = Undone(record, op.record, None, None, 0)
    done.verb, done.step, done.command = verb, step, command
    return done


def _left(store: Store, done: Undone) -> Undone:
    after = walk(log_records(store))
    done.undo_left, done.redo_left = len(after.undo), len(after.redo)
    return done


def _rolled_back_since(records: list[Record]) -> str | None:
    """The newest command rolled back (interrupted, or failed after changing something) since the newest
    operation that took effect: the last thing the user did, which did nothing. Steps of an `undo -n` or
    `redo -n` put back are not commands of their own."""
    for r in records:  # newest first
        if r.state == "done":
            return None
        if r.state == "rolled-back" and r.undoes == "-":
            return r.command
    return None


def _hidden_recoveries(store: Store, record: Record) -> int:
    """How many recovery snapshots `recover` would no longer list once `record` is undone: those of the tree a
    `tree add` registered or a `tree set` moved (recover finds them through the tree's registration)."""
    words = record.command.split()
    if record.undoes != "-" or words[:2] not in (["tree", "add"], ["tree", "set"]) or len(words) < 3:
        return 0
    if words[2] not in store.trees:
        return 0
    return sum(1 for rec in list_recoveries(store) if rec.tree == words[2])


def _changed_since(store: Store, record: Record) -> list[str]:
    """The store files `record` wrote that no longer hold what it left. Its stat data says so at once; a file
    with other stat data still counts as unchanged when it holds the bytes the record left, as the first later
    operation that replaced it kept them (an operation undone since puts back those bytes in a new file)."""
    later = [r for r in log_records(store) if r.name > record.name]
    changed = []
    for f in record.files:
        path = store_file(store, f.path)
        if stat_key(path) == f.after:
            continue
        first = next((r for r in reversed(later) if any(g.path == f.path for g in r.files)), None)
        kept = next((g for g in first.files if g.path == f.path), None) if first is not None else None
        if first is None or kept is None or (f.after == "-") == kept.existed:
            changed.append(shown_file(f.path))
            continue
        left = read_or_none(os.path.join(ops_dir(store), first.name, "files", f.path)) if kept.existed else None
        if read_or_none(path) != left:
            changed.append(shown_file(f.path))
    return changed


def failed_after_undo(records: list[Record]) -> str | None:
    """The command that failed after the newest completed operation, when that one is an undo (or redo): noted
    on its record, or a rolled-back record newer than it (a command killed midway). `records`: newest first."""
    newer: list[Record] = []
    for r in records:
        if r.state == "done":
            if r.undoes == "-":
                return None
            if r.failed_after is not None:
                return r.failed_after[1]
            return next((k.command for k in newer if k.state == "rolled-back" and k.undoes == "-"), None)
        newer.append(r)
    return None


def _pick(store: Store, wanted: str) -> Record:
    records = [r for r in log_records(store) if r.state == "done"]
    hits = [r for r in records if r.id.startswith(wanted.lower())] if len(wanted) >= 4 else []
    if len(hits) != 1:
        raise UsageProblem(f"no single completed operation {wanted}", "`stackmgr log` lists their ids")
    return hits[0]


def gc(store: Store, keep: int | None, older_than_days: float | None, dry_run: bool) -> list[Record]:
    """Forget old operations (their records, saved files and anchor refs). Recovery snapshots of `reset
    --force` are never pruned here: they may be the only copy of someone's work."""
    if keep is None and older_than_days is None:
        raise UsageProblem("gc needs --keep N or --older-than DAYS", "nothing is pruned unless asked")
    with locked(store.lock_path, "the store"):
        records = log_records(store)  # newest first
        current = interrupted_name(store)
        cutoff = time.time() - older_than_days * 86400 if older_than_days is not None else None
        doomed = [
            r for i, r in enumerate(records)
            if r.name != current and ((keep is not None and i >= keep) or (cutoff is not None and r.started < cutoff))
        ]  # fmt: skip
        if not dry_run:
            for r in doomed:
                _forget(store, r)
    return doomed


def _forget(store: Store, record: Record) -> None:
    by_top: dict[str, list[tuple[str, str | None]]] = {}
    for move in record.trees:
        base = f"{ANCHOR_PREFIX}{record.id}/{move.tree}/"
        by_top.setdefault(move.path, []).extend((base + leaf, None) for leaf in ("before", "after", "head-before"))
    for top, anchors in by_top.items():
        if os.path.isdir(top):
            repo = open_repo(top)
            existing = {ref for ref, _c, _t, _m in refs.refs_under(repo, f"{ANCHOR_PREFIX}{record.id}/")}
            gone = [(ref, oid) for ref, oid in anchors if ref in existing]
            if gone:
                refs.update_refs(repo, gone, "stackmgr gc")
    import shutil

    shutil.rmtree(os.path.join(ops_dir(store), record.name), ignore_errors=True)


def log(store: Store, limit: int | None) -> list[Record]:
    """The recorded operations, newest first (only the newest `limit`, when given)."""
    return log_records(store)[:limit]


def file_letter(record: Record, existed: bool, after: str) -> str | None:
    """A store file's change in a completed operation: A(dded), M(odified), D(eleted); None when rolled back."""
    if record.state != "done":
        return None
    return "D" if after == "-" else ("M" if existed else "A")


def shown_file(rel: str) -> str:
    """A recorded file as `log` names it: a file of the state directory as `.stackmgr/NAME`, wherever that
    directory is (in a git store, `.git/stackmgr-store/`)."""
    return ".stackmgr/" + rel[len(STATE):] if rel.startswith(STATE) else rel


def record_json(r: Record, records: list[Record] | None = None) -> dict[str, object]:
    """One operation for `--json`; `records` (the journal, newest first) names the step an undo or redo undid
    or redid (`step`: the operation that first did it; `undoes` is the record it reverted)."""
    step = step_of(r, records or [])[0] if r.undoes != "-" else None
    return {
        "id": r.id, "time": r.started, "command": r.command, "state": r.state,
        "undoes": None if r.undoes == "-" else r.undoes, "step": step,
        "trees": [{"tree": t.tree, "before": t.before, "after": t.target, "head_before": t.head_before,
                   "head_after": t.head_after, "moved": t.state == "moved"} for t in r.trees]
        + [{"tree": tree, "before": snap if snap != "-" else None, "after": snap if snap != "-" else None,
            "head_before": head, "head_after": head, "moved": False} for tree, snap, head in r.notes],
        "files": [{"path": shown_file(f.path), "change": file_letter(r, f.existed, f.after)} for f in r.files],
    }  # fmt: skip
