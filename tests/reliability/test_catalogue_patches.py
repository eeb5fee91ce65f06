"""Bad or tricky PATCH CONTENT (docs/RELIABILITY.md#catalogue-rows, rows 1–24, 27, 28, 36–39).

Each hostile input goes into the store the way it reaches a user: a saved patch whose bytes were damaged later, or
a patch file written by hand (a docs/FORMATS.md#patch-file header, a diff) listed in a series. `apply` must refuse it
(exit 3, one line naming the patch and what is wrong, nothing written anywhere), and `status`/`check` must neither
crash on it nor count it as preserving a change. Tricky but legitimate content must round-trip exactly through
save → reset → apply (tree ids and bytes). `import` does not exist yet: its inputs are tested through `apply` of a
series that lists them and through `status`/`check` with them in the store.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Lab, Result, git, git_text, make_repo, run_stackmgr, tree_files
from tests.reliability.conftest import REBUILDABLE, assert_one_line_error, changed_paths, fingerprint

FROM = b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
ZERO = "0" * 40
Edit = Callable[[Path], None]

# --- helpers ----------------------------------------------------------------------------------------------------------


def _blob(data: bytes) -> str:
    """The git blob id of `data` (SHA-1 repositories), computed without writing anything."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _head(lab: Lab) -> str:
    return git_text(lab.tree, "rev-parse", "HEAD")


def _commit(lab: Lab, files: dict[str, bytes], links: dict[str, str] | None = None, *, mode: int = 0o644) -> str:
    """A new base commit in the lab tree (files written with `mode`, symlinks as given); returns its id."""
    for name, data in files.items():
        path = lab.tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
    for name, target in (links or {}).items():
        os.symlink(target, lab.tree / name)
    git(lab.tree, "add", "-A")
    git(lab.tree, "commit", "-q", "-m", "more base")
    return _head(lab)


def _files(tree: Path) -> dict[str, tuple[bool, bool, bytes]]:
    """Every file of the tree as (is a symlink, is executable, bytes or link target): umask-independent."""
    return {p: (stat.S_ISLNK(m), bool(m & 0o100) and not stat.S_ISLNK(m), d) for p, (m, d) in tree_files(tree).items()}


def _hand_patch(lab: Lab, name: str, diff: bytes, *, base: str | None = None, series: str | None = "s") -> Path:
    """patches/NAME.patch written by hand: a docs/FORMATS.md#patch-file header and trailers, then `diff`; listed as the
    only entry of `series` (unless None)."""
    header = (
        FROM + b"From: Jane Doe <jane@example.com>\nDate: Sat, 13 Jun 2026 10:02:11 +0000\n"
        b"Subject: [PATCH] " + name.encode() + b"\n\nhand-written\n\n"
        b"Stackmgr-Tree: vllm\nStackmgr-Base: " + (base or _head(lab)).encode() + b"\n---\n\n"
    )
    path = lab.store / "patches" / f"{name}.patch"
    path.write_bytes(header + diff)
    if series:
        _series(lab, series, name)
    return path


def _series(lab: Lab, series: str, *names: str) -> None:
    (lab.store / "series" / series).write_text("".join(f"{n}.patch\n" for n in names))


def _creation(path: str, content: bytes, mode: str = "100644") -> bytes:
    """The git diff that creates `path` with `content` (full index line, as stackmgr writes them)."""
    lines = content.split(b"\n")
    nonl = not content.endswith(b"\n")
    if not nonl:
        lines.pop()
    head = f"diff --git a/{path} b/{path}\nnew file mode {mode}\nindex {ZERO}..{_blob(content)}\n".encode()
    if not content:
        return head
    hunk = b"".join(b"+" + ln + b"\n" for ln in lines) + (b"\\ No newline at end of file\n" if nonl else b"")
    return head + f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n".encode() + hunk


def _modification(path: str, old: bytes, new: bytes, mode: str = "100644") -> bytes:
    """The git diff of a one-hunk change of a small file from `old` to `new` (whole-file hunk)."""

    def side(sign: bytes, data: bytes) -> tuple[bytes, int]:
        lines = data.split(b"\n")
        nonl = not data.endswith(b"\n")
        if not nonl:
            lines.pop()
        text = b"".join(sign + ln + b"\n" for ln in lines)
        return text + (b"\\ No newline at end of file\n" if nonl and data else b""), len(lines)

    minus, a = side(b"-", old)
    plus, b = side(b"+", new)
    head = f"diff --git a/{path} b/{path}\nindex {_blob(old)}..{_blob(new)} {mode}\n--- a/{path}\n+++ b/{path}\n"
    return head.encode() + f"@@ -1,{a} +1,{b} @@\n".encode() + minus + plus


def _saved(lab: Lab, edit: Edit, name: str = "p", series: str | None = "s") -> tuple[Path, str]:
    """Make `edit`, save it as NAME (in `series`), reset the tree; returns the patch file and the tree id saved."""
    edit(lab.tree)
    wanted = lab.worktree_id()
    args = ("save", name, "-m", name) + (("--series", series) if series else ())
    saved = lab.sm(*args)
    assert saved.code == 0, saved.err
    reset = lab.sm("reset")
    assert reset.code == 0, reset.err
    return lab.store / "patches" / f"{name}.patch", wanted


def _no_crash(result: Result) -> None:
    assert "Traceback" not in result.err and "internal error" not in result.err, result.err


# What a refused command may still touch: REBUILDABLE, the private directory itself on a tree's first use, and
# git's append-only object store (`git apply --3way --check`, run to explain a refusal, writes the post-image blob
# it tried; a snapshot hashes the files it reads: unreachable, invisible, pruned by gc; no file of the user's).
MAY_TOUCH = (*REBUILDABLE, "/.git/stackmgr", "/.git/objects/")


def _refused(lab: Lab, args: tuple[str, ...], *needles: str, code: int = 3, also: tuple[Path, ...] = ()) -> Result:
    """`stackmgr ARGS` refuses with `code` and one line naming `needles`; nothing under the store, the tree (its
    .git included) or `also` is created, removed or changed, except rebuildable caches."""
    roots = (lab.store, lab.tree, *also)
    before = fingerprint(*roots)
    result = lab.sm(*args)
    assert result.code == code, (result.code, result.out, result.err)
    assert_one_line_error(result.err, *needles)
    _no_crash(result)
    assert changed_paths(before, fingerprint(*roots), MAY_TOUCH) == []
    return result


def _round_trip(lab: Lab, edit: Edit, name: str = "rt") -> bytes:
    """save → reset → apply gives back the exact working tree (tree id, bytes, modes, links); returns the patch."""
    edit(lab.tree)
    wanted_id, wanted = lab.worktree_id(), _files(lab.tree)
    saved = lab.sm("save", name, "--series", name, "-m", name)
    assert saved.code == 0, saved.err
    reset = lab.sm("reset")
    assert reset.code == 0, reset.err
    assert lab.worktree_id() == git_text(lab.tree, "rev-parse", "HEAD^{tree}"), "reset went back to the base"
    applied = lab.sm("apply", name)
    assert applied.code == 0, applied.err
    assert lab.worktree_id() == wanted_id
    assert _files(lab.tree) == wanted
    assert lab.sm("check").code == 0
    return (lab.store / "patches" / f"{name}.patch").read_bytes()


def _not_trusted(lab: Lab, edit: Edit, path: str) -> None:
    """With the tree holding the change that only a damaged or hostile patch claims, `check` says 1 and names
    the path, `status` lists it as unpreserved; neither crashes nor writes anything."""
    edit(lab.tree)
    before = fingerprint(lab.store, lab.tree)
    check = lab.sm("check", "-v")
    _no_crash(check)
    assert check.code == 1, (check.out, check.err)
    assert path in check.out
    status = lab.sm("--json", "status")
    _no_crash(status)
    assert status.code == 0, status.err
    tree = json.loads(status.out)["trees"][0]
    assert path in [u["path"] for u in tree["unpreserved"]]
    assert changed_paths(before, fingerprint(lab.store, lab.tree), MAY_TOUCH) == []


