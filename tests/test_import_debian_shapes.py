"""Shapes of real Debian quilt patches that quilt (GNU patch) applies and `import` must take the same way: each
test's tree is checked against `quilt push -a` of the same series where quilt is installed (CI installs it)."""

from __future__ import annotations

import functools
import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import Lab, commit
from tests.test_import import imp
from tests.test_import_creation_hunks import quilt_series


def _imported_and_applied_as_quilt_does(lab: Lab, tmp_path: Path, quilt: Path) -> str:
    """Import the series, apply it, and check the tree against quilt's; the tree id and what import said."""
    result = imp(lab, str(quilt), "--series", "pkg")
    assert result.code == 0, result.err
    applied = lab.sm("apply", "pkg")
    assert applied.code == 0, applied.err
    wanted = lab.worktree_id()
    assert lab.sm("reset").code == 0
    if shutil.which("quilt"):
        env = dict(os.environ, QUILT_PATCHES=str(quilt), QUILT_PC=str(tmp_path / "pc"))
        subprocess.run(["quilt", "--quiltrc", "-", "push", "-a", "-q"], cwd=lab.tree, env=env, check=True,
                       capture_output=True, stdin=subprocess.DEVNULL)  # fmt: skip
        assert lab.worktree_id() == wanted
    return wanted + "\n" + result.err


A_DIFF = b"""diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-one
+ONE
"""

TRIMMED = (
    b"""From: A U Thor <a@example.com>
Subject: [PATCH] fix a (backport: the change to b dropped)

---
 a.txt | 2 +-
 b.txt | 2 +-
 2 files changed, 2 insertions(+), 2 deletions(-)

"""
    + A_DIFF
)


@pytest.mark.regression("a security backport that dropped a file of the upstream mail and kept its diffstat was "
                        "refused as truncated (jq, sqlite3, cyrus-sasl2, cdparanoia in Debian)")  # fmt: skip
def test_a_quilt_patch_whose_diffstat_lists_files_it_dropped_is_applied(lab: Lab, tmp_path: Path) -> None:
    commit(lab.tree, {"a.txt": "one\n", "b.txt": "two\n"}, "two files")
    before = lab.worktree_id()
    said = _imported_and_applied_as_quilt_does(lab, tmp_path, quilt_series(tmp_path, {"CVE-1.patch": TRIMMED}))
    assert said.split("\n")[0] != before


SQUASHED = (
    b"""From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001
From: A U Thor <a@example.com>
Subject: [PATCH] first upstream fix

From 2222222222222222222222222222222222222222 Mon Sep 17 00:00:00 2001
From: A U Thor <a@example.com>
Subject: [PATCH] second upstream fix

---
"""
    + A_DIFF
    + b"""diff --git a/b.txt b/b.txt
--- a/b.txt
+++ b/b.txt
@@ -1 +1 @@
-two
+TWO
"""
)


@pytest.mark.regression("a quilt patch squashing two upstream commits' headers above one diff was split into "
                        "mails, the first 'not a patch' (libwebp's CVE-2023-4863.patch, lcms2)")  # fmt: skip
def test_a_quilt_patch_with_two_mail_headers_is_one_patch(lab: Lab, tmp_path: Path) -> None:
    commit(lab.tree, {"a.txt": "one\n", "b.txt": "two\n"}, "two files")
    _imported_and_applied_as_quilt_does(lab, tmp_path, quilt_series(tmp_path, {"CVE-2023-4863.patch": SQUASHED}))
    assert [p.name for p in (lab.store / "patches").glob("*.patch")] == ["CVE-2023-4863.patch"]


