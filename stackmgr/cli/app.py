"""The command line: parse, call the core, render. No git calls and no business rules here.

This module holds the `stackmgr` group, the click side of the commands whose bodies must start without click
(`check`, `status`, `save`, `apply`, `import`, `rebase`, `run`: bodies in check.py, status.py, save.py,
apply.py, import_.py, rebase.py, run.py), `init` and `demo`, and
COMMANDS: every other command, registered once, at the end. Each lives in the module named after it (`series
…` in series.py, `log`/`undo`/`gc` in undo.py, `trees`/`tree add` in trees.py, `reset` in reset.py, …).
"""

from __future__ import annotations

from typing import Any

import click

from stackmgr import __version__, output
from stackmgr.cli import apply as apply_body
from stackmgr.cli import argspec
from stackmgr.cli import check as check_body
from stackmgr.cli import import_ as import_body
from stackmgr.cli import rebase as rebase_body
from stackmgr.cli import run as run_body
from stackmgr.cli import save as save_body
from stackmgr.cli import status as status_body
from stackmgr.cli.ab import ab_cmd
from stackmgr.cli.ablate import ablate_cmd
from stackmgr.cli.bisect import bisect_cmd
from stackmgr.cli.compare import compare_cmd
from stackmgr.cli.context import Context, json_option, options, pass_context, series_names, store_everywhere, tree_names
from stackmgr.cli.diff import diff_cmd
from stackmgr.cli.export import export_cmd
from stackmgr.cli.git_setup import git_setup_cmd, merge_series_cmd
from stackmgr.cli.help import EPILOG, NO_STORE, help_cmd
from stackmgr.cli.interdiff import interdiff_cmd
from stackmgr.cli.links import link_cmd, links_cmd, show_cmd, verify_cmd
from stackmgr.cli.lint import lint_cmd
from stackmgr.cli.navigate import drop_cmd, pop_cmd, push_cmd, refresh_cmd, rename_cmd, top_cmd
from stackmgr.cli.recover import recover_cmd
from stackmgr.cli.report import report_cmd
from stackmgr.cli.reset import reset_cmd
from stackmgr.cli.series import series_group
from stackmgr.cli.shell import guard_cmd, shell_init_cmd
from stackmgr.cli.trees import tree_group, trees_cmd  # tree_group holds `tree add`
from stackmgr.cli.undo import gc_cmd, log_cmd, redo_cmd, undo_cmd


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    invoke_without_command=True,
    epilog=EPILOG,
    subcommand_metavar="COMMAND [ARGS]...",
)
@options(argspec.GLOBAL)
@click.version_option(__version__, prog_name="stackmgr")
@click.pass_context
def cli(ctx: click.Context, store: str | None, debug: bool) -> None:
    """Keep dirty git trees safe: save changes as patches, order them in series, guard resets.

    --store DIR and --json may come before or after the command (`run`: before its CMD)."""
    ctx.ensure_object(Context).store = store  # `--json` here has set .json already; `CMD --store` may override
    if ctx.invoked_subcommand is None:  # bare `stackmgr`: the help, asked for (stdout, exit 0), as `stackmgr help`
        output.out(ctx.get_help())


@click.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def init(directory: str) -> None:
    """Create a store (stackmgr.toml, patches/, series/, links/) in DIRECTORY."""
    from stackmgr.store.config import init_store

    root, created = init_store(directory)
    output.out(f"{'created' if created else 'already a'} store {root}")
    from stackmgr.commands.git_setup import set_up_new_store

    set_up_new_store(root)  # series files merge with stackmgr once the store is a git repository


@click.command()
@click.argument("trees", nargs=-1, shell_complete=tree_names)
@json_option()
@pass_context
def status(ctx: Context, trees: tuple[str, ...]) -> None:
    """Per tree: HEAD, changes and the patches that preserve them, unprotected files."""
    status_body.run(ctx.store, trees, as_json=ctx.json)


@click.command()
@click.argument("trees", nargs=-1, shell_complete=tree_names)
@options(argspec.CHECK)
@pass_context
def check(ctx: Context, /, trees: tuple[str, ...], **values: Any) -> None:
    """Exit 0 when every change is preserved in a patch, 1 otherwise."""
    raise SystemExit(check_body.run(check_body.CheckArgs.from_values(ctx.store, ctx.json, trees, values)))


