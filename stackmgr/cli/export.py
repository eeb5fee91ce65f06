"""`stackmgr export SERIES --quilt DIR | --mbox FILE | --git BRANCH`: a single-tree series handed to other tools."""

from __future__ import annotations

import click

from stackmgr import output
from stackmgr.cli.context import Context, pass_context, series_names
from stackmgr.errors import UsageProblem
from stackmgr.store.config import open_store


@click.command("export")
@click.argument("series", shell_complete=series_names)
@click.option("--quilt", "quilt_dir", metavar="DIR", help="Write DIR/<patches> and DIR/series for quilt.")
@click.option("--mbox", "mbox", metavar="FILE", help="Write one mbox for `git am --keep-cr FILE`.")
@click.option("--git", "branch", metavar="BRANCH", help="Make BRANCH in the tree: one commit per patch.")
@click.option("--guard", "guards", multiple=True, metavar="G", help="Activate MQ guard G (repeatable).")
@pass_context
def export_cmd(ctx: Context, series: str, quilt_dir: str | None, mbox: str | None, branch: str | None,
               guards: tuple[str, ...]) -> None:  # fmt: skip
    """Hand a single-tree series to quilt, to `git am`, or to a new branch (the tree itself is not touched)."""
    from stackmgr.commands.export import export_git, export_mbox, export_quilt

    chosen = [x for x in (quilt_dir, mbox, branch) if x is not None]
    if len(chosen) != 1:
        raise UsageProblem("give exactly one of --quilt DIR, --mbox FILE, --git BRANCH",
                           f"e.g. `stackmgr export {series} --mbox {series}.mbox`")  # fmt: skip
    store = open_store(ctx.store)
    if quilt_dir is not None:
        names, binary = export_quilt(store, series, quilt_dir, guards)
        where = f"{quilt_dir} (QUILT_PATCHES={quilt_dir} quilt push -a)"
        if binary:  # GNU patch refuses them: say so rather than hand out a command that fails
            shown = ", ".join(binary[:3]) + (" …" if len(binary) > 3 else "")
            where = (f"{quilt_dir}; {shown} hold{'s' if len(binary) == 1 else ''} a binary change, which quilt "
                     f"(GNU patch) cannot apply: use `stackmgr export {series} --mbox FILE` and `git am` for "
                     "those")  # fmt: skip
    elif mbox is not None:
        names = export_mbox(store, series, mbox, guards)
        where = f"{mbox} (git am --keep-cr {mbox})"
    else:
        assert branch is not None
        names = export_git(store, series, branch, guards)
        where = f"branch {branch}"
    output.out(f"exported {series} ({len(names)} patch{'es' if len(names) != 1 else ''}) to {where}")
