"""`stackmgr undo [OP]`, `log` and `gc`: the operation journal read back. An undo reverts the newest completed
operation (its store files and its trees, through journal/rollback.py) and is an operation itself, so undoing it
redoes the original.
"""

from __future__ import annotations

import os
import time

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git import refs
from stackmgr.git.repo import open_repo
from stackmgr.journal.operation import operation
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
    """What `undo` did: the operation it reverted, its own record (None: nothing to change), and why it chose that
    one when the newest thing in the journal is not it: the command that failed after an undo (`failed`), or the
    interrupted command that was rolled back since (`rolled_back`); and the recovery snapshots that an undo of
    `tree add`/`tree set` named explicitly leaves out of `recover`'s list (`hidden`)."""

    def __init__(self, record: Record, mine: Record | None, failed: str | None, rolled_back: str | None,
                 hidden: int) -> None:  # fmt: skip
        self.record = record
        self.mine = mine
        self.failed = failed
        self.rolled_back = rolled_back
        self.hidden = hidden


def undo(store: Store, wanted: str | None) -> Undone:
    """Revert the newest completed operation (or the one `wanted` names): its store files and its trees. The
    undo is an operation itself, so undoing it redoes the original, but only right after it: once a command
    failed after an undo, `undo` reverts the newest operation that still stands instead. A command that was
    interrupted and rolled back did nothing (as in git and jj): `undo` reverts the last operation that took
    effect, and says so. An undo of `tree add`/`tree set` that would take recovery snapshots out of `recover`'s
    list is refused unless that operation is named (`undo OP`)."""
    with operation(store, "undo") as op:
        records = log_records(store)
        failed = None if wanted is not None else failed_after_undo(records)
        record = _pick(store, wanted) if failed is None else _standing(store, failed)
        rolled_back = None if wanted is not None or failed is not None else _rolled_back_since(records, record)
        hidden = _hidden_recoveries(store, record)
        if hidden and wanted is None:
            why = f"`{rolled_back}` was interrupted and rolled back, so " if rolled_back else ""
            raise StackmgrError(
                f"not undone: {why}the last operation that took effect is `{record.command}` (op {record.id}), and "
                f"undoing it would take {hidden} recovery snapshot{'s' if hidden != 1 else ''} of tree "
                f"{record.command.split()[2]} out of `stackmgr recover`'s list; nothing changed",
                f"`stackmgr undo {record.id}` does it anyway (the snapshots stay in that repository)")  # fmt: skip
        directory = os.path.join(ops_dir(store), record.name)
        changed = _changed_since(store, record)
        if changed:
            raise StackmgrError(f"cannot undo `{record.command}` (op {record.id}): {changed[0]} changed since",
                                "undo the later operations first (`stackmgr log` lists them)")  # fmt: skip
        op.command = _undo_command(record)
        op.undoes = record.id
        for move in reversed(record.trees):
            if move.state == "moved":
                tree_back(store, move, directory, record, after_only=True)
                if forced_reset(record):
                    give_back_raw_of(store, move.tree, move.before)  # the bytes on disk, past git's conversions
        for change in reversed(record.files):
            file_back(store, change.path, change.existed, directory)
    return Undone(record, op.record, failed, rolled_back, hidden)


def _rolled_back_since(records: list[Record], record: Record) -> str | None:
    """The newest command rolled back (interrupted, or failed after changing something) since `record`."""
    return next((r.command for r in records if r.name > record.name and r.state == "rolled-back"), None)


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


def _standing(store: Store, failed: str) -> Record:
    """The newest completed operation, not an undo, whose effect stands (no standing undo reverted it)."""
    reverted: set[str] = set()
    for r in log_records(store):  # newest first: an undo is always newer than what it reverts
        if r.state != "done" or r.id in reverted:
            continue
        if r.undoes != "-":
            reverted.add(r.undoes)
            continue
        return r
    raise UsageProblem(f"nothing to undo: `{failed}` failed and changed nothing, and every operation before it "
                       "is undone already", "`stackmgr log` lists them; `stackmgr undo OP` redoes one")  # fmt: skip


def _undo_command(record: Record) -> str:
    """`undo ID (CMD)`; undoing an undo says `redo ID (CMD)` with the original command, not a nest of them."""
    verb, inner = "undo", record.command
    if record.undoes != "-" and inner.endswith(")") and " (" in inner:
        verb = "redo" if inner.startswith("undo ") else "undo"
        inner = inner.split(" (", 1)[1][:-1]
    return f"{verb} {record.id} ({inner})"


def _pick(store: Store, wanted: str | None) -> Record:
    records = [r for r in log_records(store) if r.state == "done"]
    if wanted is not None:
        hits = [r for r in records if r.id.startswith(wanted.lower())] if len(wanted) >= 4 else []
        if len(hits) != 1:
            raise UsageProblem(f"no single completed operation {wanted}", "`stackmgr log` lists their ids")
        return hits[0]
    if not records:
        raise UsageProblem("nothing to undo: no operation is recorded", "`stackmgr log` lists what was recorded")
    return records[0]


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


def undid(undone: Record, mine: Record) -> tuple[str, str]:
    """("undo" or "redo", the command it reverted), read from the undo's own command line `undo ID (CMD)`."""
    verb, _, rest = mine.command.partition(" ")
    return verb, rest.split(" (", 1)[1][:-1] if " (" in rest else undone.command


def file_letter(record: Record, existed: bool, after: str) -> str | None:
    """A store file's change in a completed operation: A(dded), M(odified), D(eleted); None when rolled back."""
    if record.state != "done":
        return None
    return "D" if after == "-" else ("M" if existed else "A")


def shown_file(rel: str) -> str:
    """A recorded file as `log` names it: a file of the state directory as `.stackmgr/NAME`, wherever that
    directory is (in a git store, `.git/stackmgr-store/`)."""
    return ".stackmgr/" + rel[len(STATE):] if rel.startswith(STATE) else rel


def record_json(r: Record) -> dict[str, object]:
    return {
        "id": r.id, "time": r.started, "command": r.command, "state": r.state,
        "undoes": None if r.undoes == "-" else r.undoes,
        "trees": [{"tree": t.tree, "before": t.before, "after": t.target, "head_before": t.head_before,
                   "head_after": t.head_after, "moved": t.state == "moved"} for t in r.trees]
        + [{"tree": tree, "before": snap if snap != "-" else None, "after": snap if snap != "-" else None,
            "head_before": head, "head_after": head, "moved": False} for tree, snap, head in r.notes],
        "files": [{"path": shown_file(f.path), "change": file_letter(r, f.existed, f.after)} for f in r.files],
    }  # fmt: skip
