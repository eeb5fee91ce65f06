"""The reliability suite's summary line: catalogue rows covered and crash points injected.

Every test of a row of the bad-input catalogue (docs/RELIABILITY.md#catalogue-rows) is marked
`@pytest.mark.catalogue(N)`; every crash test records the crash points it injected with the `crash_points`
fixture. The last lines of a run count both, so CI shows what was covered.

A plugin (tests/conftest.py names it in `pytest_plugins`), not tests/reliability/conftest.py: under pytest-xdist the
tests, their markers and the fixture live in the workers, while the summary is printed by the controller, which
never collects and does not load that conftest. So each test's report carries its rows and crash points in
`report.user_properties` (sent to the controller with the report), and the controller counts them as reports arrive.
Without xdist the same hooks run in the one process.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

CATALOGUE_ROWS = 68
ROWS = "stackmgr_catalogue_rows"  # user_properties key: the catalogue rows of the test (every phase)
CRASH_POINTS = "stackmgr_crash_points"  # user_properties key: the crash points it injected (teardown)
_injected = pytest.StashKey[list[str]]()


_passed_rows: set[int] = set()
_failed_rows: set[int] = set()
_crash_points: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "catalogue(row): covers a row of the bad-input catalogue (docs/RELIABILITY.md#catalogue-rows)"
    )


@pytest.fixture
def crash_points(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """Append one entry per crash point a test injected (e.g. "save:publish-patch")."""
    seen: list[str] = []
    request.node.stash[_injected] = seen
    yield seen


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    rows = [int(row) for mark in item.iter_markers("catalogue") for row in mark.args]
    if rows:
        report.user_properties.append((ROWS, rows))
    if report.when == "teardown" and _injected in item.stash:
        report.user_properties.append((CRASH_POINTS, list(item.stash[_injected])))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A row is covered when its tests ran and passed; an expected failure (a known bug) does not cover it."""
    properties = dict(report.user_properties)
    rows = properties.get(ROWS, [])
    if report.failed or (report.when == "call" and hasattr(report, "wasxfail")):
        _failed_rows.update(rows)
    elif report.when == "call" and report.passed:
        _passed_rows.update(rows)
    _crash_points.extend(properties.get(CRASH_POINTS, []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _passed_rows and not _failed_rows and not _crash_points:
        return
    covered = sorted(_passed_rows - _failed_rows)
    failing = sorted(_failed_rows)
    terminalreporter.write_line(
        f"reliability: {len(covered)} of {CATALOGUE_ROWS} catalogue rows covered"
        + (f" ({len(failing)} not passing: {failing})" if failing else "")
        + f"; {len(_crash_points)} crash points injected; "
        + ("all passing" if not failing else "NOT ALL PASSING")
    )