def test_a_quilt_series_listing_no_patch_is_refused_in_one_line_and_makes_noquilt_series(
    lab: Lab, tmp_path: Path
) -> None:
    quilt = tmp_path / "debian" / "patches"
    quilt.mkdir(parents=True)
    (quilt / "series").write_text("# nothing to patch in this release\n")
    result = imp(lab, str(quilt), "--series", "pkg")
    assert result.code == 3 and result.out == ""
    assert result.err.startswith(f"stackmgr: nothing to import: the quilt series in {quilt} lists no patch; no series")
    assert result.err.count("\n") == 1 and not (lab.store / "series" / "pkg").exists()


OFFSET_TOP = b"""--- a/Makefile.obexd
+++ b/Makefile.obexd
@@ -1,6 +1,7 @@
 l1
 l2
 l3
+NEW
 l4
 l5
 l6
"""


@pytest.mark.regression(
    "a hunk at line 1 whose file gained a line on top was refused: git pins it to the start, GNU patch applies it "
    "one line lower (bluez's allow-using-obexd-without-systemd-in-the-user-sessio.patch)"
)
def test_a_hunk_at_line_one_applies_where_its_lines_moved_as_gnu_patch_does(lab: Lab, tmp_path: Path) -> None:
    commit(lab.tree, {"Makefile.obexd": "# SPDX\n# more\nl1\nl2\nl3\nl4\nl5\nl6\nl7\n"}, "a new header on top")
    said = _imported_and_applied_as_quilt_does(lab, tmp_path, quilt_series(tmp_path, {"obexd.patch": OFFSET_TOP}))
    assert "a hunk of Makefile.obexd that git would pin to the file's start or end is applied where its lines" in said


ZERO_CONTEXT = b"""Subject: use bzero

diff --git a/lib/util.c b/lib/util.c
--- a/lib/util.c
+++ b/lib/util.c
@@ -5 +5 @@
-5
+FIVE
"""


@pytest.mark.regression(
    "a diff -U0 hunk in the middle of a file was refused: git pins a hunk without context below it to the file's "
    "end (samba's use-bzero-instead-of-memset_s.diff)"
)
def test_a_zero_context_hunk_applies_where_its_line_is_as_gnu_patch_does(lab: Lab, tmp_path: Path) -> None:
    commit(lab.tree, {"lib/util.c": "".join(f"{n}\n" for n in range(1, 11))}, "ten lines")
    _imported_and_applied_as_quilt_does(lab, tmp_path, quilt_series(tmp_path, {"bzero.diff": ZERO_CONTEXT}))
    assert lab.sm("apply", "pkg").code == 0
    assert (lab.tree / "lib" / "util.c").read_text() == "".join(f"{n}\n" for n in range(1, 11)).replace("5\n", "FIVE\n")


def test_a_hunk_git_finds_where_it_pins_it_is_left_byte_for_byte(lab: Lab, tmp_path: Path) -> None:
    from stackmgr.incoming.gnu_patch import unpin_hunks

    content = b"".join(b"%d\n" % n for n in range(1, 11))
    at_start = b"--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n 1\n-2\n+TWO\n 3\n"
    at_end = b"--- a/f\n+++ b/f\n@@ -9,2 +9,3 @@\n 9\n 10\n+11\n"
    nowhere = b"--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-x\n+y\n z\n"
    for diff in (at_start, at_end, nowhere):
        assert unpin_hunks(diff, 1, lambda _p: content) == (diff, [], [])


NUL_IN_HUNK = (
    b"Subject: add a crash reproducer\n\n---\ndiff --git a/poc b/poc\nnew file mode 100644\nindex 0000000..1111111\n"
    b"--- /dev/null\n+++ b/poc\n@@ -0,0 +1,2 @@\n+a\x00b\n+c\n"
)


@pytest.mark.regression(
    "a NUL byte inside a text hunk (a test file vim's CVE-2023-4781.patch adds; libsoup3) was refused as 'a binary "
    "file'; git apply and quilt take it"
)
def test_a_nul_byte_inside_a_text_hunk_is_a_patch(lab: Lab, tmp_path: Path) -> None:
    _imported_and_applied_as_quilt_does(lab, tmp_path, quilt_series(tmp_path, {"CVE-2023-4781.patch": NUL_IN_HUNK}))
    assert lab.sm("apply", "pkg").code == 0 and (lab.tree / "poc").read_bytes() == b"a\x00b\nc\n"


