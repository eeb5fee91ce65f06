"""`check`: is every change in the trees preserved? (Quiet unless -v or --json; the CLI renders.)"""

from __future__ import annotations

from stackmgr.commands.status import TreeReport, interrupted, status_reports

TYPE_CHECKING = False  # mypy treats this as true; `typing` stays out of `check`'s start-up
if TYPE_CHECKING:
    from stackmgr.store.config import Store


class Check:
    __slots__ = ("pending", "reports", "unsafe")

    def __init__(self, pending: str | None, reports: list[TreeReport], unsafe: list[TreeReport]) -> None:
        self.pending = pending  # an interrupted operation: nothing is known to be safe while it stands
        self.reports = reports
        self.unsafe = unsafe  # trees with unpreserved changes, or that could not be snapshotted

    @property
    def preserved(self) -> bool:
        return self.pending is None and not self.unsafe


def check(store: Store, trees: tuple[str, ...]) -> Check:
    """The trees' reports and which are unsafe; half-moved trees (an interrupted operation) fail the check."""
    pending = interrupted(store)
    if pending is not None:  # half-moved trees are not known to be safe
        return Check(pending, [], [])
    reports = status_reports(store, trees, full=False)
    # A tree that could not be snapshotted is not known to be safe: fail closed.
    return Check(None, reports, [r for r in reports if r.blockers or r.state == "error"])


def check_json(report: TreeReport) -> dict[str, object]:
    data = report.to_json()
    return {k: data.get(k) for k in ("name", "path", "state", "error", "head", "unpreserved", "unprotected")}
