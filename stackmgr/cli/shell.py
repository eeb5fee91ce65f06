"""`stackmgr shell-init` and the hidden `stackmgr guard` the shell function calls (logic in shell_init.py)."""

from __future__ import annotations

import os

import click

from stackmgr import output
from stackmgr.cli.context import Context, pass_context


def _shells(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    from stackmgr.commands.shell_init import SHELLS

    return [s for s in SHELLS if s.startswith(incomplete)]


@click.command("shell-init")
@click.argument("shell", shell_complete=_shells)
@pass_context
def shell_init_cmd(ctx: Context, shell: str) -> None:
    """Print a `git` shell function (bash or zsh) that runs `stackmgr check` before git discards work in a
    registered tree: reset --hard, checkout -- PATHS / . / -f, restore, clean -f, switch -f, stash drop/clear.

    Install with `eval "$(stackmgr shell-init bash)"` in ~/.bashrc (zsh: ~/.zshrc). `command git ...`
    bypasses it once. With --store, the function always asks that store.
    """
    from stackmgr.commands.shell_init import pinned_store, shell_function

    store, not_found = pinned_store(shell, ctx.store)
    if not_found:
        output.err("stackmgr: note: no store found from here; the guard will look from each directory (above "
                   "it, or $STACKMGR_STORE); for a store elsewhere: `stackmgr --store DIR shell-init`")  # fmt: skip
    output.out(shell_function(shell, store).rstrip("\n"))


@click.command("guard", hidden=True)
@click.argument("git_args", nargs=-1, type=click.UNPROCESSED)
@pass_context
def guard_cmd(ctx: Context, git_args: tuple[str, ...]) -> None:
    """Exit 0 when `git GIT_ARGS` may run here; 1, with the reason on stderr, when it would discard work that
    no patch preserves. Called as `stackmgr guard -- ARGS` by the shell-init function."""
    from stackmgr.cli.check import unpreserved_report
    from stackmgr.commands.shell_init import guard_refusal

    refusal = guard_refusal(ctx.store, list(git_args), os.getcwd(), unpreserved_report)
    if refusal is None:
        return
    for line in refusal:
        output.err(line)
    raise SystemExit(1)