def _reads_cleanly(lab: Lab) -> None:
    """status and check on a clean tree, with a hostile patch in the store: they answer, they do not crash."""
    before = fingerprint(lab.store, lab.tree)
    for args in (("check",), ("status",), ("--json", "status"), ("series",), ("series", "s")):
        result = lab.sm(*args)
        _no_crash(result)
        assert result.code == 0, (args, result.err)
    assert changed_paths(before, fingerprint(lab.store, lab.tree), MAY_TOUCH) == []


def _two_line_edit(tree: Path) -> None:
    (tree / "README").write_text("changed\n")
    (tree / "src" / "model.py").write_text("def f():\n    return 2\n")


def _model_edit(tree: Path) -> None:
    (tree / "src" / "model.py").write_text("def f():\n    return 2\n")


# --- rows 1–4: malformed, truncated, lying and overflowing patches ----------------------------------------------------


@pytest.mark.catalogue(1)
def test_row01_garbage_patch_file_is_refused_before_anything_is_touched(lab: Lab) -> None:
    """Row 1: a patch file of garbage text (no header, no diff): apply refuses naming the file; status and check
    still answer."""
    (lab.store / "patches" / "p.patch").write_bytes(b"this is not a patch\n\x00\xff\xfe garbage\n@@ @@\n")
    _series(lab, "s", "p")
    _refused(lab, ("apply", "s"), "patches/p.patch")
    _reads_cleanly(lab)


@pytest.mark.catalogue(1)
def test_row01_malformed_hunk_header_is_refused_and_not_trusted(lab: Lab) -> None:
    """Row 1: a hunk header that is not `@@ -a,b +c,d @@`: apply refuses naming the patch; check does not count
    the patch as preserving the change it claims."""
    patch, _ = _saved(lab, _model_edit)
    patch.write_bytes(patch.read_bytes().replace(b"@@ -1,2 +1,2 @@", b"@@ -one,2 +1,2 @@"))
    _refused(lab, ("apply", "s"), "patch p ", "nothing was changed")
    _not_trusted(lab, _model_edit, "src/model.py")


@pytest.mark.catalogue(2)
def test_row02_patch_cut_in_the_middle_of_a_hunk_is_refused(lab: Lab) -> None:
    """Row 2: a patch truncated in the middle of a hunk (after its `-` line, before its `+` line): refused."""
    patch, _ = _saved(lab, _two_line_edit)
    data = patch.read_bytes()
    patch.write_bytes(data[: data.index(b"-    return 1\n") + len(b"-    return 1\n")])
    _refused(lab, ("apply", "s"), "patch p ", "nothing was changed")
    _not_trusted(lab, _two_line_edit, "src/model.py")


@pytest.mark.catalogue(2)
def test_row02_patch_cut_in_the_middle_of_a_line_is_refused(lab: Lab) -> None:
    """Row 2: a patch truncated in the middle of its last `+` line (no final newline): git must not take the
    stump for the whole line; refused."""
    patch, _ = _saved(lab, _two_line_edit)
    data = patch.read_bytes()
    patch.write_bytes(data[: data.index(b"+    return 2") + len(b"+    ret")])
    _refused(lab, ("apply", "s"), "patch p ", "nothing was changed")
    _not_trusted(lab, _two_line_edit, "src/model.py")


@pytest.mark.catalogue(2)
def test_row02_patch_cut_at_a_file_boundary_is_refused(lab: Lab) -> None:
    """Row 2: a patch truncated exactly before its second file's `diff --git` is still a valid diff of one file;
    its diffstat (2 files changed) shows it was cut. Applying it would silently drop half the change: refused."""
    patch, _ = _saved(lab, _two_line_edit)
    data = patch.read_bytes()
    patch.write_bytes(data[: data.index(b"diff --git a/src/model.py")])
    _refused(lab, ("apply", "s"), "p")


@pytest.mark.catalogue(2)
def test_row02_file_cut_off_a_patch_is_not_counted_as_preserved(lab: Lab) -> None:
    """Row 2: with the second file cut off the patch, check says that file's change is not preserved."""
    patch, _ = _saved(lab, _two_line_edit)
    data = patch.read_bytes()
    patch.write_bytes(data[: data.index(b"diff --git a/src/model.py")])
    _not_trusted(lab, _two_line_edit, "src/model.py")


@pytest.mark.catalogue(3)
@pytest.mark.parametrize("lie", [b"@@ -1,3 +1,3 @@", b"@@ -1,1 +1,1 @@", b"@@ -1,2 +1,9 @@"],
                         ids=["more-lines-claimed", "fewer-lines-claimed", "new-side-claims-more"])  # fmt: skip
def test_row03_hunk_counts_that_lie_are_refused_and_not_recounted(lab: Lab, lie: bytes) -> None:
    """Row 3: hunk line counts that do not match the hunk body: refused (never `--recount` a stored patch); check
    does not count it as preserving anything."""
    patch, _ = _saved(lab, _model_edit)
    data = patch.read_bytes()
    assert data.count(b"@@ -1,2 +1,2 @@") == 1
    patch.write_bytes(data.replace(b"@@ -1,2 +1,2 @@", lie))
    _refused(lab, ("apply", "s"), "patch p ", "nothing was changed")
    _not_trusted(lab, _model_edit, "src/model.py")




@pytest.mark.catalogue(4)
@pytest.mark.parametrize("header", [
    b"@@ -1,18446744073709551617 +1,2 @@",
    pytest.param(b"@@ -99999999999999999999999,2 +1,2 @@"),
    pytest.param(b"@@ -1,2 +4294967297,2 @@"),
    pytest.param(b"@@ -2147483648,2 +2147483648,2 @@"),
])  # fmt: skip
def test_row04_hunk_header_integer_overflow_is_refused(lab: Lab, header: bytes) -> None:
    """Row 4: hunk-header numbers that overflow 32/64-bit integers (a line count, or a start line): refused with
    one line, also with --3way (no crash in git, in stackmgr's hunk parsing or its error report)."""
    patch, _ = _saved(lab, _model_edit)
    patch.write_bytes(patch.read_bytes().replace(b"@@ -1,2 +1,2 @@", header))
    _refused(lab, ("apply", "s"), "patch p ", "nothing was changed")
    _refused(lab, ("apply", "s", "--3way"), "patch p ")


@pytest.mark.catalogue(4)
@pytest.mark.parametrize("header", [
    b"@@ -99999999999999999999999,2 +1,2 @@",
    b"@@ -1,18446744073709551617 +1,2 @@",
    b"@@ -2147483648,2 +2147483648,2 @@",
])  # fmt: skip
def test_row04_overflowing_hunk_header_does_not_crash_show_status_or_check(lab: Lab, header: bytes) -> None:
    """Row 4: with such a patch in the store, show, status and check answer without a traceback."""
    patch, _ = _saved(lab, _model_edit)
    patch.write_bytes(patch.read_bytes().replace(b"@@ -1,2 +1,2 @@", header))
    for args in (("show", "p"), ("status",), ("check",), ("series", "s")):
        result = lab.sm(*args)
        _no_crash(result)
        assert result.code in (0, 3), (args, result)
    _model_edit(lab.tree)
    for args in (("status",), ("--json", "status"), ("check", "-v")):
        result = lab.sm(*args)
        _no_crash(result)
        assert result.code in (0, 1), (args, result)


# --- row 5: CRLF damage to the patch file; row 6: CRLF content --------------------------------------------------------


def _crlf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


@pytest.mark.catalogue(5)
def test_row05_patch_file_converted_to_crlf_is_refused(lab: Lab) -> None:
    """Row 5: an editor or mailer turned every LF of a saved patch into CRLF: refused (no --ignore-whitespace),
    nothing changed; check does not count it as preserving the change."""
    patch, _ = _saved(lab, _two_line_edit)
    patch.write_bytes(_crlf(patch.read_bytes()))
    _refused(lab, ("apply", "s"), "p")
    _refused(lab, ("apply", "s", "--3way"), "p")
    _not_trusted(lab, _two_line_edit, "src/model.py")


