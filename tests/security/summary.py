"""The attacker suite's summary line (docs/SECURITY.md), printed before pytest's own summary:

    security: 122 cases (local state 11, git argv 10, symlinks 19, …): all passing

A plugin (tests/conftest.py names it in `pytest_plugins`), as tests/reliability/kill_summary.py is: under
pytest-xdist the controller prints it from the reports the workers send.
"""

from __future__ import annotations

from collections import Counter

import pytest

KINDS = {  # file of tests/security/ -> the kind of attack it plays (docs/SECURITY.md, "The suite")
    "test_local_state.py": "local state", "test_guard.py": "shell guard", "test_git_argv.py": "git argv",
    "test_store_symlinks.py": "symlinks", "test_outside_records.py": "records outside",
    "test_exhaustion.py": "exhaustion", "test_terminal.py": "terminal", "test_secrets.py": "secrets",
}  # fmt: skip
_outcomes: dict[str, tuple[str, str]] = {}  # nodeid -> (kind, outcome)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    if not path.startswith("tests/security/"):
        return
    kind = KINDS.get(path.rsplit("/", 1)[-1], path.rsplit("/", 1)[-1])
    if report.failed or report.nodeid not in _outcomes or report.when == "call":
        _outcomes[report.nodeid] = (kind, "failed" if report.failed else report.outcome)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _outcomes:
        return
    by_kind = Counter(kind for kind, _ in _outcomes.values())
    failed = Counter(kind for kind, outcome in _outcomes.values() if outcome == "failed")
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items(), key=lambda kv: list(KINDS.values()).index(kv[0])
                                                      if kv[0] in KINDS.values() else 99))  # fmt: skip
    verdict = "all passing" if not failed else "FAILING: " + ", ".join(f"{k} {n}" for k, n in sorted(failed.items()))
    terminalreporter.write_line(f"security: {len(_outcomes)} cases ({kinds}): {verdict}")
