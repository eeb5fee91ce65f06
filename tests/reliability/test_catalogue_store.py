"""Catalogue rows 40–47, 58, 61–63 (docs/RELIABILITY.md#catalogue-rows): the store's own files under attack.

Series files that name missing, duplicate or escaping patches, series edited while applied, the grammar's corners,
truncated or corrupt series / link / state files, hostile link artifacts, patch files that are symlinks or hard
links, a full disk, a second stackmgr, a held `index.lock` and a read-only patch directory.

Each test drives the real CLI (in-process, or in a subprocess where a resource limit, a lock holder or dropped
privileges are needed) on a store and tree in tmp_path, and checks the exit code (docs/FORMATS.md#exit-codes),
the one-line message, and — on a refusal — that nothing but rebuildable caches changed.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Lab, Result, git
from tests.reliability.conftest import REBUILDABLE, assert_one_line_error, changed_paths, fingerprint

README_EDIT = "hello, patched\n"
MODEL_EDIT = "def f():\n    return 2\n"


# --- helpers ---------------------------------------------------------------------------------------------------


def _ok(result: Result) -> Result:
    assert result.code == 0, result
    return result


def _refused(result: Result, code: int, *needles: str) -> None:
    """A refusal: the exit code, one `stackmgr: …` line naming what is wrong, never an internal error."""
    assert result.code == code, result
    assert_one_line_error(result.err, *needles)
    assert "internal error" not in result.err, result.err


def _sub(lab: Lab, *args: str, env: dict[str, str] | None = None, preexec_fn: Callable[[], None] | None = None,
         timeout: float = 60) -> Result:  # fmt: skip
    """The CLI in its own process, with the test's hermetic environment (plus `env`)."""
    proc = subprocess.run(
        [sys.executable, "-m", "stackmgr", "--store", str(lab.store), *args],
        env={**os.environ, **(env or {})}, capture_output=True, preexec_fn=preexec_fn, timeout=timeout,
    )  # fmt: skip
    return Result(proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"))


def _temp_files(store: Path) -> list[str]:
    return sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.name.endswith(".tmp"))


def _status_json(lab: Lab) -> dict[str, object]:
    result = _ok(lab.sm("status", "--json"))
    return dict(json.loads(result.out)["trees"][0])


def _applied_line(lab: Lab, series: str) -> str:
    out = _ok(lab.sm("status")).out
    return next(ln for ln in out.splitlines() if ln.strip().startswith(f"{series}: "))


def _snap(lab: Lab) -> dict[str, tuple[int, bytes]]:
    return fingerprint(lab.store, lab.tree)


def _before(lab: Lab) -> dict[str, tuple[int, bytes]]:
    """The fingerprint to compare a refusal with, taken after a `check`: the snapshot's objects are then already
    in the object database, so a refused command that snapshots the same tree adds nothing there."""
    lab.sm("check")
    lab.worktree_id()  # and the snapshot's tree object (a refused reset or apply writes that one)
    return _snap(lab)


def _unchanged(lab: Lab, before: dict[str, tuple[int, bytes]]) -> None:
    assert changed_paths(before, _snap(lab), REBUILDABLE) == []


@dataclass
class Stacked:
    """Patches p1 (README) and p2 (src/model.py) saved against HEAD, the tree back at HEAD, series `replay`
    listing both (not applied yet)."""

    lab: Lab
    clean: str  # working-tree id at HEAD
    result: str  # working-tree id with both patches applied

    @property
    def series(self) -> Path:
        return self.lab.store / "series" / "replay"


@pytest.fixture
def stacked(lab: Lab) -> Stacked:
    clean = lab.worktree_id()
    (lab.tree / "README").write_text(README_EDIT)
    (lab.tree / "src" / "model.py").write_text(MODEL_EDIT)
    result = lab.worktree_id()
    _ok(lab.sm("save", "p1", "-t", "vllm", "-m", "readme", "README"))
    _ok(lab.sm("save", "p2", "-t", "vllm", "-m", "model", "src/model.py"))
    _ok(lab.sm("reset", "vllm"))
    assert lab.worktree_id() == clean
    (lab.store / "series" / "replay").write_bytes(b"p1.patch\np2.patch\n")
    _ok(lab.sm("check"))  # warm the private index, so later refusals write no new objects
    return Stacked(lab, clean, result)


# --- row 40: a series naming a missing patch -------------------------------------------------------------------


@pytest.mark.catalogue(40)
@pytest.mark.parametrize("dry_run", [False, True], ids=["apply", "dry-run"])
def test_apply_refuses_a_series_naming_missing_patches_listing_every_one(stacked: Stacked, dry_run: bool) -> None:
    """Row 40: a series that names missing patch files is a hard error listing every missing name (with its line)
    before anything is touched; quilt would apply them as empty patches."""
    lab = stacked.lab
    stacked.series.write_bytes(b"p1.patch\nghost-a.patch\np2.patch\n# a comment\nghost-b.patch\n")
    before = _before(lab)
    result = lab.sm("apply", "replay", *(["--dry-run"] if dry_run else []))
    _refused(result, 3, "series/replay", "ghost-a.patch (line 2)", "ghost-b.patch (line 5)")
    _unchanged(lab, before)
    assert lab.worktree_id() == stacked.clean


@pytest.mark.catalogue(40)
def test_a_dangling_patch_symlink_counts_as_missing(stacked: Stacked, tmp_path: Path) -> None:
    """Row 40: a patch name whose file is a dangling symlink is missing too, not an empty patch."""
    lab = stacked.lab
    os.symlink(tmp_path / "gone.patch", lab.store / "patches" / "dangling.patch")
    stacked.series.write_bytes(b"p1.patch\ndangling.patch\n")
    before = _before(lab)
    _refused(
        lab.sm("apply", "replay"), 3, "patches/dangling.patch is a symbolic link out of patches/ (series/replay line 2)"
    )
    _unchanged(lab, before)


@pytest.mark.catalogue(40)
def test_series_add_refuses_a_missing_patch_and_show_marks_it(stacked: Stacked) -> None:
    """Row 40: `series add` refuses a patch that has no file (exit 2), writing nothing; `series NAME` lists a
    missing entry as MISSING instead of hiding it."""
    lab = stacked.lab
    before = _before(lab)
    _refused(lab.sm("series", "add", "replay", "p1", "ghost"), 2, "patches/ghost.patch")
    _unchanged(lab, before)
    stacked.series.write_bytes(b"p1.patch\nghost.patch\n")
    shown = _ok(lab.sm("series", "replay"))
    assert "MISSING" in next(ln for ln in shown.out.splitlines() if "ghost" in ln)
    listing = json.loads(_ok(lab.sm("series", "--json")).out)
    assert {"name": "replay", "patches": 2, "missing": 1, "error": None, "applied": []} in listing["series"]


# --- row 41: duplicate entries ---------------------------------------------------------------------------------


@pytest.mark.catalogue(41)
@pytest.mark.parametrize("second", [b"p1.patch", b"p1.patch -p1", b"p1.patch #+xpu", b"p1.patch\t# again"])
def test_apply_refuses_a_duplicate_entry_naming_both_lines(stacked: Stacked, second: bytes) -> None:
    """Row 41: a patch listed twice (however the second line is decorated) is refused before anything is applied,
    naming the file, the line and the first occurrence."""
    lab = stacked.lab
    stacked.series.write_bytes(b"p1.patch\np2.patch\n" + second + b"\n")
    before = _before(lab)
    _refused(lab.sm("apply", "replay"), 3, "series/replay:3", "listed twice (first on line 1)")
    _unchanged(lab, before)
    assert lab.worktree_id() == stacked.clean


