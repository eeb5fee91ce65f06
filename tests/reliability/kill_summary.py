"""The kill-anywhere summary line (tests/reliability/test_kill_anywhere.py), printed before pytest's own summary:

    kill-anywhere: 39 trials (seed 1): 0 invariant failures, 0 internal errors, 0 bytes lost

A trial with a known failure (an expected failure: tests/reliability/kill_anywhere.py KNOWN) is counted in its
classes all the same, and the line then names them ("2 known failures (xfail): undo/index.lock ×2"), so it never
reads cleaner than the run was.

A plugin (tests/conftest.py names it in `pytest_plugins`), like tests/reliability/catalogue.py and for the same
reason: under pytest-xdist the controller prints the summary from the reports the workers send, so each trial's
outcome travels in `report.user_properties`.
"""

from __future__ import annotations

from collections import Counter

import pytest

TRIAL = "stackmgr_kill_trial"  # user_properties key: {"command", "seed", "n", "classes": [...], "known": [...]}
_trials: list[dict[str, object]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for key, value in report.user_properties:
        if key == TRIAL and isinstance(value, dict):
            _trials.append(value)


def summary_line(trials: list[dict[str, object]]) -> str:
    seeds = sorted({str(t["seed"]) for t in trials})
    count: Counter[str] = Counter()
    known: Counter[str] = Counter()
    for t in trials:
        count.update(set(t["classes"]))  # type: ignore[arg-type]
        known.update(t["known"])  # type: ignore[arg-type]
    line = (f"kill-anywhere: {len(trials)} trials (seed {', '.join(seeds)}): {count['invariant']} invariant failures, "
            f"{count['internal']} internal errors, {count['bytes-lost']} bytes lost")  # fmt: skip
    if count["harness"]:
        line += f"; {count['harness']} trials not run (harness error)"
    if known:
        shown = ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in sorted(known.items()))
        line += f"; {sum(known.values())} known failures (xfail): {shown}"
    return line


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _trials:
        terminalreporter.write_line(summary_line(_trials))
