"""`stackmgr report -o DIR` and `--markdown FILE`: the static HTML site of series, patches, evidence and the
graveyard; the lab's lessons page as Markdown."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.store.config import Store, open_store

if TYPE_CHECKING:
    from stackmgr.evidence.report.lab_page import LiveTree


@click.command("report")
@click.option("-o", "--output", "out_dir", metavar="DIR",
              help="Directory to write the site into (new, empty, or an earlier report).")  # fmt: skip
@click.option("--markdown", "markdown", metavar="FILE",
              help="Write the lessons page as Markdown: targets, topics, failed paths, patches worth remembering, "
              "open experiments, baselines, the trees now.")  # fmt: skip
@click.option("--title", default="Lessons", show_default=True, metavar="TEXT",
              help='The lessons page\'s title, e.g. "Bugs And Failed Paths".')  # fmt: skip
@json_option()
@pass_context
def report_cmd(ctx: Context, out_dir: str | None, markdown: str | None, title: str) -> None:
    """Write a static HTML site (series, patches with diff beside evidence, results, the graveyard of lessons),
    the lessons page as Markdown, or both. The lessons page also gives each series' targets, described series
    with their lanes, baselines by run, and the registered trees as `status` sees them now."""
    from stackmgr.errors import UsageProblem
    from stackmgr.evidence.report.site import write_report

    if out_dir is None and markdown is None:
        raise UsageProblem("report needs -o DIR, --markdown FILE, or both",
                           "e.g. `stackmgr report -o /tmp/lab-report --markdown /tmp/lessons.md`")  # fmt: skip
    if not title.strip() or len(title) > 200 or not title.isprintable():
        raise UsageProblem("--title is printable text of at most 200 characters",
                           'e.g. --title "Bugs And Failed Paths"')  # fmt: skip
    store = open_store(ctx.store)
    with output.activity("writing the report"):
        written = write_report(store, out_dir, markdown, title, live_trees(store) if markdown is not None else None)
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


def live_trees(store: Store) -> list[LiveTree]:
    """The registered trees as `status` sees them (commands/status.py), for the lessons page: no machine path, no
    time, so the page stays the same bytes for the same store and trees."""
    from stackmgr.commands.status import status_reports
    from stackmgr.evidence.report.lab_page import LiveTree

    out = []
    for r in status_reports(store, ()):
        if r.state != "ok":
            said = {"missing": "not on this machine", "no path": "no path on this machine"}.get(
                r.state, "cannot be read"
            )
            out.append(LiveTree(r.name, r.state, said))
            continue
        a = r.applied or {}
        out.append(LiveTree(r.name, r.state, "", str(a.get("position") or ""), tuple(a.get("patches") or ()),
                            len(a.get("drift") or ()), len(r.blockers)))  # fmt: skip
    return out
