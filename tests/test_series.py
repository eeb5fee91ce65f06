"""Series files (docs/FORMATS.md#series-file) and `stackmgr series …`: the grammar, the edits, the refusals.

Series files are written by hand as often as by stackmgr, so every edit is checked on the exact bytes it leaves.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stackmgr.errors import StackmgrError
from stackmgr.store.config import open_store
from stackmgr.store.series import SeriesError, SeriesFile, list_series, parse_entry
from tests.conftest import Lab, Result, run_stackmgr

# A series as the lab writes it by hand: header, blank lines, -p1, guards, trailing comments, a retired lane.
HAND_WRITTEN = (
    b"# replay-correctness: the stack behind the 107.77 tok/s run\n"
    b"#   keep the routed-GEMM fix first\n"
    b"\n"
    b"routegemm-fix.patch -p1   # see results/probe.log\n"
    b"\n"
    b"# instrumentation, drop before upstreaming\n"
    b"decode-boundary.patch #+xpu\n"
    b"replay-stack.patch\t#-cuda\n"
    b"\n"
    b"#old-lane.patch  (do not revive: JSON gate failed)\n"
)


def _patches(lab: Lab, *names: str) -> None:
    """Stand-in patch files: the series commands only need them to exist."""
    for name in names:
        (lab.store / "patches" / f"{name}.patch").write_bytes(b"placeholder, not a diff\n")


def _series(lab: Lab, name: str, data: bytes | None = None) -> Path:
    path = lab.store / "series" / name
    if data is not None:
        path.write_bytes(data)
    return path


def _load(lab: Lab, name: str) -> SeriesFile:
    return SeriesFile.load(open_store(str(lab.store)), name)


def _ok(result: Result) -> Result:
    assert result.code == 0, result
    return result


def _refused(result: Result, code: int, says: str) -> None:
    """One line on stderr starting 'stackmgr: ', the exit code (docs/FORMATS.md#exit-codes), nothing on stdout."""
    assert result.code == code, result
    assert says in result.err, result.err
    assert result.err.startswith("stackmgr: ") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err and result.out == "", result


def _store_files(store: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(store)): p.read_bytes()
        for p in sorted(store.rglob("*"))
        if p.is_file() and ".stackmgr" not in p.parts
    }


def _words(text: str) -> list[str]:
    """Output lines with runs of blanks squeezed, so tests do not depend on column widths."""
    return [" ".join(line.split()) for line in text.splitlines()]


# --- grammar -----------------------------------------------------------------------------------------------------


def test_a_hand_written_series_is_parsed_as_written(lab: Lab) -> None:
    _series(lab, "replay", HAND_WRITTEN)
    series = _load(lab, "replay")
    assert series.patch_names() == ["routegemm-fix", "decode-boundary", "replay-stack"]
    fix, decode, replay = series.entries
    assert (fix.lineno, fix.strip, fix.guards, fix.comment) == (4, True, [], "# see results/probe.log")
    assert (decode.lineno, decode.strip, decode.guards) == (7, False, ["+xpu"])
    assert (replay.lineno, replay.guards) == (8, ["-cuda"])
    assert series.render() == HAND_WRITTEN


def test_parse_entry_reads_strip_guards_and_a_trailing_comment() -> None:
    entry = parse_entry("series/s", 3, "routegemm-fix.patch -p1 #+xpu #-cuda # see results/probe.log")
    assert entry is not None
    assert (entry.patch, entry.name, entry.lineno) == ("routegemm-fix.patch", "routegemm-fix", 3)
    assert (entry.strip, entry.guards, entry.comment) == (True, ["+xpu", "-cuda"], "# see results/probe.log")
    for not_an_entry in ("", "   \t", "# a comment", "#+xpu", "#old.patch"):
        assert parse_entry("series/s", 1, not_an_entry) is None


