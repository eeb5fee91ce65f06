"""`stackmgr report --markdown FILE`: the lab's lessons page, exact Markdown on a built store, read back by a
CommonMark parser (markdown-it-py, which rich depends on) with GitHub's tables."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.conftest import Lab, link_id, link_records, one_line_error

HOSTILE_LESSON = "tile 128 | B-layout <b>breaks</b> the *color* gate\n# not a heading\n1. keep `fp32` & [x](y)"


@pytest.fixture
def lessons(ev: Lab) -> dict[str, str]:
    """gemm-tile promoted over a baseline; replay-probe rejected, do not revive, with a lesson full of Markdown;
    replay-fix inconclusive. The link ids by role."""
    ids = {"baseline": link_id(ev, "gemm-tile", "--metric", "output_throughput=98.4tok/s", "--gate", "json=pass")}
    ids["promoted"] = link_id(ev, "gemm-tile", "results/bench.json", "--metric", "output_throughput=107.77tok/s",
                              "--gate", "json=pass", "--verdict", "promoted",
                              "--baseline", ids["baseline"])  # fmt: skip
    ids["rejected"] = link_id(ev, "replay-probe", "results/probe.log", "--metric", "output_throughput=101.5tok/s",
                              "--metric", "mean_ttft_ms=52.25ms", "--gate", "json=pass", "--gate", "color=fail:3/8",
                              "--verdict", "rejected", "--do-not-revive", "--lesson", HOSTILE_LESSON,
                              "--baseline", ids["baseline"])  # fmt: skip
    ids["open"] = link_id(ev, "replay-fix", "results/probe.log", "--metric", "mean_ttft_ms=41.2ms",
                          "--verdict", "inconclusive")  # fmt: skip
    return ids


def _when(lab: Lab, patch: str, link: str) -> str:
    (record,) = [r for r in link_records(lab, patch) if r["id"] == link]
    return str(record["created"])[:16].replace("T", " ") + " UTC"


def _lessons(lab: Lab, file: str, *more: str) -> str:
    result = lab.sm("report", "--markdown", file, *more)
    assert result.code == 0, result.err
    return (Path(lab.store) / file if not os.path.isabs(file) else Path(file)).read_text(encoding="utf-8")


def _expected(lab: Lab, ids: dict[str, str], probe: str, bench: str, probe_state: str = "fresh") -> str:
    roles = (("replay-probe", "rejected"), ("gemm-tile", "promoted"), ("replay-fix", "open"))
    rejected, promoted, opened = (_when(lab, patch, ids[role]) for patch, role in roles)
    quoted = probe_state == "fresh"  # a broken result's numbers are never quoted as the patch's latest
    numbers, evidence = ("`mean_ttft_ms` 41.2 ms", probe) if quoted else ("—", " ")
    valid = f"1 valid result, the latest `{ids['open']}`." if quoted else \
        f"**No valid result yet**: `{ids['open']}`: broken: an artifact changed or is missing (\\`stackmgr verify\\`)."
    return f"""# Lessons

What the lab's measurements taught: the lanes that failed and why, the patches worth remembering, and the \
experiments still without a verdict. Written by `stackmgr report --markdown` from the store's link records: change \
those (`stackmgr link`), not this page.

