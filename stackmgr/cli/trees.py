"""`stackmgr reset` and `recover` (and `apply`, in commands.py for its fast start): commands that change trees."""

from __future__ import annotations

import time

import click

from stackmgr import output
from stackmgr.cli.context import store_and_json
from stackmgr.store.config import open_store


@click.command("reset")
@click.argument("trees", nargs=-1)
@click.option("--to", "to", metavar="REV", help="Reset to REV (default: the applied series' base, else HEAD).")
@click.option("--force", is_flag=True, help="Store unpreserved work in a recovery snapshot, then reset.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def reset_cmd(ctx: click.Context, trees: tuple[str, ...], to: str | None, force: bool, as_json: bool) -> None:
    """Reset trees to their target, but only when every change is preserved."""
    from stackmgr.commands.reset import reset_trees

    outcomes = reset_trees(open_store(store_and_json(ctx)[0]), trees, to=to, force=force)
    if store_and_json(ctx)[1]:
        output.emit_json({"schema": 1, "trees": [vars(o) for o in outcomes]})
        return
    for o in outcomes:
        if o.recovery:
            output.err(f"stackmgr: {o.tree}: working tree stored as recovery snapshot {o.recovery}; "
                       f"undo with `stackmgr recover {o.recovery}`")  # fmt: skip
        output.out(f"{o.tree}: {'reset to' if o.moved else 'already at'} {o.target[:12]}")
    if not outcomes:
        output.out("no trees to reset")


@click.command("recover")
@click.argument("recovery_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def recover_cmd(ctx: click.Context, recovery_id: str | None, as_json: bool) -> None:
    """List recovery snapshots, or restore one (ID) into its tree."""
    from stackmgr.commands.recover import list_recoveries, restore
    from stackmgr.journal.rollback import recover_interrupted

    store = open_store(store_and_json(ctx)[0])
    rolled = recover_interrupted(store)
    if rolled is not None:
        what = "rolled back" if rolled.state == "rolled-back" else "had completed; marked done"
        output.err(f"stackmgr: interrupted `{rolled.command}` (op {rolled.id}) {what}")
    if recovery_id is not None:
        rec = restore(store, recovery_id)
        output.out(f"{rec.tree}: restored recovery snapshot {rec.id} ({rec.files} changed files)")
        return
    found = list_recoveries(store)
    if store_and_json(ctx)[1]:
        output.emit_json({"schema": 1, "recoveries": [r.to_json() for r in found]})
        return
    if not found:
        output.out("no recovery snapshots (`stackmgr reset --force` makes them)")
    for r in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.time))
        output.out(f"{r.id}  {r.tree:<20} {when}  {r.files} changed files  (HEAD was {r.head[:12]} {r.branch})")
