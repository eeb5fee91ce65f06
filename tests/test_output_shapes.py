"""What the human views look like to someone reading them for the first time: a mode change said as one, a legend
of the status letters, a `links` table with a header and a column per metric, units spaced from their numbers,
counts in the singular when there is one, refusals listing files one per line, and the report naming artifacts by
the file the run wrote."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tests.conftest import Lab, link_id, stackmgr_process


def cells(line: str) -> list[str]:
    """The columns of a table row: separated by two spaces or more."""
    return re.split(r"\s{2,}", line.strip())


# --- status: a mode change, and the letters explained --------------------------------------------------------------


def test_status_says_a_mode_change_as_the_modes_and_explains_its_letters(lab: Lab) -> None:
    (lab.tree / "README").chmod(0o755)
    (lab.tree / "new.txt").write_text("new\n")
    shown = lab.sm("status")
    assert shown.code == 0, shown.err
    (row,) = [line for line in shown.out.splitlines() if "README" in line]
    assert cells(row)[:3] == ["m README", "mode 100644 -> 100755", "NOT PRESERVED"]
    assert "+0 -0" not in shown.out
    assert shown.out.splitlines()[-1] == "  letters: A added, m mode changed"  # no row shows `!`: none explained
    assert lab.sm("save", "x", "-m", "x").code == 0
    assert "letters: A added, m mode changed\n" in lab.sm("status").out


def test_status_of_a_clean_tree_has_no_legend(lab: Lab) -> None:
    shown = lab.sm("status")
    assert shown.code == 0 and "letters:" not in shown.out


# --- links: a header, a column per metric, units spaced -------------------------------------------------------------


def test_links_has_a_header_and_a_column_per_metric_with_spaced_units(ev: Lab) -> None:
    bench = link_id(ev, "replay-fix", "--from-json", "results/bench.json")
    hand = link_id(ev, "gemm-tile", "results/probe.log", "--metric", "tput=5tok/s", "--gate", "json=pass")
    lines = ev.sm("links").out.splitlines()
    header = cells(lines[0])
    assert header[:4] == ["DATE", "LINK", "PATCH", "TREE"] and header[-3:] == ["GATES", "VERDICT", "STATE"]
    assert header[4:-3] == ["output_throughput", "mean_ttft_ms", "tput"]
    rows = {cells(line)[1]: dict(zip(header, cells(line), strict=True)) for line in lines[1:]}
    assert rows[bench]["output_throughput"] == "107.77 tok/s" and rows[bench]["mean_ttft_ms"] == "41.2 ms"
    assert rows[bench]["tput"] == "—" and rows[hand]["tput"] == "5 tok/s" and rows[hand]["output_throughput"] == "—"
    assert rows[hand]["GATES"] == "json✓" and rows[bench]["GATES"] == "—"
    one = ev.sm("links", "--metric", "tput").out.splitlines()
    assert cells(one[0])[4:-3] == ["tput"] and len(one) == 2


def test_link_says_its_metrics_with_spaced_units(ev: Lab) -> None:
    said = ev.sm("link", "replay-fix", "results/probe.log", "--metric", "output_throughput=1874.2tok/s")
    assert said.code == 0 and "output_throughput 1874.2 tok/s" in said.out and "1 artifact," in said.out


# --- counts in the singular ------------------------------------------------------------------------------------------


def test_one_failed_path_is_said_in_the_singular(ev: Lab) -> None:
    link_id(ev, "replay-probe", "results/probe.log", "--verdict", "rejected", "--lesson", "slower")
    said = ev.sm("report", "--markdown", "lessons.md")
    assert said.code == 0, said.err
    assert said.out == "wrote lessons: lessons.md (1 failed path, 0 worth remembering, 0 open)\n"


# --- the report names an artifact by the file the run wrote ---------------------------------------------------------


def test_the_report_names_artifacts_by_their_file_and_the_run_that_wrote_them(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    out = tmp_path / "r"
    write = (f"import json, os; os.makedirs({str(out)!r}); "
             f"json.dump({{'output_throughput': 5.0}}, open(os.path.join({str(out)!r}, 'bench-qps1.json'), 'w'))")
    done = stackmgr_process(lab.store, "run", "--name", "qps1", "--result-dir", str(out), "--", sys.executable, "-c",
                            write)  # fmt: skip
    assert done.returncode == 0, done.stderr
    site, notes = tmp_path / "site", tmp_path / "lessons.md"
    made = lab.sm("report", "-o", str(site), "--markdown", str(notes))
    assert made.code == 0, made.err
    results = (site / "results.html").read_text()
    assert "bench-qps1.json" in results and "qps1" in results and "os.makedirs" in results  # the file, the run
    patch_page = next(p for p in (site / "patches").glob("*.html") if "fix" in p.name).read_text()
    assert "bench-qps1.json" in patch_page and ("the run&#x27;s log" in patch_page or "the run's log" in patch_page)
    assert "run qps1" in patch_page
    artifact_pages = [p.read_text() for p in (site / "artifacts").glob("*.html")]
    assert any("<h1" in p and "bench-qps1.json" in p.split("<h1", 1)[1].split("</h1>")[0] for p in artifact_pages)
    lessons = notes.read_text()
    assert "bench-qps1.json" in lessons and "run qps1" in lessons
    assert json.loads(lab.sm("links", "--json").out)["links"][0]["run"]["name"] == "qps1"


# --- refusals list their files one per line --------------------------------------------------------------------------


def test_a_refusal_lists_its_files_one_per_line_under_the_one_line_error(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    assert lab.sm("reset").code == 0
    for n in range(14):
        (lab.tree / f"scratch-{n:02}.txt").write_text(f"{n}\n")
    before = lab.worktree_id()
    refused = lab.sm("apply", "S")
    assert refused.code == 1 and lab.worktree_id() == before
    first, *files = refused.err.splitlines()
    assert first.startswith("stackmgr: tree vllm has changes no patch preserves (14 paths); ")
    assert "scratch" not in first
    assert files[:2] == ["  scratch-00.txt (added)", "  scratch-01.txt (added)"]
    assert len(files) == 11 and files[-1] == "  … and 4 more"
    for n in range(2, 14):
        (lab.tree / f"scratch-{n:02}.txt").unlink()
    refused = lab.sm("apply", "S")
    assert refused.err.splitlines()[1:] == ["  scratch-00.txt (added)", "  scratch-01.txt (added)"]
