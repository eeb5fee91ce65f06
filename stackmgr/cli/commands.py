"""Command bodies shared by the click CLI and the start-up fast path: parse → call the core → render."""

from __future__ import annotations

import os

from stackmgr import output
from stackmgr.commands.status import TreeReport, status_json, status_reports
from stackmgr.store.config import open_store


def check(store_dir: str | None, trees: tuple[str, ...], *, verbose: bool, as_json: bool) -> int:
    """Exit 0 when every change in the trees is preserved, 1 otherwise (quiet unless -v or --json)."""
    store = open_store(store_dir)
    from stackmgr.journal.operation import pending_message

    pending = pending_message(store)
    if pending is not None:  # half-moved trees are not known to be safe
        output.err(f"stackmgr: {pending}")
        return 1
    reports = status_reports(store, trees, full=False)
    # A tree that could not be snapshotted is not known to be safe: fail closed, and say why even when quiet.
    unsafe = [r for r in reports if r.blockers or r.state == "error"]
    for r in reports:
        if r.state == "error" and not as_json:
            output.err(f"stackmgr: {r.name}: {r.error}")
    if as_json:
        output.emit_json({"schema": 1, "preserved": not unsafe, "trees": [_check_json(r) for r in reports]})
    elif verbose:
        for r in reports:
            if r.state == "missing":
                output.out(f"{r.name}: missing ({r.error})")
            elif r.state == "ok" and not r.blockers:
                output.out(f"{r.name}: all changes preserved")
            output.render_blockers(r.name, r.blockers)
    return 1 if unsafe else 0


def _check_json(report: TreeReport) -> dict[str, object]:
    data = report.to_json()
    return {k: data.get(k) for k in ("name", "path", "state", "error", "head", "unpreserved", "unprotected")}


def status(store_dir: str | None, trees: tuple[str, ...], *, as_json: bool) -> int:
    from stackmgr.journal.operation import pending_message

    store = open_store(store_dir)
    pending = pending_message(store)
    if pending is not None:
        output.err(f"stackmgr: warning: {pending}")
    reports = status_reports(store, trees)
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


def save(store_dir: str | None, name: str, paths: tuple[str, ...], opts: dict[str, object]) -> int:
    from stackmgr.commands.save import SaveRequest
    from stackmgr.commands.save import save as do_save

    req = SaveRequest(
        name, _opt(opts, "tree"), _opt(opts, "message"), _opt(opts, "series"), _opt(opts, "base"), paths,
        bool(opts.get("update")), bool(opts.get("allow_conflict_markers")),
    )  # fmt: skip
    store = open_store(store_dir)
    with output.activity(f"saving {name}: snapshot, diff, round-trip check"):
        result = do_save(store, req)
    for warning in result.warnings:
        output.err(f"stackmgr: note: {warning}")
    if opts.get("as_json"):
        output.emit_json({"schema": 1, **{k: v for k, v in vars(result).items() if k != "warnings"}})
        return 0
    rel = os.path.relpath(result.path, store.root)
    what = {"saved": "saved", "updated": "updated", "unchanged": "unchanged, already saved as"}[result.outcome]
    tail = f"; in series {result.series}" if result.series else ""
    output.out(f"{what} {rel}: {result.files} files, +{result.insertions} -{result.deletions} "
               f"(tree {result.tree}, base {result.base[:12]}){tail}")  # fmt: skip
    return 0


def _opt(opts: dict[str, object], key: str) -> str | None:
    value = opts.get(key)
    return value if isinstance(value, str) else None


def apply(store_dir: str | None, series: str, opts: dict[str, object]) -> int:
    from stackmgr.commands.apply import apply_series

    guards = opts.get("guards")
    guard_names = tuple(str(g) for g in guards) if isinstance(guards, tuple) else ()
    store = open_store(store_dir)
    dry_run = bool(opts.get("dry_run"))
    with output.activity(f"applying {series}"):
        outcomes = apply_series(
            store, series, only_tree=_opt(opts, "only_tree"), guards=guard_names,
            three_way=bool(opts.get("three_way")), dry_run=dry_run, override=_opt(opts, "override"),
        )  # fmt: skip
    if opts.get("as_json"):
        output.emit_json({"schema": 1, "series": series, "dry_run": dry_run, "trees": [
            {"tree": o.tree, "base": o.base, "patches": o.patches, "result_tree": o.result, "changed": o.changed}
            for o in outcomes]})  # fmt: skip
        return 0
    verb = "would apply" if dry_run else "applied"
    for o in outcomes:
        n = len(o.patches)
        state = "working tree changes" if o.changed else "working tree already there"
        output.out(f"{o.tree}: {verb} {series} ({n} patch{'es' if n != 1 else ''}) on {o.base[:12]}; "
                   f"tree {o.result}; {state}")  # fmt: skip
    return 0
