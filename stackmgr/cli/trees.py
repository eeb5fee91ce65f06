"""`stackmgr trees`, `tree add`, `tree set`, `tree rm`: the registered trees and where they live here."""

from __future__ import annotations

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context, tree_names
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
    """Register the git working tree at PATH as NAME (the name is shared with the store; the path is this
    machine's, in stackmgr.local.toml). A tree a teammate registered gets its path here."""
    from stackmgr.commands.trees import register_tree

    top = register_tree(open_store(ctx.store), name, path)
    output.out(f"registered tree {name}: {top}")


@tree_group.command("set")
@click.argument("name", shell_complete=tree_names)
@click.argument("path", type=click.Path(), required=False)
@pass_context
def tree_set(ctx: Context, name: str, path: str | None) -> None:
    """Say where tree NAME lives on this machine (stackmgr.local.toml, never shared). Without PATH, accept the
    default path the shared config suggests (never used until accepted here: a pull could point it anywhere)."""
    from stackmgr.commands.trees import set_tree

    top = set_tree(open_store(ctx.store), name, path)
    output.out(f"tree {name} is at {top} on this machine")


@tree_group.command("rm")
@click.argument("name", shell_complete=tree_names)
@pass_context
def tree_rm(ctx: Context, name: str) -> None:
    """Forget tree NAME (refused while patches of the store belong to it): its name in the shared config and its
    path on this machine. The tree itself is not touched, and a teammate's machine that placed it keeps it
    registered and guarded until `tree rm` there."""
    from stackmgr.commands.trees import forget_tree

    output.out(forget_tree(open_store(ctx.store), name))
