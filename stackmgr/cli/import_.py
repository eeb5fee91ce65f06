"""`stackmgr import FILES`: adopt patches made elsewhere (mails, mboxes, quilt, plain diffs). No click: the plain
form starts on entry.py's fast path; the click command (app.py) calls the same `run`."""

from __future__ import annotations

from stackmgr import output
from stackmgr.cli.argspec import Values, text
from stackmgr.store.config import open_store


def run(store_dir: str | None, as_json: bool, files: tuple[str, ...], values: Values) -> int:
    """Import, print what came in and what was refused; exit 0 when all were imported, 1 when some were
    refused, 3 when none could be."""
    from stackmgr.commands.import_ import import_patches

    store = open_store(store_dir)
    with output.activity("importing"):
        report = import_patches(store, list(files), text(values, "tree"), text(values, "series"),
                                text(values, "name"), text(values, "base"), text(values, "override"))  # fmt: skip
    if as_json:
        output.emit_json({"schema": 1, "series": report.series if report.imported else None,
                          "imported": [{"name": i.name, "source": i.source, "tree": i.tree, "base": i.base,
                                        "found_at": i.found_at, "outcome": i.outcome} for i in report.imported],
                          "refused": [{"source": r.source, "reason": r.reason} for r in report.refused],
                          "skipped": [{"source": r.source, "reason": r.reason} for r in report.skipped]})  # fmt: skip
    else:
        for i in report.imported:
            files_n, plus, minus = i.stat
            verb = "imported" if i.outcome == "imported" else "already there:"
            output.out(output.show_text(f"{verb} {i.name} ({i.source}): tree {i.tree}, base {i.base[:12]} "
                                        f"({i.found_at}), {files_n} file{'s' if files_n != 1 else ''} +{plus} "
                                        f"-{minus}"))  # fmt: skip
        if report.imported and report.series:
            n = report.appended
            output.out(f"series {report.series}: {n} patch{'es' if n != 1 else ''} appended" if n else
                       f"series {report.series}: already holds them; nothing appended")  # fmt: skip
        for r in report.skipped:
            output.err(output.show_text(f"stackmgr: skipped {r.source}: {r.reason}"))
        for r in report.refused:
            output.err(output.show_text(f"stackmgr: refused {r.source}: {r.reason}"))
    if report.refused:
        return 1 if report.imported else 3
    return 0