def _new_notes(tree: Path) -> None:
    (tree / "notes.txt").write_text("line one\nline two\n")


@pytest.mark.catalogue(5)
def test_row05_crlf_damaged_creation_patch_does_not_create_crlf_content(lab: Lab) -> None:
    """Row 5: a patch that only creates a file, turned to CRLF as a whole: git alone would create the file with
    CRLF content; stackmgr refuses instead, and check does not count it for the LF file."""
    patch, _ = _saved(lab, _new_notes)
    patch.write_bytes(_crlf(patch.read_bytes()))
    _refused(lab, ("apply", "s"), "p")
    assert not (lab.tree / "notes.txt").exists()
    _not_trusted(lab, _new_notes, "notes.txt")


@pytest.mark.catalogue(5, 39)
def test_row05_crlf_damaged_diff_body_is_caught_by_the_recorded_blob(lab: Lab) -> None:
    """Rows 5, 39: only the diff body of a creation patch turned CRLF (the mail header still LF, so the patch
    parses): the result would be `notes.txt` with CRLF, whose blob is not the post-image the index line records.
    Refused; the recorded state is never replaced by a different one."""
    patch, _ = _saved(lab, _new_notes)
    data = patch.read_bytes()
    at = data.index(b"\n@@ ") + 1
    patch.write_bytes(data[:at] + _crlf(data[at:]))
    _refused(lab, ("apply", "s"), "p", "notes.txt")


@pytest.mark.catalogue(5)
def test_row05_refusal_says_the_line_endings_changed(lab: Lab) -> None:
    """Row 5: the one-line refusal tells the user the patch's line endings changed (CRLF)."""
    patch, _ = _saved(lab, _two_line_edit)
    patch.write_bytes(_crlf(patch.read_bytes()))
    result = _refused(lab, ("apply", "s"), "p")
    assert "CRLF" in result.err or "line ending" in result.err


@pytest.mark.catalogue(6)
def test_row06_crlf_content_round_trips_byte_exact(lab: Lab) -> None:
    """Row 6: CRLF content, a lone CR, mixed endings and CR at EOF are content: save → reset → apply gives the
    same bytes and tree id, and the patch carries the CRs."""

    def edit(tree: Path) -> None:
        (tree / "README").write_bytes(b"one\r\ntwo\r\n")
        (tree / "win.txt").write_bytes(b"a\r\nb\rc\n\r\nlast\r")
        (tree / "src" / "model.py").write_bytes(b"def f():\r\n    return 1\n")

    patch = _round_trip(lab, edit)
    assert b"+one\r\n" in patch and b"+def f():\r\n" in patch and b"+b\rc\n" in patch
    assert (lab.tree / "win.txt").read_bytes() == b"a\r\nb\rc\n\r\nlast\r"


@pytest.mark.catalogue(6)
def test_row06_crlf_checkout_attribute_round_trips(lab: Lab) -> None:
    """Row 6: with `.gitattributes` `*.bat eol=crlf` the blob is LF and the file on disk CRLF; the round trip
    goes through the same attributes and gives back the same bytes."""
    _commit(lab, {".gitattributes": b"*.bat eol=crlf\n"})

    def edit(tree: Path) -> None:
        (tree / "run.bat").write_bytes(b"@echo off\r\nexit /b 0\r\n")

    _round_trip(lab, edit)
    assert (lab.tree / "run.bat").read_bytes() == b"@echo off\r\nexit /b 0\r\n"


# --- row 7: no newline at end of file ---------------------------------------------------------------------------------


@pytest.mark.catalogue(7)
def test_row07_missing_final_newlines_round_trip(lab: Lab) -> None:
    """Row 7: removing a final newline, changing a last line that has none, and a new file without one:
    `\\ No newline at end of file` is preserved exactly."""

    def edit(tree: Path) -> None:
        (tree / "README").write_bytes(b"hello")
        (tree / "src" / "model.py").write_bytes(b"def f():\n    return 2")
        (tree / "nonl.txt").write_bytes(b"x")

    patch = _round_trip(lab, edit)
    assert patch.count(b"\\ No newline at end of file") == 3
    assert (lab.tree / "README").read_bytes() == b"hello" and (lab.tree / "nonl.txt").read_bytes() == b"x"


@pytest.mark.catalogue(7)
def test_row07_adding_a_final_newline_round_trips(lab: Lab) -> None:
    """Row 7: a base file without a final newline gains one, another gains a line after it."""
    _commit(lab, {"tail.txt": b"end", "more.txt": b"first"})

    def edit(tree: Path) -> None:
        (tree / "tail.txt").write_bytes(b"end\n")
        (tree / "more.txt").write_bytes(b"first\nsecond")

    _round_trip(lab, edit)
    assert (lab.tree / "tail.txt").read_bytes() == b"end\n"


@pytest.mark.catalogue(7)
@pytest.mark.parametrize(("old", "new"), [(b"hello", b"bye\n"), (b"hello\n", b"bye")])
def test_row07_final_newline_mismatch_with_the_base_is_refused(lab: Lab, old: bytes, new: bytes) -> None:
    """Row 7: a patch whose pre-image ends differently from the base's file (the base README is `hello\\n`):
    refused, not applied with the ending guessed."""
    if old == b"hello\n":
        _commit(lab, {"README": b"hello"})  # now the base has no final newline and the patch expects one
    _hand_patch(lab, "p", _modification("README", old, new))
    result = _refused(lab, ("apply", "s"), "patch p ", "README", "nothing was changed")
    assert "does not apply" in result.err


# --- rows 8–11: binary patches ----------------------------------------------------------------------------------------


