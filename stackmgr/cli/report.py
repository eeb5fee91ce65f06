"""`stackmgr report -o DIR`: the static HTML site of series, patches, evidence and the graveyard."""

from __future__ import annotations

import os

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.store.config import open_store


@click.command("report")
@click.option("-o", "--output", "out_dir", required=True, metavar="DIR",
              help="Directory to write the site into (new, empty, or an earlier report).")  # fmt: skip
@json_option()
@pass_context
def report_cmd(ctx: Context, out_dir: str) -> None:
    """Write a static HTML site: series, patches (diff beside evidence), results, the graveyard of lessons."""
    from stackmgr.evidence.report.site import write_report

    store = open_store(ctx.store)
    with output.activity("writing the report"):
        target, site = write_report(store, out_dir)
    if ctx.json:
        output.emit_json({"schema": 1, "dir": target, "pages": site.html_pages, "patches": site.patches,
                          "links": site.links})  # fmt: skip
        return
    output.out(f"wrote report: {os.path.join(out_dir, 'index.html')} ({site.patches} patches, {site.links} links)")
