"""`stackmgr series …`: list series, show one (`series NAME`), edit one (`new`, `add`, `remove`, `move`), delete
one (`rm`)."""

from __future__ import annotations

from typing import Any

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context, patch_names, series_names
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

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[click.shell_completion.CompletionItem]:
        # `series NAME` shows one: its names are offered beside the subcommands.
        from click.shell_completion import CompletionItem

        named = [CompletionItem(name) for name in series_names(ctx, self, incomplete)]
        return super().shell_complete(ctx, incomplete) + named


_VERBOSE = click.option("-v", "--verbose", is_flag=True,
                        help="Accepted as in quilt's `series -v`: the +/>/- markers are always shown.")  # fmt: skip
LEGEND = "(+ applied, > top applied, - not applied)"


@click.group("series", cls=_SeriesGroup, invoke_without_command=True)
@_VERBOSE
@json_option()
@pass_context
def series_group(ctx: Context, verbose: bool) -> None:
    """List series, show one (`series NAME`, `series -v NAME`), or edit one."""
    if click.get_current_context().invoked_subcommand is not None:
        return
    from stackmgr.commands.series import applied_in, series_rows

    store = open_store(ctx.store)
    rows = series_rows(store)
    applied = applied_in(store)
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
        where = "".join(f", {p.tally()} in {output.show_text(p.tree)}" for p in applied.get(row["name"], []))
        output.out(f"{row['name']:<40} {n} patch{'es' if n != 1 else ''}{missing}{where}")


@series_group.command("show")
@click.argument("name", shell_complete=series_names)
@_VERBOSE
@json_option()
@pass_context
def show(ctx: Context, name: str, verbose: bool) -> None:
    """Show a series as `stg series` does: each patch marked + applied, > the top applied one, - not applied
    (in the tree the series is applied in), with its tree, +/-, verdict and latest headline result."""
    from stackmgr.commands.series import applied_in, empty_trees, patch_rows, refuse_conflicted_rows

    store = open_store(ctx.store)
    rows = patch_rows(store, name)
    empty = empty_trees(store, name, rows)
    if ctx.json:
        output.emit_json({"schema": 1, "series": name, "description": _description(store, name), "patches": rows,
                          "base": {e["tree"]: e["base"] for e in empty}, "empty": empty})  # fmt: skip
        refuse_conflicted_rows(store, rows)
        return
    where = "".join(f", {p.tally()} in {output.show_text(p.tree)}" for p in applied_in(store).get(name, []))
    output.out(f"series {name}: {len(rows)} patch{'es' if len(rows) != 1 else ''}{where}")
    for line in _description(store, name).splitlines():
        output.out(f"  {output.show_text(line)}".rstrip())
    for e in empty:
        output.out(f"empty: {output.show_text(e['why'])}; apply gives its base {e['base'][:12]} (tree "
                   f"{output.show_text(e['tree'])})")  # fmt: skip
    for row in rows:
        mark = ">" if row["top"] else "+" if row["applied"] else "-"
        if not row["exists"]:
            output.out(f"{mark} {row['position']:>3}. {row['patch']:<44} {output.paint('MISSING', 'red')}")
            continue
        guards = output.show_text(" " + " ".join("#" + g for g in row["guards"]) if row["guards"] else "")
        problem = output.paint(f"  ({output.show_text(row['error'])})", "red") if row["error"] else ""
        output.out(f"{mark} {row['position']:>3}. {row['patch']:<44} {output.show_text(row['tree'] or '?'):<18} "
                   f"+{row['insertions']} -{row['deletions']}{guards}{_evidence(row)}{problem}")  # fmt: skip
    if rows:
        output.out(LEGEND)
    refuse_conflicted_rows(store, rows)


def _description(store: Any, name: str) -> str:
    from stackmgr.store.series import SeriesFile

    return SeriesFile.load(store, name).description