def _bytes(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


BINARY = b"\0\1\2\3" + _bytes(1, 300)


def _new_binary(tree: Path) -> None:
    (tree / "blob.bin").write_bytes(BINARY)


@pytest.mark.catalogue(8, 9)
def test_row08_save_always_writes_full_binary_patches(lab: Lab) -> None:
    """Rows 8, 9: a binary change is saved as a `GIT binary patch` with full 40-hex index lines, never as a
    "Binary files … differ" stub, and round-trips byte-exact."""
    patch = _round_trip(lab, _new_binary)
    assert b"GIT binary patch" in patch and b"Binary files" not in patch
    assert f"index {ZERO}..{_blob(BINARY)}".encode() in patch


def _stub(tree: Path, path: str, content: bytes) -> bytes:
    """A `Binary files a/PATH and b/PATH differ` diff (no --binary), made in a scratch clone of the tree so the
    lab tree has no object for `content`."""
    scratch = tree.parent / "stub-clone"
    git(tree.parent, "clone", "-q", str(tree), str(scratch))
    (scratch / path).write_bytes(content)
    git(scratch, "add", "-A")
    diff = git(scratch, "diff", "--cached", "--full-index", "--no-color", "HEAD")
    assert b"Binary files " in diff and b"GIT binary patch" not in diff
    return diff


@pytest.mark.catalogue(8)
def test_row08_binary_stub_is_refused_by_apply(lab: Lab) -> None:
    """Row 8: a "Binary files a/blob.bin and b/blob.bin differ" stub (no content) listed in a series: refused,
    naming the file, nothing changed."""
    _hand_patch(lab, "p", _stub(lab.tree, "blob.bin", BINARY))
    _refused(lab, ("apply", "s"), "patch p ", "blob.bin", "nothing was changed")
    _reads_cleanly(lab)


@pytest.mark.catalogue(8)
def test_row08_binary_stub_with_an_abbreviated_index_is_refused(lab: Lab) -> None:
    """Row 8: a stub as plain `git diff` writes it (abbreviated index line): refused, naming the file."""
    diff = _stub(lab.tree, "blob.bin", BINARY)
    short = diff.replace(ZERO.encode(), b"0000000").replace(_blob(BINARY).encode(), b"1234567")
    _hand_patch(lab, "p", short)
    _refused(lab, ("apply", "s"), "patch p ", "blob.bin")


@pytest.mark.catalogue(8)
def test_row08_binary_stub_does_not_preserve_the_file_it_names(lab: Lab) -> None:
    """Row 8: a stub names the new blob but does not hold it: the store cannot reproduce the file from it, so
    check does not count it, even when the tree's own object store happens to hold that blob."""
    patch, _ = _saved(lab, _new_binary)
    data = patch.read_bytes()
    patch.write_bytes(data[: data.index(b"GIT binary patch")] + b"Binary files /dev/null and b/blob.bin differ\n")
    _not_trusted(lab, _new_binary, "blob.bin")


@pytest.mark.catalogue(8)
def test_row08_binary_stub_is_refused_even_when_the_blob_is_at_hand(lab: Lab) -> None:
    """Row 8: a stub whose post-image blob happens to sit in the tree's object store still cannot rebuild the
    state anywhere else (another clone, after gc): apply refuses it rather than depend on a stray object."""
    patch, _ = _saved(lab, _new_binary)
    data = patch.read_bytes()
    patch.write_bytes(data[: data.index(b"GIT binary patch")] + b"Binary files /dev/null and b/blob.bin differ\n")
    _refused(lab, ("apply", "s"), "p", "blob.bin")


def _big_binary(seed: int) -> bytes:
    return _bytes(seed, 40_000)


@pytest.mark.catalogue(9)
def test_row09_binary_literal_and_delta_round_trip(lab: Lab) -> None:
    """Row 9: a new binary file (literal) and a small change to a big committed binary (delta) round-trip
    byte-exact through git's binary patches."""
    base = _big_binary(7)
    _commit(lab, {"weights.bin": base})

    def edit(tree: Path) -> None:
        changed = bytearray(base)
        changed[100:110] = b"\0" * 10
        (tree / "weights.bin").write_bytes(bytes(changed) + b"tail")
        (tree / "new.bin").write_bytes(b"\xff\xfe\0" + _bytes(2, 2000))

    patch = _round_trip(lab, edit)
    assert b"\ndelta " in patch and b"\nliteral " in patch


@pytest.mark.catalogue(10)
def test_row10_binary_patch_onto_the_wrong_pre_image_is_refused(lab: Lab) -> None:
    """Row 10: two binary patches saved independently against the same base, stacked in one series: the second
    one's pre-image is not what the first left. Refused naming the patch, the file and the hash of the contents
    found; with --3way too (a binary file cannot be merged)."""
    v0 = _big_binary(3)
    _commit(lab, {"blob.bin": v0})
    _saved(lab, lambda t: (t / "blob.bin").write_bytes(v0[:1000] + b"one"), name="a", series=None)
    _saved(lab, lambda t: (t / "blob.bin").write_bytes(v0[:2000] + b"two"), name="b", series=None)
    _series(lab, "s", "a", "b")
    result = _refused(lab, ("apply", "s"), "patch b (2 of 2", "blob.bin", "nothing was changed")
    assert _blob(v0[:1000] + b"one") in result.err, "the contents found are named"
    _refused(lab, ("apply", "s", "--3way"), "patch b (2 of 2", "blob.bin")


@pytest.mark.catalogue(10)
def test_row10_wrong_pre_image_refusal_names_both_hashes(lab: Lab) -> None:
    """Row 10: the refusal names the file, the pre-image the patch expects and the contents it found."""
    v0 = _big_binary(3)
    _commit(lab, {"blob.bin": v0})
    _saved(lab, lambda t: (t / "blob.bin").write_bytes(v0[:1000] + b"one"), name="a", series=None)
    _saved(lab, lambda t: (t / "blob.bin").write_bytes(v0[:2000] + b"two"), name="b", series=None)
    _series(lab, "s", "a", "b")
    result = _refused(lab, ("apply", "s"), "blob.bin", _blob(v0[:1000] + b"one")[:12])
    assert _blob(v0)[:12] in result.err


@pytest.mark.catalogue(11)
def test_row11_truncated_binary_patch_is_refused(lab: Lab) -> None:
    """Row 11: a GIT binary patch with base85 lines cut off: refused, nothing changed; check does not count it."""
    patch, _ = _saved(lab, _new_binary)
    data = patch.read_bytes()
    start = data.index(b"GIT binary patch\nliteral ")
    body = data[start:].split(b"\n")
    patch.write_bytes(data[:start] + b"\n".join(body[:4]) + b"\n")
    _refused(lab, ("apply", "s"), "patch p ", "nothing was changed")
    _not_trusted(lab, _new_binary, "blob.bin")


@pytest.mark.catalogue(11)
@pytest.mark.parametrize("damage", [
    (b"GIT binary patch\nliteral ", b"GIT binary patch\nbogus "),
    (b"GIT binary patch\nliteral 304", b"GIT binary patch\nliteral 999"),
])  # fmt: skip
def test_row11_unrecognized_or_wrong_size_binary_patch_is_refused(lab: Lab, damage: tuple[bytes, bytes]) -> None:
    """Row 11: an unrecognized binary hunk kind, or a literal whose declared size lies: refused."""
    patch, _ = _saved(lab, _new_binary)
    data = patch.read_bytes()
    assert damage[0] in data
    patch.write_bytes(data.replace(damage[0], damage[1]))
    _refused(lab, ("apply", "s"), "patch p ", "nothing was changed")
    _not_trusted(lab, _new_binary, "blob.bin")


@pytest.mark.catalogue(11)
def test_row11_binary_patch_with_a_flipped_base85_character_is_refused(lab: Lab) -> None:
    """Row 11: one character of the base85 data changed (a bit flip in transit): the inflated content fails its
    checks, refused; check does not count it."""
    patch, _ = _saved(lab, _new_binary)
    data = bytearray(patch.read_bytes())
    line = data.index(b"\n", data.index(b"GIT binary patch\nliteral ") + len(b"GIT binary patch\n")) + 1
    at = line + 10
    data[at] = ord("A") if data[at] != ord("A") else ord("B")
    patch.write_bytes(bytes(data))
    _refused(lab, ("apply", "s"), "patch p ", "nothing was changed")
    _not_trusted(lab, _new_binary, "blob.bin")


# --- row 12: empty patch files ----------------------------------------------------------------------------------------


@pytest.mark.catalogue(12)
def test_row12_empty_patch_file_is_an_error_not_a_no_op(lab: Lab) -> None:
    """Row 12: a 0-byte patch file in a series is never applied as an empty patch: refused naming the file;
    status, check, series and show answer without crashing."""
    (lab.store / "patches" / "p.patch").write_bytes(b"")
    _series(lab, "s", "p")
    _refused(lab, ("apply", "s"), "patches/p.patch")
    _refused(lab, ("apply", "s", "--dry-run"), "patches/p.patch")
    _reads_cleanly(lab)
    shown = lab.sm("show", "p")
    _no_crash(shown)
    assert shown.code == 3, shown
    assert_one_line_error(shown.err, "p.patch")


@pytest.mark.catalogue(12)
def test_row12_empty_patch_after_a_good_one_stops_the_whole_series(lab: Lab) -> None:
    """Row 12: a series whose second patch file is empty: the first is not applied alone."""
    _saved(lab, _model_edit, name="good")
    (lab.store / "patches" / "empty.patch").write_bytes(b"")
    _series(lab, "s", "good", "empty")
    _refused(lab, ("apply", "s"), "patches/empty.patch")


@pytest.mark.catalogue(12)
def test_row12_header_without_a_diff_is_refused(lab: Lab) -> None:
    """Row 12: a patch that has the mail header and trailers but no diff at all: refused."""
    _hand_patch(lab, "p", b"")
    _refused(lab, ("apply", "s"), "p")
    _reads_cleanly(lab)


# --- rows 13–15: modes, symlinks, type changes ------------------------------------------------------------------------


def _chmod_x(path: Path, on: bool) -> None:
    mode = path.stat().st_mode
    path.chmod(mode | 0o111 if on else mode & ~0o111)


@pytest.mark.catalogue(13)
def test_row13_mode_changes_round_trip(lab: Lab) -> None:
    """Row 13: 100644 → 100755, 100755 → 100644 and a new executable file keep their modes exactly."""
    _commit(lab, {"tool.sh": b"#!/bin/sh\necho tool\n"}, mode=0o755)

    def edit(tree: Path) -> None:
        _chmod_x(tree / "src" / "model.py", True)
        _chmod_x(tree / "tool.sh", False)
        (tree / "run.sh").write_bytes(b"#!/bin/sh\necho run\n")
        _chmod_x(tree / "run.sh", True)

    patch = _round_trip(lab, edit)
    assert b"old mode 100644\nnew mode 100755" in patch and b"old mode 100755\nnew mode 100644" in patch
    assert b"new file mode 100755" in patch
    assert os.access(lab.tree / "src" / "model.py", os.X_OK) and not os.access(lab.tree / "tool.sh", os.X_OK)


@pytest.mark.catalogue(13)
def test_row13_bogus_mode_in_a_patch_is_refused(lab: Lab) -> None:
    """Row 13: a mode line git does not know (`new mode 100666` where the saved patch said 100755): refused,
    never read as some other mode."""
    patch, _ = _saved(lab, lambda t: _chmod_x(t / "src" / "model.py", True))
    patch.write_bytes(patch.read_bytes().replace(b"new mode 100755", b"new mode 100666"))
    _refused(lab, ("apply", "s"), "p")


@pytest.mark.catalogue(13)
def test_row13_warns_when_core_filemode_false_hides_a_mode_change(lab: Lab) -> None:
    """Row 13: with `core.fileMode=false` git cannot see `chmod +x`; status warns that mode changes are hidden."""
    git(lab.tree, "config", "core.fileMode", "false")
    _chmod_x(lab.tree / "README", True)
    status = lab.sm("status")
    _no_crash(status)
    assert "fileMode" in status.out + status.err


def _symlinks(outside: Path) -> Edit:
    def edit(tree: Path) -> None:
        os.symlink("src/model.py", tree / "alias")
        os.symlink("no/such/target", tree / "dangling")
        os.symlink(str(outside / "secret.txt"), tree / "abs-outside")
        os.symlink("src", tree / "srcdir")

    return edit


@pytest.mark.catalogue(14)
def test_row14_symlinks_added_round_trip_and_are_never_followed(lab: Lab, tmp_path: Path) -> None:
    """Row 14: new symlinks (relative, dangling, absolute outside the tree, to a directory) come back as
    symlinks with the same targets; the outside file's content never enters the patch and is never touched."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"TOP-SECRET-CONTENT\n")
    before = fingerprint(outside)
    patch = _round_trip(lab, _symlinks(outside))
    assert b"new file mode 120000" in patch and b"TOP-SECRET" not in patch
    assert os.readlink(lab.tree / "abs-outside") == str(outside / "secret.txt")
    assert (lab.tree / "srcdir").is_symlink() and os.readlink(lab.tree / "dangling") == "no/such/target"
    assert changed_paths(before, fingerprint(outside)) == []


@pytest.mark.catalogue(14)
def test_row14_symlinks_retargeted_and_removed_round_trip(lab: Lab, tmp_path: Path) -> None:
    """Row 14: a committed symlink retargeted, another removed: the round trip keeps both exactly."""
    _commit(lab, {}, {"moving": "README", "doomed": "src"})

    def edit(tree: Path) -> None:
        (tree / "moving").unlink()
        os.symlink("src/model.py", tree / "moving")
        (tree / "doomed").unlink()

    patch = _round_trip(lab, edit)
    assert b"-README\n\\ No newline at end of file\n+src/model.py" in patch
    assert os.readlink(lab.tree / "moving") == "src/model.py" and not os.path.lexists(lab.tree / "doomed")


@pytest.mark.catalogue(15)
def test_row15_file_symlink_type_changes_round_trip(lab: Lab, tmp_path: Path) -> None:
    """Row 15: a file becomes a symlink to /etc/passwd, another to a file outside the tree, a committed symlink
    becomes a file: delete + create pairs that round-trip; the targets are content, never dereferenced."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"TOP-SECRET-CONTENT\n")
    _commit(lab, {}, {"was-link": "README"})

    def edit(tree: Path) -> None:
        (tree / "README").unlink()
        os.symlink("/etc/passwd", tree / "README")
        (tree / "src" / "model.py").unlink()
        os.symlink(str(outside / "secret.txt"), tree / "src" / "model.py")
        (tree / "was-link").unlink()
        (tree / "was-link").write_bytes(b"now a file\n")

    patch = _round_trip(lab, edit)
    assert b"TOP-SECRET" not in patch and b"root:" not in patch
    assert os.readlink(lab.tree / "README") == "/etc/passwd"
    assert (outside / "secret.txt").read_bytes() == b"TOP-SECRET-CONTENT\n"
    assert not (lab.tree / "was-link").is_symlink()


# --- rows 16–22: paths that escape the tree or reach git's and stackmgr's own files -----------------------------------


def _outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_bytes(b"victim\n")
    return outside


def _link_diff(path: str, target: str) -> bytes:
    return _creation(path, target.encode(), "120000")


def _deletion(path: str, content: bytes) -> bytes:
    lines = content.splitlines()
    head = f"diff --git a/{path} b/{path}\ndeleted file mode 100644\nindex {_blob(content)}..{ZERO}\n"
    hunk = f"--- a/{path}\n+++ /dev/null\n@@ -1,{len(lines)} +0,0 @@\n"
    return (head + hunk).encode() + b"".join(b"-" + ln + b"\n" for ln in lines)


@pytest.mark.catalogue(16)
@pytest.mark.parametrize("target", ["../outside", "ABSOLUTE"])
@pytest.mark.parametrize("action", ["create", "modify", "delete"])
def test_row16_patch_creating_a_symlink_then_writing_through_it_is_refused(
    lab: Lab, tmp_path: Path, target: str, action: str
) -> None:
    """Row 16 (CVE-2023-23946 shape): one patch creates `ln -> outside` and then creates, modifies or deletes a
    file below `ln`: refused before anything is written, inside or outside the tree; check does not count the
    patch as preserving the symlink either."""
    outside = _outside(tmp_path)
    link = str(outside) if target == "ABSOLUTE" else target
    through = {
        "create": _creation("ln/pwned", b"pwned\n"),
        "modify": _modification("ln/victim.txt", b"victim\n", b"pwned\n"),
        "delete": _deletion("ln/victim.txt", b"victim\n"),
    }[action]
    _hand_patch(lab, "p", _link_diff("ln", link) + through)
    _refused(lab, ("apply", "s"), "patch p ", "ln/", also=(outside,))
    _refused(lab, ("apply", "s", "--3way"), "patch p ", also=(outside,))
    assert (outside / "victim.txt").read_bytes() == b"victim\n" and not (outside / "pwned").exists()
    _not_trusted(lab, lambda t: os.symlink(link, t / "ln"), "ln")


@pytest.mark.catalogue(16)
def test_row16_symlink_from_an_earlier_patch_of_the_series_is_not_written_through(lab: Lab, tmp_path: Path) -> None:
    """Row 16: the symlink comes from a saved patch earlier in the series, the write through it from a later one:
    the series is refused as a whole."""
    outside = _outside(tmp_path)
    _saved(lab, lambda t: os.symlink("../outside", t / "ln"), name="link", series=None)
    _hand_patch(lab, "evil", _creation("ln/pwned", b"pwned\n"), series=None)
    _series(lab, "s", "link", "evil")
    _refused(lab, ("apply", "s"), "evil", also=(outside,))
    assert not (outside / "pwned").exists()


@pytest.mark.catalogue(17)
@pytest.mark.parametrize("action", ["create", "modify", "delete"])
def test_row17_patch_writing_below_a_committed_symlinked_directory_is_refused(
    lab: Lab, tmp_path: Path, action: str
) -> None:
    """Row 17: the base has `ext -> ../outside`; a patch creates, modifies or deletes `ext/…`: refused, the
    directory outside is untouched; check and status do not crash on it."""
    outside = _outside(tmp_path)
    _commit(lab, {}, {"ext": "../outside"})
    diff = {
        "create": _creation("ext/pwned", b"pwned\n"),
        "modify": _modification("ext/victim.txt", b"victim\n", b"pwned\n"),
        "delete": _deletion("ext/victim.txt", b"victim\n"),
    }[action]
    _hand_patch(lab, "p", diff)
    _refused(lab, ("apply", "s"), "patch p ", "ext/", also=(outside,))
    _refused(lab, ("apply", "s", "--3way"), "patch p ", also=(outside,))
    _reads_cleanly(lab)
    assert (outside / "victim.txt").read_bytes() == b"victim\n"


@pytest.mark.catalogue(18)
@pytest.mark.parametrize("path", ["../evil", "src/../../evil", "./README", "src//evil", "src/./evil", ".."])
def test_row18_dot_dot_and_odd_components_are_refused(lab: Lab, tmp_path: Path, path: str) -> None:
    """Row 18: `..`, `.` or empty path components in a patch: refused naming the path, nothing created inside
    or next to the tree; status and check answer."""
    _hand_patch(lab, "p", _creation(path, b"evil\n"))
    _refused(lab, ("apply", "s"), "patch p ", also=(tmp_path / "cwd",))
    assert not (tmp_path / "evil").exists()
    _reads_cleanly(lab)


def _traditional_creation(path: str, content: bytes) -> bytes:
    lines = content.splitlines()
    return f"--- /dev/null\n+++ {path}\n@@ -0,0 +1,{len(lines)} @@\n".encode() + b"".join(
        b"+" + ln + b"\n" for ln in lines
    )


@pytest.mark.catalogue(19)
def test_row19_absolute_path_in_a_git_header_is_refused(lab: Lab, tmp_path: Path) -> None:
    """Row 19: `diff --git a//abs/evil b//abs/evil`: refused, nothing written anywhere."""
    target = str(tmp_path / "abs_evil")
    _hand_patch(lab, "p", _creation(target, b"evil\n"))  # a//tmp/…/abs_evil: -p1 leaves /tmp/…/abs_evil
    _refused(lab, ("apply", "s"), "patch p ")
    assert not Path(target).exists()
    _reads_cleanly(lab)


@pytest.mark.catalogue(19)
def test_row19_absolute_path_in_a_traditional_header_is_not_re_rooted(lab: Lab, tmp_path: Path) -> None:
    """Row 19: a plain `diff -u` style `+++ /tmp/…/abs_evil` (no `diff --git`): `-p1` would quietly re-root it
    inside the tree; stackmgr refuses it itself: a stored patch is a git diff, and this one is not."""
    target = str(tmp_path / "abs_evil")
    _hand_patch(lab, "p", _traditional_creation(target, b"evil\n"))
    _refused(lab, ("apply", "s"), "patch p ", "no git diff")
    assert not Path(target).exists()


@pytest.mark.catalogue(20)
@pytest.mark.parametrize(("path", "mode"), [
    (".git/config", "100644"),
    (".git/hooks/post-checkout", "100755"),
    (".GIT/config", "100644"),
    (".Git/HEAD", "100644"),
    ("src/.git/config", "100644"),
    ("git~1/config", "100644"),
    (".git./config", "100644"),
    (".git /config", "100644"),
    (".gitmodules", "120000"),
])  # fmt: skip
def test_row20_git_directory_paths_and_gitmodules_symlinks_are_refused(lab: Lab, path: str, mode: str) -> None:
    """Row 20: a patch creating `.git/…` (any case, NTFS aliases, nested) or `.gitmodules` as a symlink:
    refused, nothing written (the hook would run on the next checkout)."""
    content = b"../outside" if mode == "120000" else b"[core]\n\tfsmonitor = touch /tmp/pwned\n"
    _hand_patch(lab, "p", _creation(path, content, mode))
    _refused(lab, ("apply", "s"), "patch p ")
    assert not (lab.tree / ".git" / "hooks" / "post-checkout").exists()
    _reads_cleanly(lab)


@pytest.mark.catalogue(20)
def test_row20_hfs_alias_of_git_directory_is_refused(lab: Lab) -> None:
    """Row 20: `.g<ZWNJ>it/config` is `.git/config` on HFS+ (a teammate's Mac pulling the store): refused."""
    _hand_patch(lab, "p", _creation(".g\u200cit/config", b"[core]\n\tfsmonitor = touch /tmp/pwned\n"))
    _refused(lab, ("apply", "s"), "patch p ")


@pytest.mark.catalogue(20, 21)
def test_row21_patch_into_stackmgr_state_inside_git_dir_is_refused(lab: Lab) -> None:
    """Rows 20, 21: stackmgr's private state inside a tree lives in `.git/stackmgr/`; a patch that writes there
    (its snapshot index) is refused."""
    _hand_patch(lab, "p", _creation(".git/stackmgr/index", b"DIRC garbage\n"))
    _refused(lab, ("apply", "s"), "patch p ")


@pytest.mark.catalogue(21)
def test_row21_patch_into_the_store_metadata_of_a_tree_that_holds_the_store_is_refused(tmp_path: Path) -> None:
    """Row 21: the store is itself a registered tree (the product's repository is the lab's store): a patch
    creating `.stackmgr/applied.json` (stackmgr's own, git-ignored metadata) is refused."""
    root = make_repo(tmp_path / "selfhost", {"README": "store and tree\n"})
    assert run_stackmgr("init", str(root)).code == 0
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "store")
    lab = Lab(root, root)
    assert lab.sm("tree", "add", "vllm", str(root)).code == 0
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "tree registered")
    _hand_patch(lab, "p", _creation(".stackmgr/applied.json", b'{"schema": 1, "trees": {}}\n'))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "patch and series")
    assert lab.sm("check").code == 0
    _refused(lab, ("apply", "s"), "patch p ", ".stackmgr")


