"""`stackmgr export SERIES --quilt DIR | --mbox FILE | --git BRANCH`: each hand-off rebuilds the
tree `stackmgr apply` builds, with the real programs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Lab, clone_at_base, git, git_text, save_three_patch_series


def _applied_tree(lab: Lab) -> str:
    save_three_patch_series(lab)
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "S").code == 0
    wanted = lab.worktree_id()
    assert lab.sm("reset").code == 0
    return wanted


def test_mbox_export_is_what_git_am_takes(lab: Lab, tmp_path: Path) -> None:
    wanted = _applied_tree(lab)
    mbox = tmp_path / "S.mbox"
    result = lab.sm("export", "S", "--mbox", str(mbox))
    assert result.code == 0 and "3 patches" in result.out
    clone = clone_at_base(lab, tmp_path / "am")
    git(clone, "am", "--keep-cr", "-q", str(mbox))
    assert git_text(clone, "rev-parse", "HEAD^{tree}") == wanted
    assert git_text(clone, "log", "--format=%s", "-3").splitlines() == ["swap model for a script", "notes",
                                                                        "fix: return 2"]  # fmt: skip
    again = lab.sm("export", "S", "--mbox", str(mbox))
    assert again.code == 2 and "already exists" in again.err


@pytest.mark.skipif(shutil.which("quilt") is None, reason="quilt is not installed (CI installs it)")
def test_quilt_export_is_what_quilt_push_applies(lab: Lab, tmp_path: Path) -> None:
    wanted = _applied_tree(lab)
    out = tmp_path / "quilt-patches"
    assert lab.sm("export", "S", "--quilt", str(out)).code == 0
    assert (out / "series").read_text() == "fix.patch\nnotes.patch\nswap.patch\n"
    assert (out / "notes.patch").read_bytes() == (lab.store / "patches" / "notes.patch").read_bytes()
    clone = Lab(lab.store, clone_at_base(lab, tmp_path / "q"))
    env = dict(os.environ, QUILT_PATCHES=str(out), QUILT_PC=str(tmp_path / "pc"))
    proc = subprocess.run(["quilt", "--quiltrc", "-", "push", "-a", "-q"], cwd=clone.tree, env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert clone.worktree_id() == wanted


def test_git_export_makes_a_branch_without_touching_the_tree(lab: Lab) -> None:
    wanted = _applied_tree(lab)
    head, before = git_text(lab.tree, "rev-parse", "HEAD"), lab.worktree_id()
    result = lab.sm("export", "S", "--git", "replay")
    assert result.code == 0, result.err
    assert git_text(lab.tree, "rev-parse", "replay^{tree}") == wanted
    assert git_text(lab.tree, "rev-list", "--count", f"{head}..replay") == "3"
    assert git_text(lab.tree, "log", "--format=%an <%ae>", "-1", "replay") == "Jane Doe <jane@example.com>"
    assert git_text(lab.tree, "rev-parse", "HEAD") == head and lab.worktree_id() == before
    assert lab.sm("export", "S", "--git", "replay").code == 2
    assert lab.sm("export", "S", "--git", "bad..name").code == 2


def test_export_needs_exactly_one_target(lab: Lab, tmp_path: Path) -> None:
    save_three_patch_series(lab)
    (tmp_path / "afile").write_text("x")
    for args in ((), ("--mbox", str(tmp_path / "a"), "--git", "b"), ("--quilt", str(tmp_path / "afile"))):
        result = lab.sm("export", "S", *args)
        assert result.code == 2 and len(result.err.strip().splitlines()) == 1


@pytest.mark.regression("export --quilt into someone's quilt directory overwrote its series file")
def test_quilt_export_refuses_a_quilt_directory_it_did_not_write(lab: Lab, tmp_path: Path) -> None:
    save_three_patch_series(lab)
    theirs = tmp_path / "debian" / "patches"
    theirs.mkdir(parents=True)
    (theirs / "series").write_text("their-fix.patch\n")
    (theirs / "their-fix.patch").write_text("--- a/x\n+++ b/x\n")
    refused = lab.sm("export", "S", "--quilt", str(theirs))
    assert refused.code == 2 and "their-fix.patch" in refused.err, refused.err
    assert (theirs / "series").read_text() == "their-fix.patch\n"
    (theirs / "their-fix.patch").unlink()
    refused = lab.sm("export", "S", "--quilt", str(theirs))  # a series listing a patch this export does not write
    assert refused.code == 2 and "series (it lists their-fix.patch)" in refused.err, refused.err
    out = tmp_path / "out"
    assert lab.sm("export", "S", "--quilt", str(out)).code == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert lab.sm("export", "S", "--quilt", str(out)).code == 0  # an earlier export of this series: written again
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first


@pytest.mark.regression("export --quilt of a binary patch advised `quilt push -a`, which refuses binary patches")
def test_quilt_export_of_a_binary_patch_says_quilt_cannot_apply_it(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "logo.png").write_bytes(bytes(range(256)) * 4)
    assert lab.sm("save", "logo", "--series", "S", "-m", "a logo").code == 0
    (lab.tree / "README").write_text("hello\nworld\n")
    assert lab.sm("save", "readme", "--series", "S", "-m", "readme").code == 0
    result = lab.sm("export", "S", "--quilt", str(tmp_path / "q"))
    assert result.code == 0, result.err
    assert "logo.patch holds a binary change, which quilt (GNU patch) cannot apply" in result.out
    assert "quilt push -a" not in result.out and "--mbox" in result.out
