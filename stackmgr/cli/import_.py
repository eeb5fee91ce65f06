"""`stackmgr import FILES`: adopt patches made elsewhere (mails, mboxes, quilt, plain diffs)."""

from __future__ import annotations

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.store.config import open_store


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("-t", "--tree", metavar="TREE", help="The tree the patches are for (needed when several could be).")
@click.option("--series", metavar="S", help="Import the files as a stack, in order, appended to series S.")
@click.option("--name", metavar="N", help="The patch name (one file only); else from the file name or subject.")
@click.option("--base", metavar="REV", help="The commit the patches apply to; else the newest one they apply to.")
@json_option()
@pass_context
def import_cmd(ctx: Context, files: tuple[str, ...], tree: str | None, series: str | None, name: str | None,
               base: str | None) -> None:  # fmt: skip
    """Adopt patches: git format-patch files or an mbox, quilt patches (DEP-3 or free text), plain diff -u /
    diff -ruN output, or a quilt directory (its `series` gives the order). Each is applied in a scratch index and
    saved in stackmgr's format; files that are not patches, truncated or for another tree are refused one by
    one. Exit 0 when all were imported, 1 when some were refused, 3 when none could be."""
    from stackmgr.commands.import_ import import_patches

    store = open_store(ctx.store)
    with output.activity("importing"):
        report = import_patches(store, list(files), tree, series, name, base)
    if ctx.json:
        output.emit_json({"schema": 1, "series": report.series if report.imported else None,
                          "imported": [{"name": i.name, "source": i.source, "tree": i.tree, "base": i.base,
                                        "found_at": i.found_at, "outcome": i.outcome} for i in report.imported],
                          "refused": [{"source": r.source, "reason": r.reason} for r in report.refused],
                          "skipped": [{"source": r.source, "reason": r.reason} for r in report.skipped]})  # fmt: skip
    else:
        for i in report.imported:
            files_n, plus, minus = i.stat
            verb = "imported" if i.outcome == "imported" else "already there:"
            output.out(f"{verb} {i.name} ({i.source}): tree {i.tree}, base {i.base[:12]} ({i.found_at}), "
                       f"{files_n} file{'s' if files_n != 1 else ''} +{plus} -{minus}")  # fmt: skip
        if report.imported and report.series:
            n = report.appended
            output.out(f"series {report.series}: {n} patch{'es' if n != 1 else ''} appended" if n else
                       f"series {report.series}: already holds them; nothing appended")  # fmt: skip
        for r in report.skipped:
            output.err(f"stackmgr: skipped {r.source}: {r.reason}")
        for r in report.refused:
            output.err(f"stackmgr: refused {r.source}: {r.reason}")
    if report.refused:
        raise SystemExit(1 if report.imported else 3)