def _edited(rnd: random.Random) -> tuple[bytes, bytes, bytes]:
    """A random small file of few distinct lines (so hunks match in several places), a diff of one or two random
    edits of it with 0, 1 or 3 lines of context, and the file the diff is applied to: the same with up to three
    lines put on top (every hunk moves)."""
    alphabet = [b"a\n", b"b\n", b"c\n", b"\n"]
    lines = [rnd.choice(alphabet) for _ in range(rnd.randint(3, 14))]
    new = list(lines)
    for _ in range(rnd.randint(1, 2)):
        op, i = rnd.choice(["insert", "delete", "change"]), rnd.randint(0, len(new))
        if op == "insert":
            new.insert(i, b"X\n")
        elif i < len(new):
            new[i : i + 1] = [] if op == "delete" else [b"Y\n"]
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "a").mkdir()
        (Path(d) / "b").mkdir()
        (Path(d) / "a" / "f").write_bytes(b"".join(lines))
        (Path(d) / "b" / "f").write_bytes(b"".join(new))
        context = rnd.choice([0, 1, 3])
        diff = subprocess.run(["diff", f"-U{context}", "a/f", "b/f"], cwd=d, capture_output=True).stdout
    on_top = b"".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 3)))
    return diff, b"".join(lines), on_top + b"".join(lines)


def _same(content: bytes, _path: bytes) -> bytes:
    return content


def _applied(tool: list[str], content: bytes, diff: bytes) -> bytes | None:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "f").write_bytes(content)
        subprocess.run(["git", "init", "-q"], cwd=d, check=True)
        done = subprocess.run(tool, cwd=d, input=diff, capture_output=True)
        return (Path(d) / "f").read_bytes() if done.returncode == 0 else None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
def test_hunks_git_would_pin_land_where_gnu_patch_puts_them_on_random_edits() -> None:
    """Seeded random edits of small repetitive files, each diff applied to the file moved down by lines put on
    top: GNU patch (`patch -F0`, quilt's program) against `git apply` of the diff as `unpin_hunks` rewrites it.
    git alone gave 42 different files where both applied (a `diff -U0` insertion added at the end, a hunk at
    line 1 pinned there, a hunk found from its own line where GNU patch looks from where the one before it moved)
    and refused 119 that GNU patch applied; rewritten, none differs and 21 are refused (GNU patch needs no fuzz
    with -F0, but git finds no place it would take)."""
    from stackmgr.incoming.gnu_patch import unpin_hunks

    rnd = random.Random(1)
    differ = refused = both = 0
    for _ in range(400):
        diff, _old, content = _edited(rnd)
        if not diff:
            continue
        gnu = _applied(["patch", "-s", "-F0", "-p1", "--no-backup-if-mismatch", "-r", "-"], content, diff)
        rewritten, _paths, _unsure = unpin_hunks(diff, 1, functools.partial(_same, content))
        ours = _applied(["git", "apply", "-"], content, rewritten)
        differ += gnu is not None and ours is not None and gnu != ours
        refused += gnu is not None and ours is None
        both += gnu is not None and ours is not None
        assert not (gnu is None and ours is not None), "git applies what GNU patch refuses"
    assert differ == 0 and refused <= 25 and both >= 290, (differ, refused, both)


FIRST = b"--- a/f\n+++ b/f\n@@ -5,3 +5,3 @@\n c\n-d\n+D\n e\n"
SECOND_U0 = b"--- a/f\n+++ b/f\n@@ -3 +3 @@\n-x\n+y\n"


