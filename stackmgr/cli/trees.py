"""`stackmgr trees`, `tree add`, `reset` and `recover`: the registered trees, and the commands that move them
back (`apply`, which moves them forward, is in apply.py for its fast start)."""

from __future__ import annotations

import time

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.store.config import open_store


@click.command("trees")
@json_option()
@pass_context
def trees_cmd(ctx: Context) -> None:
    """List the registered trees with HEAD and unpreserved/unprotected counts."""
    from stackmgr.commands.trees import tree_rows

    rows = tree_rows(open_store(ctx.store))
    if ctx.json:
        output.emit_json({"schema": 1, "trees": rows})
        return
    if not rows:
        output.out("no trees registered; add one with `stackmgr tree add NAME PATH`")
    for row in rows:
        if row["state"] != "ok":
            output.out(f"{row['name']:<20} {output.paint(row['state'], 'yellow'):<8} {row['path']}  ({row['error']})")
            continue
        output.out(f"{row['name']:<20} {row['head'][:12]}  {row['changes']} changed, "
                   f"{row['unpreserved']} unpreserved, {row['unprotected']} unprotected  {row['path']}")  # fmt: skip


@click.group("tree")
def tree_group() -> None:
    """Register trees."""


@tree_group.command("add")
@click.argument("name")
@click.argument("path", type=click.Path())
@pass_context
def tree_add(ctx: Context, name: str, path: str) -> None:
    """Register the git working tree at PATH as NAME."""
    from stackmgr.commands.trees import register_tree

    top = register_tree(open_store(ctx.store), name, path)
    output.out(f"registered tree {name}: {top}")


@click.command("reset")
@click.argument("trees", nargs=-1)
@click.option("--to", "to", metavar="REV", help="Reset to REV (default: the applied series' base, else HEAD).")
@click.option("--force", is_flag=True, help="Store unpreserved work in a recovery snapshot, then reset.")
@json_option()
@pass_context
def reset_cmd(ctx: Context, trees: tuple[str, ...], to: str | None, force: bool) -> None:
    """Reset trees to their target, but only when every change is preserved."""
    from stackmgr.commands.reset import reset_trees

    outcomes = reset_trees(open_store(ctx.store), trees, to=to, force=force)
    if ctx.json:
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
@json_option()
@pass_context
def recover_cmd(ctx: Context, recovery_id: str | None) -> None:
    """List recovery snapshots, or restore one (ID) into its tree."""
    from stackmgr.commands.recover import finish_interrupted, list_recoveries, restore

    store = open_store(ctx.store)
    rolled = finish_interrupted(store)
    if rolled is not None:
        what = "rolled back" if rolled.rolled_back else "had completed; marked done"
        output.err(f"stackmgr: interrupted `{rolled.command}` (op {rolled.id}) {what}")
    if recovery_id is not None:
        rec = restore(store, recovery_id)
        output.out(f"{rec.tree}: restored recovery snapshot {rec.id} ({rec.files} changed files)")
        return
    found = list_recoveries(store)
    if ctx.json:
        output.emit_json({"schema": 1, "recoveries": [r.to_json() for r in found]})
        return
    if not found:
        output.out("no recovery snapshots (`stackmgr reset --force` makes them)")
    for r in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.time))
        output.out(f"{r.id}  {r.tree:<20} {when}  {r.files} changed files  (HEAD was {r.head[:12]} {r.branch})")
