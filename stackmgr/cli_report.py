"""`stackmgr report -o DIR`: the static HTML site of series, patches, evidence and the graveyard."""

from __future__ import annotations

import os

import click

from stackmgr import output
from stackmgr.cli_context import store_and_json
from stackmgr.config import open_store


@click.command("report")
@click.option("-o", "--output", "out_dir", required=True, metavar="DIR",
              help="Directory to write the site into (new, empty, or an earlier report).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def report_cmd(ctx: click.Context, out_dir: str, as_json: bool) -> None:
    """Write a static HTML site: series, patches (diff beside evidence), results, the graveyard of lessons."""
    from stackmgr.report import write_report

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
    from stackmgr.lint import lint_store

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