@pytest.mark.catalogue(22)
def test_row22_failed_apply_writes_no_reject_or_backup_files(lab: Lab, tmp_path: Path) -> None:
    """Row 22: an ignored `README.rej` symlink pointing outside sits in the tree; a patch that does not apply
    (also with --3way) writes no `.rej`/`.orig` file, never through that symlink."""
    outside = _outside(tmp_path)
    (lab.tree / ".git" / "info" / "exclude").write_text("*.rej\n*.orig\n")
    os.symlink(str(outside / "victim.txt"), lab.tree / "README.rej")
    os.symlink(str(outside / "victim.txt"), lab.tree / "README.orig")
    _hand_patch(lab, "p", _modification("README", b"not the base\n", b"pwned\n"))
    _refused(lab, ("apply", "s"), "patch p ", "README", also=(outside,))
    _refused(lab, ("apply", "s", "--3way"), "patch p ", also=(outside,))
    assert (outside / "victim.txt").read_bytes() == b"victim\n"
    assert sorted(p.name for p in lab.tree.iterdir()) == [".git", "README", "README.orig", "README.rej", "src"]


# --- rows 23, 24: renames ---------------------------------------------------------------------------------------------


@pytest.mark.catalogue(23)
def test_row23_renames_are_saved_without_rename_detection_and_round_trip(lab: Lab) -> None:
    """Row 23: a rename with an edit (`mv` then change) is saved as delete + create (deterministic, no
    similarity index) and round-trips."""

    def edit(tree: Path) -> None:
        (tree / "src" / "model.py").rename(tree / "src" / "core.py")
        (tree / "src" / "core.py").write_text("def f():\n    return 3\n")

    patch = _round_trip(lab, edit)
    assert b"rename from" not in patch and b"similarity index" not in patch
    assert b"deleted file mode 100644" in patch and b"new file mode 100644" in patch


