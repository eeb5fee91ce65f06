"""A run measured without the patch (every patch popped, the result linked to the patch: a baseline) is no
measurement of the patch in any view: `links` marks it, ranks it after the patch's own results, `--json` says so,
the HTML pages badge it, and neither the index nor the lessons page quotes its numbers as the patch's. A result
whose artifact broke is never quoted either: one rule (evidence/link_state.py) for every view."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Lab, link_id
from tests.test_link_state import _bench, _site


def _baseline_day(ev: Lab) -> tuple[str, str]:
    """replay-fix measured on its stack at 100 tok/s, then every patch popped and a run at 500 tok/s linked to it:
    (the real result, the baseline)."""
    real = link_id(ev, "replay-fix", "--from-json", _bench(ev, "real.json", 100.0), "--verdict", "experimental")
    assert ev.sm("pop", "-a", "-t", "vllm").code == 0
    base = link_id(ev, "replay-fix", "--from-json", _bench(ev, "base.json", 500.0), "--verdict", "experimental")
    return real, base


def _lessons_row(ev: Lab, patch: str) -> str:
    assert ev.sm("report", "--markdown", "lessons.md").code == 0
    page = (ev.store / "lessons.md").read_text()
    return next(line for line in page.splitlines() if line.startswith(f"| `{patch}`"))


def test_the_lessons_page_never_quotes_a_run_without_the_patch_as_its_latest(ev: Lab) -> None:
    real, _base = _baseline_day(ev)
    row = _lessons_row(ev, "replay-fix")
    assert "100 tok/s" in row and "500" not in row and real in row, row


def test_the_lessons_page_never_quotes_a_broken_result_as_the_patch_latest(ev: Lab) -> None:
    real = link_id(ev, "replay-fix", "--from-json", _bench(ev, "real.json", 100.0), "--verdict", "experimental")
    later = link_id(ev, "replay-fix", "--from-json", _bench(ev, "later.json", 590.0), "--verdict", "experimental")
    (ev.store / "results" / "later.json").write_text('{"output_throughput": 1}')
    assert ev.sm("verify").code == 1
    row = _lessons_row(ev, "replay-fix")
    assert "100 tok/s" in row and "590" not in row and real in row and later not in row, row


def test_links_marks_a_run_without_the_patch_and_ranks_it_last(ev: Lab) -> None:
    real, base = _baseline_day(ev)
    listed = ev.sm("links").out.splitlines()
    assert next(line for line in listed if base in line).rstrip().endswith("WITHOUT THE PATCH")
    assert "WITHOUT THE PATCH" not in next(line for line in listed if real in line)
    ranked = ev.sm("links", "--sort", "metric", "--metric", "output_throughput").out
    assert ranked.index(real) < ranked.index(base), "the baseline's 500 tok/s is no result of the patch"
    rows = {k["id"]: k for k in json.loads(ev.sm("links", "--json").out)["links"]}
    assert (rows[base]["measured_patch"], rows[base]["usable"], rows[base]["measures"]) == (False, True, False)
    assert rows[real]["measures"] is True
    ordered = [k["id"] for k in json.loads(ev.sm("links", "--json", "--sort", "metric", "--metric",
                                                "output_throughput").out)["links"]]  # fmt: skip
    assert ordered.index(real) < ordered.index(base)
    shown = ev.sm("show", "replay-fix").out
    assert next(line for line in shown.splitlines() if base in line).rstrip().endswith("WITHOUT THE PATCH")


def test_the_report_badges_a_run_without_the_patch_and_never_quotes_it(ev: Lab, tmp_path: Path) -> None:
    real, base = _baseline_day(ev)
    pages = _site(ev, tmp_path / "site")
    results = pages["results.html"]
    assert "without the patch" in results[results.index(base) + len(base) :].split("lnk-")[0]
    assert "without the patch" not in results[results.index(real) + len(real) :].split("lnk-")[0]
    fix_page = next(text for page, text in pages.items() if page.startswith("patches/replay-fix"))
    assert "without the patch" in fix_page[fix_page.index(base) :]
    index = pages["index.html"]
    fix_row = index[index.index("replay-fix") : index.index("replay-probe")]
    assert "100 tok/s" in fix_row and "500" not in fix_row and "1 fresh" in fix_row, fix_row
