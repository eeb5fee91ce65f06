"""`stackmgr git-setup` (the store's git repository merges series files with stackmgr) and `merge-series`, the
driver git runs."""

from __future__ import annotations

import click

from stackmgr import output
from stackmgr.cli.context import Context, pass_context
from stackmgr.store.config import open_store


@click.command("git-setup")
@click.option("--lfs", is_flag=True, help="Keep the store's big artifacts/ files in git LFS (needs git-lfs installed).")
@click.option("--lfs-above", "above", metavar="SIZE", help="With --lfs: the size from which a file is an LFS object "
              "(default 1MiB, or what was chosen before; 0: every file).")  # fmt: skip
@pass_context
def git_setup_cmd(ctx: Context, lfs: bool, above: str | None) -> None:
    """Make git merge series files with stackmgr (appends on both sides keep both): .gitattributes, and this
    clone's git config (git does not clone config: run this once after cloning a store). With --lfs, results
    under artifacts/ of at least --lfs-above are git LFS objects; a teammate's clone then needs `git lfs pull`."""
    from stackmgr.commands.git_setup import git_setup
    from stackmgr.errors import UsageProblem
    from stackmgr.store import lfs as lfs_files

    if above is not None and not lfs:
        raise UsageProblem("--lfs-above goes with --lfs", "`stackmgr git-setup --lfs --lfs-above SIZE`")
    store = open_store(ctx.store)
    tracked = git_setup(store, lfs=lfs, above=None if above is None else lfs_files.parse_size(above))
    output.out(f"store {store.root}: series files merge with stackmgr (.gitattributes and this clone's git config)")
    if lfs:
        size = output.human_size(lfs_files.threshold(store) or 0)
        output.out(f"artifacts/: files of {size} or more are git LFS objects (artifacts/.gitattributes, commit it); "
                   "a teammate runs `stackmgr git-setup --lfs` and `git lfs pull` after cloning")  # fmt: skip
        if tracked:
            made = output.plural(len(tracked), "file")
            output.out(f"  {made} already there made LFS objects: {', '.join(tracked[:3])}"
                       + (" …" if len(tracked) > 3 else "") + "; `git add --renormalize artifacts` before "
                       "committing turns those git already holds into LFS objects")  # fmt: skip


@click.command("merge-series", hidden=True)
@click.argument("base", type=click.Path(exists=True, dir_okay=False))
@click.argument("ours", type=click.Path(exists=True, dir_okay=False))
@click.argument("theirs", type=click.Path(exists=True, dir_okay=False))
def merge_series_cmd(base: str, ours: str, theirs: str) -> None:
    """git's merge driver for series files (%O %A %B): exit 0 merged, 1 a conflict left for a person."""
    from stackmgr.commands.merge_series import merge_series

    raise SystemExit(0 if merge_series(base, ours, theirs) else 1)
