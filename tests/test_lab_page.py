"""The lab's own page from its evidence (`report --markdown FILE --title "Bugs And Failed Paths"`): targets, also
against the series' baseline, with their note and whether a valid result reached them; a series' description
heading its lanes; the lessons of open lanes and whether they have a valid result; artifacts by their label;
baselines by their run group; the registered trees as `status` sees them. Every part from a record or the config,
escaped, and the same bytes again for the same store and trees."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from stackmgr.errors import StackmgrError
from stackmgr.store.targets_config import Target, parse_target, series_targets
from tests.conftest import Lab, link_records, one_line_error

BENCH = """\
import json, os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
json.dump({"model_id": "m", "output_throughput": float(os.environ["TPUT"])}, open(os.path.join(out, "b.json"), "w"))
sys.exit(int(os.environ.get("EXIT", "0")))
"""

NOTE = "not merely within 20% of the non-spec baseline"


def run(lab: Lab, script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, tput: str,
        *more: str, exit_code: str = "0") -> str:  # fmt: skip
    out = tmp_path / f"out-{name}"
    monkeypatch.setenv("TPUT", tput)
    monkeypatch.setenv("EXIT", exit_code)
    done = lab.sm("run", *more, "--name", name, "--result-dir", str(out), "--", sys.executable, str(script), str(out))
    assert done.code == int(exit_code), done.err
    found = re.search(r"recorded (lnk-[0-9a-f]{12})", done.err)
    assert found is not None, done.err
    return found.group(1)


@pytest.fixture
def spec(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Series spec (described; patches draft, dflash), an absolute and a relative target with a note, a baseline
    run group `non-spec-baseline` of 3 runs at 100, draft valid at 130, dflash failing at 200 and
    experimental with a lesson and labelled notes. Returns the link ids by role."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "draft", "--series", "spec", "-m", "draft model").code == 0
    (lab.tree / "README").write_text("dflash\n")
    assert lab.sm("save", "dflash", "--series", "spec", "-m", "dflash").code == 0
    assert lab.sm("series", "describe", "spec", "-m", "Speculative decoding.\nThe lab's main lane.").code == 0
    with (lab.store / "stackmgr.toml").open("a") as config:
        config.write(f'\n[targets.spec]\ntarget = ["output_throughput > 150", "output_throughput >= baseline +20%"]'
                     f'\nnote = "{NOTE}"\n')  # fmt: skip
    script = tmp_path / "bench.py"
    script.write_text(BENCH)
    assert lab.sm("pop", "-a").code == 0
    ids = {"base": run(lab, script, tmp_path, monkeypatch, "non-spec-baseline", "100", "--repeat", "3")}
    assert lab.sm("push").code == 0
    ids["draft"] = run(lab, script, tmp_path, monkeypatch, "draft-1", "130")
    assert lab.sm("push").code == 0
    ids["dflash"] = run(lab, script, tmp_path, monkeypatch, "dflash-1", "200", exit_code="1")
    notes = tmp_path / "dflash-notes.md"
    notes.write_text("# day 1\ntried the tree attention\n")
    done = lab.sm("link", "dflash", str(notes), "--label", "detailed chronological notes", "--verdict",
                  "experimental", "--lesson", "most plausible direction, no clean serving result yet")  # fmt: skip
    assert done.code == 0, done.err
    return ids


def page(lab: Lab, *more: str) -> str:
    done = lab.sm("report", "--markdown", str(lab.store / "docs" / "lab.md"), *more)
    assert done.code == 0, done.err
    return (lab.store / "docs" / "lab.md").read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The lines of section `## heading`, up to the next `## `."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start + 1 : end + 1 if end >= 0 else len(text)]


def test_targets_are_read_plain_against_the_baseline_as_a_list_and_as_a_table_never_evaluated() -> None:
    relative = parse_target("spec", "output_throughput >= baseline +20%")
    assert (relative.text, relative.op, relative.relative, relative.at(100.0)) == (
        "output_throughput >= baseline +20%", ">=", 20.0, 120.0)  # fmt: skip
    lower = parse_target("spec", "mean_tpot_ms <= baseline -10%")
    assert (lower.text, lower.at(50.0)) == ("mean_tpot_ms <= baseline -10%", 45.0)
    assert parse_target("spec", "output_throughput > 150").threshold == 150.0
    table = series_targets("spec", {"target": ["output_throughput > 150", "x >= baseline"], "note": NOTE})
    assert [(t.text, t.note) for t in table if not isinstance(t, StackmgrError)] == [
        ("output_throughput > 150", NOTE), ("x >= baseline", NOTE)]  # fmt: skip
    for bad in (
        "output_throughput >= baseline 20%",
        "output_throughput >= baseline +20",
        "tput >= baseline +-5%",
        "tput >= baseline -100%",
        "tput >= baseline +nan%",
        "tput >= baselines",
        "tput >= baseline*2",
    ):
        with pytest.raises(StackmgrError, match="METRIC OP NUMBER"):
            parse_target("spec", bad)
    kept, wrong = series_targets("spec", {"target": "t > 1", "why": "x"})  # a typo switches no bound off
    assert isinstance(kept, Target) and (kept.metric, kept.threshold) == ("t", 1.0)
    assert isinstance(wrong, StackmgrError) and "unknown key 'why' (its bounds are judged all" in wrong.message
    (wrong,) = series_targets("spec", {"note": "x"})
    assert isinstance(wrong, StackmgrError) and "no `target`" in wrong.message


def test_status_says_each_bound_and_the_relative_one_by_the_baseline_run_group(lab: Lab, spec: dict[str, str]) -> None:
    said = json.loads(lab.sm("links", "--series", "spec", "--json").out)["targets"]
    assert [t["target"] for t in said] == ["output_throughput > 150", "output_throughput >= baseline +20%"]
    assert [t["met"] for t in said] == [False, True] and [t["note"] for t in said] == [NOTE, NOTE]
    assert said[1]["baseline"] == "baseline of spec (run group non-spec-baseline, 3 runs, median 100 tok/s)"
    assert said[1]["line"] == (
        "target spec: output_throughput >= baseline +20% (= 120 tok/s; the baseline of spec (run group "
        f"non-spec-baseline, 3 runs, median 100 tok/s)) reached: 130 tok/s ({spec['draft']}, run draft-1), "
        "with 1 of 2 patches of spec (top draft)"  # a prefix's result: the whole stack may be far from it
    )
    assert said[0]["line"] == (f"target spec: output_throughput > 150 not reached: best valid 130 tok/s "
                               f"({spec['draft']}, run draft-1), with 1 of 2 patches of spec (top draft); "
                               "1 result above it is not valid (exit 1)")  # fmt: skip
    status = lab.sm("status")
    assert said[1]["line"] in status.out and said[0]["line"] in status.out


def test_the_lab_page_carries_targets_topic_open_lessons_notes_baselines_and_the_trees(
    lab: Lab, spec: dict[str, str]
) -> None:
    (lab.tree / "scratch.py").write_text("experiment\n")  # dirty: a change in no saved patch
    text = page(lab, "--title", "Bugs And Failed Paths")
    assert text.startswith("# Bugs And Failed Paths\n\n")
    assert "- [Targets](#targets): 2\n- [Topics](#topics)\n- [Failed paths](#failed-paths): 0\n" in text
    assert section(text, "Targets") == (
        "## Targets\n\nEach series' targets (`[targets]` of stackmgr.toml) and whether a valid result reached "
        "them: a run that passed, every gate it records passed, untainted, its evidence whole.\n\n"
        f"### `spec`\n\n> {NOTE}\n\n"
        f"- `output_throughput > 150`: **not reached**: the best valid result is 130 tok/s, run `draft-1` "
        f"(`{spec['draft']}`), with 1 of 2 patches of spec (top draft); above it but not valid: run `dflash-1` "
        f"(`{spec['dflash']}`): exit 1\n"
        "- `output_throughput >= baseline +20%` (that is 120 tok/s, from the baseline of spec (run group "
        "non-spec-baseline, 3 runs, median 100 tok/s)): **reached**: by 130 tok/s, run `draft-1` "
        f"(`{spec['draft']}`), with 1 of 2 patches of spec (top draft); above it but not valid: run `dflash-1` "
        f"(`{spec['dflash']}`): exit 1\n\n"
    )
    assert section(text, "Topics") == (
        "## Topics\n\nSeries whose patches share a topic (`stackmgr series describe`), in series order.\n\n"
        "### `spec`\n\nSpeculative decoding.\\\nThe lab's main lane.\n\n"
        "1. `draft`: experimental (see Open experiments)\n2. `dflash`: experimental (see Open experiments)\n\n"
    )
    (notes,) = [a["path"] for r in link_records(lab, "dflash") for a in r.get("artifact", []) if a.get("label")]
    opened = section(text, "Open experiments").split("### `dflash`\n\n")[1].split("### ")[0]
    assert opened.split("\n\n")[1:] == [
        "> most plausible direction, no clean serving result yet",
        f"**No valid result yet**: run `dflash-1` (`{spec['dflash']}`): exit 1.",
        f"Notes: detailed chronological notes: [dflash-notes.md](../{notes})", ""]  # fmt: skip
    assert section(text, "Baselines").endswith(
        "- `spec`: the baseline of spec (run group non-spec-baseline, 3 runs, median 100 tok/s), `output_throughput`; "
        "the latest run `non-spec-baseline-3` of run group `non-spec-baseline` (`"
        + next(r["id"] for r in link_records(lab, "draft") if r["run"]["name"] == "non-spec-baseline-3")
        + "`)\n\n"
    )
    assert text.endswith(
        "- `vllm`: spec: 2 of 2 applied, top dflash; dirty: 1 file changed on top of them, 1 change in "
        "no saved patch; not a promoted set: `draft` (experimental), `dflash` (experimental)\n"
    )
    assert page(lab, "--title", "Bugs And Failed Paths") == text, "no clock: the same store and trees, the same bytes"
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    assert not [t for t in tokens if t.type.startswith("html")]
    done = lab.sm("link", "draft", "--amends", "draft-1", "--baseline", "non-spec-baseline-1", "--verdict", "rejected")
    assert done.code == 0, done.err
    failed = section(page(lab), "Failed paths")
    assert "| metric | value | vs baseline run `non-spec-baseline-1` |\n" in failed, "a baseline by its run name"


def test_a_promoted_patch_is_judged_against_the_baseline_named_by_its_run_group(lab: Lab, spec: dict[str, str]) -> None:
    assert lab.sm("link", "draft", "--amends", "draft-1", "--verdict", "promoted").code == 0
    (row,) = [r for r in section(page(lab), "Patches worth remembering").splitlines() if r.startswith("| `draft`")]
    assert (
        "`output_throughput` 130 tok/s +30.0%, 1 vs 3 run(s), no verdict, vs the baseline of spec (run group "
        "non-spec-baseline, 3 runs, median 100 tok/s)" in row
    )


def test_a_series_description_is_its_leading_comment_lines_and_the_file_stays_quilt_shaped(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    file = lab.store / "series" / "S"
    before = file.read_bytes()
    assert lab.sm("series", "show", "S", "--json").code == 0 and file.read_bytes() == before, "read: untouched"
    assert lab.sm("series", "describe", "S", "-m", "Replay fixes.\n\nShared by the team.").code == 0
    assert file.read_bytes() == b"## Replay fixes.\n##\n## Shared by the team.\n" + before
    shown = lab.sm("series", "S")
    assert shown.out.splitlines()[1:4] == ["  Replay fixes.", "", "  Shared by the team."]
    assert json.loads(lab.sm("series", "show", "S", "--json").out)["description"] == \
        "Replay fixes.\n\nShared by the team."  # fmt: skip
    (lab.tree / "README").write_text("probe\n")
    assert lab.sm("save", "probe", "-m", "probe").code == 0
    done = lab.sm("series", "move", "S", "probe", "1")  # a new first entry goes below the description
    assert done.code == 0, done.err
    assert file.read_bytes() == b"## Replay fixes.\n##\n## Shared by the team.\nprobe.patch\n" + before
    assert lab.sm("series", "describe", "S", "-m", "").code == 0
    assert file.read_bytes() == b"probe.patch\n" + before
    assert lab.sm("series", "new", "T", "-m", "Topic T").code == 0
    assert (lab.store / "series" / "T").read_bytes() == b"## Topic T\n"
    one_line_error(lab.sm("series", "describe", "T", "-m", "bell\x07"), 2)
    one_line_error(lab.sm("series", "describe", "nope", "-m", "x"), 2)


def test_a_label_says_what_a_linked_artifact_is_and_needs_an_artifact(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "-m", "fix").code == 0
    notes = tmp_path / "notes.md"
    notes.write_text("notes\n")
    assert lab.sm("link", "fix", str(notes), "--label", "detailed chronological notes").code == 0
    (record,) = link_records(lab, "fix")
    (artifact,) = record["artifact"]
    assert artifact["label"] == "detailed chronological notes" and artifact["origin"] == str(notes)
    one_line_error(lab.sm("link", "fix", "--label", "notes"), 2)
    one_line_error(lab.sm("link", "fix", str(notes), "--label", "a\nb"), 2)
    assert "- [Failed paths](#failed-paths): 0" in page(lab)
    one_line_error(lab.sm("report", "--markdown", "x.md", "--title", ""), 2)


def test_markup_in_a_note_a_description_and_a_label_is_shown_as_text(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    assert lab.sm("series", "describe", "S", "-m", "<b>bold</b> | [x](y)\n# not a heading").code == 0
    with (lab.store / "stackmgr.toml").open("a") as config:
        config.write('\n[targets.S]\ntarget = "output_throughput > 1"\nnote = "<script>x</script> *e*"\n')
    notes = tmp_path / "n.md"
    notes.write_text("n\n")
    assert lab.sm("link", "fix", str(notes), "--label", "[click](javascript:x) <i>", "--verdict",
                  "inconclusive").code == 0  # fmt: skip
    series = lab.store / "series" / "S"  # a teammate's push: the CLI refuses control characters, git does not
    series.write_bytes(b"## \x1b]0;pwned\x07 and \x1b[31mred\n" + series.read_bytes())
    text = page(lab, "--title", "# <h1>Title</h1> #")
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)  # `cat` of the page acts on nothing
    assert "\\x1b\\]0;pwned\\x07 and \\x1b\\[31mred" in text
    assert lab.sm("report", "-o", str(tmp_path / "site")).code == 0  # the HTML index shows the topic too, as text
    index = (tmp_path / "site" / "index.html").read_text()
    assert '<div class="desc topic">' in index and "&lt;b&gt;bold&lt;/b&gt; | [x](y)\n# not a heading" in index
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    inline = [c for t in tokens if t.type == "inline" for c in (t.children or [])]
    assert not [t for t in tokens + inline if t.type.startswith("html")]
    assert "javascript" not in "".join(str(t.attrs.get("href", "")) for t in inline if t.type == "link_open")
    assert text.startswith("# \\# \\<h1\\>Title\\</h1\\> \\#\n")
    assert next(t.content for t in tokens if t.type == "inline") == "\\# \\<h1\\>Title\\</h1\\> \\#"
    assert "> \\<script\\>x\\</script\\> \\*e\\*\n" in text
    assert "\\<b\\>bold\\</b\\> \\| \\[x\\](y)\\\n\\# not a heading\n" in text


def test_a_bound_relative_to_a_baseline_the_series_lacks_says_so_and_stops_nothing(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    with (lab.store / "stackmgr.toml").open("a") as config:
        config.write('\n[targets]\nS = ["mean_tpot_ms <= baseline -10%", "tput >= 1 tok/s"]\n')
    status = lab.sm("status")
    assert status.code == 0, status.err
    said = [line.strip() for line in status.out.splitlines() if line.strip().startswith("target ")]
    assert said == [
        "target S: mean_tpot_ms <= baseline -10%: no valid baseline of S has mean_tpot_ms",
        'target S: "tput >= 1 tok/s" is not METRIC OP NUMBER or METRIC OP baseline +N% (OP one of >= > <= <) '
        '(fix [targets] in stackmgr.toml, e.g. replay = "output_throughput >= 150")',
    ]
    assert '- target S: "tput \\>= 1 tok/s" is not METRIC OP NUMBER' in section(page(lab), "Targets")