def test_a_zero_context_hunk_in_a_file_a_patch_above_changed_lands_where_quilt_puts_it(
    lab: Lab, tmp_path: Path
) -> None:
    """The file as the patches above leave it is asked (not the base's, nor left to git, which would pin the
    hunk to the file's end and change its last `x`)."""
    commit(lab.tree, {"f": "a\nb\nx\nc\nd\ne\nf\ng\nh\ni\nx\n"}, "two x")
    _imported_and_applied_as_quilt_does(lab, tmp_path, quilt_series(tmp_path, {"1.patch": FIRST, "2.patch": SECOND_U0}))
    assert lab.sm("apply", "pkg").code == 0
    assert (lab.tree / "f").read_text() == "a\nb\ny\nc\nD\ne\nf\ng\nh\ni\nx\n"


SECOND_HUNK_MOVED = b"--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n a1\n-OLD\n+NEW\n a3\n@@ -20,3 +20,3 @@\n k1\n-z\n+Z\n k2\n"


def test_a_hunk_is_looked_for_where_the_hunk_before_it_moved_as_gnu_patch_does(lab: Lab, tmp_path: Path) -> None:
    """Three lines on top move the first hunk three lines down; GNU patch looks for the second there too, and
    finds `k1 z k2` at line 23, where git, looking from line 20, finds the copy at line 19."""
    lines = ["new1", "new2", "new3", "a0", "a1", "OLD", "a3", *(f"fill{n}" for n in range(8, 19)), "k1", "z", "k2",
             "fill22", "k1", "z", "k2", *(f"fill{n}" for n in range(26, 31))]  # fmt: skip
    commit(lab.tree, {"f": "".join(f"{ln}\n" for ln in lines)}, "moved down")
    _imported_and_applied_as_quilt_does(lab, tmp_path, quilt_series(tmp_path, {"p.patch": SECOND_HUNK_MOVED}))
    assert lab.sm("apply", "pkg").code == 0
    assert (lab.tree / "f").read_text().split("\n")[18:25] == ["k1", "z", "k2", "fill22", "k1", "Z", "k2"]


MINUS_MISSING_PLUS_OTHER = b"diff --git a/X b/X\n--- a/missing\n+++ b/Y\n@@ -1,3 +1,3 @@\n 1\n-2\n+TWO\n 3\n"


def test_a_minus_line_naming_a_missing_file_under_a_plus_line_naming_another_is_not_taken_for_the_header(
    lab: Lab, tmp_path: Path
) -> None:
    """GNU patch patches the `+++` file (Y); rewriting `---` to the `diff --git` name (X) made git delete X."""
    commit(lab.tree, {"X": "1\n2\n3\n", "Y": "1\n2\n3\n"}, "X and Y")
    result = imp(lab, str(quilt_series(tmp_path, {"odd.patch": MINUS_MISSING_PLUS_OTHER})), "--series", "pkg")
    assert result.code == 3 and "its `---` line names" not in result.err
    assert (lab.tree / "X").read_text() == "1\n2\n3\n" and not (lab.store / "series" / "pkg").exists()


def test_a_quilt_series_imported_onto_a_series_reads_its_patches_as_gnu_patch_does(lab: Lab, tmp_path: Path) -> None:
    commit(lab.tree, {"f": "".join(f"{n}\n" for n in range(1, 11)), "g": "g\n"}, "ten lines")
    first = quilt_series(tmp_path / "one", {"g.patch": b"--- a/g\n+++ b/g\n@@ -1 +1 @@\n-g\n+G\n"})
    assert imp(lab, str(first), "--series", "pkg").code == 0
    insert = quilt_series(tmp_path / "two", {"u0.patch": b"--- a/f\n+++ b/f\n@@ -5,0 +6 @@\n+NEW\n"})
    result = imp(lab, str(insert), "--series", "pkg")
    assert result.code == 0, result.err
    assert lab.sm("apply", "pkg").code == 0
    assert (lab.tree / "f").read_text().split("\n")[4:7] == ["5", "NEW", "6"]  # after line 5, as quilt puts it
