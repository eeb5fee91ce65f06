"""`stackmgr apply`, `reset` and `recover`: the commands that change working trees."""

from __future__ import annotations

import time

import click

from stackmgr import output
from stackmgr.config import open_store


def _wants_json(ctx: click.Context, local: bool) -> bool:
    return local or bool(ctx.find_root().params.get("as_json"))


def _store_dir(ctx: click.Context) -> str | None:
    store = ctx.find_root().params.get("store")
    return store if isinstance(store, str) else None


@click.command("apply")
@click.argument("series")
@click.option("-t", "--tree", "only_tree", help="Apply only this tree's patches of the series.")
@click.option("--guard", "guards", multiple=True, help="Activate an MQ guard (#+GUARD / #-GUARD lines).")
@click.option("--3way", "three_way", is_flag=True, help="Fall back to 3-way merges using the full blob ids.")
@click.option("--dry-run", is_flag=True, help="Check and compute everything; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def apply_cmd(ctx: click.Context, series: str, only_tree: str | None, guards: tuple[str, ...], three_way: bool,
              dry_run: bool, as_json: bool) -> None:  # fmt: skip
    """Rebuild the tree state a series describes: HEAD detached at its base, the patches as working-tree changes."""
    from stackmgr.apply import apply_series

    store = open_store(_store_dir(ctx))
    with output.activity(f"applying {series}"):
        outcomes = apply_series(store, series, only_tree=only_tree, guards=guards, three_way=three_way,
                                dry_run=dry_run)  # fmt: skip
    if _wants_json(ctx, as_json):
        output.emit_json({"schema": 1, "series": series, "dry_run": dry_run, "trees": [
            {"tree": o.tree, "base": o.base, "patches": o.patches, "result_tree": o.result, "changed": o.changed}
            for o in outcomes]})  # fmt: skip
        return
    verb = "would apply" if dry_run else "applied"
    for o in outcomes:
        n = len(o.patches)
        state = "working tree changes" if o.changed else "working tree already there"
        output.out(f"{o.tree}: {verb} {series} ({n} patch{'es' if n != 1 else ''}) on {o.base[:12]}; "
                   f"tree {o.result}; {state}")  # fmt: skip


@click.command("reset")
@click.argument("trees", nargs=-1)
@click.option("--to", "to", metavar="REV", help="Reset to REV (default: the applied series' base, else HEAD).")
@click.option("--force", is_flag=True, help="Store unpreserved work in a recovery snapshot, then reset.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def reset_cmd(ctx: click.Context, trees: tuple[str, ...], to: str | None, force: bool, as_json: bool) -> None:
    """Reset trees to their target, but only when every change is preserved (SPEC §4)."""
    from stackmgr.reset import reset_trees

    outcomes = reset_trees(open_store(_store_dir(ctx)), trees, to=to, force=force)
    if _wants_json(ctx, as_json):
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
    from stackmgr.recover import list_recoveries, restore

    store = open_store(_store_dir(ctx))
    if recovery_id is not None:
        rec = restore(store, recovery_id)
        output.out(f"{rec.tree}: restored recovery snapshot {rec.id} ({rec.files} changed files)")
        return
    found = list_recoveries(store)
    if _wants_json(ctx, as_json):
        output.emit_json({"schema": 1, "recoveries": [r.to_json() for r in found]})
        return
    if not found:
        output.out("no recovery snapshots (`stackmgr reset --force` makes them)")
    for r in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.time))
        output.out(f"{r.id}  {r.tree:<20} {when}  {r.files} changed files  (HEAD was {r.head[:12]} {r.branch})")
