"""Catalogue rows about tree state and names (docs/RELIABILITY.md#catalogue-rows): submodules (25, 26), odd
contents and file names (29-35), the state of HEAD, the index and the working tree (48-57), and odd
repositories (64-68: not a repository, no commits, shallow, linked worktree, sparse, a subdirectory).

Accepted inputs are checked on bytes and git tree ids (a save → reset → apply round trip rebuilds every byte); refusals
on the exit code (docs/FORMATS.md#exit-codes), one `stackmgr: …` line, and a fingerprint of the store and the tree that
must not move. Tests marked xfail(strict=True) show a bug that is not fixed yet; the reason says what goes wrong.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from stackmgr.safety import tree_move
from tests.conftest import Lab, Result, git, git_text, make_repo, run_stackmgr, tree_files
from tests.reliability.conftest import REBUILDABLE, assert_one_line_error, changed_paths, fingerprint

# --- helpers ---------------------------------------------------------------------------------------------------

# A refusal at the switch itself (git's two-way read-tree said no) comes after the operation journal started: the
# attempt stays recorded (state rolled-back) under .stackmgr/ops/, and the checked snapshot's tree object may have
# been written (content-addressed, unreferenced). Neither is user data; everything else must be untouched.
# The tree's private-index directory itself (REBUILDABLE names what is inside it) may be created by any command.
QUIET = (*REBUILDABLE, "/.git/stackmgr")
SWITCH_ATTEMPT = (*QUIET, "/.stackmgr/ops/", "/.git/objects/")


def _put(tree: Path, rel: bytes, data: bytes) -> None:
    """Write a file whose name is raw bytes (not necessarily UTF-8), creating its directories."""
    full = os.path.join(os.fsencode(tree), rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as f:
        f.write(data)


def _status(tree: Path) -> bytes:
    return git(tree, "status", "--porcelain", "--untracked-files=all")


def _head(tree: Path) -> str:
    return git_text(tree, "rev-parse", "HEAD")


def _detached(tree: Path) -> bool:
    return subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=tree, capture_output=True).returncode == 1


def _patch(lab: Lab, name: str) -> bytes:
    return (lab.store / "patches" / f"{name}.patch").read_bytes()


def _diff_headers(data: bytes) -> list[bytes]:
    return re.findall(rb"^diff --git (.*)$", data, re.M)


def _refused(
    lab: Lab, args: tuple[str, ...], code: int, *needles: str, roots: tuple[Path, ...] = (),
    may_touch: tuple[str, ...] = QUIET,
) -> Result:  # fmt: skip
    """Run a command that must refuse: exit `code`, one line naming `needles`, nothing written."""
    roots = roots or (lab.store, lab.tree)
    before = fingerprint(*roots)
    result = lab.sm(*args)
    assert result.code == code, f"{args}: exit {result.code}: {result.err}"
    assert_one_line_error(result.err, *needles)
    assert changed_paths(before, fingerprint(*roots), may_touch) == [], args
    _no_leftover_locks(lab)
    return result


def _no_leftover_locks(lab: Lab) -> None:
    assert not (lab.store / ".stackmgr" / "ops" / "CURRENT").exists(), "the journal says an operation is running"
    assert not (lab.tree / ".git" / "index.lock").exists()


def _round_trip(lab: Lab, *save_args: str) -> None:
    """save (into series s) → reset → apply: reset gives exactly HEAD back, apply every saved byte."""
    wanted_id, wanted = lab.worktree_id(), tree_files(lab.tree)
    head = _head(lab.tree)
    saved = lab.sm("save", "p", "--series", "s", "-m", "round trip", *save_args)
    assert saved.code == 0, saved.err
    assert lab.sm("check").code == 0
    reset = lab.sm("reset")
    assert reset.code == 0, reset.err
    assert _status(lab.tree) == b"", _status(lab.tree)
    assert lab.worktree_id() == git_text(lab.tree, "rev-parse", "HEAD^{tree}")
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert _head(lab.tree) == head
    assert lab.worktree_id() == wanted_id
    assert tree_files(lab.tree) == wanted
    assert lab.sm("check").code == 0


def _with_submodule(lab: Lab, tmp_path: Path) -> tuple[Path, str]:
    """A submodule `sub` committed in the tree; returns its directory and the commit the tree records."""
    origin = make_repo(tmp_path / "subsrc", {"s.txt": "s\n"})
    git(lab.tree, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(origin), "sub")
    git(lab.tree, "commit", "-qm", "add sub")
    return lab.tree / "sub", _head(lab.tree / "sub")


def _bump(sub: Path) -> str:
    (sub / "s.txt").write_text("s2\n")
    git(sub, "commit", "-qam", "s2")
    return _head(sub)


# --- 25, 26: submodules ----------------------------------------------------------------------------------------


def _gitlink_patch(lab: Lab, name: str, series: str) -> None:
    """patches/NAME.patch written by hand (save refuses to write one): the submodule's pointer moved from the
    commit HEAD records to the one checked out in it now; the only entry of `series`."""
    header = (
        f"From {'0' * 40} Mon Sep 17 00:00:00 2001\nFrom: Jane Doe <jane@example.com>\n"
        f"Date: Sat, 13 Jun 2026 10:02:11 +0000\nSubject: [PATCH] {name}\n\nhand-written\n\n"
        f"Stackmgr-Tree: vllm\nStackmgr-Base: {_head(lab.tree)}\n---\n\n"
    ).encode()
    diff = git(lab.tree, "diff", "--full-index", "--binary", "--no-color", "HEAD", "--", "sub")
    assert b"+Subproject commit " in diff
    (lab.store / "patches" / f"{name}.patch").write_bytes(header + diff)
    (lab.store / "series" / series).write_text(f"{name}.patch\n")


@pytest.mark.catalogue(25)
def test_row25_a_moved_submodule_is_a_change_save_keeps_and_check_then_passes(lab: Lab, tmp_path: Path) -> None:
    """Row 25: a submodule moved to another commit is a change (mode 160000) that check reports; save records the
    pointer (`Subproject commit`), alone or with other changes, and the change is then preserved."""
    sub, old = _with_submodule(lab, tmp_path)
    new = _bump(sub)
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.splitlines() == ["vllm: sub (submodule)"]
    (lab.tree / "README").write_text("plain edit\n")
    assert lab.sm("save", "both", "-m", "both").code == 0
    assert _diff_headers(_patch(lab, "both")) == [b"a/README b/README", b"a/sub b/sub"]
    assert f"-Subproject commit {old}\n+Subproject commit {new}\n".encode() in _patch(lab, "both")
    assert lab.sm("check").code == 0


@pytest.mark.catalogue(25)
def test_row25_a_hand_made_patch_of_the_pointer_preserves_it_and_apply_moves_the_checkout(
    lab: Lab, tmp_path: Path
) -> None:
    """Row 25: a patch recording the submodule's new pointer (written by hand) preserves the change; reset moves
    the submodule back and apply moves it forward, its checkout with its pointer."""
    sub, old = _with_submodule(lab, tmp_path)
    new = _bump(sub)
    _gitlink_patch(lab, "bump", "s")
    assert lab.sm("check").code == 0
    assert lab.sm("reset").code == 0 and _head(sub) == old and _status(lab.tree) == b""
    assert lab.sm("apply", "s").code == 0 and _head(sub) == new


@pytest.mark.catalogue(25)
@pytest.mark.parametrize("recurse", [False, True])
def test_row25_reset_refuses_a_moved_submodule_and_force_keeps_its_commits(
    lab: Lab, tmp_path: Path, recurse: bool
) -> None:
    """Row 25: reset refuses while the submodule's new pointer is unpreserved; --force moves it back with the rest
    and loses nothing: its commits stay on its branch (even with submodule.recurse set), and `recover` brings
    the pointer and the checkout back."""
    sub, old = _with_submodule(lab, tmp_path)
    new = _bump(sub)
    if recurse:
        git(lab.tree, "config", "submodule.recurse", "true")
    (lab.tree / "README").write_text("unsaved top-level edit\n")
    head = _head(lab.tree)
    _refused(lab, ("reset",), 1, "sub (submodule)", "README (modified)")
    forced = lab.sm("reset", "--force")
    assert forced.code == 0, forced.err
    assert "stackmgr recover " in forced.err
    assert _head(sub) == old and (sub / "s.txt").read_text() == "s\n"
    assert git_text(sub, "log", "-1", "--format=%H", "main") == new, "its commits stay on its branch"
    assert (lab.tree / "README").read_text() == "hello\n"
    assert _head(lab.tree) == head and git_text(lab.tree, "rev-parse", ":sub") == old
    assert lab.sm("check").code == 0
    recovered = lab.sm("recover", forced.err.split("stackmgr recover ")[1].split()[0].strip("`'"))
    assert recovered.code == 0, recovered.err
    assert _head(sub) == new and (lab.tree / "README").read_text() == "unsaved top-level edit\n"


@pytest.mark.catalogue(26)
@pytest.mark.parametrize("inside", ["modified", "untracked"])
def test_row26_dirty_content_inside_a_submodule_is_unprotected_and_never_touched(
    lab: Lab, tmp_path: Path, inside: str
) -> None:
    """Row 26: edits inside a submodule are not in the superproject's diff: they are listed as unprotected (never
    saved, never deleted); reset and apply that leave the pointer where it is go ahead around them, and save has
    nothing it could write."""
    sub, _ = _with_submodule(lab, tmp_path)
    (lab.tree / "README").write_text("saved edit\n")
    assert lab.sm("save", "readme", "--series", "s", "-m", "readme").code == 0
    assert lab.sm("reset").code == 0
    if inside == "modified":
        (sub / "s.txt").write_text("edited inside the submodule\n")
    else:
        (sub / "notes.txt").write_text("new file inside the submodule\n")
    inner = tree_files(sub)
    assert lab.sm("check").code == 0
    assert "unprotected: sub (uncommitted changes inside this submodule" in lab.sm("status").out
    _refused(lab, ("save", "inside", "-t", "vllm", "-m", "m"), 3)
    assert lab.sm("apply", "s").code == 0 and (lab.tree / "README").read_text() == "saved edit\n"
    assert lab.sm("reset").code == 0 and (lab.tree / "README").read_text() == "hello\n"
    assert tree_files(sub) == inner, "the submodule's own work is untouched"


@pytest.mark.catalogue(26)
def test_row26_saving_the_other_changes_does_not_absorb_a_dirty_submodule(lab: Lab, tmp_path: Path) -> None:
    """Row 26: with a dirty submodule and a plain edit, save writes the plain edit only."""
    sub, _ = _with_submodule(lab, tmp_path)
    (sub / "s.txt").write_text("edited inside\n")
    (lab.tree / "README").write_text("plain edit\n")
    assert lab.sm("save", "readme", "-m", "readme").code == 0
    assert _diff_headers(_patch(lab, "readme")) == [b"a/README b/README"]
    assert lab.sm("check").code == 0 and (sub / "s.txt").read_text() == "edited inside\n"


@pytest.mark.catalogue(26)
def test_row26_a_move_of_a_dirty_submodule_is_refused_and_force_never_touches_its_content(
    lab: Lab, tmp_path: Path
) -> None:
    """Row 26: a reset that would move a submodule with uncommitted work inside is refused, forced or not: its
    work cannot be stored, so it must stay where it is."""
    sub, _ = _with_submodule(lab, tmp_path)
    _bump(sub)
    (sub / "s.txt").write_text("edited inside\n")
    (sub / "notes.txt").write_text("new inside\n")
    (lab.tree / "README").write_text("unsaved top-level edit\n")
    inner = tree_files(sub)
    forced = lab.sm("reset", "--force")
    assert forced.code == 3, forced
    assert "submodule sub has uncommitted changes inside" in forced.err
    assert tree_files(sub) == inner, "the submodule's own work is untouched"
    assert (lab.tree / "README").read_text() == "unsaved top-level edit\n"


# --- 29-35: contents and names ----------------------------------------------------------------------------------


@pytest.mark.catalogue(29)
def test_row29_non_utf8_content_round_trips_byte_for_byte(lab: Lab) -> None:
    """Row 29: Latin-1, invalid UTF-8, UTF-16 and lone CR bytes are saved and rebuilt as bytes."""
    latin1 = "café crème\n".encode("latin-1")
    (lab.tree / "README").write_bytes(b"hello\n" + latin1)
    (lab.tree / "invalid.txt").write_bytes(b"\xff\xfe\x80 not utf-8 \xc0\xaf\n\xed\xa0\x80\n")
    (lab.tree / "utf16.txt").write_bytes("ünïcode\n".encode("utf-16"))
    (lab.tree / "src" / "model.py").write_bytes(b"def f():\r    return '\xe9'\r\n")
    _round_trip(lab)
    data = _patch(lab, "p")
    assert b"\n+" + latin1 in data, "a text hunk carries the raw bytes"
    assert b"\n+def f():\r    return '\xe9'\r\n" in data


@pytest.mark.catalogue(30)
def test_row30_non_utf8_file_names_are_listed_saved_and_rebuilt(lab: Lab) -> None:
    """Row 30: names that are not UTF-8 (a file and a directory) are never skipped: listed, saved, rebuilt."""
    _put(lab.tree, b"bad\xe9.txt", b"latin-1 name\n")
    _put(lab.tree, b"dir \xff\xfe/f\xe9", b"in a non-utf-8 directory\n")
    check = lab.sm("check", "-v")
    assert check.code == 1
    assert check.out.splitlines() == ["vllm: bad\\xe9.txt (added)", "vllm: dir \\xff\\xfe/f\\xe9 (added)"]
    _refused(lab, ("reset",), 1, "bad\\xe9.txt (added)")
    _round_trip(lab)
    assert b'diff --git "a/bad\\351.txt" "b/bad\\351.txt"' in _patch(lab, "p")


@pytest.mark.catalogue(30)
def test_row30_a_non_utf8_path_argument_selects_that_file(lab: Lab) -> None:
    """Row 30: `save NAME PATH` with a non-UTF-8 PATH saves exactly that file."""
    _put(lab.tree, b"bad\xe9.txt", b"one\n")
    (lab.tree / "other.txt").write_text("other\n")
    assert lab.sm("save", "bad", "-m", "m", os.fsdecode(b"bad\xe9.txt")).code == 0
    assert _diff_headers(_patch(lab, "bad")) == [b'"a/bad\\351.txt" "b/bad\\351.txt"']
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.strip() == "vllm: other.txt (added)"


@pytest.mark.catalogue(31)
def test_row31_names_with_spaces_round_trip_and_select_as_paths(lab: Lab) -> None:
    """Row 31: spaces inside, leading and trailing; a directory with spaces given as PATH."""
    (lab.tree / "sp ace.txt").write_text("one\n")
    (lab.tree / " lead").write_text("lead\n")
    (lab.tree / "trail ").write_text("trail\n")
    (lab.tree / "dir with space").mkdir()
    (lab.tree / "dir with space" / "f g.py").write_text("x = 1\n")
    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("save", "dir", "--series", "s", "-m", "dir", "dir with space").code == 0
    assert _diff_headers(_patch(lab, "dir")) == [b"a/dir with space/f g.py b/dir with space/f g.py"]
    _round_trip(lab)
    assert b"+++ b/sp ace.txt" in _patch(lab, "p")


@pytest.mark.catalogue(32)
def test_row32_quotes_tabs_backslashes_and_unicode_names_round_trip(lab: Lab) -> None:
    """Row 32: names git C-quotes in diffs come back exactly; a quoted name is a literal PATH."""
    names = [b'q"uote', b"ta\tb", b"back\\slash", "ünï cödé.txt".encode(), "日本/データ.md".encode()]
    for name in names:
        _put(lab.tree, name, b"content of " + name + b"\n")
    assert lab.sm("save", "quote", "--series", "s", "-m", "quote", 'q"uote').code == 0
    assert _diff_headers(_patch(lab, "quote")) == [b'"a/q\\"uote" "b/q\\"uote"']
    _round_trip(lab)
    data = _patch(lab, "p")
    assert b'diff --git "a/ta\\tb" "b/ta\\tb"' in data
    assert b'"b/\\303\\274n\\303\\257 c\\303\\266d\\303\\251.txt"' in data


@pytest.mark.catalogue(33)
def test_row33_a_newline_in_a_file_name_round_trips(lab: Lab) -> None:
    """Row 33: a tree path may hold a newline (git quotes it as \\n); it is saved and rebuilt."""
    _put(lab.tree, b"new\nline.txt", b"n\n")
    _put(lab.tree, b"dir\nname/f", b"f\n")
    _round_trip(lab)
    assert b'"b/new\\nline.txt"' in _patch(lab, "p")


@pytest.mark.catalogue(33)
@pytest.mark.parametrize("args", [("save", "a\nb", "-m", "m"), ("save", "ok", "--series", "s\nt", "-m", "m"),
                                  ("series", "new", "x\ny")])  # fmt: skip
def test_row33_patch_and_series_names_with_a_newline_are_refused(lab: Lab, args: tuple[str, ...]) -> None:
    """Row 33: a newline is never allowed in a patch or series name: usage error, nothing written."""
    (lab.tree / "README").write_text("edit\n")
    assert lab.sm("check").code == 1
    _refused(lab, args, 2, "invalid")


@pytest.mark.catalogue(33)
def test_row33_a_refusal_naming_a_file_with_a_newline_is_one_line(lab: Lab) -> None:
    """Row 33: an unsaved file named `new\\nline` makes reset refuse in one line (an escaped name); check -v
    lists it on one line too, and other control characters (tab, ESC) are escaped the same way."""
    _put(lab.tree, b"new\nline", b"unsaved\n")
    _put(lab.tree, b"esc\x1b[31m\tred", b"unsaved\n")
    _refused(lab, ("reset",), 1, "new\\nline (added)", "esc\\x1b[31m\\tred (added)")
    check = lab.sm("check", "-v")
    assert check.code == 1
    assert check.out.splitlines() == ["vllm: esc\\x1b[31m\\tred (added)", "vllm: new\\nline (added)"]


@pytest.mark.catalogue(34)
def test_row34_names_that_look_like_pathspec_magic_are_literal(lab: Lab) -> None:
    """Row 34: `*`, `[ab]`, `:(glob)x`, `:!README` as file names and as PATH arguments mean themselves."""
    for name in ("*", "[ab]", ":(glob)x", ":!README", "a", "b"):
        (lab.tree / name).write_text(f"file {name}\n")
    (lab.tree / "README").write_text("edited\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and len(check.out.splitlines()) == 7
    for n, name in enumerate(["*", "[ab]", ":(glob)x", ":!README"]):
        assert lab.sm("save", f"magic{n}", "--series", "s", "-m", name, "--", name).code == 0
        assert _diff_headers(_patch(lab, f"magic{n}")) == [f"a/{name} b/{name}".encode()], name
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.splitlines() == ["vllm: README (modified)", "vllm: a (added)",
                                                          "vllm: b (added)"]  # fmt: skip
    _round_trip(lab)


@pytest.mark.catalogue(35)
def test_row35_a_large_untracked_file_is_unprotected_never_saved_never_deleted(lab: Lab) -> None:
    """Row 35: an untracked file above max_untracked_bytes is listed unprotected, left out of the patch, and
    survives reset and apply; one exactly at the limit, and a large tracked file, are handled normally."""
    config = lab.store / "stackmgr.local.toml"  # this machine's: a shared one never lowers it
    config.write_text("max_untracked_bytes = 1000\n" + config.read_text())
    (lab.tree / "tracked-big.bin").write_bytes(b"t" * 3000)
    git(lab.tree, "add", "tracked-big.bin")
    git(lab.tree, "commit", "-qm", "big tracked file")
    head = _head(lab.tree)
    weights = b"\0w" * 501  # 1002 bytes: over the limit
    (lab.tree / "ckpt").mkdir()
    (lab.tree / "ckpt" / "weights.bin").write_bytes(weights)
    (lab.tree / "edge.bin").write_bytes(b"e" * 1000)  # at the limit: protected
    (lab.tree / "tracked-big.bin").write_bytes(b"T" * 3000)
    status = lab.sm("--json", "status")
    tree = json.loads(status.out)["trees"][0]
    assert [(u["path"], u["reason"]) for u in tree["unprotected"]] == [("ckpt/weights.bin", "large")]
    assert sorted(c["path"] for c in tree["changes"]) == ["edge.bin", "tracked-big.bin"]
    assert lab.sm("save", "p", "--series", "s", "-m", "m").code == 0
    data = _patch(lab, "p")
    assert b"weights.bin" not in data and b"edge.bin" in data
    assert lab.sm("check").code == 0, "an unprotected file does not fail check"
    wanted = tree_files(lab.tree)
    assert lab.sm("reset").code == 0
    assert (lab.tree / "ckpt" / "weights.bin").read_bytes() == weights
    assert not (lab.tree / "edge.bin").exists() and (lab.tree / "tracked-big.bin").read_bytes() == b"t" * 3000
    assert _status(lab.tree) == b"?? ckpt/weights.bin\n"
    assert lab.sm("apply", "s").code == 0
    assert tree_files(lab.tree) == wanted and _head(lab.tree) == head


# --- 48-57: HEAD, index and working tree ------------------------------------------------------------------------


@pytest.mark.catalogue(48)
def test_row48_apply_after_head_moved_rebuilds_on_the_saved_base_and_keeps_the_branch(lab: Lab) -> None:
    """Row 48: HEAD moved (a new commit) since the save: apply restores the saved state on its recorded base
    (like `git stash branch`), detached; the branch keeps the new commit."""
    base = _head(lab.tree)
    (lab.tree / "README").write_text("saved on the old base\n")
    wanted = lab.worktree_id()
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "README").write_text("committed later\n")
    git(lab.tree, "commit", "-qam", "moved on")
    moved = _head(lab.tree)
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert _head(lab.tree) == base and _detached(lab.tree)
    assert lab.worktree_id() == wanted
    assert git_text(lab.tree, "rev-parse", "main") == moved


@pytest.mark.catalogue(48)
def test_row48_reset_refuses_when_head_moved_onto_a_commit_no_branch_holds(lab: Lab) -> None:
    """Row 48: after apply (HEAD detached at the base) the user commits: reset to the base would orphan that
    commit, so reset and apply refuse, naming it; nothing moves."""
    (lab.tree / "README").write_text("series\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0 and lab.sm("apply", "s").code == 0
    (lab.tree / "src" / "model.py").write_text("committed on the detached HEAD\n")
    git(lab.tree, "commit", "-qam", "experiment")
    commit = _head(lab.tree)
    check = lab.sm("check", "-v")
    assert check.code == 1 and f"1 local commit on no branch, {commit[:12]}" in check.out
    _refused(lab, ("reset",), 1, "local commit on no branch", commit[:12])
    _refused(lab, ("apply", "s"), 1, "local commit on no branch")
    assert _head(lab.tree) == commit


@pytest.mark.catalogue(49)
def test_row49_detached_head_saves_against_its_commit_and_stays_detached(lab: Lab) -> None:
    """Row 49: a detached HEAD is fine: the patch records the commit, reset keeps HEAD detached there."""
    (lab.tree / "README").write_text("second\n")
    git(lab.tree, "commit", "-qam", "second")
    git(lab.tree, "checkout", "-q", "--detach", "HEAD~1")
    commit = _head(lab.tree)
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 'detached'\n")
    (lab.tree / "new.txt").write_text("new\n")
    _round_trip(lab)
    assert f"Stackmgr-Base: {commit}\n".encode() in _patch(lab, "p")
    assert _detached(lab.tree) and _head(lab.tree) == commit
    assert git_text(lab.tree, "log", "-1", "--format=%s", "main") == "second"


def _diverged(tree: Path) -> None:
    """Branches main and other both edit README (a conflict waiting to happen)."""
    git(tree, "checkout", "-qb", "other")
    (tree / "README").write_text("other\n")
    git(tree, "commit", "-qam", "other")
    git(tree, "checkout", "-q", "main")
    (tree / "README").write_text("main\n")
    git(tree, "commit", "-qam", "main")


def _start(tree: Path, tmp_path: Path, op: str) -> None:
    def run(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tree, capture_output=True)  # these stop half-way: exit 1 is expected

    if op == "merge":
        run("merge", "other")
    elif op == "rebase":
        run("rebase", "other")
    elif op == "rebase -i (edit)":
        run("-c", "sequence.editor=sed -i s/^pick/edit/", "rebase", "-i", "HEAD~1")
    elif op == "cherry-pick":
        run("cherry-pick", "other")
    elif op == "revert":
        (tree / "README").write_text("main2\n")
        git(tree, "commit", "-qam", "main2")
        run("revert", "HEAD~1")
    elif op == "am":
        (tmp_path / "o.patch").write_bytes(git(tree, "format-patch", "-1", "--stdout", "other"))
        run("am", str(tmp_path / "o.patch"))
    elif op == "bisect":
        run("bisect", "start")
        run("bisect", "bad")


@pytest.mark.catalogue(50)
@pytest.mark.parametrize(("op", "marker", "what"), [
    ("merge", "MERGE_HEAD", "a merge"), ("rebase", "rebase-merge", "a rebase"),
    ("rebase -i (edit)", "rebase-merge", "a rebase"), ("cherry-pick", "CHERRY_PICK_HEAD", "a cherry-pick"),
    ("revert", "REVERT_HEAD", "a revert"), ("am", "rebase-apply", "a rebase or am"),
    ("bisect", "BISECT_LOG", "a bisect"),
])  # fmt: skip
def test_row50_a_tree_mid_operation_is_refused_by_reset_apply_and_save(
    lab: Lab, tmp_path: Path, op: str, marker: str, what: str
) -> None:
    """Row 50: mid merge/rebase/cherry-pick/revert/am/bisect: reset (even --force), apply and save refuse with
    one line naming the operation (exit 3), and nothing changes."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 9\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    _diverged(lab.tree)
    _start(lab.tree, tmp_path, op)
    assert (lab.tree / ".git" / marker).exists(), f"{op} did not stop half-way"
    (lab.tree / "notes.txt").write_text("something to save\n")
    lab.sm("check")  # the private index is warm: refusals below hash nothing new
    for args in (("reset",), ("reset", "--force"), ("apply", "s"), ("save", "q", "-m", "q"),
                 ("save", "q", "-t", "vllm", "-m", "q")):  # fmt: skip
        _refused(lab, args, 3, f"tree vllm is in the middle of {what}", "abort")


