"""`log`, `undo` and `gc`: the operation journal (journal/) as the commands see it; records shaped for output."""

from __future__ import annotations

from stackmgr.journal import undo as journal
from stackmgr.journal.record import Record
from stackmgr.store.config import Store


def log(store: Store, limit: int | None) -> list[Record]:
    """The recorded operations, newest first (only the newest `limit`, when given)."""
    return journal.log_records(store)[:limit]


def undo(store: Store, op_id: str | None) -> tuple[Record, Record | None]:
    """Revert the newest completed operation (or OP): (the one undone, the undo's own record, None when it left
    nothing to revert)."""
    return journal.undo(store, op_id)


def undid(undone: Record, mine: Record) -> tuple[str, str]:
    """("undo" or "redo", the command it reverted), read from the undo's own command line `undo ID (CMD)`."""
    verb, _, rest = mine.command.partition(" ")
    return verb, rest.split(" (", 1)[1][:-1] if " (" in rest else undone.command


def gc(store: Store, keep: int | None, older_than: float | None, dry_run: bool) -> list[Record]:
    """Forget old operations (records, saved files, anchor refs); the ones forgotten (or that would be)."""
    return journal.gc(store, keep, older_than, dry_run)


def file_letter(record: Record, existed: bool, after: str) -> str | None:
    """A store file's change in a completed operation: A(dded), M(odified), D(eleted); None when rolled back."""
    if record.state != "done":
        return None
    return "D" if after == "-" else ("M" if existed else "A")


def record_json(r: Record) -> dict[str, object]:
    return {
        "id": r.id, "time": r.started, "command": r.command, "state": r.state,
        "undoes": None if r.undoes == "-" else r.undoes,
        "trees": [{"tree": t.tree, "before": t.before, "after": t.target, "head_before": t.head_before,
                   "head_after": t.head_after, "moved": t.state == "moved"} for t in r.trees]
        + [{"tree": tree, "before": snap if snap != "-" else None, "after": snap if snap != "-" else None,
            "head_before": head, "head_after": head, "moved": False} for tree, snap, head in r.notes],
        "files": [{"path": f.path, "change": file_letter(r, f.existed, f.after)} for f in r.files],
    }  # fmt: skip
