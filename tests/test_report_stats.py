"""The report judges a patch against its series' baseline runs as `compare` does (evidence.stats.judge): with
repeats a side, the median, the effect with its 95% interval and the verdict; a single pair shows its plain delta
and `1 run`, never a verdict."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import Lab
from tests.test_baselines import bench_run, popped  # noqa: F401  (the fixture)
from tests.test_compare_baseline import measured  # noqa: F401  (the fixture)


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def _site(lab: Lab, tmp_path: Path) -> dict[str, str]:
    out = tmp_path / "site"
    done = lab.sm("report", "-o", str(out))
    assert done.code == 0, done.err
    return {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*.html")}


def test_repeats_against_the_series_baseline_show_median_effect_interval_and_verdict(
        measured: Lab, tmp_path: Path) -> None:  # noqa: F811  # fmt: skip
    pages = _site(measured, tmp_path)
    index = _text(pages["index.html"])
    row = index[index.index("probe") :]
    assert "output_throughput 110.35 tok/s (n=4) +10.1% [+8.5%, +11.7%] faster vs baseline of S (4 runs)" in row
    page = _text(pages["patches/probe.html"])
    assert "vs baseline of S (4 runs)" in page and "+10.1% [+8.5%, +11.7%] faster" in page
    assert "baseline of S: 4 runs, median output_throughput 100.2 tok/s" in index


def test_a_single_pair_shows_its_delta_and_one_run_never_a_verdict(
        lab: Lab, popped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811  # fmt: skip
    assert bench_run(lab, popped, tmp_path, name="base", tput="100", monkeypatch=monkeypatch).code == 0
    assert lab.sm("push", "-a").code == 0
    assert bench_run(lab, popped, tmp_path, name="full", tput="150", monkeypatch=monkeypatch).code == 0
    pages = _site(lab, tmp_path)
    row = _text(pages["index.html"])[_text(pages["index.html"]).index("probe") :]
    assert "output_throughput 150 tok/s +50.0% (+50) 1 run vs baseline of S (1 run)" in row
    for word in ("faster", "better", "slower", "no significant change"):
        assert word not in row


def test_the_lessons_page_judges_each_open_patch_against_the_series_baseline_as_the_index_does(
        measured: Lab, tmp_path: Path) -> None:  # noqa: F811  # fmt: skip
    page = tmp_path / "lessons.md"
    assert measured.sm("report", "--markdown", str(page)).code == 0
    (row,) = [line for line in page.read_text().splitlines() if line.startswith("| `probe`")]
    assert (r"`output_throughput` 110.35 tok/s (n=4): +10.1% \[+8.5%, +11.7%\] faster, "
            "vs the baseline of S (runs base3, base2, base1 and 1 more, 4 runs, median 100.2 tok/s)"
            in row), row  # fmt: skip
    assert "| vs the series' baseline |" in page.read_text()


def test_the_lessons_page_gives_a_single_pair_no_verdict(
        lab: Lab, popped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811  # fmt: skip
    assert bench_run(lab, popped, tmp_path, name="base", tput="100", monkeypatch=monkeypatch).code == 0
    assert lab.sm("push", "-a").code == 0
    assert bench_run(lab, popped, tmp_path, name="full", tput="150", monkeypatch=monkeypatch).code == 0
    page = tmp_path / "lessons.md"
    assert lab.sm("report", "--markdown", str(page)).code == 0
    (row,) = [line for line in page.read_text().splitlines() if line.startswith("| `probe`")]
    assert ("`output_throughput` 150 tok/s +50.0%, 1 vs 1 run(s), no verdict, "
            "vs the baseline of S (run base, 1 run, median 100 tok/s)" in row), row
    for word in ("faster", "better", "slower", "no significant change"):
        assert word not in row


def test_a_patch_measured_on_top_of_others_says_the_effect_is_theirs_too(lab: Lab, tmp_path: Path) -> None:
    """The top patch's results measured p1+p2+p3: against the base that is the stack's effect, not p3's alone
    (`ab p3` measures p3's): the label says what else was applied."""
    from tests.test_ab import leave_out_bench, three_patches_the_middle_one_fast

    three_patches_the_middle_one_fast(lab)
    assert lab.sm("pop", "-a").code == 0
    assert lab.sm("run", "--repeat", "2", "--", *leave_out_bench(tmp_path, lab)).code == 0
    assert lab.sm("push", "-a").code == 0
    assert lab.sm("run", "--repeat", "2", "--", *leave_out_bench(tmp_path, lab)).code == 0
    index = _text(_site(lab, tmp_path)["index.html"])
    assert "vs baseline of S (2 runs); measured with 2 other patches applied" in index, index[-600:]


def test_a_patch_measured_on_two_trees_is_judged_on_one_never_pooled(lab: Lab, tmp_path: Path) -> None:
    """p2 measured on p1+p2 (run --repeat 2), then on p1+p2+p3 (ab --leave-out's B side): compare shows two
    columns, so the report judges the latest tree's runs alone and counts the others."""
    from tests.test_ab import leave_out_bench, three_patches_the_middle_one_fast

    three_patches_the_middle_one_fast(lab)
    bench = leave_out_bench(tmp_path, lab)
    assert lab.sm("pop", "-a").code == 0
    assert lab.sm("run", "--repeat", "2", "--", *bench).code == 0
    assert lab.sm("push", "p2").code == 0
    assert lab.sm("run", "--repeat", "2", "--", *bench).code == 0
    assert lab.sm("push", "-a").code == 0
    assert lab.sm("ab", "p2", "--leave-out", "-n", "2", "--", *bench).code == 0
    index = _text(_site(lab, tmp_path)["index.html"])
    row = index[index.index("p2") :]
    assert "(n=2)" in row and "(n=4)" not in row, row[:400]
    assert "2 results of other measured trees left out (`stackmgr compare` shows each)" in row, row[:600]
