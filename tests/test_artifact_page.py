"""The report's artifact page: the head and the tail of a long log, its error lines marked and listed at the top."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import Lab, link_id

CRASH_END = [
    "Traceback (most recent call last):",
    '  File "vllm/v1/worker/gpu_model_runner.py", line 1712, in execute_model',
    "    hidden = self.model(input_ids, positions)",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]


def _crash_log(path: Path, lines: int, width: int = 0, newline_at_end: bool = True) -> None:
    """`lines` lines: a warm-up, one FAILED check at line 50, steps, and a Traceback as the last four lines."""
    body = [f"INFO step {n} ok".ljust(width, ".") for n in range(1, lines - len(CRASH_END) + 1)]
    body[49] = "FAILED warmup check: json gate 3/8"
    text = "\n".join(body + CRASH_END)
    path.write_text(text + ("\n" if newline_at_end else ""))


def _page(ev: Lab, tmp_path: Path, log: str) -> str:
    link_id(ev, "replay-fix", log, "--verdict", "rejected", "--lesson", "crashes at decode")
    result = ev.sm("report", "-o", str(tmp_path / "site"))
    assert result.code == 0, result.err
    (page,) = [p for p in (tmp_path / "site" / "artifacts").glob("*.html") if "crash" in p.name]
    return page.read_text()


def _rows(page: str) -> list[tuple[str, str]]:
    """(id, class) of each preview row, and ("omit", text) for the gap."""
    out = []
    for m in re.finditer(r'<tr (?:id="(L\d+)"(?: class="(\w+)")?|class="omit")>(?:<td class="ln">[^<]*</td>)?'
                         r'<td class="code">([^<]*)</td>', page):  # fmt: skip
        out.append((m.group(1), m.group(2) or "") if m.group(1) else ("omit", m.group(3)))
    return out


@pytest.mark.regression("a crash log's error was cut off: the artifact page showed only its first 200 lines")
def test_long_log_shows_head_and_tail_with_error_lines_listed(ev: Lab, tmp_path: Path) -> None:
    _crash_log(ev.store / "results" / "crash.log", 2000)
    page = _page(ev, tmp_path, "results/crash.log")
    rows = _rows(page)
    assert [r[0] for r in rows] == [f"L{n}" for n in range(1, 101)] + ["omit"] + [f"L{n}" for n in range(1801, 2001)]
    assert rows[100] == ("omit", "… 1,700 lines omitted …")
    assert [r[0] for r in rows if r[1] == "err"] == ["L50", "L1997", "L2000"]
    assert [r[0] for r in rows if r[1] == "tb"] == ["L1998", "L1999"], "the traceback's frames are marked too"
    assert '<td class="code">RuntimeError: CUDA error: an illegal memory access was encountered</td>' in page
    jumps = re.findall(r'<li><a href="#(L\d+)">line (\d+)</a> <span class="mono">([^<]*)</span></li>', page)
    assert jumps == [("L50", "50", "FAILED warmup check: json gate 3/8"), ("L1997", "1997", CRASH_END[0]),
                     ("L2000", "2000", CRASH_END[3])]  # fmt: skip
    assert '<p class="note bad">3 error lines shown below:</p>' in page
    assert "the first 100 and the last 200 of 2,000 lines shown" in page


def test_log_larger_than_the_preview_is_read_at_both_ends(ev: Lab, tmp_path: Path) -> None:
    """600 KB, no newline at the end: the tail is read from the end of the file, its line numbers counted."""
    _crash_log(ev.store / "results" / "crash.log", 20_000, width=30, newline_at_end=False)
    assert (ev.store / "results" / "crash.log").stat().st_size > 600_000
    page = _page(ev, tmp_path, "results/crash.log")
    rows = _rows(page)
    assert [r[0] for r in rows] == [f"L{n}" for n in range(1, 101)] + ["omit"] + [f"L{n}" for n in range(19801, 20001)]
    assert rows[100] == ("omit", "… 19,700 lines omitted …")
    assert [r[0] for r in rows if r[1] == "err"] == ["L50", "L19997", "L20000"]
    line = "INFO step 19801 ok............"
    assert f'<tr id="L19801"><td class="ln">19801</td><td class="code">{line}</td></tr>' in page


def test_short_log_is_shown_whole_without_a_gap(ev: Lab, tmp_path: Path) -> None:
    _crash_log(ev.store / "results" / "crash.log", 300)
    page = _page(ev, tmp_path, "results/crash.log")
    assert [r[0] for r in _rows(page)] == [f"L{n}" for n in range(1, 301)]
    assert "lines omitted" not in page and "lines shown</p>" not in page


def test_many_error_lines_list_the_first_five_and_the_last_fifteen(ev: Lab, tmp_path: Path) -> None:
    (ev.store / "results" / "crash.log").write_text("".join(f"ERROR retry {n}\n" for n in range(1, 31)))
    page = _page(ev, tmp_path, "results/crash.log")
    jumps = re.findall(r'<li><a href="#L(\d+)">|<li class="muted">([^<]*)</li>', page)
    listed = [int(n) if n else more for n, more in jumps]
    assert listed == [1, 2, 3, 4, 5, "… 10 more …", *range(16, 31)]
    assert '<p class="note bad">30 error lines shown below:</p>' in page