def test_loading_and_writing_back_changes_no_byte(lab: Lab) -> None:
    awkward = (
        b"# caf\xe9 in latin-1, not UTF-8 \xff\r\n"  # undecodable bytes, CRLF
        b"a.patch\n"  # LF in the same file
        b"  \t \n"  # a blank line that is not empty
        b"# page one\x0c page two \xe2\x80\xa8 still one line\n"  # \f and U+2028 do not end lines
        b"b.patch #+xpu"  # no final newline
    )
    path = _series(lab, "awkward", awkward)
    series = _load(lab, "awkward")
    assert series.patch_names() == ["a", "b"]
    assert [e.lineno for e in series.entries] == [2, 5]
    series.write()
    assert path.read_bytes() == awkward


def test_only_newline_ends_a_line(lab: Lab) -> None:
    """A form feed or U+2028 inside a comment must not turn the rest of the comment into an entry."""
    _series(lab, "notes", b"# lane A \x0c  moved.patch\n" + "# see \u2028split.patch\n".encode() + b"real.patch\n")
    series = _load(lab, "notes")
    assert [(e.patch, e.lineno) for e in series.entries] == [("real.patch", 3)]
    _series(lab, "late", b"# \x0c one line\n" + "# \u2028 one line\n".encode() + b"real.patch\n  # indented\n")
    with pytest.raises(SeriesError) as exc:
        _load(lab, "late")
    assert exc.value.message == "series/late:4: comment not in column 0"


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b"fix.patch -p0", "series/replay:3: '-p0' is not supported"),
        (b"fix.patch -p2", "series/replay:3: '-p2' is not supported"),
        (b"fix.patch -R", "series/replay:3: unexpected '-R' after the patch name"),
        (b"fix.patch --fuzz=3", "series/replay:3: unexpected '--fuzz=3' after the patch name"),
        (b"  # indented comment", "series/replay:3: comment not in column 0"),
        (b"\t#+xpu", "series/replay:3: comment not in column 0"),
        (b"fix.patch #+", "series/replay:3: bad guard '#+'"),
        (b"../x.patch", "series/replay:3: invalid patch name '../x.patch'"),
        (b"/etc/passwd", "series/replay:3: invalid patch name '/etc/passwd'"),
        (b"sub/dir.patch", "series/replay:3: invalid patch name 'sub/dir.patch'"),
        (b"my fix.patch", "series/replay:3: unexpected 'fix.patch' after the patch name"),
        (b"fix\xc2\xa0two.patch", "series/replay:3: invalid patch name 'fix\\xa0two.patch'"),
        (b".hidden.patch", "series/replay:3: invalid patch name '.hidden.patch'"),
        (b"x.lock", "series/replay:3: invalid patch name 'x.lock'"),
    ],
)
def test_a_bad_line_is_refused_with_file_and_line_and_nothing_changes(lab: Lab, line: bytes, says: str) -> None:
    _patches(lab, "first", "fix", "later", "new")
    data = b"# replay\nfirst.patch\n" + line + b"\nlater.patch\n"
    path = _series(lab, "replay", data)
    _refused(lab.sm("series", "replay"), 3, says)
    _refused(lab.sm("series", "add", "replay", "new"), 3, says)
    _refused(lab.sm("series", "remove", "replay", "first"), 3, says)
    _refused(lab.sm("series", "move", "replay", "later", "1"), 3, says)
    assert path.read_bytes() == data


def test_p1_is_the_one_option_accepted(lab: Lab) -> None:
    _patches(lab, "fix", "new")
    path = _series(lab, "replay", b"fix.patch -p1\n")
    assert _load(lab, "replay").entries[0].strip
    _ok(lab.sm("series", "add", "replay", "new"))
    assert path.read_bytes() == b"fix.patch -p1\nnew.patch\n"


def test_a_duplicate_entry_is_refused_naming_both_lines(lab: Lab) -> None:
    _patches(lab, "a", "b", "c")
    data = b"# twice by mistake\na.patch\nb.patch\na.patch -p1 #+xpu\n"
    path = _series(lab, "replay", data)
    says = "series/replay:4: 'a.patch' is listed twice (first on line 2)"
    with pytest.raises(SeriesError) as exc:
        _load(lab, "replay")
    assert exc.value.message == says
    _refused(lab.sm("series", "replay"), 3, says)
    _refused(lab.sm("series", "remove", "replay", "a"), 3, says)
    _refused(lab.sm("series", "add", "replay", "c"), 3, says)
    assert path.read_bytes() == data


