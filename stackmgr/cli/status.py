"""`stackmgr status`: per tree, HEAD, changes and the patches that preserve them, unprotected files. No click."""

from __future__ import annotations

from stackmgr import output
from stackmgr.commands.status import interrupted, rebases_in_progress, status_json, status_reports
from stackmgr.store.config import Store, open_store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.commands.status import TreeReport
    from stackmgr.evidence.targets import TargetCheck


def run(store_dir: str | None, trees: tuple[str, ...], *, as_json: bool) -> int:
    store = open_store(store_dir)
    pending = interrupted(store)
    if pending is not None:  # said before the trees are looked at, which may fail
        output.err(f"stackmgr: warning: {output.show_text(pending)}")
    for series in rebases_in_progress(store):  # as `git status` says "rebase in progress"
        output.err(f"stackmgr: note: a rebase of series {series} is in progress: `stackmgr rebase {series} "
                   "--continue` or `--abort`")  # fmt: skip
    reports = status_reports(store, trees)
    checks = _targets(store, reports)
    if as_json:
        output.emit_json({**status_json(reports), **({"targets": [c.to_json() for c in checks]} if checks else {})})
    else:
        letters: set[str] = set()
        for i, report in enumerate(reports):
            if i:
                output.out()
            letters |= output.render_status(report)
        if (legend := output.legend(letters)) is not None:  # what m, T, ! mean, once, after every tree
            output.out(legend)
        for check in checks:  # the applied series' targets, one line each (evidence/targets.py)
            output.out(output.show_text(check.line))
        if not reports:
            output.out("no trees registered; add one with `stackmgr tree add NAME PATH`")
    from stackmgr.store.conflicts import missing_merge_driver

    no_driver = missing_merge_driver(store.root)
    if no_driver is not None:  # every append to a series will conflict: said before the conflict comes
        output.err(f"stackmgr: note: {no_driver}")
    return 0


def _targets(store: Store, reports: list[TreeReport]) -> list[TargetCheck]:
    """Whether each applied series meets its `[targets]` target; nothing is read when the config has none."""
    if not store.targets:
        return []
    from stackmgr.evidence.targets import targets_of

    return targets_of(store, {r.applied["series"] for r in reports if r.applied and r.applied.get("series")})
