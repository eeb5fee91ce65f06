"""`stackmgr series …`: list series, show one (`series NAME`), edit one (`new`, `add`, `remove`, `move`), delete
one (`rm`)."""

from __future__ import annotations

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.store.config import open_store


class _SeriesGroup(click.Group):
    """`stackmgr series NAME` shows a series; `stackmgr series new|add|remove|move|rm …` edit or delete one."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        # Resolved after the group's own options, so `series --json NAME` works like `series NAME --json`.
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            return "show", self.commands["show"], args
        return super().resolve_command(ctx, args)


@click.group("series", cls=_SeriesGroup, invoke_without_command=True)
@json_option()
@pass_context
def series_group(ctx: Context) -> None:
    """List series, show one (`series NAME`), or edit one."""
    if click.get_current_context().invoked_subcommand is not None:
        return
    from stackmgr.commands.series import series_rows

    rows = series_rows(open_store(ctx.store))
    if ctx.json:
        output.emit_json({"schema": 1, "series": rows})
        return
    if not rows:
        output.out("no series yet; create one with `stackmgr series new NAME` "
                   "or `stackmgr save NAME --series S`")  # fmt: skip
    for row in rows:
        if row["error"]:
            output.out(f"{row['name']:<40} {output.paint(output.show_text(row['error']), 'red')}")
            continue
        n = row["patches"]
        missing = output.paint(f", {row['missing']} missing", "red") if row["missing"] else ""
        output.out(f"{row['name']:<40} {n} patch{'es' if n != 1 else ''}{missing}")


@series_group.command("show")
@click.argument("name")
@json_option()
@pass_context
def show(ctx: Context, name: str) -> None:
    """Show a series: each patch with its tree, +/- and whether its file exists."""
    from stackmgr.commands.series import patch_rows, refuse_conflicted_rows

    store = open_store(ctx.store)
    rows = patch_rows(store, name)
    if ctx.json:
        output.emit_json({"schema": 1, "series": name, "patches": rows})
        refuse_conflicted_rows(store, rows)
        return
    output.out(f"series {name}: {len(rows)} patch{'es' if len(rows) != 1 else ''}")
    for row in rows:
        if not row["exists"]:
            output.out(f"  {row['position']:>3}. {row['patch']:<44} {output.paint('MISSING', 'red')}")
            continue
        guards = output.show_text(" " + " ".join("#" + g for g in row["guards"]) if row["guards"] else "")
        problem = output.paint(f"  ({output.show_text(row['error'])})", "red") if row["error"] else ""
        output.out(f"  {row['position']:>3}. {row['patch']:<44} {output.show_text(row['tree'] or '?'):<18} "
                   f"+{row['insertions']} -{row['deletions']}{guards}{problem}")  # fmt: skip
    refuse_conflicted_rows(store, rows)


@series_group.command("new")
@click.argument("name")
@pass_context
def new(ctx: Context, name: str) -> None:
    """Create an empty series."""
    from stackmgr.commands.series import new_series

    new_series(open_store(ctx.store), name)
    output.out(f"created series {name}")


@series_group.command("add")
@click.argument("name")
@click.argument("patches", nargs=-1, required=True)
@click.option("--at", "position", type=click.IntRange(min=1), help="Insert at this position (1 = first).")
@click.option("--override", metavar="REASON", help="Add a do-not-revive lane anyway, saying why.")
@pass_context
def add(ctx: Context, name: str, patches: tuple[str, ...], position: int | None, override: str | None) -> None:
    """Append PATCHES to series NAME (created when missing)."""
    from stackmgr.commands.series import add_patches

    add_patches(open_store(ctx.store), name, patches, position, override)  # a revival's warning: said there
    output.out(f"series {name}: added {', '.join(patches)}")


@series_group.command("remove")
@click.argument("name")
@click.argument("patches", nargs=-1, required=True)
@pass_context
def remove(ctx: Context, name: str, patches: tuple[str, ...]) -> None:
    """Remove PATCHES from series NAME (the patch files stay)."""
    from stackmgr.commands.series import remove_patches

    remove_patches(open_store(ctx.store), name, patches)
    output.out(f"series {name}: removed {', '.join(patches)}")


@series_group.command("move")
@click.argument("name")
@click.argument("patch")
@click.argument("position", type=click.IntRange(min=1))
@pass_context
def move(ctx: Context, name: str, patch: str, position: int) -> None:
    """Move PATCH to POSITION (1 = first) in series NAME."""
    from stackmgr.commands.series import move_patch

    now = move_patch(open_store(ctx.store), name, patch, position)
    output.out(f"series {name}: {patch} is now number {now}")


@series_group.command("rm")
@click.argument("name")
@pass_context
def rm(ctx: Context, name: str) -> None:
    """Delete series NAME (its patch files stay; `stackmgr undo` brings it back)."""
    from stackmgr.commands.series import delete_series

    listed = delete_series(open_store(ctx.store), name)
    output.out(f"series {name} deleted ({listed} patch{'es' if listed != 1 else ''} listed; their files stay)")
