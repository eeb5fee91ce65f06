"""`stackmgr log`, `undo`, `redo` and `gc`: the operations stackmgr recorded, walking back and forward through
them, forgetting old ones."""

from __future__ import annotations

import time

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.output import show_text as show
from stackmgr.store.config import open_store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.commands.undo import Undone


@click.command("log")
@click.option("-n", "limit", type=click.IntRange(min=1), metavar="N", help="Show only the newest N operations.")
@json_option()
@pass_context
def log_cmd(ctx: Context, limit: int | None) -> None:
    """List the operations that changed the store or a tree, newest first."""
    from stackmgr.commands.undo import file_letter, log, record_json

    records = log(open_store(ctx.store), None)
    records, every = records[:limit], records
    if ctx.json:
        output.emit_json({"schema": 1, "operations": [record_json(r, every) for r in records]})
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
@click.option("-n", "steps", type=click.IntRange(min=1), default=1, metavar="N", help="Walk back N steps.")
@json_option()
@pass_context
def undo_cmd(ctx: Context, op_id: str | None, steps: int) -> None:
    """Walk back one step: revert the newest operation not undone yet (its store files and its trees); again
    goes one step further back, `redo` forward. With OP: revert that operation."""
    from stackmgr.commands.undo import undo, unsaved_after

    store = open_store(ctx.store)
    done = undo(store, op_id, steps)
    _said(ctx, done, unsaved_after(store, done))


@click.command("redo")
@click.option("-n", "steps", type=click.IntRange(min=1), default=1, metavar="N", help="Walk forward N steps.")
@json_option()
@pass_context
def redo_cmd(ctx: Context, steps: int) -> None:
    """Walk forward one step: redo what the last `undo` took back. A new operation clears what can be redone."""
    from stackmgr.commands.undo import redo

    _said(ctx, redo(open_store(ctx.store), steps))


def _said(ctx: Context, done: list[Undone], unsaved: list[str] | None = None) -> None:
    """Each step of an undo or redo, one line each (`--json`: the last step, with every step under `steps`), then
    the trees whose edits no patch holds now (`unsaved`: an undone save or refresh)."""
    from stackmgr.commands.undo import record_json

    first, last = done[0], done[-1]
    if ctx.json:
        output.emit_json({"schema": 1, "undone": record_json(last.record), "operation": last.mine and
                          record_json(last.mine), "after_failed": first.failed, "after_rolled_back":
                          first.rolled_back, "verb": last.verb, "step": last.step,
                          "steps": [{"verb": d.verb, "step": d.step, "command": d.command, "undone": d.record.id,
                                     "operation": d.mine and d.mine.id} for d in done],
                          "undo_left": last.undo_left, "redo_left": last.redo_left,
                          "unsaved": unsaved or []})  # fmt: skip
        return
    for d in done:
        if d.hidden:
            tree = show(d.record.command.split()[2])
            output.err(f"stackmgr: note: tree {tree}: {d.hidden} recovery snapshot(s) are no longer listed by "
                       "`stackmgr recover`; they stay under refs/stackmgr/recovery/ in its repository")  # fmt: skip
        what = f"`{show(d.command)}` (op {show(d.step)})"
        if d.verb == "redo":
            further = ", `stackmgr redo` goes one step further forward" if d.redo_left else ""
            output.out(f"redid {what}; `stackmgr undo` undoes it again{further}")
            continue
        why = ""
        if d.failed is not None:
            why = f", the last operation that stands: `{show(d.failed)}` failed and changed nothing"
        elif d.rolled_back is not None:
            why = (f", the last operation that took effect: `{show(d.rolled_back)}` was interrupted and rolled "
                   "back, changing nothing")  # fmt: skip
        further = ", `stackmgr undo` goes one step further back" if d.undo_left else " (nothing before it to undo)"
        output.out(f"undid {what}{why}; `stackmgr redo` redoes it{further}")
    for note in unsaved or []:
        output.err(f"stackmgr: note: {note}")


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
