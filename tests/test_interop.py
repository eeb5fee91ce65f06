"""Interop with the real programs (issue 6, "must show"): a single-tree series saved by stackmgr, applied with
`quilt push -a` (QUILT_PATCHES/QUILT_SERIES pointing into the store) and with `git am`, gives the same tree id as
`stackmgr apply`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Lab, git, git_text


def _series(lab: Lab) -> list[Path]:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix: return 2").code == 0
    (lab.tree / "notes.txt").write_bytes(b"windows\r\nline endings\r\n")
    (lab.tree / "README").write_text("hello\nand more\n")
    assert lab.sm("save", "notes", "--series", "S", "-m", "notes").code == 0
    (lab.tree / "src" / "model.py").unlink()
    (lab.tree / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (lab.tree / "run.sh").chmod(0o755)
    assert lab.sm("save", "swap", "--series", "S", "-m", "swap model for a script").code == 0
    return [lab.store / "patches" / f"{n}.patch" for n in ("fix", "notes", "swap")]


def _clone_at_base(lab: Lab, where: Path) -> Path:
    git(where.parent, "clone", "-q", str(lab.tree), str(where))
    return where


@pytest.mark.skipif(shutil.which("quilt") is None, reason="quilt is not installed (CI installs it)")
def test_quilt_push_a_builds_the_tree_stackmgr_apply_builds(lab: Lab, tmp_path: Path) -> None:
    _series(lab)
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "S").code == 0
    wanted = lab.worktree_id()
    other = Lab(lab.store, _clone_at_base(lab, tmp_path / "quilt-tree"))
    env = dict(os.environ, QUILT_PATCHES=str(lab.store / "patches"), QUILT_SERIES=str(lab.store / "series" / "S"),
               QUILT_PC=str(tmp_path / "quilt-pc"))  # fmt: skip
    proc = subprocess.run(["quilt", "--quiltrc", "-", "push", "-a", "-q"], cwd=other.tree, env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert other.worktree_id() == wanted


def test_git_am_builds_the_tree_stackmgr_apply_builds(lab: Lab, tmp_path: Path) -> None:
    patches = _series(lab)
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "S").code == 0
    wanted = lab.worktree_id()
    clone = _clone_at_base(lab, tmp_path / "am-tree")
    git(clone, "am", "--keep-cr", "-q", *map(str, patches))
    assert git_text(clone, "rev-parse", "HEAD^{tree}") == wanted
    assert git_text(clone, "log", "--format=%s", "-1", "HEAD~2") == "fix: return 2", "one commit per patch"