def _scratch_diff(lab: Lab, edit: Edit, *flags: str) -> tuple[bytes, str]:
    """A full-index binary `git diff` of `edit` made with `flags` in a scratch clone; and the tree id it leads to."""
    scratch = lab.tree.parent / "scratch-clone"
    git(lab.tree.parent, "clone", "-q", str(lab.tree), str(scratch))
    edit(scratch)
    git(scratch, "add", "-A")
    diff = git(scratch, "diff", "--cached", "--full-index", "--binary", "--no-color", *flags, "HEAD")
    return diff, git_text(scratch, "write-tree")


def _swap(tree: Path) -> None:
    a, b = (tree / "a.txt").read_bytes(), (tree / "b.txt").read_bytes()
    (tree / "a.txt").write_bytes(b)
    (tree / "b.txt").write_bytes(a)


_RENAME_CASES = {
    "rename": (lambda t: git(t, "mv", "src/model.py", "src/core.py"), ("-M",), b"rename from src/model.py"),
    "copy": (lambda t: (t / "src" / "copy.py").write_bytes((t / "src" / "model.py").read_bytes()),
             ("-C", "--find-copies-harder"), b"copy from src/model.py"),
    "swap": (_swap, ("-B", "-M"), b"rename from a.txt"),
}  # fmt: skip