@pytest.mark.catalogue(50)
def test_row50_unmerged_entries_without_an_operation_are_refused(lab: Lab) -> None:
    """Row 50: a conflicted `git stash pop` leaves unmerged entries and no marker file: check lists them,
    reset and apply refuse (exit 1), save refuses (exit 3); nothing changes."""
    (lab.tree / "new.txt").write_text("n\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "README").write_text("stashed\n")
    git(lab.tree, "stash", "-q")
    (lab.tree / "README").write_text("committed\n")
    git(lab.tree, "commit", "-qam", "c")
    assert subprocess.run(["git", "stash", "pop"], cwd=lab.tree, capture_output=True).returncode != 0
    check = lab.sm("check", "-v")
    assert check.code == 1 and "vllm: README (unmerged)" in check.out
    _refused(lab, ("reset",), 1, "README (unmerged)")
    _refused(lab, ("apply", "s"), 1, "README (unmerged)")
    _refused(lab, ("save", "q", "-m", "q"), 3, "unmerged paths (README)")


@pytest.mark.catalogue(51)
@pytest.mark.parametrize("working", ["edited again", "back at HEAD"])
def test_row51_staged_and_unstaged_versions_are_not_flattened(lab: Lab, working: str) -> None:
    """Row 51: README staged as one version, the working tree holds another: the patch keeps the working-tree
    version, check and reset still say the staged one is unpreserved; --force keeps both, recover restores both."""
    (lab.tree / "README").write_text("staged version\n")
    git(lab.tree, "add", "README")
    work = "working version\n" if working == "edited again" else "hello\n"
    (lab.tree / "README").write_text(work)
    (lab.tree / "other.txt").write_text("something to save\n")
    saved = lab.sm("save", "p", "-m", "p")
    assert saved.code == 0
    if working == "edited again":
        assert "README: its staged version differs" in saved.err
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.strip() == "vllm: README (staged and unstaged versions differ)"
    _refused(lab, ("reset",), 1, "README (staged and unstaged versions differ)")
    forced = lab.sm("reset", "--force")
    assert forced.code == 0, forced.err
    rid = forced.err.split("recovery snapshot ")[1].split(";")[0]
    assert git(lab.tree, "show", ":README") == b"hello\n"
    assert lab.sm("recover", rid).code == 0
    assert (lab.tree / "README").read_text() == work
    assert git(lab.tree, "show", ":README") == b"staged version\n"


@pytest.mark.catalogue(52)
def test_row52_intent_to_add_entries_round_trip_without_a_rename(lab: Lab) -> None:
    """Row 52: `git add -N` files (one empty) beside a deleted empty file: saved as adds and a delete (never a
    100% similarity rename), reset drops them, apply rebuilds them."""
    (lab.tree / "empty-old").write_bytes(b"")
    git(lab.tree, "add", "empty-old")
    git(lab.tree, "commit", "-qm", "an empty file")
    (lab.tree / "empty-old").unlink()
    (lab.tree / "ita.txt").write_text("content\n")
    (lab.tree / "ita-empty").write_bytes(b"")
    git(lab.tree, "add", "-N", "ita.txt", "ita-empty")
    check = lab.sm("check", "-v")
    assert check.code == 1
    assert check.out.splitlines() == ["vllm: empty-old (deleted)", "vllm: ita-empty (added)", "vllm: ita.txt (added)"]
    _round_trip(lab)
    data = _patch(lab, "p")
    assert b"similarity" not in data and b"rename" not in data
    assert b"deleted file mode 100644" in data and data.count(b"new file mode 100644") == 2


@pytest.mark.catalogue(53)
def test_row53_untracked_files_are_saved_without_git_add(lab: Lab) -> None:
    """Row 53: untracked (not ignored) files, in new directories, empty, and symlinks, are saved by default;
    the real index is never written by save."""
    (lab.tree / "a" / "b" / "c").mkdir(parents=True)
    (lab.tree / "a" / "b" / "c" / "deep.py").write_text("deep\n")
    (lab.tree / "empty").write_bytes(b"")
    os.symlink("src/model.py", lab.tree / "link")
    index = (lab.tree / ".git" / "index").read_bytes()
    saved = lab.sm("save", "u", "-m", "untracked")
    assert saved.code == 0 and (lab.tree / ".git" / "index").read_bytes() == index
    assert _diff_headers(_patch(lab, "u")) == [b"a/a/b/c/deep.py b/a/b/c/deep.py", b"a/empty b/empty",
                                              b"a/link b/link"]  # fmt: skip
    (lab.store / "patches" / "u.patch").unlink()
    _round_trip(lab)


@pytest.mark.catalogue(54)
def test_row54_ignored_files_are_never_saved_and_never_deleted(lab: Lab) -> None:
    """Row 54: ignored files (.gitignore, info/exclude, an ignored directory, one beside a saved new file in a
    new directory) stay out of the patch and keep their bytes through reset and apply."""
    (lab.tree / ".gitignore").write_text("*.o\nbuild/\n")
    git(lab.tree, "add", ".gitignore")
    git(lab.tree, "commit", "-qm", "ignore")
    (lab.tree / ".git" / "info" / "exclude").write_text("scratch.txt\n")
    ignored = {"kernel.o": b"\x7fELF\0", "build/out.so": b"\x7fELF so", "scratch.txt": b"mine\n",
               "newdir/cache.o": b"\0cache"}  # fmt: skip
    for rel, data in ignored.items():
        (lab.tree / rel).parent.mkdir(exist_ok=True)
        (lab.tree / rel).write_bytes(data)
    (lab.tree / "newdir" / "keep.txt").write_text("saved\n")
    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "m").code == 0
    data = _patch(lab, "p")
    assert not any(rel.encode() in data for rel in ignored)
    wanted = tree_files(lab.tree)
    assert lab.sm("reset").code == 0
    assert not (lab.tree / "newdir" / "keep.txt").exists()
    assert {rel: (lab.tree / rel).read_bytes() for rel in ignored} == ignored
    assert lab.sm("apply", "s").code == 0
    assert tree_files(lab.tree) == wanted


