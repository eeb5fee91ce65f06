"""Interop with the real programs: a single-tree series saved by stackmgr, applied with
`quilt push -a` (QUILT_PATCHES/QUILT_SERIES pointing into the store) and with `git am`, gives the same tree id as
`stackmgr apply`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Lab, clone_at_base, git, git_text, save_three_patch_series


@pytest.mark.skipif(shutil.which("quilt") is None, reason="quilt is not installed (CI installs it)")
def test_quilt_push_a_builds_the_tree_stackmgr_apply_builds(lab: Lab, tmp_path: Path) -> None:
    save_three_patch_series(lab)
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "S").code == 0
    wanted = lab.worktree_id()
    other = Lab(lab.store, clone_at_base(lab, tmp_path / "quilt-tree"))
    env = dict(os.environ, QUILT_PATCHES=str(lab.store / "patches"), QUILT_SERIES=str(lab.store / "series" / "S"),
               QUILT_PC=str(tmp_path / "quilt-pc"))  # fmt: skip
    proc = subprocess.run(["quilt", "--quiltrc", "-", "push", "-a", "-q"], cwd=other.tree, env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert other.worktree_id() == wanted


def test_git_am_builds_the_tree_stackmgr_apply_builds(lab: Lab, tmp_path: Path) -> None:
    patches = save_three_patch_series(lab)
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "S").code == 0
    wanted = lab.worktree_id()
    clone = clone_at_base(lab, tmp_path / "am-tree")
    git(clone, "am", "--keep-cr", "-q", *map(str, patches))
    assert git_text(clone, "rev-parse", "HEAD^{tree}") == wanted
    assert git_text(clone, "log", "--format=%s", "-1", "HEAD~2") == "fix: return 2", "one commit per patch"


def _quilt(cwd: Path, env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(["quilt", "--quiltrc", "-", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0, f"quilt {' '.join(args)}: {proc.stdout}{proc.stderr}"
    return proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("quilt") is None, reason="quilt is not installed (CI installs it)")
def test_a_real_quilt_series_imports_and_applies_to_the_same_tree(lab: Lab, tmp_path: Path) -> None:
    """A colleague's quilt series, made with quilt new/add/refresh in their own checkout (with a DEP-3 header):
    `stackmgr import DIR` adopts it as a series, and `stackmgr apply` builds the tree quilt built."""
    theirs = clone_at_base(lab, tmp_path / "colleague")
    qdir = tmp_path / "colleague-patches"
    env = dict(os.environ, QUILT_PATCHES=str(qdir), QUILT_PC=str(tmp_path / "colleague-pc"))
    _quilt(theirs, env, "new", "fix-return.patch")
    _quilt(theirs, env, "add", "src/model.py")
    (theirs / "src" / "model.py").write_text("def f():\n    return 2\n")
    _quilt(theirs, env, "refresh")
    header = "Description: make f return 2\n Longer explanation.\nAuthor: Col League <col@example.com>\n"
    patch = qdir / "fix-return.patch"
    patch.write_text(header + "\n" + patch.read_text())  # what `quilt header -e` leaves
    _quilt(theirs, env, "new", "add-notes.patch")
    _quilt(theirs, env, "add", "notes.txt", "README")
    (theirs / "notes.txt").write_text("new file\n")
    (theirs / "README").write_text("hello\nquilt was here\n")
    _quilt(theirs, env, "refresh")
    git(theirs, "add", "-A", "--", ".", ":!.pc")  # the tree quilt built, without quilt's own .pc
    wanted = git_text(theirs, "write-tree")

    result = lab.sm("import", str(qdir), "--series", "from-quilt")
    assert result.code == 0, result.err
    assert "imported fix-return" in result.out and "imported add-notes" in result.out
    assert (lab.store / "series" / "from-quilt").read_text() == "fix-return.patch\nadd-notes.patch\n"
    fix = (lab.store / "patches" / "fix-return.patch").read_bytes()
    assert b"From: Col League <col@example.com>\n" in fix and b"Subject: [PATCH] make f return 2\n" in fix
    assert b"Description: make f return 2\n Longer explanation.\n" in fix  # the DEP-3 header kept
    assert lab.sm("apply", "from-quilt").code == 0
    assert lab.worktree_id() == wanted


def test_a_format_patch_range_imports_and_applies_to_the_same_tree(lab: Lab, tmp_path: Path) -> None:
    """Three commits on a colleague's branch, handed over as `git format-patch base..HEAD` files; imported while
    this tree already sits on that branch's newest commit, the base search walks back to where they apply."""
    base = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    git(lab.tree, "commit", "-q", "-am", "fix: return 2\n\nWith a body.")
    (lab.tree / "blob.bin").write_bytes(bytes(range(256)) * 8)
    git(lab.tree, "add", "blob.bin")
    git(lab.tree, "commit", "-q", "-m", "add a binary")
    git(lab.tree, "rm", "-q", "README")
    git(lab.tree, "commit", "-q", "-m", "drop README")
    wanted = git_text(lab.tree, "rev-parse", "HEAD^{tree}")
    out = tmp_path / "fp"
    git(lab.tree, "format-patch", "-q", "-o", str(out), f"{base}..HEAD")
    files = sorted(str(p) for p in out.iterdir())
    assert len(files) == 3

    result = lab.sm("import", *files, "--series", "from-git")
    assert result.code == 0, result.err
    assert f"base {base[:12]} (HEAD~3)" in result.out
    assert (lab.store / "series" / "from-git").read_text().splitlines() == [
        "0001-fix-return-2.patch", "0002-add-a-binary.patch", "0003-drop-README.patch"]  # fmt: skip
    first = (lab.store / "patches" / "0001-fix-return-2.patch").read_bytes()
    assert b"Subject: [PATCH] fix: return 2\n\nWith a body.\n\nStackmgr-Tree: vllm\n" in first
    git(lab.tree, "checkout", "-q", "--detach", base)
    assert lab.sm("apply", "from-git").code == 0
    assert lab.worktree_id() == wanted