@pytest.mark.catalogue(41)
@pytest.mark.parametrize("args", [("p1",), ("p1.patch",), ("p2", "p2")], ids=["name", "file", "twice-in-one-call"])
def test_series_add_refuses_to_list_a_patch_twice(stacked: Stacked, args: tuple[str, ...]) -> None:
    """Row 41: `series add` never creates a duplicate, also when the same patch is given twice in one call (the
    whole call is refused, not half written)."""
    lab = stacked.lab
    if args == ("p2", "p2"):
        stacked.series.write_bytes(b"p1.patch\n")
    before = _before(lab)
    _refused(lab.sm("series", "add", "replay", *args), 2, "already in series replay")
    _unchanged(lab, before)


# --- row 42: entries that leave the patches directory ----------------------------------------------------------


@pytest.mark.catalogue(42)
@pytest.mark.parametrize(
    "entry",
    [b"../../etc/passwd", b"/etc/passwd", b"../patches/p2.patch", b"sub/p2.patch", b"..", b".p2.patch",
     b"p2.patch.lock", b"p2\\..\\..\\x.patch"],
)  # fmt: skip
def test_apply_refuses_a_series_entry_that_is_not_a_patch_name(stacked: Stacked, entry: bytes) -> None:
    """Row 42: `../../etc/passwd`, absolute paths and other non-names in a series are refused by the name allowlist,
    with file and line, before anything is read or touched."""
    lab = stacked.lab
    stacked.series.write_bytes(b"p1.patch\n" + entry + b"\n")
    before = _before(lab)
    _refused(lab.sm("apply", "replay"), 3, "series/replay:2", "invalid patch name")
    _unchanged(lab, before)


@pytest.mark.catalogue(42)
@pytest.mark.parametrize("name", ["../../victimdir", "/tmp/victim", "a/b", ".hidden"])
@pytest.mark.parametrize("command", ["series-new", "series-add", "save"])
def test_names_that_would_leave_the_store_are_refused_on_the_command_line(
    stacked: Stacked, tmp_path: Path, command: str, name: str
) -> None:
    """Row 42: quilt's `new ../../victimdir` wiped a directory outside the project; stackmgr refuses such names
    (exit 2) for series and patches alike, and creates nothing anywhere."""
    lab = stacked.lab
    (lab.tree / "README").write_text(README_EDIT)
    args = {"series-new": ("series", "new", name), "series-add": ("series", "add", name, "p1"),
            "save": ("save", name, "-t", "vllm", "-m", "x")}[command]  # fmt: skip
    before = fingerprint(tmp_path)
    result = lab.sm(*args)
    _refused(result, 2, "invalid")
    assert changed_paths(before, fingerprint(tmp_path), REBUILDABLE) == []


@pytest.mark.catalogue(42)
def test_a_patch_symlink_to_a_non_patch_outside_is_refused(stacked: Stacked) -> None:
    """Row 42: a series entry whose file is a symlink to /etc/passwd is refused (exit 3) without touching the
    tree."""
    lab = stacked.lab
    os.symlink("/etc/passwd", lab.store / "patches" / "passwd.patch")
    stacked.series.write_bytes(b"p1.patch\npasswd.patch\n")
    before = _before(lab)
    _refused(lab.sm("apply", "replay"), 3, "passwd.patch")
    _unchanged(lab, before)


@pytest.mark.catalogue(42)
def test_a_series_entry_symlinked_out_of_the_patches_directory_is_refused(stacked: Stacked, tmp_path: Path) -> None:
    """Row 42: a series entry whose patch file is a symlink leaving the patches directory is refused (containment:
    the resolved path must stay inside patches/, docs/FORMATS.md#names), even when it points at a valid patch."""
    lab = stacked.lab
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(lab.store / "patches" / "p2.patch", outside / "foreign.patch")
    os.symlink(outside / "foreign.patch", lab.store / "patches" / "foreign.patch")
    stacked.series.write_bytes(b"p1.patch\nforeign.patch\n")
    before = _before(lab)
    result = lab.sm("apply", "replay")
    assert result.code in (2, 3), result
    assert_one_line_error(result.err, "foreign.patch")
    _unchanged(lab, before)


# --- row 43: the series edited while applied -------------------------------------------------------------------


def _apply_and_look(stacked: Stacked) -> tuple[dict[str, object], str]:
    lab = stacked.lab
    _ok(lab.sm("apply", "replay"))
    assert lab.worktree_id() == stacked.result
    applied = _status_json(lab)["applied"]
    assert isinstance(applied, dict) and applied["patches"] == ["p1", "p2"] and applied["matches"] is True
    return applied, _applied_line(lab, "replay")


def _edit_while_applied(stacked: Stacked, how: str) -> None:
    lab = stacked.lab
    if how == "reordered":
        stacked.series.write_bytes(b"p2.patch\np1.patch\n")
    elif how == "entry-removed":
        stacked.series.write_bytes(b"p1.patch\n")
    else:  # the applied patch's file rewritten by hand (same diff, new description)
        path = lab.store / "patches" / "p1.patch"
        data = path.read_bytes()
        assert b"Subject: [PATCH] readme\n" in data
        path.write_bytes(data.replace(b"Subject: [PATCH] readme\n", b"Subject: [PATCH] readme, reworded\n"))


@pytest.mark.catalogue(43)
@pytest.mark.parametrize("how", ["reordered", "entry-removed", "patch-rewritten"])
def test_status_says_when_the_applied_series_was_edited(stacked: Stacked, how: str) -> None:
    """Row 43: after `apply replay`, editing series/replay (reorder, remove a line) or rewriting one of its patch
    files is drift against the recorded applied stack (names plus sha256): `status` must say so, in its text and
    its JSON, although the working tree itself did not move."""
    lab = stacked.lab
    applied_before, line_before = _apply_and_look(stacked)
    _edit_while_applied(stacked, how)
    assert lab.worktree_id() == stacked.result
    applied_after = _status_json(lab)["applied"]
    line_after = _applied_line(lab, "replay")
    assert applied_after != applied_before, "status --json reports the edited series exactly as before"
    assert not line_after.rstrip().endswith("tree matches"), line_after
    assert line_after != line_before


@pytest.mark.catalogue(43)
@pytest.mark.parametrize("how", ["reordered", "entry-removed"])
def test_save_on_top_of_an_edited_applied_series_is_refused_until_reapplied(stacked: Stacked, how: str) -> None:
    """Row 43: `save NAME --series S` on top of a series whose file no longer lists what was applied is refused
    (exit 3, as `refresh` refuses it: the position rule, store/position.py; pointing at `apply S`) with nothing
    written; after `apply S` the same save works."""
    lab = stacked.lab
    _apply_and_look(stacked)
    _edit_while_applied(stacked, how)
    (lab.tree / "NEW").write_text("new work\n")
    before = _before(lab)
    series_bytes = stacked.series.read_bytes()
    _refused(lab.sm("save", "p3", "--series", "replay", "-m", "p3"), 3, "apply replay")
    _unchanged(lab, before)
    os.unlink(lab.tree / "NEW")
    _ok(lab.sm("apply", "replay"))
    (lab.tree / "NEW").write_text("new work\n")
    _ok(lab.sm("save", "p3", "--series", "replay", "-m", "p3"))
    assert stacked.series.read_bytes() == series_bytes + b"p3.patch\n"
    assert _ok(lab.sm("check")).code == 0


# --- row 44: the grammar's corners -----------------------------------------------------------------------------