@pytest.mark.catalogue(55)
def test_row55_tracked_files_matching_gitignore_are_ordinary_changes(lab: Lab) -> None:
    """Row 55: a tracked file that .gitignore matches is tracked: its edit and its deletion are saved."""
    (lab.tree / ".gitignore").write_text("*.log\nbuild/\n")
    (lab.tree / "build").mkdir()
    (lab.tree / "run.log").write_text("tracked log\n")
    (lab.tree / "build" / "config.h").write_text("#define X 1\n")
    git(lab.tree, "add", ".gitignore")
    git(lab.tree, "add", "-f", "run.log", "build/config.h")
    git(lab.tree, "commit", "-qm", "force-added ignored files")
    (lab.tree / "run.log").write_text("tracked log, edited\n")
    (lab.tree / "build" / "config.h").unlink()
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.splitlines() == ["vllm: build/config.h (deleted)",
                                                          "vllm: run.log (modified)"]  # fmt: skip
    _round_trip(lab)
    assert _diff_headers(_patch(lab, "p")) == [b"a/build/config.h b/build/config.h", b"a/run.log b/run.log"]


def _kinds(tree: Path) -> dict[str, tuple[int, bytes]]:
    """Like tree_files, but safe with FIFOs (never opened: that would block)."""
    found = {os.path.relpath(k, tree): v for k, v in fingerprint(tree).items()}
    return {k: v for k, v in found.items() if k.split(os.sep)[0] != ".git"}


