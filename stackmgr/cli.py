"""The command line: parse, call the core, render. No git calls and no business rules here."""

from __future__ import annotations

import os
from typing import Any

import click

from stackmgr import __version__, commands, output
from stackmgr.config import add_tree, init_store, open_store
from stackmgr.errors import UsageProblem
from stackmgr.names import check_name


class Ctx:
    def __init__(self, store: str | None, as_json: bool) -> None:
        self.store = store
        self.json = as_json


pass_ctx = click.make_pass_decorator(Ctx)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")


def _json(ctx: Ctx, local: bool) -> bool:
    return ctx.json or local


def _tree_names(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    try:
        store = open_store(ctx.find_root().params.get("store"))
    except Exception:
        return []
    return [n for n in store.trees if n.startswith(incomplete)]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", metavar="DIR", help="The store directory (default: $STACKMGR_STORE, then walk up).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on listing commands.")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
@click.version_option(__version__, prog_name="stackmgr")
@click.pass_context
def cli(ctx: click.Context, store: str | None, as_json: bool, debug: bool) -> None:
    """Keep dirty git trees safe: save changes as patches, order them in series, guard resets."""
    ctx.obj = Ctx(store, as_json)


@cli.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def init(directory: str) -> None:
    """Create a store (stackmgr.toml, patches/, series/, links/) in DIRECTORY."""
    root, created = init_store(directory)
    output.out(f"{'created' if created else 'already a'} store {root}")


@cli.command("trees")
@json_option
@pass_ctx
def trees_cmd(ctx: Ctx, as_json: bool) -> None:
    """List the registered trees with HEAD and unpreserved/unprotected counts."""
    from stackmgr.status import status_reports

    store = open_store(ctx.store)
    reports = status_reports(store, (), full=False)
    rows: list[dict[str, Any]] = []
    for r in reports:
        snap = r.snapshot
        rows.append({
            "name": r.name, "path": r.path, "state": r.state, "error": r.error,
            "head": snap.head if snap else None, "changes": len(snap.changes) if snap else None,
            "unpreserved": len(r.blockers) if snap else None,
            "unprotected": len(snap.unprotected) if snap else None,
        })  # fmt: skip
    if _json(ctx, as_json):
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


@cli.group("tree")
def tree_group() -> None:
    """Register trees."""


@tree_group.command("add")
@click.argument("name")
@click.argument("path", type=click.Path())
@pass_ctx
def tree_add(ctx: Ctx, name: str, path: str) -> None:
    """Register the git working tree at PATH as NAME."""
    from stackmgr.fsutil import locked
    from stackmgr.git import discover_toplevel

    store = open_store(ctx.store)
    check_name("tree", name)
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise UsageProblem(f"{path} is not a directory", "give the path of a git working tree")
    top = discover_toplevel(path)
    with locked(store.lock_path, "the store"):
        add_tree(store, name, top)
    output.out(f"registered tree {name}: {top}")


@cli.command()
@click.argument("trees", nargs=-1, shell_complete=_tree_names)
@json_option
@pass_ctx
def status(ctx: Ctx, trees: tuple[str, ...], as_json: bool) -> None:
    """Per tree: HEAD, changes and the patches that preserve them, unprotected files."""
    commands.status(ctx.store, trees, as_json=_json(ctx, as_json))


@cli.command()
@click.argument("trees", nargs=-1, shell_complete=_tree_names)
@click.option("-v", "--verbose", is_flag=True, help="List the unpreserved changes.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing (the default).")
@json_option
@pass_ctx
def check(ctx: Ctx, trees: tuple[str, ...], verbose: bool, quiet: bool, as_json: bool) -> None:
    """Exit 0 when every change is preserved in a patch, 1 otherwise."""
    code = commands.check(ctx.store, trees, verbose=verbose and not quiet, as_json=_json(ctx, as_json))
    raise SystemExit(code)


@cli.command()
@click.argument("name")
@click.argument("paths", nargs=-1)
@click.option("-t", "--tree", help="The tree to save from (needed when several have changes).",
              shell_complete=_tree_names)  # fmt: skip
@click.option("-m", "--message", help="Description: first line is the subject.")
@click.option("--series", help="Append the patch to this series (created when missing).")
@click.option("--base", "base", metavar="REV", help="Diff from REV instead of HEAD (keeps local commits).")
@click.option("--update", is_flag=True, help="Replace an existing patch (the old one is kept for interdiff).")
@click.option("--allow-conflict-markers", is_flag=True, help="Save even if added lines look like conflict markers.")
@json_option
@pass_ctx
def save(
    ctx: Ctx,
    name: str,
    paths: tuple[str, ...],
    tree: str | None,
    message: str | None,
    series: str | None,
    base: str | None,
    update: bool,
    allow_conflict_markers: bool,
    as_json: bool,
) -> None:
    """Save the working-tree changes of a tree (or only PATHS) into patches/NAME.patch."""
    from stackmgr.save import SaveRequest
    from stackmgr.save import save as do_save

    req = SaveRequest(name, tree, message, series, base, paths, update, allow_conflict_markers)
    with output.activity(f"saving {name}: snapshot, diff, round-trip check"):
        result = do_save(open_store(ctx.store), req)
    for warning in result.warnings:
        output.err(f"stackmgr: note: {warning}")
    if _json(ctx, as_json):
        data: dict[str, Any] = {"schema": 1, **{k: v for k, v in vars(result).items() if k != "warnings"}}
        output.emit_json(data)
        return
    rel = os.path.relpath(result.path, open_store(ctx.store).root)
    what = {"saved": "saved", "updated": "updated", "unchanged": "unchanged, already saved as"}[result.outcome]
    tail = f"; in series {result.series}" if result.series else ""
    output.out(f"{what} {rel}: {result.files} files, +{result.insertions} -{result.deletions} "
               f"(tree {result.tree}, base {result.base[:12]}){tail}")  # fmt: skip


from stackmgr.cli_series import series_group  # noqa: E402  (registers the `series` commands)

cli.add_command(series_group)


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the scratch directory and print its path.")
def demo(keep: bool) -> None:
    """Walk the whole workflow on a scratch store and tree in a temporary directory."""
    from stackmgr.demo import run_demo

    run_demo(keep=keep)