# --- edits keep the file as written ------------------------------------------------------------------------------


def test_comments_survive_add_move_and_remove_byte_for_byte(lab: Lab) -> None:
    _patches(lab, "routegemm-fix", "decode-boundary", "replay-stack", "new-probe", "first-aid")
    path = _series(lab, "replay", HAND_WRITTEN)

    # An appended patch goes to the end of the file, below the retired lane.
    _ok(lab.sm("series", "add", "replay", "new-probe"))
    step1 = HAND_WRITTEN + b"new-probe.patch\n"
    assert path.read_bytes() == step1

    # --at 1 puts it just above the first entry, below the header and its blank line.
    _ok(lab.sm("series", "add", "replay", "first-aid", "--at", "1"))
    step2 = step1.replace(b"\nroutegemm-fix.patch", b"\nfirst-aid.patch\nroutegemm-fix.patch")
    assert path.read_bytes() == step2

    # Moving keeps the moved line exactly as written: tab, guard and all.
    moved = _ok(lab.sm("series", "move", "replay", "replay-stack", "2"))
    assert moved.out == "series replay: replay-stack is now number 2\n"
    step3 = step2.replace(b"replay-stack.patch\t#-cuda\n", b"").replace(
        b"first-aid.patch\n", b"first-aid.patch\nreplay-stack.patch\t#-cuda\n"
    )
    assert path.read_bytes() == step3

    # Removing an entry leaves the comment above it alone.
    _ok(lab.sm("series", "remove", "replay", "decode-boundary.patch"))
    step4 = step3.replace(b"decode-boundary.patch #+xpu\n", b"")
    assert path.read_bytes() == step4
    assert step4 == (
        b"# replay-correctness: the stack behind the 107.77 tok/s run\n"
        b"#   keep the routed-GEMM fix first\n"
        b"\n"
        b"first-aid.patch\n"
        b"replay-stack.patch\t#-cuda\n"
        b"routegemm-fix.patch -p1   # see results/probe.log\n"
        b"\n"
        b"# instrumentation, drop before upstreaming\n"
        b"\n"
        b"#old-lane.patch  (do not revive: JSON gate failed)\n"
        b"new-probe.patch\n"
    )
    assert _load(lab, "replay").patch_names() == ["first-aid", "replay-stack", "routegemm-fix", "new-probe"]
    assert sorted(os.listdir(lab.store / "series")) == ["replay"]  # atomic writes leave no temp files


def test_a_crlf_series_stays_crlf(lab: Lab) -> None:
    _patches(lab, "a", "b", "c")
    path = _series(lab, "windows", b"# edited on the laptop\r\na.patch\r\n\r\nb.patch #+xpu\r\n")
    _ok(lab.sm("series", "add", "windows", "c"))
    assert path.read_bytes() == b"# edited on the laptop\r\na.patch\r\n\r\nb.patch #+xpu\r\nc.patch\r\n"
    _ok(lab.sm("series", "move", "windows", "c", "1"))
    assert path.read_bytes() == b"# edited on the laptop\r\nc.patch\r\na.patch\r\n\r\nb.patch #+xpu\r\n"
    _ok(lab.sm("series", "remove", "windows", "a"))
    assert path.read_bytes() == b"# edited on the laptop\r\nc.patch\r\n\r\nb.patch #+xpu\r\n"


def test_a_missing_final_newline_is_kept_until_the_end_is_edited(lab: Lab) -> None:
    _patches(lab, "a", "b", "c", "d")
    path = _series(lab, "replay", b"# typed in a hurry\na.patch\nb.patch\nc.patch")
    _ok(lab.sm("series", "remove", "replay", "b"))
    assert path.read_bytes() == b"# typed in a hurry\na.patch\nc.patch"
    _ok(lab.sm("series", "add", "replay", "d"))
    assert path.read_bytes() == b"# typed in a hurry\na.patch\nc.patch\nd.patch\n"

    crlf = _series(lab, "crlf", b"a.patch\r\nb.patch")
    _ok(lab.sm("series", "add", "crlf", "c"))
    assert crlf.read_bytes() == b"a.patch\r\nb.patch\r\nc.patch\r\n"

    tail = _series(lab, "tail", b"a.patch\nb.patch\nc.patch #+xpu")
    _ok(lab.sm("series", "move", "tail", "c", "1"))
    assert tail.read_bytes() == b"c.patch #+xpu\na.patch\nb.patch\n"