@pytest.mark.catalogue(56)
def test_row56_fifos_are_unprotected_never_opened_never_deleted(lab: Lab) -> None:
    """Row 56: untracked FIFOs are listed as special, left out of the patch, and survive reset and apply."""
    (lab.tree / "d").mkdir()
    os.mkfifo(lab.tree / "pipe")
    os.mkfifo(lab.tree / "d" / "fifo")
    (lab.tree / "d" / "real.txt").write_text("real\n")
    status = json.loads(lab.sm("--json", "status").out)["trees"][0]
    assert sorted((u["path"], u["reason"]) for u in status["unprotected"]) == [("d/fifo", "special"),
                                                                                ("pipe", "special")]  # fmt: skip
    assert lab.sm("save", "p", "--series", "s", "-m", "m").code == 0
    assert _diff_headers(_patch(lab, "p")) == [b"a/d/real.txt b/d/real.txt"]
    assert lab.sm("check").code == 0
    wanted = _kinds(lab.tree)
    assert lab.sm("reset").code == 0
    assert all(stat.S_ISFIFO(os.lstat(lab.tree / p).st_mode) for p in ("pipe", "d/fifo"))
    assert not (lab.tree / "d" / "real.txt").exists()
    assert lab.sm("apply", "s").code == 0
    assert _kinds(lab.tree) == wanted


