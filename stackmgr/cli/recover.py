"""`stackmgr recover [ID]`: list the recovery snapshots, or restore one (commands/recover.py)."""

from __future__ import annotations

import time

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.output import show_text as show
from stackmgr.store.config import open_store


@click.command("recover")
@click.argument("recovery_id", required=False)
@json_option()
@pass_context
def recover_cmd(ctx: Context, recovery_id: str | None) -> None:
    """List recovery snapshots, or restore one (ID) into its tree."""
    from stackmgr.commands.recover import finish_interrupted, list_recoveries, restore

    store = open_store(ctx.store)
    rolled, notes = finish_interrupted(store)
    if rolled is not None:
        what = "rolled back" if rolled.rolled_back else "had completed; marked done"
        output.err(f"stackmgr: interrupted `{show(rolled.command)}` (op {show(rolled.id)}) {what}")
    for note in notes:
        output.err(f"stackmgr: {show(note)}")
    if recovery_id is not None:
        rec = restore(store, recovery_id)
        output.out(f"{rec.tree}: restored recovery snapshot {rec.id} ({rec.files} changed files)")
        return
    found = list_recoveries(store)
    if ctx.json:
        output.emit_json({"schema": 1, "recoveries": [r.to_json() for r in found]})
        return
    if not found and rolled is None and not notes:  # what was put back is said above: nothing to add
        output.out("no recovery snapshots (`stackmgr reset --force` makes them)")
    for r in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.time))
        output.out(show(f"{r.id}  {r.tree:<20} {when}  {r.files} changed files  (HEAD was {r.head[:12]} {r.branch})"))