@pytest.mark.catalogue(23)
@pytest.mark.parametrize("case", sorted(_RENAME_CASES))
def test_row23_rename_copy_and_swap_patches_apply_to_the_exact_tree(lab: Lab, case: str) -> None:
    """Row 23: patches with `rename from`/`copy from` and a criss-cross swap (as `git format-patch -M -C -B` makes
    them, what `import` will meet) apply through a series to exactly the tree git meant; none is applied file by
    file sequentially."""
    filler = b"".join(b"line %d of a long enough file\n" % i for i in range(20))
    _commit(lab, {"a.txt": b"AAAA\n" + filler, "b.txt": b"BBBB\n" + filler[::-1]})
    edit, flags, marker = _RENAME_CASES[case]
    diff, wanted = _scratch_diff(lab, edit, *flags)
    assert marker in diff
    _hand_patch(lab, "p", diff)
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert lab.worktree_id() == wanted


@pytest.mark.catalogue(23)
def test_row23_tree_built_from_a_rename_patch_counts_as_preserved(lab: Lab) -> None:
    """Row 23: the store reproduces a tree built from a rename patch, so check says 0 and reset is allowed."""
    diff, wanted = _scratch_diff(lab, lambda t: git(t, "mv", "src/model.py", "src/core.py"), "-M")
    _hand_patch(lab, "p", diff)
    assert lab.sm("apply", "s").code == 0
    assert lab.worktree_id() == wanted
    check = lab.sm("check", "-v")
    assert check.code == 0, check.out


def _case_sensitive(directory: Path) -> bool:
    probe = directory / "CaseProbe"
    probe.write_text("x")
    try:
        return not (directory / "caseprobe").exists()
    finally:
        probe.unlink()


@pytest.mark.catalogue(24)
def test_row24_case_only_rename_round_trips_or_is_refused(lab: Lab, tmp_path: Path) -> None:
    """Row 24: `README` → `Readme` (and `src/model.py` → `src/Model.py`): round-trips on a case-sensitive
    filesystem; on a case-insensitive one it is refused, never half-applied."""

    def edit(tree: Path) -> None:
        git(tree, "mv", "README", "Readme")
        git(tree, "mv", "src/model.py", "src/Model.py")

    if not _case_sensitive(tmp_path):
        edit(lab.tree)
        result = lab.sm("save", "rt", "--series", "rt", "-m", "case")
        assert result.code in (0, 3) and "Traceback" not in result.err
        return
    _round_trip(lab, edit)
    assert sorted(os.listdir(lab.tree)) == [".git", "Readme", "src"]
    assert os.listdir(lab.tree / "src") == ["Model.py"]


# --- rows 27, 28: deletions and empty files ---------------------------------------------------------------------------


@pytest.mark.catalogue(27)
def test_row27_deletion_whose_pre_image_differs_is_refused(lab: Lab) -> None:
    """Row 27: patch a changes README, patch b (saved on the base) deletes README as it was there: stacked, b's
    deletion names content that is no longer there. Refused, naming b and README; --3way too."""
    _saved(lab, lambda t: (t / "README").write_text("edited by a\n"), name="a", series=None)
    _saved(lab, lambda t: (t / "README").unlink(), name="b", series=None)
    _series(lab, "s", "a", "b")
    _refused(lab, ("apply", "s"), "patch b (2 of 2", "README", "nothing was changed")
    _refused(lab, ("apply", "s", "--3way"), "README")


@pytest.mark.catalogue(27)
def test_row27_hand_written_deletion_of_different_content_is_refused(lab: Lab) -> None:
    """Row 27: a deletion of `README` whose `-` lines are not the base's README: refused, README kept."""
    _hand_patch(lab, "p", _deletion("README", b"somebody else's readme\n"))
    _refused(lab, ("apply", "s"), "patch p ", "README", "nothing was changed")
    assert (lab.tree / "README").read_bytes() == b"hello\n"


@pytest.mark.catalogue(28)
def test_row28_empty_files_created_emptied_filled_and_deleted_round_trip(lab: Lab) -> None:
    """Row 28: create an empty file, delete a committed empty file, empty a file, fill an empty one: header-only
    patch sections that round-trip."""
    _commit(lab, {"gone.txt": b"", "fill.txt": b""})

    def edit(tree: Path) -> None:
        (tree / "empty.txt").write_bytes(b"")
        (tree / "gone.txt").unlink()
        (tree / "README").write_bytes(b"")
        (tree / "fill.txt").write_bytes(b"now something\n")

    patch = _round_trip(lab, edit)
    section = patch[patch.index(b"diff --git a/empty.txt") :]
    section = section[: section.index(b"\ndiff --git", 1) + 1] if b"\ndiff --git" in section else section
    assert section == f"diff --git a/empty.txt b/empty.txt\nnew file mode 100644\nindex {ZERO}..{_blob(b'')}\n".encode()
    assert (lab.tree / "empty.txt").read_bytes() == b"" and not (lab.tree / "gone.txt").exists()


@pytest.mark.catalogue(28)
def test_row28_hand_written_header_only_create_and_delete_apply(lab: Lab) -> None:
    """Row 28: header-only sections written by hand (as `git diff` writes them) create and delete empty files."""
    _commit(lab, {"gone.txt": b""})
    delete = f"diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\nindex {_blob(b'')}..{ZERO}\n".encode()
    _hand_patch(lab, "p", _creation("empty.txt", b"") + delete)
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert (lab.tree / "empty.txt").read_bytes() == b"" and not (lab.tree / "gone.txt").exists()
    assert lab.sm("check").code == 0


# --- row 36: oversized patches ----------------------------------------------------------------------------------------


GIB = 1 << 30


def _apply_huge_patch(lab: Lab) -> Result:
    """`apply s` where patches/p.patch is a real patch followed by a sparse hole up to 1 GiB + 4 KiB; asserts
    the refusal changed nothing (the huge file itself is checked by size, not read into the fingerprint)."""
    patch, _ = _saved(lab, _model_edit)
    with open(patch, "r+b") as f:
        f.truncate(GIB + 4096)
    try:
        roots = (lab.tree, lab.store / "series", lab.store / "links")
        before = fingerprint(*roots)
        result = lab.sm("apply", "s")
        assert result.code == 3, result
        assert_one_line_error(result.err, "p")
        _no_crash(result)
        assert changed_paths(before, fingerprint(*roots), MAY_TOUCH) == []
        assert patch.stat().st_size == GIB + 4096 and os.listdir(lab.store / "patches") == ["p.patch"]
        return result
    finally:
        patch.unlink()


@pytest.mark.catalogue(36)
def test_row36_patch_over_one_gib_is_refused(lab: Lab) -> None:
    """Row 36: a patch file over 1 GiB (sparse: a real header and diff, then a hole) is refused with one line,
    exit 3, nothing changed."""
    _apply_huge_patch(lab)


@pytest.mark.catalogue(36)
def test_row36_oversized_patch_refusal_says_it_is_too_large(lab: Lab) -> None:
    """Row 36: the refusal says the patch is too large (ideally before reading it whole)."""
    result = _apply_huge_patch(lab)
    assert "too large" in result.err or "too big" in result.err


# --- rows 37–39: already applied, reversed, offset and fuzz -----------------------------------------------------------