@pytest.mark.catalogue(56)
def test_row56_a_fifo_where_reset_must_restore_a_tracked_file_is_refused(lab: Lab) -> None:
    """Row 56: README replaced by a FIFO: the deletion is a change; once saved, reset refuses to put README back
    over the FIFO (it would have to delete it) and changes nothing."""
    (lab.tree / "README").unlink()
    os.mkfifo(lab.tree / "README")
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.strip() == "vllm: README (deleted)"
    assert lab.sm("save", "p", "-m", "m").code == 0
    assert lab.sm("check").code == 0
    _refused(lab, ("reset",), 3, "in the way (1 path)", "\n  README\n", may_touch=SWITCH_ATTEMPT)
    assert stat.S_ISFIFO(os.lstat(lab.tree / "README").st_mode)


# Compared with a fingerprint taken inside the switch window, where stackmgr holds the real index's lock and the
# journal's CURRENT marker (both gone afterwards: _no_leftover_locks).
# During the switch the journal also holds an anchor of the checked state (refs/stackmgr/ops/ID/TREE/before),
# removed again when the move is refused.
HELD_DURING_SWITCH = (*SWITCH_ATTEMPT, "/.git/index.lock", "/.git/refs/stackmgr/ops/")


@pytest.mark.catalogue(57)
def test_row57_a_saved_untracked_file_edited_during_reset_is_refused_and_kept(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row 57: reset would remove a saved new file; an editor appends to it between the check and the switch:
    the switch refuses (exit 3, one line naming it) and nothing else changes."""
    (lab.tree / "notes.txt").write_text("saved notes\n")
    (lab.tree / "README").write_text("saved edit\n")
    assert lab.sm("save", "p", "-m", "m").code == 0
    seen: list[dict[str, tuple[int, bytes]]] = []

    def editor_autosave(_snap: object) -> None:
        with open(lab.tree / "notes.txt", "a") as f:
            f.write("typed during the reset\n")
        seen.append(fingerprint(lab.store, lab.tree))

    monkeypatch.setattr(tree_move, "before_switch", editor_autosave)
    result = lab.sm("reset")
    assert result.code == 3
    assert_one_line_error(result.err, "nothing changed", "notes.txt")
    assert changed_paths(seen[0], fingerprint(lab.store, lab.tree), HELD_DURING_SWITCH) == []
    _no_leftover_locks(lab)
    assert (lab.tree / "notes.txt").read_text() == "saved notes\ntyped during the reset\n"
    monkeypatch.setattr(tree_move, "before_switch", None)
    assert lab.sm("check").code == 1


@pytest.mark.catalogue(57)
def test_row57_a_file_apply_rewrites_edited_during_apply_is_refused_and_kept(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row 57: apply would rewrite src/model.py; a build touches it after the check: apply refuses, keeps it."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "m").code == 0
    assert lab.sm("reset").code == 0
    seen: list[dict[str, tuple[int, bytes]]] = []

    def build_writes(_snap: object) -> None:
        (lab.tree / "src" / "model.py").write_text("generated by a build\n")
        seen.append(fingerprint(lab.store, lab.tree))

    monkeypatch.setattr(tree_move, "before_switch", build_writes)
    result = lab.sm("apply", "s")
    assert result.code == 3
    assert_one_line_error(result.err, "nothing changed", "src/model.py")
    assert changed_paths(seen[0], fingerprint(lab.store, lab.tree), HELD_DURING_SWITCH) == []
    _no_leftover_locks(lab)
    assert (lab.tree / "src" / "model.py").read_text() == "generated by a build\n"


@pytest.mark.catalogue(57)
def test_row57_an_edit_during_reset_to_a_file_reset_leaves_alone_is_kept(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row 57: an edit made during the reset to a file the reset does not touch survives, and check reports it."""
    (lab.tree / "README").write_text("saved edit\n")
    assert lab.sm("save", "p", "-m", "m").code == 0

    def autosave(_snap: object) -> None:
        (lab.tree / "src" / "model.py").write_text("typed during the reset\n")

    monkeypatch.setattr(tree_move, "before_switch", autosave)
    assert lab.sm("reset").code == 0
    monkeypatch.setattr(tree_move, "before_switch", None)
    assert (lab.tree / "README").read_text() == "hello\n"
    assert (lab.tree / "src" / "model.py").read_text() == "typed during the reset\n"
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.strip() == "vllm: src/model.py (modified)"


# --- 64-68: odd repositories -----------------------------------------------------------------------------------


@pytest.mark.catalogue(64)
def test_row64_registering_a_directory_that_is_not_a_repository_is_refused(lab: Lab, tmp_path: Path) -> None:
    """Row 64: `tree add` of a plain directory: exit 3, one line, no config change, nothing created there."""
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "f.txt").write_text("f\n")
    _refused(lab, ("tree", "add", "plain", str(plain)), 3, "not inside a git repository", roots=(lab.store, plain))


