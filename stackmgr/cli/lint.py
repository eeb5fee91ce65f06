"""`stackmgr lint`: the store's consistency findings; exit 1 when there are any."""

from __future__ import annotations

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.store.config import open_store


@click.command("lint")
@json_option()
@pass_context
def lint_cmd(ctx: Context) -> None:
    """Check the store: series vs patches, patch headers and content, every series applying to its base,
    link records. Exit 1 when anything is found; nothing is changed."""
    from stackmgr.commands.lint import conflicts_only, lint_store
    from stackmgr.errors import StackmgrError

    with output.activity("checking the store"):
        try:
            store = open_store(ctx.store)
        except StackmgrError as exc:  # a conflicted config: still list every conflicted file
            findings = conflicts_only(ctx.store, exc)
        else:
            findings = lint_store(store)
    if ctx.json:
        output.emit_json({"schema": 1, "findings": [f.to_json() for f in findings]})
    else:
        for f in findings:
            output.out(output.show_text(f"{f.where}: {f.message}"))
        output.err(f"stackmgr: {len(findings)} finding{'s' if len(findings) != 1 else ''}" if findings
                   else "stackmgr: no findings")  # fmt: skip
    if findings:
        raise SystemExit(1)
