"""`stackmgr log`, `undo` and `gc`: the operation journal seen from the command line."""

from __future__ import annotations

import time

import click

from stackmgr import output
from stackmgr.cli.context import store_and_json
from stackmgr.store.config import open_store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.journal.record import Record


def _file_letter(existed: bool, after: str) -> str:
    return "D" if after == "-" else ("M" if existed else "A")


def _record_json(r: Record) -> dict[str, object]:
    return {
        "id": r.id, "time": r.started, "command": r.command, "state": r.state,
        "undoes": None if r.undoes == "-" else r.undoes,
        "trees": [{"tree": t.tree, "before": t.before, "after": t.target, "head_before": t.head_before,
                   "head_after": t.head_after, "moved": t.state == "moved"} for t in r.trees]
        + [{"tree": tree, "before": snap if snap != "-" else None, "after": snap if snap != "-" else None,
            "head_before": head, "head_after": head, "moved": False} for tree, snap, head in r.notes],
        "files": [{"path": f.path, "change": _file_letter(f.existed, f.after) if r.state == "done" else None}
                  for f in r.files],
    }  # fmt: skip


@click.command("log")
@click.option("-n", "limit", type=click.IntRange(min=1), metavar="N", help="Show only the newest N operations.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def log_cmd(ctx: click.Context, limit: int | None, as_json: bool) -> None:
    """List the operations that changed the store or a tree, newest first."""
    from stackmgr.commands.undo import log_records

    store_dir, want_json = store_and_json(ctx)
    records = log_records(open_store(store_dir))[:limit]
    if want_json:
        output.emit_json({"schema": 1, "operations": [_record_json(r) for r in records]})
        return
    if not records:
        output.out("no operations recorded yet")
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started))
        state = "" if r.state == "done" else f"  [{r.state}]"
        output.out(f"{output.paint(r.id, 'yellow')}  {when}  {r.command}{state}")
        for t in r.trees:
            moved = "moved" if t.state == "moved" else t.state
            output.out(f"    tree {t.tree}: {t.before[:12]} -> {t.target[:12]} ({moved}; HEAD {t.head_before[:12]} -> "
                       f"{t.head_after[:12]})")  # fmt: skip
        for tree, snap, head in r.notes:
            shown = f", tree {snap[:12]}" if snap != "-" else ""
            output.out(f"    tree {tree}: unchanged (HEAD {head[:12]}{shown})")
        for f in r.files:
            letter = _file_letter(f.existed, f.after) if r.state == "done" else "~"  # rolled back: nothing stands
            output.out(f"    {letter} {f.path}")


@click.command("undo")
@click.argument("op_id", required=False, metavar="[OP]")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def undo_cmd(ctx: click.Context, op_id: str | None, as_json: bool) -> None:
    """Revert the newest operation (or OP): its store files and its trees. Undo is itself undoable."""
    from stackmgr.commands.undo import undo

    store_dir, want_json = store_and_json(ctx)
    undone, mine = undo(open_store(store_dir), op_id)
    if want_json:
        output.emit_json({"schema": 1, "undone": _record_json(undone), "operation": mine and _record_json(mine)})
        return
    if mine is None:
        output.out(f"nothing to change: `{undone.command}` (op {undone.id}) left no trace to revert")
        return
    verb, _, rest = mine.command.partition(" ")
    what = rest.split(" (", 1)[1][:-1] if " (" in rest else undone.command
    if verb == "redo":
        output.out(f"redid `{what}` (op {mine.id}); `stackmgr undo` undoes it again")
    else:
        output.out(f"undid `{what}` (op {undone.id}); `stackmgr undo` again redoes it")


@click.command("gc")
@click.option("--keep", type=click.IntRange(min=0), metavar="N", help="Keep the newest N operations.")
@click.option("--older-than", "older_than", type=click.FloatRange(min=0), metavar="DAYS",
              help="Forget operations older than DAYS days.")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Only say what would be forgotten.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def gc_cmd(ctx: click.Context, keep: int | None, older_than: float | None, dry_run: bool, as_json: bool) -> None:
    """Forget old operations (records, saved files, anchor refs); only when asked. Recovery snapshots stay."""
    from stackmgr.commands.undo import gc

    store_dir, want_json = store_and_json(ctx)
    gone = gc(open_store(store_dir), keep, older_than, dry_run)
    if want_json:
        output.emit_json({"schema": 1, "dry_run": dry_run, "forgotten": [r.id for r in gone]})
        return
    verb = "would forget" if dry_run else "forgot"
    output.out(f"{verb} {len(gone)} operation{'s' if len(gone) != 1 else ''}"
               + (": " + ", ".join(r.id for r in gone[:10]) + (" …" if len(gone) > 10 else "") if gone else ""))
