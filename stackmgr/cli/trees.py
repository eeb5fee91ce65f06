"""`stackmgr trees` and `tree add`: the registered trees."""

from __future__ import annotations

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
