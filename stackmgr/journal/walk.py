"""Where `undo` and `redo` stand in the journal: the steps that can be undone and those that can be redone, read
from the records alone (docs/FORMATS.md#operation-journal).

Read oldest first, as an editor's undo stack: an operation that took effect (`done`, not an undo) is a step that
can be undone, and clears the steps that could be redone; an undo (its record's `undoes`: the record it reverted)
moves that step to the redo side, a redo (an undo of an undo) moves it back. A record rolled back did nothing
and counts for nothing. The step is named by the operation that first did it, whatever record stands for it now
(after a redo: the redo's record, which an undo then reverts).
"""

from __future__ import annotations

from stackmgr.journal.record import Record


class Step:
    """A step of the walk: `op`, the id of the operation that did it first, its command as typed; `record`, the
    record to revert to undo it (or, on the redo side, to redo it)."""

    def __init__(self, op: str, command: str, record: Record) -> None:
        self.op = op
        self.command = command
        self.record = record


class Walk:
    """The two sides of the walk, newest last, and the operation that last cleared the redo side (None when no
    step that could be redone was cleared since)."""

    def __init__(self) -> None:
        self.undo: list[Step] = []
        self.redo: list[Step] = []
        self.cleared_by: Record | None = None


def walk(records: list[Record]) -> Walk:
    """The walk after `records` (newest first, as `log` lists them)."""
    state = Walk()
    by_id: dict[str, Step] = {}
    for r in reversed(records):
        if r.state != "done":
            continue
        if r.undoes == "-":
            step = Step(r.id, r.command, r)
            state.undo.append(step)
            if state.redo:
                state.redo.clear()
                state.cleared_by = r
            by_id[r.id] = step
            continue
        reverted = by_id.pop(r.undoes, None)
        if reverted is None:  # it reverted a record forgotten since (`gc`): its own command line says which step
            op, command = step_of(r, [])
            by_id[r.id] = Step(op, command, r)
            (state.redo if r.command.startswith("undo ") else state.undo).append(by_id[r.id])
            continue
        moved = Step(reverted.op, reverted.command, r)
        if reverted in state.undo:
            state.undo.remove(reverted)
            state.redo.append(moved)
            state.cleared_by = None
        elif reverted in state.redo:
            state.redo.remove(reverted)
            state.undo.append(moved)
        else:  # an undo named explicitly (`undo OP`) after its redo side was cleared: it redid that step
            state.undo.append(moved)
        by_id[r.id] = moved
    return state


def step_of(record: Record, records: list[Record]) -> tuple[str, str]:
    """(the operation an undo or redo record undid or redid, first done, its command); for any other record,
    its own id and command."""
    by_id = {r.id: r for r in records}
    seen = {record.id}
    current = record
    while current.undoes != "-" and current.undoes in by_id and current.undoes not in seen:
        seen.add(current.undoes)
        current = by_id[current.undoes]
    if current.undoes == "-":
        return current.id, current.command
    # the chain runs into a record forgotten since: the id and command the record's own line names
    words = record.command.split(" ", 2)
    inner = words[2][1:-1] if len(words) == 3 and words[2].startswith("(") else record.command
    return (words[1] if len(words) > 1 else record.undoes), inner