def _evidence(row: dict[str, Any]) -> str:
    """`  rejected, do-not-revive  output_throughput 107.77 tok/s`: the verdict (none while unlinked) and the
    latest result's headline metric."""
    verdict = "" if row["verdict"] == "unlinked" else row["verdict"]
    if row["do_not_revive"]:
        verdict = f"{verdict}, do-not-revive" if verdict else "do-not-revive"
    said = f"  {output.paint(verdict, 'red') if row['do_not_revive'] or verdict == 'rejected' else verdict}" \
        if verdict else ""  # fmt: skip
    m = row["metric"]
    if m is not None:
        unit = f" {output.show_text(m['unit'])}" if m["unit"] else ""
        said += f"  {output.show_text(m['name'])} {m['value']:g}{unit}"
    return said


@series_group.command("new")
@click.argument("name")
@click.option("-m", "--message", "description", default="", metavar="TEXT",
              help="The series' description: the topic its patches share (see `series describe`).")  # fmt: skip
@pass_context
def new(ctx: Context, name: str, description: str) -> None:
    """Create an empty series."""
    from stackmgr.commands.series import new_series

    new_series(open_store(ctx.store), name, description)
    output.out(f"created series {name}")


@series_group.command("describe")
@click.argument("name", shell_complete=series_names)
@click.option("-m", "--message", "description", required=True, metavar="TEXT", help='The description; "" removes it.')
@pass_context
def describe(ctx: Context, name: str, description: str) -> None:
    """Say what a series is about: the topic its patches share, kept as the series file's leading `## ` comment
    lines (quilt and MQ ignore them), shown by `series NAME` and heading its lanes on the lessons page."""
    from stackmgr.commands.series import describe_series

    describe_series(open_store(ctx.store), name, description)
    output.out(f"described series {name}" if description.strip() else f"removed the description of series {name}")


@series_group.command("add")
@click.argument("name", shell_complete=series_names)
@click.argument("patches", nargs=-1, required=True, shell_complete=patch_names)
@click.option("--at", "position", type=click.IntRange(min=1), help="Insert at this position (1 = first).")
@click.option("--override", metavar="REASON", help="Add a do-not-revive lane anyway, saying why.")
@pass_context
def add(ctx: Context, name: str, patches: tuple[str, ...], position: int | None, override: str | None) -> None:
    """Append PATCHES to series NAME (created when missing)."""
    from stackmgr.commands.series import add_patches

    add_patches(open_store(ctx.store), name, patches, position, override)  # a revival's warning: said there
    output.out(f"series {name}: added {', '.join(patches)}")


@series_group.command("remove")
@click.argument("name", shell_complete=series_names)
@click.argument("patches", nargs=-1, required=True, shell_complete=patch_names)
@pass_context
def remove(ctx: Context, name: str, patches: tuple[str, ...]) -> None:
    """Remove PATCHES from series NAME (the patch files stay)."""
    from stackmgr.commands.series import remove_patches

    remove_patches(open_store(ctx.store), name, patches)
    output.out(f"series {name}: removed {', '.join(patches)}")


@series_group.command("move")
@click.argument("name", shell_complete=series_names)
@click.argument("patch", shell_complete=patch_names)
@click.argument("position", type=click.IntRange(min=1))
@pass_context
def move(ctx: Context, name: str, patch: str, position: int) -> None:
    """Move PATCH to POSITION (1 = first) in series NAME."""
    from stackmgr.commands.series import move_patch

    now = move_patch(open_store(ctx.store), name, patch, position)
    output.out(f"series {name}: {patch} is now number {now}")


@series_group.command("rm")
@click.argument("name", shell_complete=series_names)
@pass_context
def rm(ctx: Context, name: str) -> None:
    """Delete series NAME (its patch files stay; `stackmgr undo` brings it back)."""
    from stackmgr.commands.series import delete_series

    listed = delete_series(open_store(ctx.store), name)
    kept = "its file stays" if listed == 1 else "their files stay"
    output.out(f"series {name} deleted ({listed} patch{'es' if listed != 1 else ''} listed; {kept})")
