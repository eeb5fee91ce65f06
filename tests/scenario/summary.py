"""The lab-month suite's summary line, printed before pytest's own summary:

    scenario: 142 steps in 4 tests (week 1 saves and runs 40, week 2 team merges 35, …): all passing

A plugin (tests/conftest.py names it in `pytest_plugins`), as tests/security/summary.py is: each story counts its
steps in the test report's `user_properties` (`Month.step`), which pytest-xdist sends to the controller.
"""

from __future__ import annotations

import pytest

_tests: dict[str, tuple[str, int, bool]] = {}  # nodeid -> (week, steps played, failed)


def _week(path: str) -> str:
    name = path.rsplit("/", 1)[-1].removeprefix("test_").removesuffix(".py")
    return name.replace("_", " ")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    if not path.startswith("tests/scenario/"):
        return
    steps = sum(1 for key, _ in report.user_properties if key == "scenario_step")
    week, before, failed = _tests.get(report.nodeid, (_week(path), 0, False))
    _tests[report.nodeid] = (week, max(before, steps), failed or report.failed)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _tests:
        return
    weeks: dict[str, int] = {}
    for week, steps, _ in _tests.values():
        weeks[week] = weeks.get(week, 0) + steps
    failed = [nodeid.split("::")[-1] for nodeid, (_, _, bad) in sorted(_tests.items()) if bad]
    verdict = "all passing" if not failed else f"FAILING: {len(failed)} ({', '.join(failed)})"
    parts = ", ".join(f"{w} {n}" for w, n in sorted(weeks.items()))
    steps = sum(weeks.values())
    terminalreporter.write_line(f"scenario: {steps} steps in {len(_tests)} tests ({parts}): {verdict}")