GOOD_SERIES = {
    "comments-and-blank-lines": b"# replay: the stack\n\n#   indented text inside a comment\n\np1.patch\n# mid\n\n"
                                b"p2.patch\n\n# trailer\n",
    "crlf": b"# header\r\np1.patch\r\n\r\np2.patch\r\n",
    "no-final-newline": b"p1.patch\np2.patch",
    "crlf-no-final-newline": b"p1.patch\r\np2.patch",
    "p1-option": b"p1.patch -p1\np2.patch\t-p1   # trailing comment\n",
    "trailing-blanks": b"p1.patch   \np2.patch\t\n",
    "inactive-negative-guard": b"p1.patch\np2.patch #-cuda\n",
    "only-newlines-between": b"\n\n\np1.patch\n\n\n\np2.patch\n\n\n",
}  # fmt: skip


@pytest.mark.catalogue(44)
@pytest.mark.parametrize("data", GOOD_SERIES.values(), ids=GOOD_SERIES.keys())
def test_a_hand_written_series_applies_to_the_same_tree(stacked: Stacked, data: bytes) -> None:
    """Row 44: comments, blank lines, CRLF, a missing final newline, `-p1`, trailing comments and guards are read
    leniently but deterministically: every spelling rebuilds the same tree, and apply leaves the file as written."""
    lab = stacked.lab
    stacked.series.write_bytes(data)
    _ok(lab.sm("apply", "replay"))
    assert lab.worktree_id() == stacked.result
    assert stacked.series.read_bytes() == data
    applied = _status_json(lab)["applied"]
    assert isinstance(applied, dict) and applied["patches"] == ["p1", "p2"] and applied["matches"] is True


BAD_SERIES = {
    "p0": (b"p2.patch -p0", "'-p0' is not supported"),
    "p2": (b"p2.patch -p2", "'-p2' is not supported"),
    "p10": (b"p2.patch -p10", "'-p10' is not supported"),
    "reverse": (b"p2.patch -R", "unexpected '-R'"),
    "two-names": (b"p2.patch p1.patch", "unexpected 'p1.patch'"),
    "indented-comment": (b"  # p2.patch", "comment not in column 0"),
    "bad-guard": (b"p2.patch #+", "bad guard"),
    "cr-only-line-ends": (b"p2.patch\rp1.patch", "unexpected 'p1.patch'"),
}


@pytest.mark.catalogue(44)
@pytest.mark.parametrize(("line", "says"), BAD_SERIES.values(), ids=BAD_SERIES.keys())
def test_a_bad_series_line_is_refused_with_its_line_number(stacked: Stacked, line: bytes, says: str) -> None:
    """Row 44: any other `-pN`, unknown options, two names on a line, an indented `#` or a bare guard are errors
    carrying file and line (here line 3, after a comment), before anything is touched."""
    lab = stacked.lab
    stacked.series.write_bytes(b"# header\np1.patch\n" + line + b"\n")
    before = _before(lab)
    _refused(lab.sm("apply", "replay"), 3, "series/replay:3", says)
    _unchanged(lab, before)


# --- row 45: truncated or corrupt series, link and state files -------------------------------------------------


@pytest.mark.catalogue(45)
@pytest.mark.parametrize(
    ("data", "says"),
    [(b"p1.patch\np2.pa", "p2.pa (line 2)"), (b"p1.patch\np2.patch\x00\x00\x00\x00", "series/replay:2"),
     (b"p1.patch\n\x1f\x8b\x08\x00garbage\xff\xfe\n", "series/replay:2"),
     (b"p1.patch\n" + b"\x00" * 64, "series/replay:2")],
    ids=["cut-mid-name", "nul-tail", "binary-garbage", "zero-filled"],
)  # fmt: skip
def test_a_truncated_or_corrupt_series_fails_clearly(stacked: Stacked, data: bytes, says: str) -> None:
    """Row 45: a series file cut short or filled with garbage (a crash, a bad disk) gives one clear line and an
    exit code; the listing still shows the other series."""
    lab = stacked.lab
    stacked.series.write_bytes(data)
    (lab.store / "series" / "other").write_bytes(b"p1.patch\n")
    before = _before(lab)
    _refused(lab.sm("apply", "replay"), 3, says)
    _unchanged(lab, before)
    listing = json.loads(_ok(lab.sm("series", "--json")).out)["series"]
    assert [row["name"] for row in listing] == ["other", "replay"]
    assert listing[0]["error"] is None


@pytest.mark.catalogue(45)
def test_a_series_that_is_a_directory_fails_clearly(stacked: Stacked) -> None:
    """Row 45: a series path that is not a regular file is refused (quilt: 'is not a regular file')."""
    lab = stacked.lab
    stacked.series.unlink()
    stacked.series.mkdir()
    before = _before(lab)
    _refused(lab.sm("apply", "replay"), 3, "not a regular file")
    _refused(lab.sm("series", "add", "replay", "p1"), 3, "not a regular file")
    _unchanged(lab, before)


def _record(lab: Lab, patch: str = "p1") -> Path:
    results = lab.store / "results"
    results.mkdir(exist_ok=True)
    (results / "probe.log").write_text("Output token throughput (tok/s): 107.77\n")
    _ok(lab.sm("link", patch, str(results / "probe.log"), "--metric", "tput=107.77tok/s", "--gate", "json=fail"))
    (record,) = (lab.store / "links" / patch).iterdir()
    return record


