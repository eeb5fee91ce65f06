"""`stackmgr git-setup` (the store's git repository merges series files with stackmgr) and `merge-series`, the
driver git runs."""

from __future__ import annotations

import click

from stackmgr import output
from stackmgr.cli.context import Context, pass_context
from stackmgr.store.config import open_store


@click.command("git-setup")
@click.option("--lfs", is_flag=True, help="Keep the store's artifacts/ in git LFS (needs git-lfs installed).")
@pass_context
def git_setup_cmd(ctx: Context, lfs: bool) -> None:
    """Make git merge series files with stackmgr (appends on both sides keep both): .gitattributes, and this
    clone's git config (git does not clone config: run this once after cloning a store). With --lfs, big
    results under artifacts/ are git LFS objects; a teammate's clone then needs `git lfs pull`."""
    from stackmgr.commands.git_setup import git_setup

    store = open_store(ctx.store)
    git_setup(store, lfs=lfs)
    output.out(f"store {store.root}: series files merge with stackmgr (.gitattributes and this clone's git config)"
               + ("; artifacts/ goes through git LFS (a teammate runs `stackmgr git-setup --lfs` and "
                  "`git lfs pull` after cloning)" if lfs else ""))  # fmt: skip


@click.command("merge-series", hidden=True)
@click.argument("base", type=click.Path(exists=True, dir_okay=False))
@click.argument("ours", type=click.Path(exists=True, dir_okay=False))
@click.argument("theirs", type=click.Path(exists=True, dir_okay=False))
def merge_series_cmd(base: str, ours: str, theirs: str) -> None:
    """git's merge driver for series files (%O %A %B): exit 0 merged, 1 a conflict left for a person."""
    from stackmgr.commands.merge_series import merge_series

    raise SystemExit(0 if merge_series(base, ours, theirs) else 1)
