"""`stackmgr interdiff A B` / `interdiff A --against REV|FILE`: the real difference between two versions."""

from __future__ import annotations

import click

from stackmgr import output
from stackmgr.cli.context import Context, pass_context, patch_names
from stackmgr.store.config import open_store


@click.command("interdiff")
@click.argument("a", shell_complete=patch_names)
@click.argument("b", required=False, shell_complete=patch_names)
@click.option("--against", metavar="REV|FILE", help="Compare A with a commit of its tree, or with a patch file.")
@pass_context
def interdiff_cmd(ctx: Context, a: str, b: str | None, against: str | None) -> None:
    """The real difference between two versions of a change: each applied to its base, the results diffed.

    A and B: NAME, NAME@prev (the version `save --update` replaced), NAME@HEX, or a patch file."""
    from stackmgr.commands.interdiff import compare
    from stackmgr.errors import UsageProblem

    if (b is None) == (against is None):
        raise UsageProblem("give B or --against, not both and not neither", "e.g. `stackmgr interdiff fix@prev fix`")
    first, second, rev, data = compare(open_store(ctx.store), a, b, against)
    if not data:
        output.err(f"stackmgr: no difference between {first.label} and {second.label if second else rev}")
        return
    output.out_bytes(data)
