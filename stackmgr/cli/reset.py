"""`stackmgr reset [TREES] [--to REV] [--force]`: the guarded reset (the rules are commands/reset.py)."""

from __future__ import annotations

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context, tree_names
from stackmgr.store.config import open_store


@click.command("reset")
@click.argument("trees", nargs=-1, shell_complete=tree_names)
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
        if o.branch:  # as `git bisect reset` says it
            output.err(f"stackmgr: {o.tree}: back on branch {o.branch}")
        elif o.branch_moved:
            name, at = o.branch_moved
            output.err(f"stackmgr: {o.tree}: {name} is at {at[:12]}, not at {o.target[:12]}: HEAD stays detached "
                       f"there; `git switch {name}` (or `stackmgr reset --to {name}`) returns to it")  # fmt: skip
        elif o.branch_elsewhere:
            output.err(f"stackmgr: {o.tree}: {o.branch_elsewhere} is checked out in another worktree; HEAD stays "
                       f"detached at {o.target[:12]}")  # fmt: skip
    if not outcomes:
        output.out("no trees to reset")