@pytest.mark.catalogue(37)
def test_row37_patch_already_applied_by_an_earlier_one_is_reported_and_nothing_changes(lab: Lab) -> None:
    """Row 37: patch q repeats part of patch p (saved independently on the same base); in series [p, q], q is
    already applied: refused as such (forward fails, reverse applies), dry run too, nothing changed."""
    _saved(lab, _two_line_edit, name="p", series=None)
    _saved(lab, lambda t: (t / "README").write_text("changed\n"), name="q", series=None)
    _series(lab, "s", "p", "q")
    _refused(lab, ("apply", "s"), "patch q (2 of 2", "already applied", "nothing was changed")
    _refused(lab, ("apply", "s", "--dry-run"), "patch q", "already applied")


@pytest.mark.catalogue(37)
def test_row37_applying_the_series_the_tree_already_holds_changes_nothing(lab: Lab) -> None:
    """Row 37: `apply s` on a tree where s is applied already: exit 0, says the tree is already there, and no
    file of the working tree, its index or HEAD changes."""
    _, wanted = _saved(lab, _two_line_edit)
    assert lab.sm("apply", "s").code == 0
    files, index, head = _files(lab.tree), (lab.tree / ".git" / "index").read_bytes(), _head(lab)
    again = lab.sm("apply", "s")
    assert again.code == 0, again.err
    assert "already there" in again.out
    assert _files(lab.tree) == files and lab.worktree_id() == wanted and _head(lab) == head
    assert (lab.tree / ".git" / "index").read_bytes() == index


@pytest.mark.catalogue(38)
def test_row38_reversed_patch_is_refused_never_reversed_automatically(lab: Lab) -> None:
    """Row 38: the reverse of a change (old and new swapped, as `diff new old` writes it) listed for the base:
    its pre-image is not there. Refused; stackmgr never reverses a patch on its own; README stays as it was."""
    _saved(lab, lambda t: (t / "README").write_text("changed\n"), series=None)
    _hand_patch(lab, "rev", _modification("README", b"changed\n", b"hello\n"))
    _refused(lab, ("apply", "s"), "patch rev ", "README", "nothing was changed")
    assert (lab.tree / "README").read_bytes() == b"hello\n"


@pytest.mark.catalogue(38)
def test_row38_patch_then_its_reverse_is_a_legitimate_series(lab: Lab) -> None:
    """Row 38: [p, reverse of p] is a consistent series: it applies, and the result is the base."""
    _saved(lab, lambda t: (t / "README").write_text("changed\n"), series=None)
    _hand_patch(lab, "rev", _modification("README", b"changed\n", b"hello\n"), series=None)
    _series(lab, "s", "p", "rev")
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert lab.worktree_id() == git_text(lab.tree, "rev-parse", "HEAD^{tree}")


_BLOCK = b"block:\n    a = 1\n    b = 2\n    x = 1\n    c = 3\n    d = 4\nend\n"
_FILLER = b"".join(b"unique filler line %d\n" % i for i in range(20))
_DUP = _BLOCK + _FILLER + _BLOCK  # two identical blocks: lines 1-7 and 28-34


@pytest.mark.catalogue(39)
@pytest.mark.parametrize(("context", "damaged"), [
    (b" def f():\n", b" def g():\n"),
    (b" def f():\n", b" def f(): \n"),
])  # fmt: skip
def test_row39_context_that_needs_fuzz_or_whitespace_leniency_is_refused(
    lab: Lab, context: bytes, damaged: bytes
) -> None:
    """Row 39: a context line that differs from the base (another word, or trailing whitespace): GNU patch would
    fuzz it in, `--ignore-whitespace` would accept it; stackmgr refuses, --3way included (no fuzz, ever)."""
    patch, _ = _saved(lab, _model_edit)
    data = patch.read_bytes()
    assert data.count(context) == 1
    patch.write_bytes(data.replace(context, damaged))
    _refused(lab, ("apply", "s"), "patch p ", "src/model.py", "nothing was changed")
    _refused(lab, ("apply", "s", "--3way"), "patch p ")


@pytest.mark.catalogue(39)
def test_row39_hunk_landing_on_the_wrong_duplicate_context_is_refused(lab: Lab) -> None:
    """Row 39: a saved change to the second of two identical blocks, its hunk header edited to line 1: git finds
    the same context at line 1 and changes the first block. The resulting file is not the post-image the patch
    records (full blob ids): refused."""
    _commit(lab, {"dup.py": _DUP})
    second_block_x = _BLOCK + _FILLER + _BLOCK.replace(b"x = 1", b"x = 2")
    patch, _ = _saved(lab, lambda t: (t / "dup.py").write_bytes(second_block_x))
    data = patch.read_bytes()
    assert b"@@ -28,7 +28,7 @@" in data
    patch.write_bytes(data.replace(b"@@ -28,7 +28,7 @@", b"@@ -1,7 +1,7 @@"))
    _refused(lab, ("apply", "s"), "patch p ", "dup.py")
    assert (lab.tree / "dup.py").read_bytes() == _DUP


@pytest.mark.catalogue(39)
def test_row39_patch_whose_hunks_contradict_its_index_lines_is_not_trusted(lab: Lab) -> None:
    """Row 39: the same edited patch (its hunk now lands on the first block): check does not count it as
    preserving the change its index line names (the second block changed)."""
    _commit(lab, {"dup.py": _DUP})
    second_block_x = _BLOCK + _FILLER + _BLOCK.replace(b"x = 1", b"x = 2")
    patch, _ = _saved(lab, lambda t: (t / "dup.py").write_bytes(second_block_x))
    patch.write_bytes(patch.read_bytes().replace(b"@@ -28,7 +28,7 @@", b"@@ -1,7 +1,7 @@"))
    _not_trusted(lab, lambda t: (t / "dup.py").write_bytes(second_block_x), "dup.py")


@pytest.mark.catalogue(39)
def test_row39_stacked_patch_applied_at_an_offset_to_the_wrong_block_is_refused(lab: Lab) -> None:
    """Row 39: series s = [a: drop the filler between two identical blocks, b: change the second block], saved
    stacked. Someone removes a from the series; b alone on the base finds the first block nearer (offset -7)
    and would change it: the result is not what b records, so it is refused."""
    _commit(lab, {"dup.py": _DUP})
    (lab.tree / "dup.py").write_bytes(_BLOCK + _BLOCK)
    assert lab.sm("save", "a", "--series", "s", "-m", "a").code == 0
    (lab.tree / "dup.py").write_bytes(_BLOCK + _BLOCK.replace(b"x = 1", b"x = 2"))
    assert lab.sm("save", "b", "--series", "s", "-m", "b").code == 0
    assert b"@@ -8,7 +8,7 @@" in (lab.store / "patches" / "b.patch").read_bytes()
    assert lab.sm("reset").code == 0
    assert lab.sm("series", "remove", "s", "a").code == 0
    _refused(lab, ("apply", "s"), "patch b ", "dup.py")
    assert (lab.tree / "dup.py").read_bytes() == _DUP


@pytest.mark.catalogue(39)
def test_row39_stacked_series_rebuilds_exactly_the_recorded_tree(lab: Lab) -> None:
    """Row 39: the same two-block file, a stacked series [a, b] saved with `save --series`: apply rebuilds the
    exact tree that was saved (tree id), and status says the applied series matches."""
    _commit(lab, {"dup.py": _DUP})
    (lab.tree / "dup.py").write_bytes(_BLOCK + _BLOCK)
    assert lab.sm("save", "a", "--series", "s", "-m", "a").code == 0
    (lab.tree / "dup.py").write_bytes(_BLOCK + _BLOCK.replace(b"x = 1", b"x = 2"))
    wanted = lab.worktree_id()
    assert lab.sm("save", "b", "--series", "s", "-m", "b").code == 0
    assert lab.sm("reset").code == 0
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert lab.worktree_id() == wanted
    status = json.loads(lab.sm("--json", "status").out)["trees"][0]
    assert status["applied"]["matches"] is True
