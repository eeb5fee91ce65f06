"""`stackmgr log`, `undo` and `gc`: the operations stackmgr recorded, reverting one, forgetting old ones."""

from __future__ import annotations

import time

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.output import show_text as show
from stackmgr.store.config import open_store


@click.command("log")
@click.option("-n", "limit", type=click.IntRange(min=1), metavar="N", help="Show only the newest N operations.")
@json_option()
@pass_context
def log_cmd(ctx: Context, limit: int | None) -> None:
    """List the operations that changed the store or a tree, newest first."""
    from stackmgr.commands.undo import file_letter, log, record_json

    records = log(open_store(ctx.store), limit)
    if ctx.json:
        output.emit_json({"schema": 1, "operations": [record_json(r) for r in records]})
        return
    if not records:
        output.out("no operations recorded yet")
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started))
        state = "" if r.state == "done" else f"  [{r.state}]"
        output.out(f"{output.paint(show(r.id), 'yellow')}  {when}  {show(r.command)}{show(state)}")
        for t in r.trees:
            moved = "moved" if t.state == "moved" else t.state
            output.out(show(f"    tree {t.tree}: {t.before[:12]} -> {t.target[:12]} ({moved}; HEAD {t.head_before[:12]}"
                            f" -> {t.head_after[:12]})"))  # fmt: skip
        for tree, snap, head in r.notes:
            shown = f", tree {snap[:12]}" if snap != "-" else ""
            output.out(show(f"    tree {tree}: unchanged (HEAD {head[:12]}{shown})"))
        for f in r.files:
            letter = file_letter(r, f.existed, f.after) or "~"  # rolled back: nothing stands
            output.out(f"    {letter} {show(f.path)}")


@click.command("undo")
@click.argument("op_id", required=False, metavar="[OP]")
@json_option()
@pass_context
def undo_cmd(ctx: Context, op_id: str | None) -> None:
    """Revert the newest operation (or OP): its store files and its trees. Undo is itself undoable."""
    from stackmgr.commands.undo import record_json, undid, undo

    done = undo(open_store(ctx.store), op_id)
    undone, mine, failed = done.record, done.mine, done.failed
    if ctx.json:
        output.emit_json({"schema": 1, "undone": record_json(undone), "operation": mine and record_json(mine),
                          "after_failed": failed, "after_rolled_back": done.rolled_back})  # fmt: skip
        return
    if done.hidden:
        tree = show(undone.command.split()[2])
        output.err(f"stackmgr: note: tree {tree}: {done.hidden} recovery snapshot(s) are no longer listed by "
                   "`stackmgr recover`; they stay under refs/stackmgr/recovery/ in its repository")  # fmt: skip
    if mine is None:
        output.out(f"nothing to change: `{show(undone.command)}` (op {show(undone.id)}) left no trace to revert")
        return
    verb, what = undid(undone, mine)
    what, failed = show(what), failed if failed is None else show(failed)
    if failed is not None:
        output.out(f"undid `{what}` (op {undone.id}), the last operation that stands: `{failed}` failed and "
                   "changed nothing, so the undo before it is not redone; `stackmgr undo` again redoes it")  # fmt: skip
    elif done.rolled_back is not None:
        output.out(f"{'redid' if verb == 'redo' else 'undid'} `{what}` (op {undone.id}), the last "
                   f"operation that took effect: `{show(done.rolled_back)}` was interrupted and rolled back, changing "
                   "nothing; `stackmgr undo` again redoes it")  # fmt: skip
    elif verb == "redo":
        output.out(f"redid `{what}` (op {mine.id}); `stackmgr undo` undoes it again")
    else:
        output.out(f"undid `{what}` (op {undone.id}); `stackmgr undo` again redoes it")


@click.command("gc")
@click.option("--keep", type=click.IntRange(min=0), metavar="N", help="Keep the newest N operations.")
@click.option("--older-than", "older_than", type=click.FloatRange(min=0), metavar="DAYS",
              help="Forget operations older than DAYS days.")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Only say what would be forgotten.")
@json_option()
@pass_context
def gc_cmd(ctx: Context, keep: int | None, older_than: float | None, dry_run: bool) -> None:
    """Forget old operations (records, saved files, anchor refs); only when asked. Recovery snapshots stay."""
    from stackmgr.commands.undo import gc

    gone = gc(open_store(ctx.store), keep, older_than, dry_run)
    if ctx.json:
        output.emit_json({"schema": 1, "dry_run": dry_run, "forgotten": [r.id for r in gone]})
        return
    verb = "would forget" if dry_run else "forgot"
    output.out(f"{verb} {len(gone)} operation{'s' if len(gone) != 1 else ''}"
               + (": " + ", ".join(r.id for r in gone[:10]) + (" …" if len(gone) > 10 else "") if gone else ""))
