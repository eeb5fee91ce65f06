"""Command bodies shared by the click CLI and the start-up fast path: parse → call the core → render."""

from __future__ import annotations

from stackmgr import output
from stackmgr.config import open_store
from stackmgr.status import TreeReport, status_json, status_reports


def check(store_dir: str | None, trees: tuple[str, ...], *, verbose: bool, as_json: bool) -> int:
    """Exit 0 when every change in the trees is preserved, 1 otherwise (quiet unless -v or --json)."""
    store = open_store(store_dir)
    reports = status_reports(store, trees, full=False)
    unsafe = [r for r in reports if r.blockers]
    if as_json:
        output.emit_json({"schema": 1, "preserved": not unsafe, "trees": [_check_json(r) for r in reports]})
    elif verbose:
        for r in reports:
            if r.state != "ok":
                output.out(f"{r.name}: {r.state} ({r.error})")
            elif not r.blockers:
                output.out(f"{r.name}: all changes preserved")
            output.render_blockers(r.name, r.blockers)
    return 1 if unsafe else 0


def _check_json(report: TreeReport) -> dict[str, object]:
    data = report.to_json()
    return {k: data.get(k) for k in ("name", "path", "state", "error", "head", "unpreserved", "unprotected")}


def status(store_dir: str | None, trees: tuple[str, ...], *, as_json: bool) -> int:
    reports = status_reports(open_store(store_dir), trees)
    if as_json:
        output.emit_json(status_json(reports))
    else:
        for i, report in enumerate(reports):
            if i:
                output.out()
            output.render_status(report)
        if not reports:
            output.out("no trees registered; add one with `stackmgr tree add NAME PATH`")
    return 0
