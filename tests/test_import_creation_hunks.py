"""A quilt patch, or a plain `diff -u`, that creates a file without `/dev/null`: `--- a/PATH` / `+++ b/PATH` and one
all-added hunk `@@ -0,0 +1,N @@` against a path the tree does not have (zsh's Debian `completion-dscverify.diff`).
GNU patch, and so `quilt push`, create the file; `git apply` alone refuses it. `import` creates it as GNU patch does
(mode 100644, the added lines, `\\ No newline at end of file` honoured) and stores a git creation; where the file
exists, it behaves as `git apply` does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Lab, git, git_text
from tests.test_import import imp, patches
from tests.test_import_empty import applied_tree

DSCVERIFY = (b"Author: Debian zsh Maintainers\nDescription: Add completion for dscverify\n\n"
             b"--- a/Completion/Debian/Command/_dscverify\n+++ b/Completion/Debian/Command/_dscverify\n"
             b"@@ -0,0 +1,4 @@\n+#compdef dscverify\n+\n+_arguments \\\n"
             b"+  '*:dsc file:_files -g \"*.dsc\"'\n")  # fmt: skip
NO_NEWLINE = (b"--- a/notes/todo\n+++ b/notes/todo\n@@ -0,0 +1,2 @@\n+first\n+last, no newline\n"
              b"\\ No newline at end of file\n")  # fmt: skip
README = b"--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hi\n"


def quilt_series(tmp: Path, files: dict[str, bytes]) -> Path:
    quilt = tmp / "zsh" / "debian" / "patches"
    quilt.mkdir(parents=True)
    for name, data in files.items():
        (quilt / name).write_bytes(data)
    (quilt / "series").write_text("".join(f"{name}\n" for name in files))
    return quilt


def quilt_tree(lab: Lab, quilt: Path, tmp: Path) -> str:
    """`quilt push -a` of the series in a scratch clone of the user's tree: the tree quilt makes."""
    work = tmp / "quilt-work"
    git(tmp, "clone", "-q", str(lab.tree), str(work))
    env = dict(os.environ, QUILT_PATCHES=str(quilt), QUILT_PC=str(tmp / "pc"))
    subprocess.run(["quilt", "--quiltrc", "-", "push", "-a", "-q"], cwd=work, env=env, check=True,
                   capture_output=True, stdin=subprocess.DEVNULL)  # fmt: skip
    git(work, "add", "-A")
    return git_text(work, "write-tree")


def test_a_quilt_creation_hunk_without_dev_null_creates_the_file_as_quilt_does(lab: Lab, tmp_path: Path) -> None:
    quilt = quilt_series(tmp_path, {"completion-dscverify.diff": DSCVERIFY, "todo.diff": NO_NEWLINE,
                                    "readme.diff": README})  # fmt: skip
    result = imp(lab, str(quilt))
    assert result.code == 0, result.err
    assert (lab.store / "series" / "zsh").read_text() == "completion-dscverify.patch\ntodo.patch\nreadme.patch\n"
    stored = patches(lab.store)["completion-dscverify.patch"]
    assert (b"\ndiff --git a/Completion/Debian/Command/_dscverify b/Completion/Debian/Command/_dscverify\n"
            b"new file mode 100644\n") in stored and b"\n--- /dev/null\n" in stored  # fmt: skip
    assert lab.sm("apply", "zsh").code == 0
    made = lab.tree / "Completion" / "Debian" / "Command" / "_dscverify"
    assert made.read_bytes() == b"#compdef dscverify\n\n_arguments \\\n  '*:dsc file:_files -g \"*.dsc\"'\n"
    assert oct(made.stat().st_mode & 0o777) == "0o644"
    assert (lab.tree / "notes" / "todo").read_bytes() == b"first\nlast, no newline"
    applied = lab.worktree_id()
    assert lab.sm("reset").code == 0
    if shutil.which("quilt"):
        assert applied == quilt_tree(lab, quilt, tmp_path)


def test_a_plain_diff_u_creation_hunk_imports_as_a_new_file(lab: Lab, tmp_path: Path) -> None:
    plain = tmp_path / "todo.diff"
    plain.write_bytes(NO_NEWLINE)
    result = imp(lab, str(plain), "--series", "todo")
    assert result.code == 0, result.err
    first = result.out.splitlines()[0]
    assert first.startswith("imported todo (") and first.endswith("1 file +2 -0")
    proc = subprocess.run(["patch", "-p1", "-s", "-i", str(plain)], cwd=lab.tree, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    wanted = lab.worktree_id()  # GNU patch's tree
    (lab.tree / "notes" / "todo").unlink()
    (lab.tree / "notes").rmdir()
    assert applied_tree(lab, "todo") == wanted


def test_a_creation_hunk_against_an_existing_file_in_a_plain_diff_is_refused_as_git_apply_refuses_it(
    lab: Lab, tmp_path: Path
) -> None:
    onto = b"--- a/README\n+++ b/README\n@@ -0,0 +1 @@\n+a line on top\n"
    (tmp_path / "top.diff").write_bytes(onto)
    result = imp(lab, str(tmp_path / "top.diff"))
    assert result.code == 3
    hunk = ("error: patch failed: README:0 (hunk 1 of 1, @@ -0,0 +1 @@; it creates README, which is there already: "
            "GNU patch would put these lines above its own)")  # fmt: skip
    at = "does not apply to tree vllm at HEAD or the 1000 commits before it (at HEAD: "
    assert result.err == f"stackmgr: refused {tmp_path / 'top.diff'}: {at}{hunk})\n"
    assert patches(lab.store) == {}


@pytest.mark.skipif(shutil.which("quilt") is None, reason="quilt is not installed")
def test_in_a_quilt_series_a_creation_hunk_against_an_existing_file_goes_above_it_as_quilt_puts_it(
    lab: Lab, tmp_path: Path
) -> None:
    """For a quilt series quilt is the reference: zsh 5.9's `completion-dscverify.diff` creates a file the tarball
    has; GNU patch puts its lines above the file's own. The import does the same, says so, and the stored patch is
    git's form of that change."""
    quilt = quilt_series(tmp_path, {"top.diff": b"--- a/README\n+++ b/README\n@@ -0,0 +1,2 @@\n+a line on top\n"
                                                b"+and another\n"})  # fmt: skip
    wanted = quilt_tree(lab, quilt, tmp_path)
    assert (tmp_path / "quilt-work" / "README").read_bytes() == b"a line on top\nand another\nhello\n"
    result = imp(lab, str(quilt))
    assert result.code == 0, result.err
    assert "its hunk creating README, which is there already, puts its lines above the file's own" in result.err
    assert b"@@ -1 +1,3 @@\n+a line on top\n+and another\n hello\n" in patches(lab.store)["top.patch"]
    assert applied_tree(lab, "zsh") == wanted


def test_a_git_diff_creation_hunk_without_new_file_mode_is_left_to_git(lab: Lab, tmp_path: Path) -> None:
    """A `diff --git` section says itself whether it creates: git's reading of it stands."""
    mail = tmp_path / "git.diff"
    mail.write_bytes(b"diff --git a/notes/todo b/notes/todo\n" + NO_NEWLINE)
    result = imp(lab, str(mail))
    assert result.code == 3 and "notes/todo" in result.err