def test_bytes_that_are_not_utf8_survive_an_edit(lab: Lab) -> None:
    _patches(lab, "a", "b")
    path = _series(lab, "old", b"# r\xe9sum\xe9 from the old box \xff\na.patch\n")
    _ok(lab.sm("series", "add", "old", "b"))
    assert path.read_bytes() == b"# r\xe9sum\xe9 from the old box \xff\na.patch\nb.patch\n"


# --- missing patch files ------------------------------------------------------------------------------------------


def test_a_missing_patch_file_is_reported_not_hidden(lab: Lab) -> None:
    (lab.tree / "README").write_text("hello, replay\n")
    _ok(lab.sm("save", "readme-fix", "-m", "readme fix"))
    _series(lab, "replay", b"# one saved, one lost\nreadme-fix.patch\nlost-lane.patch #+xpu\n")

    series = _load(lab, "replay")
    assert [(e.patch, e.lineno) for e in series.missing_patches()] == [("lost-lane.patch", 3)]
    with pytest.raises(StackmgrError) as exc:
        series.check_files()
    assert exc.value.message == "series/replay: missing patch files: lost-lane.patch (line 3)"

    shown = _ok(lab.sm("series", "replay"))
    assert _words(shown.out) == [
        "series replay: 2 patches",
        "- 1. readme-fix vllm +1 -1",
        "- 2. lost-lane MISSING",
        "(+ applied, > top applied, - not applied)",
    ]
    rows = json.loads(_ok(lab.sm("series", "replay", "--json")).out)["patches"]
    assert [(r["patch"], r["file"], r["exists"], r["tree"], r["guards"]) for r in rows] == [
        ("readme-fix", "readme-fix.patch", True, "vllm", []),
        ("lost-lane", "lost-lane.patch", False, None, ["+xpu"]),
    ]
    assert _words(_ok(lab.sm("series")).out) == ["replay 2 patches, 1 missing"]

    _patches(lab, "lost-lane")  # restored from backup: the series is whole again
    _load(lab, "replay").check_files()
    assert _words(_ok(lab.sm("series")).out) == ["replay 2 patches"]


def test_a_directory_where_a_patch_file_should_be_counts_as_missing(lab: Lab) -> None:
    (lab.store / "patches" / "odd.patch").mkdir()
    _series(lab, "replay", b"odd.patch\n")
    assert _words(_ok(lab.sm("series", "replay")).out) == [
        "series replay: 1 patch", "- 1. odd MISSING", "(+ applied, > top applied, - not applied)"]


# --- the commands, as a user's day ----------------------------------------------------------------------------


def test_a_day_with_real_patches(lab: Lab) -> None:
    (lab.tree / "README").write_text("hello, replay\n")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n\n\ndef g():\n    return 3\n")
    _ok(lab.sm("save", "readme-fix", "README", "-m", "readme fix"))
    _ok(lab.sm("save", "model-tweak", "src/model.py", "-m", "model tweak"))

    assert _ok(lab.sm("series", "new", "replay")).out == "created series replay\n"
    path = _series(lab, "replay")
    assert path.read_bytes() == b""
    assert _ok(lab.sm("series", "add", "replay", "model-tweak", "readme-fix.patch")).out == (
        "series replay: added model-tweak, readme-fix.patch\n"
    )
    assert path.read_bytes() == b"model-tweak.patch\nreadme-fix.patch\n"
    assert _words(_ok(lab.sm("series", "replay")).out) == [
        "series replay: 2 patches",
        "- 1. model-tweak vllm +5 -1",
        "- 2. readme-fix vllm +1 -1",
        "(+ applied, > top applied, - not applied)",
    ]

    _ok(lab.sm("series", "move", "replay", "readme-fix", "1"))
    assert path.read_bytes() == b"readme-fix.patch\nmodel-tweak.patch\n"
    rows = json.loads(_ok(lab.sm("series", "replay", "--json")).out)["patches"]
    assert [(r["position"], r["patch"], r["tree"], r["insertions"], r["deletions"]) for r in rows] == [
        (1, "readme-fix", "vllm", 1, 1),
        (2, "model-tweak", "vllm", 5, 1),
    ]
    assert rows[0]["subject"] == "readme fix" and rows[0]["exists"] and rows[0]["error"] is None
    assert rows[0]["size"] == (lab.store / "patches" / "readme-fix.patch").stat().st_size

    assert _ok(lab.sm("series", "remove", "replay", "model-tweak")).out == "series replay: removed model-tweak\n"
    assert path.read_bytes() == b"readme-fix.patch\n"
    assert (lab.store / "patches" / "model-tweak.patch").is_file()  # removing from a series keeps the patch