- [Failed paths](#failed-paths): 1
- [Patches worth remembering](#patches-worth-remembering): 1
- [Open experiments](#open-experiments): 1

## Failed paths

### `replay-probe`

tree `vllm` · series `replay` #2

probe

**rejected, do not revive** · {rejected} · Jane Doe · `{ids["rejected"]}` (invalid)

> tile 128 \\| B-layout \\<b\\>breaks\\</b\\> the \\*color\\* gate\\
> \\# not a heading\\
> 1\\. keep \\`fp32\\` \\& \\[x\\](y)

| metric | value | vs baseline `{ids["baseline"]}` |
| --- | ---: | ---: |
| `output_throughput` | 101.5 tok/s | +3.2% (+3.1), 1 run |
| `mean_ttft_ms` | 52.25 ms | — |

Gates: `json` pass, `color` fail (3/8)

Artifacts: {probe}

## Patches worth remembering

| patch | tree | what | best result | vs baseline | vs the series' baseline | gates | promoted | evidence |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| `gemm-tile` | `vllm-xpu-kernels` | tile | `output_throughput` 107.77 tok/s (Qwen3.6 · 50 prompts) \
| +9.5% (+9.37), 1 run | — | `json` pass | {promoted} · Jane Doe · `{ids["promoted"]}` (fresh) | {bench} |

## Open experiments

| patch | tree | what | verdict | latest numbers | vs the series' baseline | gates | measured | evidence |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| `replay-fix` | `vllm` | replay fix | inconclusive | {numbers} | — |   | {opened} · Jane Doe · \
`{ids["open"]}` ({probe_state}) | {evidence} |

### `replay-fix`

**inconclusive** · {opened} · Jane Doe · `{ids["open"]}` ({probe_state})

*No lesson recorded.*

{valid}

## The trees when this page was written

What `stackmgr status` said of this machine's registered trees: the results above are the store's; a tree holds \
whatever is checked out in it now.

- `vllm`: replay: 2 of 2 applied, top replay-probe; clean; not a promoted set: `replay-fix` (inconclusive), \
`replay-probe` (rejected, do not revive)
- `vllm-xpu-kernels`: kernels: 1 of 1 applied, top gemm-tile; clean; a promoted set
"""


def test_lessons_page_in_the_store_links_artifacts_relative_to_it(ev: Lab, lessons: dict[str, str]) -> None:
    (ev.store / "docs").mkdir()
    result = ev.sm("report", "--markdown", "docs/lessons.md")
    assert result.code == 0, result.err
    assert result.out == "wrote lessons: docs/lessons.md (1 failed path, 1 worth remembering, 1 open)\n"
    page = (ev.store / "docs" / "lessons.md").read_text(encoding="utf-8")
    assert page == _expected(ev, lessons, "[results/probe.log](../results/probe.log)",
                             "[results/bench.json](../results/bench.json)")  # fmt: skip
    assert not (ev.store / "index.html").exists() and sorted(os.listdir(ev.store / "docs")) == ["lessons.md"]


def test_lessons_page_reads_back_as_the_records_say(ev: Lab, lessons: dict[str, str]) -> None:
    """Parsed as CommonMark with tables: no raw HTML, no stray emphasis, code or links; the lesson's lines come
    back as written; each table row has its columns; headings and the contents' anchors agree."""
    page = _lessons(ev, "lessons.md")
    tokens = MarkdownIt("commonmark").enable("table").parse(page)
    inline = [child for t in tokens if t.type == "inline" for child in (t.children or [])]
    assert not [t for t in tokens + inline if t.type.startswith("html")]
    assert [t.content for t in inline if t.type == "code_inline"][:3] == ["stackmgr report --markdown",
                                                                          "stackmgr link", "replay-probe"]  # fmt: skip
    assert [t.attrs["href"] for t in inline if t.type == "link_open"] == [
        "#failed-paths", "#patches-worth-remembering", "#open-experiments", "results/probe.log",
        "results/bench.json", "results/probe.log"], "lessons.md at the store's top: links relative to it"  # fmt: skip
    emphasis = [t.type for t in inline if t.type in ("em_open", "strong_open")]
    assert emphasis == ["strong_open", "strong_open", "em_open"], "only the verdicts are bold, no lesson is said"
    quote = tokens.index(next(t for t in tokens if t.type == "blockquote_open"))
    lesson = [c.content for c in tokens[quote + 2].children or [] if c.type == "text"]
    assert lesson == HOSTILE_LESSON.split("\n")
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == ["Lessons", "Failed paths", "`replay-probe`", "Patches worth remembering", "Open experiments",
                        "`replay-fix`", "The trees when this page was written"]  # fmt: skip
    rows = [[tokens[j + 1].content for j in range(i, len(tokens)) if tokens[j].type in ("td_open", "th_open")
             and j < next(k for k in range(i, len(tokens)) if tokens[k].type == "tr_close")] for i, t in
            enumerate(tokens) if t.type == "tr_open"]  # fmt: skip
    assert [len(r) for r in rows] == [3, 3, 3, 9, 9, 9, 9]
    assert rows[1] == ["`output_throughput`", "101.5 tok/s", "+3.2% (+3.1), 1 run"]


def test_lessons_page_outside_the_store_names_artifacts_and_is_the_same_bytes_again(
    ev: Lab, lessons: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "site"
    file = tmp_path / "lessons.md"
    result = ev.sm("--json", "report", "-o", str(out), "--markdown", str(file))
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data == {"schema": 1, "dir": str(out), "pages": data["pages"], "patches": 3, "links": 4,
                    "markdown": str(file), "lessons": {"failed": 1, "remembered": 1, "open": 1}}  # fmt: skip
    assert "graveyard.html" in data["pages"] and (out / "graveyard.html").is_file()
    first = file.read_bytes()
    assert first.decode() == _expected(ev, lessons, "`results/probe.log`", "`results/bench.json`")
    assert _lessons(ev, str(file)).encode() == first, "no generation time: the same store gives the same page"

    # An artifact edited after linking: said beside it, and the links that cite it are broken.
    (ev.store / "results" / "probe.log").write_text("changed\n")
    assert _lessons(ev, str(file)) == _expected(ev, lessons, "`results/probe.log` (changed since linked)",
                                                "`results/bench.json`", probe_state="broken")  # fmt: skip


def test_lessons_page_of_a_store_with_no_verdicts_says_so(ev: Lab) -> None:
    page = _lessons(ev, "lessons.md")
    assert ("## Failed paths\n\nNothing rejected yet.\n\n## Patches worth remembering\n\n"
            "Nothing promoted yet.\n\n## Open experiments\n\n"
            "No experiment is waiting for a verdict.\n\n## The trees when this page was written\n") in page  # fmt: skip
    assert "- [Failed paths](#failed-paths): 0\n" in page


def test_report_needs_a_target_and_refuses_a_lessons_path_it_cannot_write(ev: Lab, tmp_path: Path) -> None:
    result = ev.sm("report")
    one_line_error(result, 2)
    assert result.err == ("stackmgr: report needs -o DIR, --markdown FILE, or both; e.g. "
                          "`stackmgr report -o /tmp/lab-report --markdown /tmp/lessons.md`\n")  # fmt: skip
    (tmp_path / "afile").write_text("")
    for file, says in ((str(tmp_path), f"{tmp_path} is a directory"),
                       (str(tmp_path / "afile" / "lessons.md"), f"{tmp_path / 'afile'} is not a directory"),
                       ("links/lessons.md", "links/lessons.md is inside the store's links/"),
                       ("patches/x.patch", "patches/x.patch is inside the store's patches/")):  # fmt: skip
        result = ev.sm("report", "--markdown", file, "-o", str(tmp_path / "site"))
        one_line_error(result, 3)
        assert result.err.startswith(f"stackmgr: {says}"), result.err
    assert not (tmp_path / "site").exists(), "nothing is written when a target is refused"
    assert sorted(os.listdir(ev.store / "links")) == [] and not (ev.store / "patches" / "x.patch").exists()
    made = ev.sm("report", "--markdown", "docs/lessons.md")  # as the README has it, in a store with no docs/ yet
    assert made.code == 0, made.err
    assert (ev.store / "docs" / "lessons.md").read_text().startswith("# Lessons")


@pytest.mark.regression("the lessons page named a copied result by its sha256 path alone")
def test_a_result_copied_in_from_outside_is_named_by_its_original_file(ev: Lab, tmp_path: Path) -> None:
    outside = tmp_path / "sweep-qps1.json"
    outside.write_text(json.dumps({"output_throughput": 99.0}))
    link_id(ev, "replay-probe", "--from-json", str(outside), "--verdict", "rejected", "--lesson", "slower")
    (kept,) = [a["path"] for r in link_records(ev, "replay-probe") for a in r["artifact"]]
    assert kept.startswith("artifacts/sha256/")
    page = _lessons(ev, "docs/lessons.md") if (ev.store / "docs").mkdir() is None else ""
    assert f"Artifacts: [sweep-qps1.json](../{kept})" in page
    outside_page = _lessons(ev, str(tmp_path / "lessons.md"))
    assert f"Artifacts: sweep-qps1.json (`{kept}`)" in outside_page