@pytest.mark.catalogue(45)
@pytest.mark.parametrize("damage", ["cut-in-half", "empty", "not-utf8", "wrong-schema"])
def test_a_corrupt_link_record_fails_clearly_and_is_never_rewritten(stacked: Stacked, damage: str) -> None:
    """Row 45: a link TOML cut in half (or empty, undecodable, of another schema) makes the commands that read
    it fail with one line naming the file (exit 3, `verify` reports it as a finding); `check` and `status` are not
    affected; nothing rewrites the damaged record."""
    lab = stacked.lab
    record = _record(lab)
    data = record.read_bytes()
    damaged = {"cut-in-half": data[: len(data) // 2], "empty": b"", "not-utf8": b"\xff\xfe" + data,
               "wrong-schema": data.replace(b"stackmgr.link/v1", b"stackmgr.link/v9")}[damage]  # fmt: skip
    record.write_bytes(damaged)
    check_code = lab.sm("check").code
    before = _before(lab)
    for args in (("links",), ("show", "p1"), ("links", "--json"), ("show", "p1", "--json")):
        _refused(lab.sm(*args), 3, record.name)
    verify = lab.sm("verify")
    assert verify.code == 1 and record.name in verify.out + verify.err, verify
    new_link = lab.sm("link", "p1", str(lab.store / "results" / "probe.log"))
    assert new_link.code in (0, 3), new_link
    if new_link.code == 3:
        assert_one_line_error(new_link.err, record.name)
        _unchanged(lab, before)
    assert record.read_bytes() == damaged
    assert lab.sm("check").code == check_code
    assert _ok(lab.sm("status")).code == 0


@pytest.mark.catalogue(45)
@pytest.mark.parametrize("damage", [b"", b'{"schema": 1, "tre', b"\x00" * 40, b"not json at all\n"],
                         ids=["empty", "cut", "zeros", "text"])  # fmt: skip
def test_a_truncated_applied_state_is_rebuildable(stacked: Stacked, damage: bytes) -> None:
    """Row 45: `.stackmgr/applied.json` is local, rebuildable state: cut short, it reads as 'nothing applied'
    without a traceback; `check` answers as before; `save --series` refuses cleanly (apply first); `apply` writes a
    valid file again."""
    lab = stacked.lab
    _ok(lab.sm("apply", "replay"))
    state = lab.store / ".stackmgr" / "applied.json"
    state.write_bytes(damage)
    assert _ok(lab.sm("status")).code == 0
    assert lab.sm("check").code == 0
    (lab.tree / "NEW").write_text("new\n")
    before = _before(lab)
    _refused(lab.sm("save", "p3", "--series", "replay", "-m", "p3"), 2, "apply replay")
    _unchanged(lab, before)
    os.unlink(lab.tree / "NEW")
    _ok(lab.sm("apply", "replay"))
    data = json.loads(state.read_bytes())
    assert data["trees"]["vllm"]["series"] == "replay" and data["trees"]["vllm"]["result_tree"] == stacked.result


WRONG_SHAPES = [b'{"schema": 1, "trees": []}', b'{"schema": 1, "trees": "vllm"}', b'{"schema": 1, "trees": 7}']


@pytest.mark.catalogue(45)
@pytest.mark.parametrize("damage", WRONG_SHAPES, ids=["list", "string", "number"])
def test_an_applied_state_of_the_wrong_shape_does_not_crash_status(stacked: Stacked, damage: bytes) -> None:
    """Row 45: valid JSON of the wrong shape in `.stackmgr/applied.json` is as unreadable as a truncated file:
    status still reports (exit 0), no internal error."""
    lab = stacked.lab
    _ok(lab.sm("apply", "replay"))
    (lab.store / ".stackmgr" / "applied.json").write_bytes(damage)
    result = lab.sm("status")
    assert result.code == 0 and "internal error" not in result.err, result


@pytest.mark.catalogue(45)
def test_apply_with_a_wrong_shaped_state_file_fails_before_the_switch_and_clearly(stacked: Stacked) -> None:
    """Row 45: exit 3 means nothing changed (docs/FORMATS.md#exit-codes), and every failure is one clear line, never an
    internal error. A state file that cannot be updated must be found unreadable before the tree is switched (or simply
    replaced: it is rebuildable), not trip the command after the switch."""
    lab = stacked.lab
    state = lab.store / ".stackmgr" / "applied.json"
    state.parent.mkdir(exist_ok=True)
    state.write_bytes(WRONG_SHAPES[0])
    result = lab.sm("apply", "replay")
    if result.code != 0:
        assert lab.worktree_id() == stacked.clean, f"exit {result.code}, yet the tree was switched: {result.err}"
    else:
        assert lab.worktree_id() == stacked.result
        assert json.loads(state.read_bytes())["trees"]["vllm"]["series"] == "replay"
    assert "internal error" not in result.err, result


@pytest.mark.catalogue(45)
def test_a_store_config_cut_in_half_fails_clearly(stacked: Stacked) -> None:
    """Row 45: `stackmgr.toml` cut in the middle of a table gives one line naming it (exit 3), for every command."""
    lab = stacked.lab
    config = lab.store / "stackmgr.toml"
    data = config.read_bytes()
    cut = data[: data.index(b"[trees.") + len(b"[trees.vl")]
    config.write_bytes(cut)
    before = _before(lab)
    for args in (("status",), ("check",), ("apply", "replay"), ("series", "add", "replay", "p1"),
                 ("save", "x", "-m", "x")):  # fmt: skip
        _refused(lab.sm(*args), 3, "stackmgr.toml", "not valid TOML")
    _unchanged(lab, before)
    assert config.read_bytes() == cut


@pytest.mark.catalogue(45)
@pytest.mark.parametrize("damage", [b"", b"\x00garbage", b"\xfb\x02\x00\x00\x00"], ids=["empty", "garbage", "cut"])
def test_corrupt_caches_and_lock_file_are_rebuilt(stacked: Stacked, damage: bytes) -> None:
    """Row 45: the caches under `.stackmgr/cache/` and the lock file's holder line are rebuildable: damaged, the
    answers stay right (`check` 0 while preserved, 1 after a new edit) and commands that lock still run."""
    lab = stacked.lab
    _ok(lab.sm("apply", "replay"))
    for path in (lab.store / ".stackmgr" / "cache").iterdir():
        path.write_bytes(damage)
    (lab.store / ".stackmgr" / "lock").write_bytes(damage)
    assert lab.sm("check").code == 0
    (lab.tree / "README").write_text("unsaved\n")
    assert lab.sm("check").code == 1
    _ok(lab.sm("series", "new", "more"))
    _ok(lab.sm("save", "p3", "-t", "vllm", "--series", "replay", "-m", "p3"))  # README: a file replay changes
    assert lab.sm("check").code == 0


# --- row 46: hostile link artifacts ----------------------------------------------------------------------------


def _outside_store(tmp_path: Path, store: Path) -> dict[str, tuple[int, bytes]]:
    return fingerprint(*(p for p in tmp_path.iterdir() if p != store))


def _records(lab: Lab) -> list[dict[str, object]]:
    """Every link record, parsed; `links --json` must read them all too."""
    parsed = [tomllib.loads(p.read_text()) for p in sorted((lab.store / "links").rglob("*.toml"))]
    assert len(json.loads(_ok(lab.sm("links", "--json")).out)["links"]) == len(parsed)
    return parsed


@pytest.mark.catalogue(46)
def test_link_to_etc_passwd_is_read_only_and_copied_into_the_store(stacked: Stacked, tmp_path: Path) -> None:
    """Row 46: an absolute artifact outside the store (`stackmgr link PATCH /etc/passwd`) is evidence like any
    file: read only, copied into the store by content (its absolute path kept as its origin) so it travels with
    the store; nothing is written outside the store."""
    lab = stacked.lab
    outside = _outside_store(tmp_path, lab.store)
    passwd = Path("/etc/passwd").read_bytes()
    _ok(lab.sm("link", "p1", "/etc/passwd"))
    assert changed_paths(outside, _outside_store(tmp_path, lab.store), REBUILDABLE) == []
    assert Path("/etc/passwd").read_bytes() == passwd
    (record,) = _records(lab)
    artifact = record["artifact"][0]  # type: ignore[index]
    assert artifact["origin"] == "/etc/passwd" and artifact["size"] == len(passwd)
    assert artifact["path"].startswith("artifacts/sha256/") and (lab.store / artifact["path"]).read_bytes() == passwd
    shown = json.loads(_ok(lab.sm("show", "p1", "--json")).out)
    (shown_artifact,) = shown["links"][0]["artifacts"]
    assert shown_artifact["origin"] == "/etc/passwd" and shown_artifact["sha256"] == artifact["sha256"]
    assert shown_artifact["ok"] is True


def _hostile(lab: Lab, tmp_path: Path, kind: str) -> tuple[str, int, str]:
    """An artifact argument of the given kind, and the exit code and words its refusal must have."""
    results = lab.store / "results"
    results.mkdir(exist_ok=True)
    (tmp_path / "secret-dir").mkdir(exist_ok=True)
    if kind == "dotdot":
        (results / "probe.log").write_text("x\n")
        return str(results / ".." / "results" / "probe.log"), 2, "'..'"
    if kind == "relative-dotdot":
        return "../store/results/probe.log", 2, "'..'"
    if kind == "directory":
        return str(results), 2, "is a directory"
    if kind == "symlink-to-directory":
        os.symlink(tmp_path / "secret-dir", results / "dir-link")
        return str(results / "dir-link"), 2, "is a directory"
    if kind == "dangling-symlink":
        os.symlink(tmp_path / "secret-dir" / "gone.log", results / "gone.log")
        return str(results / "gone.log"), 2, "does not exist"
    if kind == "fifo":
        os.mkfifo(results / "pipe")
        return str(results / "pipe"), 2, "not a regular file"
    if kind == "device":
        return "/dev/null", 2, "not a regular file"
    if kind == "newline":
        return str(results / "a\nb.log"), 2, "newline"
    raise AssertionError(kind)


HOSTILE = ["dotdot", "relative-dotdot", "directory", "symlink-to-directory", "dangling-symlink", "fifo", "device",
           "newline"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.catalogue(46)
@pytest.mark.parametrize("kind", HOSTILE)
def test_hostile_artifact_paths_are_refused_writing_nothing(stacked: Stacked, tmp_path: Path, kind: str) -> None:
    """Row 46: `../` paths, directories (also through a symlink), dangling symlinks, FIFOs (never opened: that would
    block) and devices are refused with one line (exit 2); no record is written, nothing outside the store."""
    lab = stacked.lab
    raw, code, says = _hostile(lab, tmp_path, kind)
    before_all = fingerprint(tmp_path)
    result = _sub(lab, "link", "p1", raw, timeout=30)  # a subprocess: a FIFO opened for reading would hang here
    _refused(result, code, says)
    assert changed_paths(before_all, fingerprint(tmp_path), REBUILDABLE) == []
    assert not list((lab.store / "links").rglob("*.toml"))


@pytest.mark.catalogue(46)
def test_a_symlink_to_a_file_outside_is_recorded_without_writing_there(stacked: Stacked, tmp_path: Path) -> None:
    """Row 46: a symlink in the store pointing to a file outside is accepted as evidence (read through), recorded
    as an absolute path; the file and its directory are untouched and the record reads back fresh."""
    lab = stacked.lab
    secret = tmp_path / "secret-dir"
    secret.mkdir()
    (secret / "bench.log").write_text("Output token throughput (tok/s): 99.5\n")
    (lab.store / "results").mkdir()
    os.symlink(secret / "bench.log", lab.store / "results" / "bench.log")
    before = fingerprint(secret)
    _ok(lab.sm("link", "p1", str(lab.store / "results" / "bench.log"), "--metric", r"tput=/\(tok/s\): ([0-9.]+)/"))
    assert changed_paths(before, fingerprint(secret), REBUILDABLE) == []
    (record,) = _records(lab)
    path = record["artifact"][0]["path"]  # type: ignore[index]
    assert not str(path).startswith("..") and ".." not in str(path).split("/")
    assert record["metric"][0]["value"] == 99.5  # type: ignore[index]
    shown = json.loads(_ok(lab.sm("show", "p1", "--json")).out)
    assert shown["links"][0]["state"] in ("fresh", "orphaned") and shown["links"][0]["artifacts"][0]["ok"] is True
    assert _ok(lab.sm("verify")).code == 0


@pytest.mark.catalogue(46)
def test_odd_artifact_names_keep_the_record_valid(stacked: Stacked) -> None:
    """Row 46: quotes, backslashes, tabs, control characters and unicode in an artifact's name are escaped: the
    record parses and gives the exact path back."""
    lab = stacked.lab
    name = 'q"uo\\te\tta b \x7f\x01 ü ].log'
    (lab.store / "results").mkdir()
    (lab.store / "results" / name).write_text("x\n")
    _ok(lab.sm("link", "p1", str(lab.store / "results" / name), "--lesson", 'a "quoted"\nlesson ]]'))
    (record,) = _records(lab)
    assert record["artifact"][0]["path"] == f"results/{name}"  # type: ignore[index]
    assert record["verdict"]["lesson"] == 'a "quoted"\nlesson ]]'  # type: ignore[index]
    assert _ok(lab.sm("verify")).code == 0


@pytest.mark.catalogue(46)
def test_a_links_directory_symlinked_outside_is_never_written_through(stacked: Stacked, tmp_path: Path) -> None:
    """Row 46: `links/<patch>` replaced by a symlink to a directory outside the store (a hostile pull): `link`
    refuses instead of writing the record there."""
    lab = stacked.lab
    victim = tmp_path / "victim"
    victim.mkdir()
    (lab.store / "links").mkdir(exist_ok=True)
    os.symlink(victim, lab.store / "links" / "p1")
    (lab.store / "results").mkdir()
    (lab.store / "results" / "probe.log").write_text("x\n")
    before = _before(lab)
    _refused(lab.sm("link", "p1", str(lab.store / "results" / "probe.log")), 2, "outside")
    assert list(victim.iterdir()) == []
    _unchanged(lab, before)


# --- row 47: patch files that are symlinks or hard links -------------------------------------------------------


@pytest.mark.catalogue(47)
def test_a_patch_symlinked_out_of_the_store_preserves_nothing(stacked: Stacked, tmp_path: Path) -> None:
    """Row 47: a patch file that is a symlink leaving the store is not in the store (it is not pushed with it, and
    goes when its target goes): the changes only it holds are not preserved, so `check` says no."""
    lab = stacked.lab
    _ok(lab.sm("apply", "replay"))
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(lab.store / "patches" / "p2.patch", outside / "p2.patch")
    os.symlink(outside / "p2.patch", lab.store / "patches" / "p2.patch")
    assert lab.sm("check").code != 0


@pytest.mark.catalogue(47)
@pytest.mark.parametrize("existing", [True, False], ids=["target-exists", "target-missing"])
@pytest.mark.parametrize("update", [False, True], ids=["save", "save-update"])
def test_save_never_writes_through_a_patch_symlink_leaving_the_store(
    stacked: Stacked, tmp_path: Path, existing: bool, update: bool
) -> None:
    """Row 47: `save NAME` where patches/NAME.patch is a symlink to a file outside the store is refused (exit 2)
    and neither writes nor creates anything there."""
    lab = stacked.lab
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    if existing:
        (victim_dir / "precious.patch").write_bytes(b"precious bytes\n")
    os.symlink(victim_dir / "precious.patch", lab.store / "patches" / "evil.patch")
    (lab.tree / "README").write_text(README_EDIT)
    before_victim = fingerprint(victim_dir)
    before = _before(lab)
    result = lab.sm("save", "evil", "-t", "vllm", "-m", "evil", *(["--update"] if update else []))
    _refused(result, 2, "outside")
    assert changed_paths(before_victim, fingerprint(victim_dir)) == []
    _unchanged(lab, before)


@pytest.mark.catalogue(47)
def test_update_of_a_hard_linked_patch_breaks_the_link(stacked: Stacked, tmp_path: Path) -> None:
    """Row 47: rewriting a patch replaces the file (temp + rename), so a hard link to it elsewhere keeps the old
    bytes (quilt's hard-linked-patch test); the old version is kept for interdiff."""
    lab = stacked.lab
    patch = lab.store / "patches" / "p1.patch"
    old = patch.read_bytes()
    elsewhere = tmp_path / "hard-linked.patch"
    os.link(patch, elsewhere)
    (lab.tree / "README").write_text("hello, patched again\n")
    _ok(lab.sm("save", "p1", "-t", "vllm", "-m", "readme", "--update", "README"))
    assert elsewhere.read_bytes() == old
    assert patch.read_bytes() != old and patch.stat().st_nlink == 1
    assert patch.stat().st_ino != elsewhere.stat().st_ino
    kept = list((lab.store / "patches" / ".versions").rglob("*.patch"))
    assert [p.read_bytes() for p in kept] == [old]


@pytest.mark.catalogue(47)
def test_update_of_a_patch_symlinked_inside_the_store_replaces_the_link_not_its_target(stacked: Stacked) -> None:
    """Row 47: a patch that is a symlink to another patch in patches/ reads like that patch; `save --update` of
    it replaces the link by a regular file and leaves the other patch's bytes alone."""
    lab = stacked.lab
    p1 = lab.store / "patches" / "p1.patch"
    p1_bytes = p1.read_bytes()
    os.symlink("p1.patch", lab.store / "patches" / "alias.patch")
    stacked.series.write_bytes(b"alias.patch\np2.patch\n")
    _ok(lab.sm("apply", "replay"))
    assert lab.worktree_id() == stacked.result
    (lab.tree / "README").write_text("hello, through the alias\n")
    _ok(lab.sm("save", "alias", "-t", "vllm", "-m", "alias", "--update", "README"))
    alias = lab.store / "patches" / "alias.patch"
    assert not alias.is_symlink() and alias.read_bytes() != p1_bytes
    assert p1.read_bytes() == p1_bytes
    assert lab.sm("check").code == 0


# --- row 58: disk full / EFBIG while writing -------------------------------------------------------------------


def _file_size_limit(limit: int) -> Callable[[], None]:
    def limit_writes() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_writes


def _big_but_compressible(lab: Lab) -> None:
    """~360 KB of text: a large patch, but a small git object (so only stackmgr's own write hits the limit)."""
    (lab.tree / "src" / "big.py").write_text("".join(f"x{i % 7} = {i % 3}\n" for i in range(40_000)))


@pytest.mark.slow
@pytest.mark.catalogue(58)
def test_efbig_while_writing_a_new_patch(stacked: Stacked) -> None:
    """Row 58: a patch larger than the file-size limit: `save` fails (exit 3, one line naming the directory), the
    patches directory is as it was, no temp file is left, and the change stays unpreserved (so no reset)."""
    lab = stacked.lab
    _big_but_compressible(lab)
    assert lab.sm("check").code == 1  # also warms the private index: the failing save writes no new object
    before = _before(lab)
    result = _sub(lab, "save", "big", "-t", "vllm", "-m", "big", preexec_fn=_file_size_limit(64 * 1024))
    _refused(result, 3, str(lab.store / "patches"), "File too large")
    _unchanged(lab, before)
    assert _temp_files(lab.store) == []
    assert lab.sm("check").code == 1
    _refused(lab.sm("reset", "vllm"), 1, "src/big.py")


@pytest.mark.slow
@pytest.mark.catalogue(58)
def test_efbig_while_rewriting_a_patch_keeps_the_old_one(stacked: Stacked) -> None:
    """Row 58: `save --update` whose new bytes do not fit: the old patch file stays byte for byte, no half-written
    file or temp file, no version kept for a rewrite that did not happen."""
    lab = stacked.lab
    (lab.tree / "README").write_text(README_EDIT)
    _big_but_compressible(lab)
    assert lab.sm("check").code == 1
    before = _before(lab)
    result = _sub(lab, "save", "p1", "-t", "vllm", "-m", "readme", "--update",
                  preexec_fn=_file_size_limit(64 * 1024))  # fmt: skip
    _refused(result, 3, "File too large")
    _unchanged(lab, before)
    assert _temp_files(lab.store) == []
    assert not (lab.store / "patches" / ".versions").exists()


def _padded_series(stacked: Stacked, entries: bytes = b"p1.patch\n") -> bytes:
    data = b"".join(b"# padding line %05d, kept by every edit\n" % i for i in range(2000)) + entries
    stacked.series.write_bytes(data)
    assert len(data) > 64 * 1024
    return data


@pytest.mark.slow
@pytest.mark.catalogue(58)
def test_efbig_while_rewriting_a_series_keeps_the_old_one(stacked: Stacked) -> None:
    """Row 58: a series edit whose new file does not fit (a long hand-written series): exit 3, one line, the
    series file byte for byte as before, no temp file."""
    lab = stacked.lab
    shutil.copy(lab.store / "patches" / "p2.patch", lab.store / "patches" / "p9.patch")
    _padded_series(stacked, b"p1.patch\np2.patch\n")
    before = _before(lab)
    for args in (("series", "add", "replay", "p9"), ("series", "add", "replay", "p9", "--at", "1"),
                 ("series", "move", "replay", "p2", "1"), ("series", "remove", "replay", "p1")):  # fmt: skip
        result = _sub(lab, *args, preexec_fn=_file_size_limit(64 * 1024))
        _refused(result, 3, str(lab.store / "series"), "File too large")
        _unchanged(lab, before)
        assert _temp_files(lab.store) == []


@pytest.mark.slow
@pytest.mark.catalogue(58)
def test_efbig_on_the_series_after_the_patch_is_written(stacked: Stacked) -> None:
    """Row 58: `save NAME --series S` writes the patch first and the series last; when the series does not fit,
    the command fails (exit 3, one line) with the series and the applied state as they were and no temp file. The
    patch it already wrote is complete (it preserves the change), and the same command completes once space is
    back."""
    lab = stacked.lab
    stacked.series.write_bytes(b"p1.patch\np2.patch\n")
    _ok(lab.sm("apply", "replay"))
    padded = _padded_series(stacked) + b"p2.patch\n"
    stacked.series.write_bytes(padded)
    _ok(lab.sm("apply", "replay"))
    state = (lab.store / ".stackmgr" / "applied.json").read_bytes()
    (lab.tree / "NEW").write_text("new work\n")
    args = ("save", "p3", "--series", "replay", "-m", "p3")
    result = _sub(lab, *args, preexec_fn=_file_size_limit(64 * 1024))
    _refused(result, 3, "File too large")
    assert stacked.series.read_bytes() == padded
    assert (lab.store / ".stackmgr" / "applied.json").read_bytes() == state
    assert _temp_files(lab.store) == []
    p3 = lab.store / "patches" / "p3.patch"
    if p3.exists():
        assert lab.sm("check").code == 0
    _ok(lab.sm(*args))
    assert stacked.series.read_bytes() == padded + b"p3.patch\n"
    applied = _status_json(lab)["applied"]
    assert isinstance(applied, dict) and applied["patches"] == ["p1", "p2", "p3"] and applied["matches"] is True


@pytest.mark.slow
@pytest.mark.catalogue(58)
def test_efbig_while_writing_a_link_record(stacked: Stacked) -> None:
    """Row 58: a link record that does not fit: exit 3, one line, no record and no temp file anywhere in the
    store."""
    lab = stacked.lab
    (lab.store / "results").mkdir()
    (lab.store / "results" / "probe.log").write_text("x\n")
    lesson = "a long lesson. " * 200
    assert lab.sm("check").code == 0
    result = _sub(lab, "link", "p1", str(lab.store / "results" / "probe.log"), "--lesson", lesson,
                  preexec_fn=_file_size_limit(2048))  # fmt: skip
    _refused(result, 3, "File too large")
    assert not list((lab.store / "links").rglob("*.toml"))
    assert _temp_files(lab.store) == []


@pytest.mark.slow
@pytest.mark.catalogue(58)
def test_efbig_while_writing_a_cache_leaves_no_temp_file(stacked: Stacked) -> None:
    """Row 58: the caches under `.stackmgr/cache/` are best effort, but a failed cache write must not leave its
    temp file behind (each run would add one, named by its pid); the answer of `check` is unaffected."""
    lab = stacked.lab
    shutil.rmtree(lab.store / ".stackmgr" / "cache")
    result = _sub(lab, "check", preexec_fn=_file_size_limit(256))
    assert result.code == 0 and result.err == "", result
    assert _temp_files(lab.store) == []


@pytest.mark.slow
@pytest.mark.catalogue(58)
def test_a_series_move_that_changes_nothing_writes_nothing(stacked: Stacked) -> None:
    """Row 58: moving an entry to where it already is leaves the file byte for byte (series.py says so): it needs
    no space, so it succeeds on a full disk."""
    lab = stacked.lab
    data = _padded_series(stacked, b"p1.patch\np2.patch\n")
    result = _sub(lab, "series", "move", "replay", "p1", "1", preexec_fn=_file_size_limit(64 * 1024))
    assert result.code == 0, result
    assert stacked.series.read_bytes() == data


# --- row 61: two stackmgr processes at once --------------------------------------------------------------------

HOLDER = """
import sys
path, what, command = sys.argv[1:4]
sys.argv = ["stackmgr", *command.split()]
from stackmgr.store.fs import locked
with locked(path, what, wait_seconds=0):
    print("locked", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture
def hold_lock() -> Iterator[Callable[[Path, str], subprocess.Popen[bytes]]]:
    """Start a process that holds a stackmgr lock (as `stackmgr apply replay-correctness` would) until its stdin
    closes."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(path: Path, what: str = "the store") -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), what, "apply replay-correctness"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == b"locked\n"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=10)


def _release(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0


@pytest.mark.catalogue(61)
@pytest.mark.parametrize(
    "args",
    [("series", "add", "replay", "p2"), ("series", "new", "other"), ("save", "p3", "-t", "vllm", "-m", "p3"),
     ("apply", "replay"), ("reset", "vllm"), ("link", "p1", "RESULTS")],
    ids=["series-add", "series-new", "save", "apply", "reset", "link"],
)  # fmt: skip
@pytest.mark.slow
def test_a_second_stackmgr_fails_naming_the_holder(
    stacked: Stacked, hold_lock: Callable[[Path, str], subprocess.Popen[bytes]], args: tuple[str, ...]
) -> None:
    """Row 61: while another stackmgr holds the store lock, a second one waits `STACKMGR_LOCK_WAIT` seconds, then
    fails (exit 3) with one line naming the holder's pid, host and command; it changed nothing."""
    lab = stacked.lab
    stacked.series.write_bytes(b"p1.patch\n")
    (lab.store / "results").mkdir()
    (lab.store / "results" / "probe.log").write_text("x\n")
    args = tuple(str(lab.store / "results" / "probe.log") if a == "RESULTS" else a for a in args)
    (lab.tree / "NEW").write_text("new\n")
    _ok(lab.sm("save", "new", "-t", "vllm", "-m", "new"))  # the tree is dirty, but preserved: reset could go on
    before = _before(lab)
    holder = hold_lock(lab.store / ".stackmgr" / "lock", "the store")
    result = _sub(lab, *args, env={"STACKMGR_LOCK_WAIT": "0.3"})
    _refused(result, 3, "the store is locked", f"pid {holder.pid}", socket.gethostname(),
             "stackmgr apply replay-correctness")  # fmt: skip
    _unchanged(lab, before)
    _release(holder)
    _ok(_sub(lab, *args, env={"STACKMGR_LOCK_WAIT": "0.3"}))


@pytest.mark.catalogue(61)
def test_the_second_stackmgr_waits_for_a_holder_that_finishes(
    stacked: Stacked, hold_lock: Callable[[Path, str], subprocess.Popen[bytes]]
) -> None:
    """Row 61: with a wait long enough, the second stackmgr blocks until the holder is done, then does its work."""
    lab = stacked.lab
    stacked.series.write_bytes(b"p1.patch\n")
    holder = hold_lock(lab.store / ".stackmgr" / "lock", "the store")
    cmd = [sys.executable, "-m", "stackmgr", "--store", str(lab.store), "series", "add", "replay", "p2"]
    second = subprocess.Popen(cmd, env={**os.environ, "STACKMGR_LOCK_WAIT": "30"}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)  # fmt: skip
    time.sleep(0.5)  # not asserted on: the second is waiting, or has not reached the lock yet; both must work
    _release(holder)
    _out, err = second.communicate(timeout=40)
    assert second.returncode == 0 and err == b"", err
    assert stacked.series.read_bytes() == b"p1.patch\np2.patch\n"


@pytest.mark.slow
@pytest.mark.catalogue(61)
def test_a_killed_holder_leaves_no_stale_lock(
    stacked: Stacked, hold_lock: Callable[[Path, str], subprocess.Popen[bytes]]
) -> None:
    """Row 61: the lock dies with its process (flock): after SIGKILL of the holder, the next stackmgr proceeds
    at once although the lock file (with the dead holder's line) is still there."""
    lab = stacked.lab
    holder = hold_lock(lab.store / ".stackmgr" / "lock", "the store")
    holder.kill()
    holder.wait(timeout=10)
    assert (lab.store / ".stackmgr" / "lock").exists()
    _ok(_sub(lab, "series", "new", "after-kill", env={"STACKMGR_LOCK_WAIT": "0"}))


@pytest.mark.slow
@pytest.mark.catalogue(61)
def test_the_tree_lock_names_its_holder_too(
    stacked: Stacked, hold_lock: Callable[[Path, str], subprocess.Popen[bytes]]
) -> None:
    """Row 61: the per-tree lock (`.git/stackmgr/lock`) is reported the same way: `check` waiting on a tree that
    another stackmgr is changing fails closed (never exit 0) naming the holder."""
    lab = stacked.lab
    holder = hold_lock(lab.tree / ".git" / "stackmgr" / "lock", "tree vllm")
    result = _sub(lab, "check", env={"STACKMGR_LOCK_WAIT": "0.3"})
    assert result.code != 0, result
    assert f"pid {holder.pid}" in result.err and "stackmgr apply replay-correctness" in result.err, result.err
    assert "Traceback" not in result.err and "internal error" not in result.err
    _release(holder)
    assert _sub(lab, "check", env={"STACKMGR_LOCK_WAIT": "0.3"}).code == 0


@pytest.mark.slow
@pytest.mark.catalogue(61)
def test_a_real_stackmgr_holding_the_locks_is_named_by_the_second(stacked: Stacked, tmp_path: Path) -> None:
    """Row 61: two real stackmgr processes. The first `save` is held inside its snapshot by a clean filter that
    waits for a go file; meanwhile a second `series add` (store lock) and a `check` (tree lock) fail naming the
    first's pid and command. Once released, the first save completes normally."""
    lab = stacked.lab
    started, go = tmp_path / "filter-started", tmp_path / "filter-go"
    git(lab.tree, "config", "filter.gate.clean", f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done; cat")
    (lab.tree / ".git" / "info" / "attributes").write_text("README filter=gate\n")
    (lab.tree / "README").write_text("edited while another stackmgr waits\n")
    cmd = [sys.executable, "-m", "stackmgr", "--store", str(lab.store), "save", "held", "-t", "vllm", "-m", "held"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not started.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert started.exists(), "the clean filter never ran"
        wait = {"STACKMGR_LOCK_WAIT": "0.3"}
        store_side = _sub(lab, "series", "add", "replay", "p1", env=wait)
        _refused(store_side, 3, "the store is locked", f"pid {first.pid}", "save")
        tree_side = _sub(lab, "check", env=wait)
        assert tree_side.code != 0 and f"pid {first.pid}" in tree_side.err, tree_side
    finally:
        go.touch()
        _out, err = first.communicate(timeout=30)
    assert first.returncode == 0, err
    assert (lab.store / "patches" / "held.patch").exists()
    assert _sub(lab, "check").code == 0


# --- row 62: index.lock held by another process ----------------------------------------------------------------

INDEX_HOLDER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL)
os.write(fd, b"held by an IDE\\n")
print("held", flush=True)
sys.stdin.readline()
os.close(fd)
os.unlink(sys.argv[1])  # as git does when it is done: fails if someone removed the lock meanwhile
"""


@pytest.fixture
def index_lock(lab: Lab) -> Iterator[Path]:
    """`.git/index.lock` held open by another process (an IDE's git) for the duration of the test."""
    lock = lab.tree / ".git" / "index.lock"
    proc = subprocess.Popen([sys.executable, "-c", INDEX_HOLDER, str(lock)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
    yield lock
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0, "the holder could not remove its index.lock: someone deleted it"


@pytest.mark.slow
@pytest.mark.catalogue(62)
@pytest.mark.parametrize("command", ["apply", "reset", "reset-to-head-after-apply"])
def test_a_held_index_lock_makes_tree_changes_fail_cleanly(stacked: Stacked, command: str) -> None:
    """Row 62: with `.git/index.lock` held by another git, commands that must write the index (apply, reset) fail
    with one line naming the lock (exit 3); the tree, index, HEAD and store are unchanged and the lock is never
    deleted."""
    lab = stacked.lab
    if command == "reset":
        (lab.tree / "README").write_text(README_EDIT)
        _ok(lab.sm("save", "edit", "-t", "vllm", "-m", "edit"))
    elif command == "reset-to-head-after-apply":
        _ok(lab.sm("apply", "replay"))
    args = ("apply", "replay") if command == "apply" else ("reset", "vllm")
    assert lab.sm("check").code == 0
    lock = lab.tree / ".git" / "index.lock"
    proc = subprocess.Popen([sys.executable, "-c", INDEX_HOLDER, str(lock)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
    try:
        before = _before(lab)
        result = _sub(lab, *args)
        _refused(result, 3, "index.lock")
        _unchanged(lab, before)
        assert lock.read_bytes() == b"held by an IDE\n"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0, "the holder could not remove its index.lock: someone deleted it"
    _ok(lab.sm(*args))


@pytest.mark.slow
@pytest.mark.catalogue(62)
def test_a_held_index_lock_makes_a_forced_reset_fail_before_anything(stacked: Stacked, index_lock: Path) -> None:
    """Row 62: `reset --force` with the index locked fails like the plain reset: exit 3, nothing changed — no
    recovery snapshot is listed for a reset that never happened."""
    lab = stacked.lab
    (lab.tree / "README").write_text("unsaved\n")
    before = _before(lab)
    result = _sub(lab, "reset", "vllm", "--force")
    _refused(result, 3, "index.lock")
    assert [p for p in changed_paths(before, _snap(lab), REBUILDABLE) if "/.git/objects/" not in p] == []
    assert index_lock.read_bytes() == b"held by an IDE\n"


@pytest.mark.slow
@pytest.mark.catalogue(62)
def test_read_only_commands_and_save_work_beside_a_held_index_lock(stacked: Stacked, index_lock: Path) -> None:
    """Row 62: `check`, `status` and `save` never write the real index, so a held `index.lock` does not stop them;
    the user's index stays byte for byte and the lock stays."""
    lab = stacked.lab
    index = (lab.tree / ".git" / "index").read_bytes()
    (lab.tree / "README").write_text("edited beside an IDE\n")
    assert _sub(lab, "check").code == 1
    assert _sub(lab, "status").code == 0
    _ok(_sub(lab, "save", "beside", "-t", "vllm", "-m", "beside"))
    assert _sub(lab, "check").code == 0
    assert (lab.tree / ".git" / "index").read_bytes() == index
    assert index_lock.read_bytes() == b"held by an IDE\n"


# --- row 63: read-only store directories -----------------------------------------------------------------------

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER = 1, 2, 3


def _without_dac_override() -> None:
    """In the child, before exec: drop the capabilities that let root ignore permission bits (root still owns the
    files, so the owner bits apply to it). A no-op for other users."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Callable[[Path], None]]:
    """Make directories read-only (0555) for a child started with `_without_dac_override`; skip when this system
    cannot make permission bits bind (root without the right to drop capabilities)."""
    probe = tmp_path / "probe-ro"
    probe.mkdir()
    probe.chmod(0o555)
    try:
        check = subprocess.run([sys.executable, "-c", f"open({str(probe / 'x')!r}, 'w')"], capture_output=True,
                               preexec_fn=_without_dac_override)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        check = None
        reason = f"cannot drop CAP_DAC_OVERRIDE here ({exc})"
    else:
        reason = "permission bits do not stop writes here (root with CAP_DAC_OVERRIDE that cannot be dropped)"
    if check is None or check.returncode == 0 or b"PermissionError" not in check.stderr:
        probe.chmod(0o755)
        pytest.skip(reason)
    made: list[Path] = [probe]

    def make(path: Path) -> None:
        path.chmod(0o555)
        made.append(path)

    yield make
    for path in made:
        path.chmod(0o755)


@pytest.mark.slow
@pytest.mark.catalogue(63)
def test_a_read_only_patches_directory_fails_save_before_anything(
    stacked: Stacked, read_only: Callable[[Path], None]
) -> None:
    """Row 63: `save` into a read-only `patches/` fails (exit 3) with one line naming the directory and the
    permission problem; nothing changed, no temp file, and the change stays unpreserved so reset still refuses."""
    lab = stacked.lab
    (lab.tree / "README").write_text(README_EDIT + "more\n")
    assert lab.sm("check").code == 1
    read_only(lab.store / "patches")
    before = _before(lab)
    for args in (("save", "ro", "-t", "vllm", "-m", "ro"), ("save", "p1", "-t", "vllm", "-m", "x", "--update"),
                 ("save", "ro", "-t", "vllm", "--series", "fresh", "-m", "ro")):  # fmt: skip
        result = _sub(lab, *args, preexec_fn=_without_dac_override)
        _refused(result, 3, str(lab.store / "patches"), "Permission denied")
        _unchanged(lab, before)
    assert _temp_files(lab.store) == []
    assert lab.sm("check").code == 1


@pytest.mark.slow
@pytest.mark.catalogue(63)
def test_read_only_series_and_links_directories_fail_cleanly(
    stacked: Stacked, read_only: Callable[[Path], None]
) -> None:
    """Row 63: a read-only `series/` stops series edits, and a read-only `links/<patch>/` stops `link`, each with
    one line naming the directory (exit 3) and nothing written."""
    lab = stacked.lab
    stacked.series.write_bytes(b"p1.patch\n")
    (lab.store / "results").mkdir()
    (lab.store / "results" / "probe.log").write_text("x\n")
    (lab.store / "links" / "p1").mkdir(parents=True, exist_ok=True)
    read_only(lab.store / "series")
    read_only(lab.store / "links" / "p1")
    before = _before(lab)
    for args, where in ((("series", "add", "replay", "p2"), "series"), (("series", "new", "other"), "series"),
                        (("link", "p1", str(lab.store / "results" / "probe.log")), "links/p1")):  # fmt: skip
        result = _sub(lab, *args, preexec_fn=_without_dac_override)
        _refused(result, 3, str(lab.store / where), "Permission denied")
        _unchanged(lab, before)
    assert _temp_files(lab.store) == []


@pytest.mark.slow
@pytest.mark.catalogue(63)
def test_permission_denied_is_reported_as_such(stacked: Stacked, read_only: Callable[[Path], None]) -> None:
    """Row 63: the message is about permissions (errno EACCES), not a generic failure, and suggests checking them."""
    lab = stacked.lab
    read_only(lab.store / "series")
    result = _sub(lab, "series", "new", "other", preexec_fn=_without_dac_override)
    _refused(result, 3, os.strerror(errno.EACCES), "permission")
