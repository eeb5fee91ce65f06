"""`stackmgr shell-init` and the hidden `stackmgr guard` the shell function calls (logic in shell_init.py)."""

from __future__ import annotations

import os

import click

from stackmgr import output
from stackmgr.cli.context import store_and_json


def _shells(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    from stackmgr.commands.shell_init import SHELLS

    return [s for s in SHELLS if s.startswith(incomplete)]


@click.command("shell-init")
@click.argument("shell", shell_complete=_shells)
@click.pass_context
def shell_init_cmd(ctx: click.Context, shell: str) -> None:
    """Print a `git` shell function (bash or zsh) that runs `stackmgr check` before git discards work in a
    registered tree: reset --hard, checkout -- PATHS / . / -f, restore, clean -f, switch -f, stash drop/clear.

    Install with `eval "$(stackmgr shell-init bash)"` in ~/.bashrc (zsh: ~/.zshrc). `command git ...`
    bypasses it once. With --store, the function always asks that store.
    """
    from stackmgr.commands.shell_init import SHELLS, shell_function

    store = store_and_json(ctx)[0]
    if shell in SHELLS and store is None and not os.environ.get("STACKMGR_STORE"):
        from stackmgr.errors import UsageProblem
        from stackmgr.store.config import find_store_root

        try:  # run inside a store: the function keeps asking that one, wherever the user is
            store = find_store_root(None)
        except UsageProblem:
            output.err("stackmgr: note: no store found from here; the guard will look from each directory (above "
                       "it, or $STACKMGR_STORE); for a store elsewhere: `stackmgr --store DIR shell-init`")  # fmt: skip
    output.out(shell_function(shell, store).rstrip("\n"))


@click.command("guard", hidden=True)
@click.argument("git_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def guard_cmd(ctx: click.Context, git_args: tuple[str, ...]) -> None:
    """Exit 0 when `git GIT_ARGS` may run here; 1, with the reason on stderr, when it would discard work that
    no patch preserves. Called as `stackmgr guard -- ARGS` by the shell-init function."""
    from stackmgr.commands.shell_init import guard_refusal

    refusal = guard_refusal(store_and_json(ctx)[0], list(git_args), os.getcwd())
    if refusal is None:
        return
    for line in refusal:
        output.err(line)
    raise SystemExit(1)
