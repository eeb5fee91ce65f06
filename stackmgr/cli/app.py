"""The command line: parse, call the core, render. No git calls and no business rules here."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from stackmgr import __version__, output
from stackmgr.cli import argspec, commands
from stackmgr.errors import UsageProblem
from stackmgr.store.config import add_tree, init_store, open_store
from stackmgr.store.names import check_name

F = TypeVar("F", bound=Callable[..., Any])


class Ctx:
    def __init__(self, store: str | None, as_json: bool) -> None:
        self.store = store
        self.json = as_json


pass_ctx = click.make_pass_decorator(Ctx)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")


def options(specs: tuple[argspec.Opt, ...]) -> Callable[[F], F]:
    """Click options from the declarations the start-up fast path parses too (one source of truth)."""

    def apply(func: F) -> F:
        for opt in reversed(specs):
            if opt.takes_value:
                extra: dict[str, Any] = {"metavar": opt.metavar} if opt.metavar else {}
                if opt.multiple:
                    extra["multiple"] = True
                if opt.dest == "tree":
                    extra["shell_complete"] = _tree_names
                func = click.option(*opt.flags, opt.dest, help=opt.help, **extra)(func)
            else:
                func = click.option(*opt.flags, opt.dest, is_flag=True, help=opt.help)(func)
        return func

    return apply


def _json(ctx: Ctx, local: bool) -> bool:
    return ctx.json or local


def _tree_names(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    try:
        store = open_store(ctx.find_root().params.get("store"))
    except Exception:
        return []
    return [n for n in store.trees if n.startswith(incomplete)]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@options(argspec.GLOBAL)
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
    from stackmgr.commands.status import status_reports

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
    from stackmgr.git.repo import discover_toplevel
    from stackmgr.journal.operation import operation

    store = open_store(ctx.store)
    check_name("tree", name)
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise UsageProblem(f"{path} is not a directory", "give the path of a git working tree")
    top = discover_toplevel(path)
    with operation(store, f"tree add {name}"):
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
@options(argspec.CHECK)
@pass_ctx
def check(ctx: Ctx, trees: tuple[str, ...], verbose: bool, quiet: bool, as_json: bool) -> None:
    """Exit 0 when every change is preserved in a patch, 1 otherwise."""
    code = commands.check(ctx.store, trees, verbose=verbose and not quiet, as_json=_json(ctx, as_json))
    raise SystemExit(code)


@cli.command()
@click.argument("name")
@click.argument("paths", nargs=-1)
@options(argspec.SAVE)
@pass_ctx
def save(ctx: Ctx, /, name: str, paths: tuple[str, ...], **opts: Any) -> None:
    """Save the working-tree changes of a tree (or only PATHS) into patches/NAME.patch."""
    raise SystemExit(commands.save(ctx.store, name, paths, dict(opts, as_json=_json(ctx, opts["as_json"]))))


from stackmgr.cli.journal import gc_cmd, log_cmd, undo_cmd  # noqa: E402
from stackmgr.cli.lifecycle import import_cmd, rebase_cmd  # noqa: E402
from stackmgr.cli.links import link_cmd, links_cmd, show_cmd, verify_cmd  # noqa: E402
from stackmgr.cli.report import interdiff_cmd, lint_cmd, report_cmd  # noqa: E402
from stackmgr.cli.series import export_cmd, series_group  # noqa: E402  (registers the `series` commands)
from stackmgr.cli.shell import guard_cmd, shell_init_cmd  # noqa: E402
from stackmgr.cli.trees import recover_cmd, reset_cmd  # noqa: E402

for _command in (series_group, reset_cmd, recover_cmd, link_cmd, show_cmd, links_cmd, verify_cmd, report_cmd,
                 log_cmd, undo_cmd, gc_cmd, shell_init_cmd, guard_cmd, lint_cmd,
                 interdiff_cmd, export_cmd, import_cmd, rebase_cmd):  # fmt: skip
    cli.add_command(_command)


@cli.command("apply")
@click.argument("series")
@options(argspec.APPLY)
@pass_ctx
def apply_cmd(ctx: Ctx, /, series: str, **opts: Any) -> None:
    """Rebuild the tree state a series describes: HEAD detached at its base, the patches as working-tree changes."""
    raise SystemExit(commands.apply(ctx.store, series, dict(opts, as_json=_json(ctx, opts["as_json"]))))


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the scratch directory and print its path.")
def demo(keep: bool) -> None:
    """Walk the whole workflow on a scratch store and tree in a temporary directory."""
    from stackmgr.commands.demo import run_demo

    run_demo(keep=keep)
