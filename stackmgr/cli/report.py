"""`stackmgr report -o DIR` and `--markdown FILE`: the static HTML site of series, patches, evidence and the
graveyard; the lab's lessons page as Markdown."""

from __future__ import annotations

import os

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.store.config import open_store


@click.command("report")
@click.option("-o", "--output", "out_dir", metavar="DIR",
              help="Directory to write the site into (new, empty, or an earlier report).")  # fmt: skip
@click.option("--markdown", "markdown", metavar="FILE",
              help="Write the lessons page as Markdown: failed paths, patches worth remembering, open experiments.")
@json_option()
@pass_context
def report_cmd(ctx: Context, out_dir: str | None, markdown: str | None) -> None:
    """Write a static HTML site (series, patches with diff beside evidence, results, the graveyard of lessons),
    the lessons page as Markdown, or both."""
    from stackmgr.errors import UsageProblem
    from stackmgr.evidence.report.site import write_report

    if out_dir is None and markdown is None:
        raise UsageProblem("report needs -o DIR, --markdown FILE, or both",
                           "e.g. `stackmgr report -o /tmp/lab-report --markdown /tmp/lessons.md`")  # fmt: skip
    store = open_store(ctx.store)
    with output.activity("writing the report"):
        written = write_report(store, out_dir, markdown)
    site, lessons = written.site, written.lessons
    if ctx.json:
        counts = {"failed": lessons.failed, "remembered": lessons.remembered, "open": lessons.open} if lessons else None
        output.emit_json({"schema": 1, "dir": written.dir, "pages": site.html_pages if site else [],
                          "patches": written.patches, "links": written.links, "markdown": written.markdown,
                          "lessons": counts})  # fmt: skip
        return
    if site is not None and out_dir is not None:
        counted = f"{output.plural(site.patches, 'patch', 'patches')}, {output.plural(site.links, 'link')}"
        output.out(f"wrote report: {os.path.join(out_dir, 'index.html')} ({counted})")
    if lessons is not None:
        failed = output.plural(lessons.failed, "failed path")
        output.out(f"wrote lessons: {markdown} ({failed}, {lessons.remembered} worth "
                   f"remembering, {lessons.open} open)")  # fmt: skip
