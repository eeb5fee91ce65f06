"""The reliability suite (docs/RELIABILITY.md): `python -m pytest tests/reliability`.

Every test of a row of the bad-input catalogue (docs/RELIABILITY.md#catalogue-rows) is marked
`@pytest.mark.catalogue(N)`; every crash test records the crash points it injected with the `crash_points`
fixture. The summary line counts both, so CI shows what was covered.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

CATALOGUE_ROWS = 68
_rows: dict[str, list[int]] = {}  # test id -> the catalogue rows it covers
_passed_rows: set[int] = set()
_failed_rows: set[int] = set()
_crash_points: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "catalogue(row): covers a row of the bad-input catalogue (§4)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for mark in item.iter_markers("catalogue"):
            _rows.setdefault(item.nodeid, []).extend(int(row) for row in mark.args)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A row is covered when its tests ran and passed; an expected failure (a known bug) does not cover it."""
    rows = _rows.get(report.nodeid, [])
    if report.failed or (report.when == "call" and hasattr(report, "wasxfail")):
        _failed_rows.update(rows)
    elif report.when == "call" and report.passed:
        _passed_rows.update(rows)


@pytest.fixture
def crash_points() -> Iterator[list[str]]:
    """Append one entry per crash point a test injected (e.g. "save:publish-patch")."""
    seen: list[str] = []
    yield seen
    _crash_points.extend(seen)


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


# --- helpers ---------------------------------------------------------------------------------------------------


def fingerprint(*roots: Path) -> dict[str, tuple[int, bytes]]:
    """Every file, symlink and directory under `roots` (their .git included): mode and bytes (link target for
    links). Two equal fingerprints mean nothing was written, created or removed there."""
    out: dict[str, tuple[int, bytes]] = {}
    for root in roots:
        for dirpath, dirs, names in os.walk(root):
            for name in dirs + names:
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    data = os.readlink(path).encode()
                elif stat.S_ISREG(st.st_mode):
                    with open(path, "rb") as f:
                        data = f.read()
                else:
                    data = b""
                out[path] = (st.st_mode, data)
    return out


def changed_paths(before: dict[str, tuple[int, bytes]], after: dict[str, tuple[int, bytes]],
                  ignore: tuple[str, ...] = ()) -> list[str]:  # fmt: skip
    """Paths created, removed or changed between two fingerprints, except those containing an `ignore` part
    (stackmgr's rebuildable caches and git's own private-index files)."""
    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k) != after.get(k) and not any(part in k for part in ignore)
                  and not _empty_ref_dir(k, before.get(k), after.get(k)))  # fmt: skip


def _empty_ref_dir(path: str, *sides: tuple[int, bytes] | None) -> bool:
    """A directory under .git/refs/ that git created for a ref and left empty when the ref was deleted."""
    return "/.git/refs/" in path and all(side is None or stat.S_ISDIR(side[0]) for side in sides)


# What a refused command may still touch: rebuildable caches, stackmgr's private indexes and git objects (content-
# addressed, so written, never changed: a snapshot's trees). Never user data.
REBUILDABLE = ("/.stackmgr/cache/", "/.git/stackmgr/", "/.stackmgr/lock", "/.git/objects/")


def assert_one_line_error(err: str, *needles: str) -> None:
    """A refusal: exactly one `stackmgr: …` line, no traceback, mentioning each needle."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert lines[0].startswith("stackmgr: "), err
    assert "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