def test_save_into_a_series_that_only_has_comments_keeps_them(lab: Lab) -> None:
    _ok(lab.sm("series", "new", "replay"))
    path = _series(lab, "replay", b"# replay-correctness, started 2026-06-13\n\n")
    (lab.tree / "README").write_text("hello, replay\n")
    _ok(lab.sm("save", "readme-fix", "--series", "replay", "-m", "readme fix"))
    assert path.read_bytes() == b"# replay-correctness, started 2026-06-13\n\nreadme-fix.patch\n"


def test_series_new_refuses_an_existing_series(lab: Lab) -> None:
    _ok(lab.sm("series", "new", "replay"))
    path = _series(lab, "replay", b"# mine\n")
    _refused(lab.sm("series", "new", "replay"), 2, "series replay already exists")
    assert path.read_bytes() == b"# mine\n"
    broken = _series(lab, "broken", b"  # not in column 0\n")  # existing beats malformed
    _refused(lab.sm("series", "new", "broken"), 2, "series broken already exists")
    assert broken.read_bytes() == b"  # not in column 0\n"


def test_series_add_places_patches_and_refuses_what_cannot_be(lab: Lab) -> None:
    _patches(lab, "a", "b", "c", "d", "e")
    _ok(lab.sm("series", "add", "replay", "a"))  # creates the series
    path = _series(lab, "replay")
    assert path.read_bytes() == b"a.patch\n"
    _ok(lab.sm("series", "add", "replay", "b", "--at", "1"))
    assert path.read_bytes() == b"b.patch\na.patch\n"
    _ok(lab.sm("series", "add", "replay", "c", "d", "--at", "2"))
    assert path.read_bytes() == b"b.patch\nc.patch\nd.patch\na.patch\n"
    _ok(lab.sm("series", "add", "replay", "e", "--at", "99"))  # past the end appends
    after = b"b.patch\nc.patch\nd.patch\na.patch\ne.patch\n"
    assert path.read_bytes() == after

    _refused(lab.sm("series", "add", "replay", "nope"), 2, "no patch named nope")
    _refused(lab.sm("series", "add", "replay", "a"), 2, "'a.patch' is already in series replay")
    _refused(lab.sm("series", "add", "replay", "../a"), 2, "invalid patch name '../a'")
    assert path.read_bytes() == after

    # All or nothing: a good patch before a bad one is not added either.
    _patches(lab, "f")
    _refused(lab.sm("series", "add", "replay", "f", "nope"), 2, "no patch named nope")
    _refused(lab.sm("series", "add", "replay", "f", "f"), 2, "'f.patch' is already in series replay")
    assert path.read_bytes() == after
    _refused(lab.sm("series", "add", "ghost", "nope"), 2, "no patch named nope")
    assert not _series(lab, "ghost").exists()

    bad_at = lab.sm("series", "add", "replay", "f", "--at", "0")
    assert bad_at.code == 2 and "Traceback" not in bad_at.err
    assert path.read_bytes() == after