@pytest.mark.catalogue(64)
def test_row64_a_registered_tree_that_is_no_longer_a_repository(lab: Lab) -> None:
    """Row 64: the tree's .git is gone: check fails closed, reset/apply/save refuse in one line, nothing changes."""
    (lab.tree / "README").write_text("edit\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    shutil.rmtree(lab.tree / ".git")
    check = lab.sm("check")
    assert check.code == 1 and "is not the top level of a git working tree" in check.err
    for args in (("reset",), ("reset", "vllm", "--force"), ("apply", "s"), ("save", "q", "-m", "q"),
                 ("save", "q", "-t", "vllm", "-m", "q"), ("check", "vllm")):  # fmt: skip
        _refused(lab, args, 3, "is not the top level of a git working tree")
    assert not (lab.tree / ".git").exists()


@pytest.mark.catalogue(65)
def test_row65_a_repository_with_no_commits_is_refused(lab: Lab, tmp_path: Path) -> None:
    """Row 65: an unborn tree holding work: save, check, reset and apply refuse with "make a first commit"
    (exit 3); nothing is written, in the store or the tree."""
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q")
    (fresh / "a.txt").write_text("weeks of work\n")
    git(fresh, "add", "a.txt")
    (lab.tree / "README").write_text("edit\n")
    assert lab.sm("save", "v", "-m", "v").code == 0
    assert lab.sm("tree", "add", "fresh", str(fresh)).code == 0
    # A patch for tree fresh (as a colleague's store might hold), in a series.
    data = _patch(lab, "v").replace(b"Stackmgr-Tree: vllm", b"Stackmgr-Tree: fresh")
    (lab.store / "patches" / "f.patch").write_bytes(data)
    (lab.store / "series" / "sf").write_text("f.patch\n")
    roots = (lab.store, fresh)
    for args in (("save", "p", "-t", "fresh", "-m", "m"), ("check", "fresh"), ("reset", "fresh"),
                 ("reset", "fresh", "--force"), ("apply", "sf")):  # fmt: skip
        _refused(lab, args, 3, "tree fresh", "has no commits yet; make a first commit there", roots=roots)
    assert lab.sm("check").code != 0, "the unborn tree's work is not known to be safe"


def _shallow_setup(lab: Lab, tmp_path: Path) -> Path:
    """Series s saved on the first commit; then a second commit; a depth-1 clone of it lacks the base."""
    (lab.tree / "README").write_text("edit\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "new.txt").write_text("n\n")
    git(lab.tree, "add", "new.txt")
    git(lab.tree, "commit", "-qm", "second")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{lab.tree}", str(shallow))
    assert git_text(shallow, "rev-parse", "--is-shallow-repository") == "true"
    return shallow


@pytest.mark.catalogue(66)
def test_row66_apply_into_a_shallow_clone_missing_the_base_is_refused(lab: Lab, tmp_path: Path) -> None:
    """Row 66: the series' base is not in the (shallow) tree: apply, with or without --3way, refuses in one line
    naming the base and the fix; nothing changes."""
    shallow = _shallow_setup(lab, tmp_path)
    config = lab.store / "stackmgr.local.toml"  # where the tree is on this machine
    config.write_text(config.read_text().replace(str(lab.tree), str(shallow)))
    assert lab.sm("check").code == 0
    base = re.search(rb"Stackmgr-Base: ([0-9a-f]{12})", _patch(lab, "p")).group(1).decode()  # type: ignore[union-attr]
    for args in (("apply", "s"), ("apply", "s", "--3way")):
        _refused(lab, args, 3, f"the base {base}", "is not a commit there", "git fetch", roots=(lab.store, shallow))


@pytest.mark.catalogue(66)
def test_row66_a_patch_whose_base_left_with_a_shallow_reclone_preserves_nothing(lab: Lab, tmp_path: Path) -> None:
    """Row 66: the tree is re-cloned shallow at the same path; the edit p holds is made again. p's base is not there, so
    p cannot be applied to its base (docs/ARCHITECTURE.md#invariants, 2): check must say no (with the warm cache), and
    reset refuse. With the full clone back at that path, p preserves the edit again."""
    shallow = _shallow_setup(lab, tmp_path)
    lab.tree.rename(tmp_path / "full")
    shallow.rename(lab.tree)
    (lab.tree / "README").write_text("edit\n")
    assert lab.sm("check").code == 1, "answer with the cache: p's base is not in this tree"
    _refused(lab, ("reset",), 1, "README (modified)")
    lab.tree.rename(tmp_path / "shallow-again")
    (tmp_path / "full").rename(lab.tree)
    (lab.tree / "README").write_text("edit\n")
    assert lab.sm("check").code == 0, "the full clone has p's base again"


@pytest.mark.catalogue(67)
def test_row67_a_linked_worktree_round_trips_and_leaves_the_main_tree_alone(lab: Lab, tmp_path: Path) -> None:
    """Row 67: a linked worktree registered as a tree: check, save, reset and apply work on it alone; the main
    checkout's files, index and HEAD stay as they were; state lives in the worktree's own git dir."""
    wt = tmp_path / "wt"
    git(lab.tree, "worktree", "add", "-q", "-b", "side", str(wt))
    store = tmp_path / "store-wt"
    assert run_stackmgr("init", str(store)).code == 0
    wlab = Lab(store, wt)
    assert wlab.sm("tree", "add", "wt", str(wt)).code == 0
    (lab.tree / "main-only.txt").write_text("untracked in the main checkout\n")
    main_files, main_index = tree_files(lab.tree), (lab.tree / ".git" / "index").read_bytes()
    (wt / "README").write_text("in the worktree\n")
    (wt / "wt-new.txt").write_text("new\n")
    check = wlab.sm("check", "-v")
    assert check.code == 1 and check.out.splitlines() == ["wt: README (modified)", "wt: wt-new.txt (added)"]
    wanted = _worktree_id(wt)
    assert wlab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert wlab.sm("reset").code == 0 and _status(wt) == b""
    assert wlab.sm("apply", "s").code == 0 and _worktree_id(wt) == wanted
    assert (wt / "README").read_text() == "in the worktree\n"
    assert tree_files(lab.tree) == main_files and (lab.tree / ".git" / "index").read_bytes() == main_index
    assert git_text(lab.tree, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert (lab.tree / ".git" / "worktrees" / "wt" / "stackmgr" / "index").exists()
    assert not (lab.tree / ".git" / "stackmgr").exists(), "the main tree's private index is never created"


def _worktree_id(tree: Path) -> str:
    """The working-tree id of a linked worktree (its .git is a file), computed with git alone."""
    index = git_text(tree, "rev-parse", "--path-format=absolute", "--git-path", "test-snapshot-index")
    env = dict(os.environ, GIT_INDEX_FILE=index)
    try:
        for args in (["read-tree", "HEAD"], ["add", "-A"]):
            subprocess.run(["git", *args], cwd=tree, env=env, check=True)
        out = subprocess.run(["git", "write-tree"], cwd=tree, env=env, check=True, capture_output=True)
        return out.stdout.decode().strip()
    finally:
        Path(index).unlink(missing_ok=True)


def _with_other_dir(lab: Lab) -> None:
    (lab.tree / "other").mkdir()
    (lab.tree / "other" / "o.txt").write_text("o\n")
    git(lab.tree, "add", "other")
    git(lab.tree, "commit", "-qm", "other")


@pytest.mark.catalogue(67)
def test_row67_a_sparse_checkout_round_trips_inside_the_cone(lab: Lab) -> None:
    """Row 67: in a cone-mode sparse checkout, paths outside the cone are not deletions; edits inside it round
    trip; the out-of-cone file stays absent and skip-worktree."""
    _with_other_dir(lab)
    git(lab.tree, "sparse-checkout", "set", "src")
    assert not (lab.tree / "other").exists()
    assert lab.sm("check").code == 0, "paths outside the cone are not deletions"
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 'sparse'\n")
    (lab.tree / "src" / "new.py").write_text("new\n")
    _round_trip(lab)
    assert not (lab.tree / "other").exists()
    assert b"S other/o.txt\n" in git(lab.tree, "ls-files", "-v")


@pytest.mark.catalogue(67)
@pytest.mark.parametrize("edit", ["modified", "added"])
def test_row67_a_series_touching_a_path_outside_the_sparse_cone(lab: Lab, edit: str) -> None:
    """Row 67: a series edits other/o.txt (or adds other/new.txt), outside the cone the tree has now: git would
    record it in the index without writing the file, so apply refuses in one line naming it and how to widen
    the checkout, and nothing changes. Once widened, apply writes it."""
    _with_other_dir(lab)
    path = "other/o.txt" if edit == "modified" else "other/new.txt"
    (lab.tree / path).write_text("edited outside the cone-to-be\n")
    wanted = lab.worktree_id()
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    git(lab.tree, "sparse-checkout", "set", "src")
    assert lab.sm("check").code == 0
    _refused(lab, ("apply", "s"), 3, "its sparse checkout hides 1 path", f"\n  {path}\n", "nothing changed",
             "git sparse-checkout add other")  # fmt: skip
    git(lab.tree, "sparse-checkout", "add", "other")
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert (lab.tree / path).read_text() == "edited outside the cone-to-be\n"
    assert lab.worktree_id() == wanted
    assert lab.sm("check").code == 0


@pytest.mark.catalogue(67)
def test_row67_reset_refuses_to_bring_back_a_path_outside_the_sparse_cone(lab: Lab) -> None:
    """Row 67: `reset --to` a commit that still has other/o.txt, in a tree whose cone is src: git would put it in
    the index only, so reset refuses (nothing changed), naming it."""
    _with_other_dir(lab)
    git(lab.tree, "rm", "-q", "other/o.txt")
    git(lab.tree, "commit", "-qm", "drop other")
    git(lab.tree, "sparse-checkout", "set", "src")
    assert lab.sm("check").code == 0
    _refused(lab, ("reset", "--to", "HEAD~1"), 3, "its sparse checkout hides 1 path", "\n  other/o.txt\n",
             "git sparse-checkout add other")  # fmt: skip


@pytest.mark.catalogue(67)
@pytest.mark.parametrize("patterns", [("/*", "!/other/"), ("*.py", "/README"), ("/src/",)])
def test_row67_a_non_cone_sparse_checkout_refuses_only_what_it_hides(lab: Lab, patterns: tuple[str, ...]) -> None:
    """Row 67: with sparse-checkout patterns (not cone mode), a series adding a file the patterns leave out is
    refused, one adding a file they include is applied; git's own bits agree afterwards."""
    _with_other_dir(lab)
    (lab.tree / "src" / "in.py").write_text("in\n")
    assert lab.sm("save", "inside", "--series", "in", "-m", "inside").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "other" / "out.txt").write_text("out\n")
    assert lab.sm("save", "outside", "--series", "out", "-m", "outside").code == 0
    assert lab.sm("reset").code == 0
    git(lab.tree, "sparse-checkout", "set", "--no-cone", *patterns)
    assert lab.sm("check").code == 0
    _refused(lab, ("apply", "out"), 3, "its sparse checkout hides 1 path", "\n  other/out.txt\n")
    applied = lab.sm("apply", "in")
    assert applied.code == 0, applied.err
    assert (lab.tree / "src" / "in.py").read_text() == "in\n"
    assert lab.sm("check").code == 0


@pytest.mark.catalogue(67)
def test_row67_a_skip_worktree_bit_without_sparse_checkout_does_not_hide(lab: Lab) -> None:
    """Row 67: without sparse checkout, git writes a path whatever its skip-worktree bit says (set by hand with
    `git update-index --skip-worktree`), so apply goes ahead and writes it."""
    (lab.tree / "README").write_text("saved edit\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    git(lab.tree, "update-index", "--skip-worktree", "README")
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert (lab.tree / "README").read_text() == "saved edit\n"


_SPARSE_PATHS = ["README", "top.py", "src/x.py", "src/y.txt", "src/a/q.py", "src/a/deep/r.txt", "src/b/y.py",
                 "other/o.txt", "other/src/x.py", "docs/internal/i.md", "docs/d.md", "lib/sub/foo.py", "a b/c d.txt",
                 "[x]/y"]  # fmt: skip


@pytest.mark.catalogue(67)
@pytest.mark.parametrize(("cone", "lines"), [
    (True, ["/*", "!/*/", "/src/"]), (True, ["/*", "!/*/", "/src/", "!/src/*/", "/src/a/"]), (True, ["/*"]),
    (True, ["/*", "!/*/", "/a\\ b/"]), (True, ["/*", "!/*/", "/src/x*/"]), (False, ["/*", "!/other/"]),
    (False, ["*.py", "/README"]), (False, ["src/"]), (False, ["/docs/", "!/docs/internal/"]), (False, ["**/x.py"]),
    (False, ["/src/**/*.py"]), (False, ["*", "!/src/", "/src/a/"]), (False, ["[!a-s]*", "#c", "", "/README  "]),
    (False, ["\\[x]/"]),
])  # fmt: skip
def test_row67_which_added_paths_a_sparse_checkout_hides_is_what_git_does(
    tmp_path: Path, cone: bool, lines: list[str]
) -> None:
    """Row 67: stackmgr's reading of the sparse-checkout file (cone and pattern mode) agrees with the
    skip-worktree bits `read-tree -m -u` gives the paths it adds."""
    from stackmgr.git.sparse import checked_out

    repo = make_repo(tmp_path / "sparse", dict.fromkeys(_SPARSE_PATHS, "x\n"))
    for name in os.listdir(repo):
        if name != ".git":
            shutil.rmtree(repo / name) if (repo / name).is_dir() else (repo / name).unlink()
    git(repo, "config", "core.sparseCheckout", "true")
    git(repo, "config", "core.sparseCheckoutCone", str(cone).lower())
    (repo / ".git" / "info" / "sparse-checkout").write_text("".join(f"{line}\n" for line in lines))
    git(repo, "read-tree", "--empty")
    git(repo, "read-tree", "-m", "-u", "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "HEAD")
    written = {ln[2:] for ln in git(repo, "ls-files", "-t").decode().splitlines() if ln.startswith("H ")}
    inside = checked_out([line.encode() for line in lines], cone)
    assert {p for p in _SPARSE_PATHS if inside(p.encode(), False)} == written
    assert written == {p for p in _SPARSE_PATHS if (repo / p).exists()}


@pytest.mark.catalogue(68)
def test_row68_commands_run_from_a_subdirectory_act_on_the_whole_tree(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row 68: from src/, `save` without PATH saves root-level files too (git -C top level), `save NAME .` only
    src/, and reset/apply rebuild the whole tree."""
    monkeypatch.chdir(lab.tree / "src")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 'sub'\n")
    (lab.tree / "src" / "extra.py").write_text("extra\n")
    (lab.tree / "README").write_text("root edit\n")
    (lab.tree / "root-new.txt").write_text("root new\n")
    assert lab.sm("save", "here", "--series", "s", "-m", "src only", ".").code == 0
    assert _diff_headers(_patch(lab, "here")) == [b"a/src/extra.py b/src/extra.py", b"a/src/model.py b/src/model.py"]
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.splitlines() == ["vllm: README (modified)", "vllm: root-new.txt (added)"]
    _round_trip(lab)
    assert _diff_headers(_patch(lab, "p")) == [b"a/README b/README", b"a/root-new.txt b/root-new.txt"]
    assert Path.cwd() == lab.tree / "src"
