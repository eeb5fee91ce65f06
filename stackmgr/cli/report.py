"""`stackmgr report -o DIR`: the static HTML site of series, patches, evidence and the graveyard."""

from __future__ import annotations

import os

import click

from stackmgr import output
from stackmgr.cli.context import store_and_json
from stackmgr.store.config import open_store


@click.command("report")
@click.option("-o", "--output", "out_dir", required=True, metavar="DIR",
              help="Directory to write the site into (new, empty, or an earlier report).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def report_cmd(ctx: click.Context, out_dir: str, as_json: bool) -> None:
    """Write a static HTML site: series, patches (diff beside evidence), results, the graveyard of lessons."""
    from stackmgr.evidence.report.site import write_report

    store_dir, global_json = store_and_json(ctx)
    store = open_store(store_dir)
    with output.activity("writing the report"):
        target, site = write_report(store, out_dir)
    if as_json or global_json:
        output.emit_json({"schema": 1, "dir": target, "pages": site.html_pages, "patches": site.patches,
                          "links": site.links})  # fmt: skip
        return
    output.out(f"wrote report: {os.path.join(out_dir, 'index.html')} ({site.patches} patches, {site.links} links)")


@click.command("lint")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def lint_cmd(ctx: click.Context, as_json: bool) -> None:
    """Check the store: series vs patches, patch headers and content, every series applying to its base,
    link records. Exit 1 when anything is found; nothing is changed."""
    from stackmgr.commands.lint import lint_store

    store_dir, global_json = store_and_json(ctx)
    with output.activity("checking the store"):
        findings = lint_store(open_store(store_dir))
    if as_json or global_json:
        output.emit_json({"schema": 1, "findings": [f.to_json() for f in findings]})
    else:
        for f in findings:
            output.out(f"{f.where}: {f.message}")
        output.err(f"stackmgr: {len(findings)} finding{'s' if len(findings) != 1 else ''}" if findings
                   else "stackmgr: no findings")  # fmt: skip
    if findings:
        raise SystemExit(1)


@click.command("interdiff")
@click.argument("a")
@click.argument("b", required=False)
@click.option("--against", metavar="REV|FILE", help="Compare A with a commit of its tree, or with a patch file.")
@click.pass_context
def interdiff_cmd(ctx: click.Context, a: str, b: str | None, against: str | None) -> None:
    """The real difference between two versions of a change: each applied to its base, the results diffed.

    A and B: NAME, NAME@prev (the version `save --update` replaced), NAME@HEX, or a patch file."""
    from stackmgr.commands.interdiff import interdiff, resolve
    from stackmgr.errors import UsageProblem

    if (b is None) == (against is None):
        raise UsageProblem("give B or --against, not both and not neither", "e.g. `stackmgr interdiff fix@prev fix`")
    store = open_store(store_and_json(ctx)[0])
    first = resolve(store, a)
    rev = None
    if against is not None and not os.path.isfile(against):
        rev = against
    second = resolve(store, b if b is not None else str(against)) if rev is None else None
    data = interdiff(store, first, second, rev)
    if not data:
        output.err(f"stackmgr: no difference between {first.label} and {second.label if second else rev}")
        return
    output.out_bytes(data)