def test_series_remove_refuses_a_patch_that_is_not_there(lab: Lab) -> None:
    _patches(lab, "a", "b", "c")
    path = _series(lab, "replay", b"# three\na.patch\nb.patch\nc.patch\n")
    _refused(lab.sm("series", "remove", "replay", "nope"), 2, "'nope' is not in series replay")
    _refused(lab.sm("series", "remove", "replay", "a", "nope"), 2, "'nope' is not in series replay")
    _refused(lab.sm("series", "remove", "replay", "a", "a"), 2, "'a' is not in series replay")
    _refused(lab.sm("series", "remove", "missing", "a"), 2, "no series named 'missing'")
    assert path.read_bytes() == b"# three\na.patch\nb.patch\nc.patch\n"
    _ok(lab.sm("series", "remove", "replay", "c", "a.patch"))
    assert path.read_bytes() == b"# three\nb.patch\n"
    assert sorted(os.listdir(lab.store / "patches")) == ["a.patch", "b.patch", "c.patch"]


def test_series_move_by_position(lab: Lab) -> None:
    _patches(lab, "a", "b", "c")
    path = _series(lab, "replay", b"# head\na.patch\nb.patch\nc.patch\n# tail\n")
    assert _ok(lab.sm("series", "move", "replay", "c", "1")).out == "series replay: c is now number 1\n"
    assert path.read_bytes() == b"# head\nc.patch\na.patch\nb.patch\n# tail\n"
    _ok(lab.sm("series", "move", "replay", "c", "2"))
    assert path.read_bytes() == b"# head\na.patch\nc.patch\nb.patch\n# tail\n"
    # Beyond the end clamps to the last place.
    assert _ok(lab.sm("series", "move", "replay", "a", "10")).out == "series replay: a is now number 3\n"
    assert path.read_bytes() == b"# head\nc.patch\nb.patch\n# tail\na.patch\n"
    # Already there: not a byte changes, not even around the trailing comment.
    _ok(lab.sm("series", "move", "replay", "a", "7"))
    _ok(lab.sm("series", "move", "replay", "c", "1"))
    assert path.read_bytes() == b"# head\nc.patch\nb.patch\n# tail\na.patch\n"

    _refused(lab.sm("series", "move", "replay", "nope", "1"), 2, "'nope' is not in series replay")
    _refused(lab.sm("series", "move", "missing", "a", "1"), 2, "no series named 'missing'")
    for bad in ("0", "-1", "first"):
        result = lab.sm("series", "move", "replay", "a", bad)
        assert result.code == 2 and "Traceback" not in result.err, result
    assert path.read_bytes() == b"# head\nc.patch\nb.patch\n# tail\na.patch\n"


def test_series_lists_every_series_with_counts(lab: Lab) -> None:
    assert _ok(lab.sm("series")).out.startswith("no series yet")
    assert json.loads(_ok(lab.sm("series", "--json")).out) == {"schema": 1, "series": []}
    _patches(lab, "a", "b")
    _series(lab, "empty", b"# nothing yet\n")
    _series(lab, "one", b"a.patch\n")
    _series(lab, "two", b"a.patch\nb.patch #+xpu\ngone.patch\n")
    _series(lab, "two~", b"an editor backup\n")  # not a series name: not listed
    _series(lab, ".two.swp", b"vim swap\n")
    assert list_series(open_store(str(lab.store))) == ["empty", "one", "two"]
    assert _words(_ok(lab.sm("series")).out) == [
        "empty 0 patches",
        "one 1 patch",
        "two 3 patches, 1 missing",
    ]
    expected = {
        "schema": 1,
        "series": [
            {"name": "empty", "patches": 0, "missing": 0, "error": None, "applied": []},
            {"name": "one", "patches": 1, "missing": 0, "error": None, "applied": []},
            {"name": "two", "patches": 3, "missing": 1, "error": None, "applied": []},
        ],
    }
    assert json.loads(_ok(lab.sm("series", "--json")).out) == expected
    assert json.loads(_ok(lab.sm("--json", "series")).out) == expected


def test_one_broken_series_does_not_hide_the_others(lab: Lab) -> None:
    _patches(lab, "a")
    _series(lab, "good", b"a.patch\n")
    _series(lab, "broken", b"a.patch\n  # indented\n")
    listing = _ok(lab.sm("series"))
    assert _words(listing.out) == [
        "broken series/broken:2: comment not in column 0; move the '#' to the start of the line",
        "good 1 patch",
    ]
    rows = json.loads(_ok(lab.sm("series", "--json")).out)["series"]
    assert rows[0]["name"] == "broken" and rows[0]["patches"] is None
    assert rows[0]["error"].startswith("series/broken:2: comment not in column 0")
    assert rows[1] == {"name": "good", "patches": 1, "missing": 0, "error": None, "applied": []}