@click.command()
@click.argument("name")
@click.argument("paths", nargs=-1)
@options(argspec.SAVE)
@pass_context
def save(ctx: Context, /, name: str, paths: tuple[str, ...], **values: Any) -> None:
    """Save the working-tree changes of a tree (or only PATHS) into patches/NAME.patch."""
    raise SystemExit(save_body.run(save_body.SaveArgs.from_values(ctx.store, ctx.json, name, paths, values)))


@click.command("apply")
@click.argument("series", required=False, default="", shell_complete=series_names)
@options(argspec.APPLY)
@pass_context
def apply_cmd(ctx: Context, /, series: str, **values: Any) -> None:
    """Rebuild the tree state a series describes: HEAD detached at its base, the patches as working-tree changes.
    With --link LINK instead, the exact trees a result was measured on."""
    raise SystemExit(apply_body.run(apply_body.ApplyArgs.from_values(ctx.store, ctx.json, series, values)))


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@options(argspec.IMPORT)
@pass_context
def import_cmd(ctx: Context, /, files: tuple[str, ...], **values: Any) -> None:
    """Adopt patches: git format-patch files or an mbox, quilt patches (DEP-3 or free text), plain diff -u /
    diff -ruN output, or a quilt directory (its `series` gives the order). Each is applied in a scratch index and
    saved in stackmgr's format; files that are not patches, truncated or for another tree are refused one by
    one. Exit 0 when all were imported, 1 when some were refused, 3 when none could be."""
    raise SystemExit(import_body.run(ctx.store, ctx.json, files, values))


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@options(argspec.RUN)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_context
def run_cmd(ctx: Context, /, command: tuple[str, ...], **values: Any) -> None:
    """Run CMD (after `--`), tee its output to a log, record the measured state before and after, the command,
    its exit code, times, environment, host and accelerators, the files written under the result directories
    and the metrics in them, as a draft (experimental) link; exit with CMD's own code. CMD runs in the measured
    tree (in the directory you stand in when that is inside it; else at the tree's top, said on stderr), or in
    --cwd DIR; a relative --result-dir or --from-json is read from there too."""
    raise SystemExit(run_body.run(ctx.store, ctx.json, command, values))


@click.command("rebase")
@click.argument("series", required=False, shell_complete=series_names)
@options(argspec.REBASE)
@pass_context
def rebase_cmd(ctx: Context, /, series: str | None, **values: Any) -> None:
    """Carry a series to a new upstream base, classifying every patch: unchanged, context drift, merged (3-way),
    conflict resolved, already upstream. A series that carries cleanly needs no worktree; one that conflicts is
    carried in a scratch worktree, where you resolve it. Your working tree is not touched; the patches and the
    series are rewritten only once all of them are carried (`stackmgr undo` reverts that)."""
    raise SystemExit(rebase_body.run(ctx.store, ctx.json, series, values))


@click.command()
@click.option("--keep", is_flag=True, help="Keep the scratch directory and print its path.")
def demo(keep: bool) -> None:
    """Walk the whole workflow on a scratch store and tree in a temporary directory."""
    from stackmgr.commands.demo import run_demo

    run_demo(keep=keep)


# Every command of `stackmgr`, once (click lists them sorted by name).
COMMANDS: tuple[click.Command, ...] = (
    init, trees_cmd, tree_group, status, check, save, apply_cmd, reset_cmd, recover_cmd, series_group, export_cmd,
    import_cmd, rebase_cmd, push_cmd, pop_cmd, refresh_cmd, top_cmd, rename_cmd, drop_cmd, diff_cmd, interdiff_cmd,
    link_cmd, show_cmd, links_cmd, verify_cmd, compare_cmd, run_cmd, bisect_cmd, ab_cmd, ablate_cmd, report_cmd,
    lint_cmd, log_cmd, undo_cmd, redo_cmd, gc_cmd, shell_init_cmd, guard_cmd, git_setup_cmd, merge_series_cmd, demo,
    help_cmd,
)  # fmt: skip

for _command in COMMANDS:
    cli.add_command(_command)
store_everywhere(cli, skip=NO_STORE)  # `status --store X`, `series --store X show S`: as `--json`, anywhere