def test_json_is_accepted_before_and_after_the_command(lab: Lab) -> None:
    _patches(lab, "a")
    _series(lab, "replay", b"a.patch #+xpu\n")
    answers = [
        run_stackmgr("--store", str(lab.store), "--json", "series", "replay"),
        lab.sm("series", "replay", "--json"),
        lab.sm("series", "--json", "replay"),
        lab.sm("series", "show", "replay", "--json"),
        lab.sm("--json", "series", "show", "replay"),
    ]
    data = [json.loads(_ok(r).out) for r in answers]
    assert all(d == data[0] for d in data)
    assert data[0]["schema"] == 1 and data[0]["series"] == "replay"
    (row,) = data[0]["patches"]
    assert (row["position"], row["patch"], row["exists"], row["guards"]) == (1, "a", True, ["+xpu"])
    assert row["tree"] is None and row["error"]  # a placeholder is not a diff: tree unknown, error says why


def test_show_refuses_a_series_that_does_not_exist(lab: Lab) -> None:
    _refused(lab.sm("series", "nope"), 2, "no series named 'nope'")
    _refused(lab.sm("series", "show", "nope"), 2, "no series named 'nope'")


# --- names that would escape the store ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("series", "../evil"),
        ("series", "show", "../evil"),
        ("series", "new", "../evil"),
        ("series", "add", "../evil", "a"),
        ("series", "remove", "../evil", "a"),
        ("series", "move", "../evil", "a", "1"),
        ("series", "new", "/tmp/evil"),
        ("series", "new", "evil.lock"),
        ("series", "new", ".evil"),
    ],
)
def test_a_series_name_outside_the_store_is_refused(lab: Lab, tmp_path: Path, args: tuple[str, ...]) -> None:
    _patches(lab, "a")
    before = _store_files(lab.store)
    _refused(lab.sm(*args), 2, "invalid series name")
    assert _store_files(lab.store) == before
    assert not (lab.store / "evil").exists() and not (tmp_path / "evil").exists()


def test_a_series_symlink_pointing_outside_the_store_is_refused(lab: Lab, tmp_path: Path) -> None:
    _patches(lab, "a")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not the store's\n")
    (lab.store / "series" / "evil").symlink_to(outside)
    _refused(lab.sm("series", "add", "evil", "a"), 2, "resolves outside")
    _refused(lab.sm("series", "evil"), 2, "resolves outside")
    _refused(lab.sm("series", "new", "evil"), 2, "resolves outside")
    assert outside.read_bytes() == b"not the store's\n"
    assert (lab.store / "series" / "evil").is_symlink()
    listing = _ok(lab.sm("series"))  # still listed, with what is wrong
    assert "evil" in listing.out and "resolves outside" in listing.out


def test_series_rm_deletes_the_list_keeps_the_patches_and_undo_brings_it_back(lab: Lab) -> None:
    (lab.tree / "README").write_text("hello\nsaved\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    kept = (lab.store / "series" / "S").read_bytes()
    refused = lab.sm("series", "rm", "S")
    assert refused.code == 3 and "applied to tree vllm" in refused.err and "nothing changed" in refused.err
    assert (lab.store / "series" / "S").read_bytes() == kept
    assert lab.sm("reset").code == 0  # S stays current, none applied
    said = lab.sm("series", "rm", "S")
    assert said.code == 0 and said.out == "series S deleted (1 patch listed; its file stays)\n", said
    assert not (lab.store / "series" / "S").exists() and (lab.store / "patches" / "p1.patch").is_file()
    assert json.loads(lab.sm("--json", "status").out)["trees"][0]["applied"] is None, "the tree forgot it"
    assert lab.sm("undo").code == 0 and (lab.store / "series" / "S").read_bytes() == kept
    typo = lab.sm("series", "rm", "s")
    assert typo.code == 2 and "no series named 's'" in typo.err and "did you mean \"S\"?" in typo.err
