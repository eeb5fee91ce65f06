"""A submodule's pointer (a gitlink, mode 160000) is a change like any other: saved, checked, applied, reset,
rebased, rebuilt by `apply --link` and recovered, the submodule's checkout moving with it, as `git submodule
update` moves it. The submodule's own uncommitted work is never saved and never touched: unprotected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Lab, git, git_text, link_id, make_repo, one_line_error, recovery_id, tree_files


def _head(repo: Path) -> str:
    return git_text(repo, "rev-parse", "HEAD")


def _with_submodule(lab: Lab, tmp_path: Path) -> tuple[Path, str, str]:
    """The tree with submodule `third_party/oneDNN` committed at its first commit; the submodule's repository
    has a second commit (the upgrade). Returns the submodule's directory, the old and the new commit."""
    origin = make_repo(tmp_path / "oneDNN", {"version.txt": "3.4\n"})
    old = _head(origin)
    (origin / "version.txt").write_text("3.5\n")
    git(origin, "commit", "-qam", "v3.5")
    new = _head(origin)
    git(lab.tree, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(origin), "third_party/oneDNN")
    sub = lab.tree / "third_party" / "oneDNN"
    git(sub, "checkout", "-q", old)
    git(lab.tree, "add", "third_party/oneDNN")
    git(lab.tree, "commit", "-qm", "oneDNN as a submodule")
    return sub, old, new


def _upgrade(sub: Path, new: str) -> None:
    git(sub, "checkout", "-q", new)


def _saved_and_reset(lab: Lab, sub: Path, new: str) -> None:
    """The upgrade saved as series `s` (its only patch), and the tree reset to its base."""
    _upgrade(sub, new)
    assert lab.sm("save", "bump", "--series", "s", "-m", "bump").code == 0
    assert lab.sm("reset").code == 0


def test_an_upgraded_submodule_is_saved_reset_and_applied_back_with_its_checkout(lab: Lab, tmp_path: Path) -> None:
    sub, old, new = _with_submodule(lab, tmp_path)
    _upgrade(sub, new)
    (lab.tree / "README").write_text("built against oneDNN 3.5\n")
    assert lab.sm("check").code == 1
    upgraded = lab.worktree_id()
    saved = lab.sm("save", "onednn-3.5", "--series", "upgrade", "-m", "upgrade oneDNN")
    assert saved.code == 0, saved.err
    patch = (lab.store / "patches" / "onednn-3.5.patch").read_bytes()
    assert f"-Subproject commit {old}\n+Subproject commit {new}\n".encode() in patch
    assert b"index " + f"{old}..{new} 160000".encode() in patch
    assert lab.sm("check").code == 0, "the pointer is preserved: the patch ends the path at that commit"

    reset = lab.sm("reset")
    assert reset.code == 0, reset.err
    assert _head(sub) == old, "reset moves the submodule's checkout back with its pointer"
    assert (sub / "version.txt").read_text() == "3.4\n"
    assert git(lab.tree, "status", "--porcelain") == b""

    applied = lab.sm("apply", "upgrade")
    assert applied.code == 0, applied.err
    assert _head(sub) == new and (sub / "version.txt").read_text() == "3.5\n"
    assert lab.worktree_id() == upgraded
    assert git_text(lab.tree, "rev-parse", ":third_party/oneDNN") == old, "unstaged, as every applied change is"
    assert git(lab.tree, "status", "--porcelain") == b" M README\n M third_party/oneDNN\n"
    assert lab.sm("check").code == 0


def test_git_am_takes_the_saved_submodule_bump_as_stackmgr_applies_it(lab: Lab, tmp_path: Path) -> None:
    sub, _old, new = _with_submodule(lab, tmp_path)
    _upgrade(sub, new)
    assert lab.sm("save", "bump", "--series", "s", "-m", "bump oneDNN").code == 0
    assert lab.sm("reset").code == 0
    mirror = tmp_path / "mirror"
    git(tmp_path, "clone", "-q", str(lab.tree), str(mirror))
    git(mirror, "am", "-q", str(lab.store / "patches" / "bump.patch"))
    assert git_text(mirror, "rev-parse", "HEAD:third_party/oneDNN") == new
    assert lab.sm("apply", "s").code == 0
    assert lab.worktree_id() == git_text(mirror, "rev-parse", "HEAD^{tree}")


def test_a_submodule_not_initialized_here_is_refused_with_the_command_that_initializes_it(
    lab: Lab, tmp_path: Path
) -> None:
    sub, _old, new = _with_submodule(lab, tmp_path)
    _saved_and_reset(lab, sub, new)
    git(lab.tree, "submodule", "deinit", "-q", "-f", "third_party/oneDNN")
    assert list(sub.iterdir()) == []
    applied = lab.sm("apply", "s")
    one_line_error(applied, 3)
    assert "submodule third_party/oneDNN is not checked out here" in applied.err
    assert "git submodule update --init third_party/oneDNN" in applied.err
    assert list(sub.iterdir()) == [] and git(lab.tree, "status", "--porcelain") == b""
    git(lab.tree, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init", "third_party/oneDNN")
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert _head(sub) == new and lab.sm("check").code == 0


def test_apply_refuses_to_move_a_submodule_with_uncommitted_work_inside_and_changes_nothing(
    lab: Lab, tmp_path: Path
) -> None:
    sub, old, new = _with_submodule(lab, tmp_path)
    _saved_and_reset(lab, sub, new)
    (sub / "version.txt").write_text("3.4 with a local experiment\n")
    before = tree_files(lab.tree), git(lab.tree, "status", "--porcelain")
    applied = lab.sm("apply", "s")
    one_line_error(applied, 3)
    assert "submodule third_party/oneDNN has uncommitted changes inside" in applied.err
    assert "commit or stash them in third_party/oneDNN" in applied.err
    assert (tree_files(lab.tree), git(lab.tree, "status", "--porcelain")) == before
    assert _head(sub) == old and git_text(lab.tree, "rev-parse", ":third_party/oneDNN") == old


def test_apply_refuses_a_submodule_commit_its_repository_lacks(lab: Lab, tmp_path: Path) -> None:
    sub, old, new = _with_submodule(lab, tmp_path)
    _saved_and_reset(lab, sub, new)
    for ref in git_text(sub, "for-each-ref", "--contains", new, "--format=%(refname)").split():
        git(sub, "update-ref", "-d", ref)  # as if this clone never fetched the upgrade
    git(sub, "reflog", "expire", "--expire=now", "--all")
    git(sub, "gc", "-q", "--prune=now")
    applied = lab.sm("apply", "s")
    one_line_error(applied, 3)
    assert f"submodule third_party/oneDNN: commit {new[:12]} is not in its repository" in applied.err
    assert "git -C third_party/oneDNN fetch" in applied.err
    assert _head(sub) == old and git(lab.tree, "status", "--porcelain") == b""


def test_the_submodules_own_uncommitted_work_is_unprotected_never_saved_never_touched(lab: Lab, tmp_path: Path) -> None:
    sub, _old, _new = _with_submodule(lab, tmp_path)
    (sub / "version.txt").write_text("an experiment inside oneDNN\n")
    (sub / "notes.txt").write_text("untracked inside\n")
    (lab.tree / "README").write_text("plain edit\n")
    status = json.loads(lab.sm("--json", "status").out)["trees"][0]
    assert [(u["path"], u["reason"]) for u in status["unprotected"]] == [
        ("third_party/oneDNN", "uncommitted changes inside this submodule: commit them there to save its pointer")
    ]
    text = lab.sm("status").out
    assert "unprotected: third_party/oneDNN (uncommitted changes inside this submodule" in text
    assert lab.sm("save", "readme", "-m", "readme").code == 0
    assert lab.sm("check").code == 0
    inside = tree_files(sub)
    assert lab.sm("reset").code == 0
    assert tree_files(sub) == inside, "a reset that leaves the pointer never touches the submodule's work"
    assert (lab.tree / "README").read_text() == "hello\n"


def test_a_forced_reset_of_an_unsaved_upgrade_is_recovered_with_the_submodules_checkout(
    lab: Lab, tmp_path: Path
) -> None:
    sub, old, new = _with_submodule(lab, tmp_path)
    git(sub, "checkout", "-q", "--detach", new)
    git(sub, "commit", "-q", "--allow-empty", "-m", "a local fix on no branch")
    local = _head(sub)
    upgraded = lab.worktree_id()
    assert lab.sm("reset").code == 1
    forced = lab.sm("reset", "--force")
    assert forced.code == 0, forced.err
    assert _head(sub) == old
    assert git_text(sub, "rev-parse", f"refs/stackmgr/kept/{local}") == local, "the local commit stays reachable"
    recovered = lab.sm("recover", recovery_id(forced.err))
    assert recovered.code == 0, recovered.err
    assert _head(sub) == local and lab.worktree_id() == upgraded


def test_apply_link_rebuilds_the_measured_submodule_commit(lab: Lab, tmp_path: Path) -> None:
    sub, old, new = _with_submodule(lab, tmp_path)
    _upgrade(sub, new)
    assert lab.sm("save", "bump", "--series", "s", "-m", "bump").code == 0
    measured = lab.worktree_id()
    result = tmp_path / "bench.log"
    result.write_text("Output token throughput (tok/s): 107.77\n")
    link = link_id(lab, "bump", str(result))
    assert lab.sm("reset").code == 0 and _head(sub) == old
    rebuilt = lab.sm("apply", "--link", link)
    assert rebuilt.code == 0, rebuilt.err
    assert _head(sub) == new and lab.worktree_id() == measured


def test_rebase_carries_a_submodule_bump_onto_a_new_upstream(lab: Lab, tmp_path: Path) -> None:
    sub, _old, new = _with_submodule(lab, tmp_path)
    base = _head(lab.tree)
    _saved_and_reset(lab, sub, new)
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    git(lab.tree, "commit", "-qam", "upstream moves on")
    onto = _head(lab.tree)
    git(lab.tree, "checkout", "-q", base)
    rebased = lab.sm("rebase", "s", "--onto", onto)
    assert rebased.code == 0, rebased.err
    assert lab.sm("apply", "s").code == 0
    assert _head(lab.tree) == onto and _head(sub) == new
    mirror = tmp_path / "mirror"
    git(tmp_path, "clone", "-q", str(lab.tree), str(mirror))
    git(mirror, "checkout", "-q", onto)
    git(mirror, "update-index", "--cacheinfo", f"160000,{new},third_party/oneDNN")
    assert lab.worktree_id() == git_text(mirror, "write-tree")


def test_an_untracked_file_in_the_way_inside_the_submodule_refuses_before_anything_changes(
    lab: Lab, tmp_path: Path
) -> None:
    """The submodule's own move is tried as a dry run first: a file in its way stops pop and a forced reset before
    the superproject's first file changes, and the user's unsaved edit stays."""
    sub, old, _new = _with_submodule(lab, tmp_path)
    git(sub, "rm", "-q", "version.txt")
    git(sub, "commit", "-qm", "3.5 drops version.txt")
    (lab.tree / "README").write_text("saved edit\n")
    assert lab.sm("save", "bump", "--series", "s", "-m", "bump").code == 0
    (sub / "version.txt").write_text("the user's own file, in the way of 3.4's\n")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 'unsaved'\n")
    before = tree_files(lab.tree)
    for args in (("reset", "--force"), ("pop", "--merge")):
        refused = lab.sm(*args)
        assert refused.code == 3, refused
        assert "git would refuse to check out" in refused.err and "version.txt" in refused.err
        assert tree_files(lab.tree) == before and _head(sub) != old
    assert lab.sm("recover").out.count("\n") <= 1


def test_a_half_moved_submodule_left_by_a_kill_is_finished_by_the_next_move(lab: Lab, tmp_path: Path) -> None:
    """A kill between the submodule's files and its HEAD leaves its index and files at one end of the move and HEAD
    at the other: the next move takes it for stackmgr's own half move (not the user's work) and completes it."""
    sub, old, new = _with_submodule(lab, tmp_path)
    _upgrade(sub, new)
    assert lab.sm("save", "bump", "--series", "s", "-m", "bump").code == 0
    git(sub, "read-tree", "-m", "-u", f"{new}^{{tree}}", old)  # files back at 3.4, HEAD still at 3.5
    assert (sub / "version.txt").read_text() == "3.4\n" and _head(sub) == new
    reset = lab.sm("reset")
    assert reset.code == 0, reset.err
    assert _head(sub) == old and git(sub, "status", "--porcelain") == b""
    assert git(lab.tree, "status", "--porcelain") == b""


def test_a_series_that_removes_a_submodule_not_checked_out_here_can_be_reset(lab: Lab, tmp_path: Path) -> None:
    """Where nothing is checked out, the pointer comes and goes with its empty directory, as git checkout does."""
    sub, _old, _new = _with_submodule(lab, tmp_path)
    git(lab.tree, "submodule", "deinit", "-q", "-f", "third_party/oneDNN")
    git(lab.tree, "rm", "-q", "--cached", "third_party/oneDNN")
    sub.rmdir()
    assert lab.sm("save", "drop-onednn", "--series", "s", "-m", "drop oneDNN").code == 0
    reset = lab.sm("reset")
    assert reset.code == 0, reset.err
    assert git(lab.tree, "status", "--porcelain") == b"" and sub.is_dir() and list(sub.iterdir()) == []
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert not sub.exists()
    assert lab.sm("reset").code == 0 and sub.is_dir()


KILL_AT_SUBMODULE_HEAD = """#!/bin/sh
case " $* " in
  *" update-ref --no-deref "*) kill -9 0 ;;
esac
exec '{git}' "$@"
"""


@pytest.mark.parametrize("locks", [(), ("HEAD.lock", "index.lock")], ids=["no-locks", "locks-left"])
def test_a_kill_between_the_submodules_files_and_its_head_is_put_back_by_recover(
    lab: Lab, tmp_path: Path, locks: tuple[str, ...]
) -> None:
    """stackmgr (and its git) SIGKILLed after the submodule's files moved and before its HEAD did: `recover` puts
    the superproject back and the submodule's files back at its HEAD, with no work of the user's taken for it; the
    locks the killed git left in the submodule's git dir are gone with it."""
    import os
    import shutil
    import subprocess
    import sys

    sub, old, new = _with_submodule(lab, tmp_path)
    _upgrade(sub, new)
    (lab.tree / "README").write_text("saved edit\n")
    assert lab.sm("save", "bump", "--series", "s", "-m", "bump").code == 0
    assert lab.sm("reset").code == 0
    base = lab.worktree_id()
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(KILL_AT_SUBMODULE_HEAD.format(git=shutil.which("git")))
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}"}
    killed = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), "apply", "s"],
                            capture_output=True, env=env, start_new_session=True)  # fmt: skip
    assert killed.returncode == -9
    assert (sub / "version.txt").read_text() == "3.5\n" and _head(sub) == old, "killed half way"
    sub_git = Path(git(sub, "rev-parse", "--absolute-git-dir").decode().strip())
    for name in locks:  # what a git killed inside its own update-ref would leave
        (sub_git / name).write_bytes(b"")
    assert lab.sm("check").code == 1
    recovered = lab.sm("recover")
    assert recovered.code == 0, recovered.err
    assert not any((sub_git / name).exists() for name in locks)
    assert _head(sub) == old and git(sub, "status", "--porcelain") == b""
    assert lab.worktree_id() == base and lab.sm("check").code == 0
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert _head(sub) == new and (lab.tree / "README").read_text() == "saved edit\n"


def test_rebase_onto_an_upstream_that_bumped_the_submodule_further_keeps_the_newer_as_git_rebase_does(
    lab: Lab, tmp_path: Path
) -> None:
    """Both moved the pointer, upstream past the patch's commit: git's merge keeps the commit that contains the
    other (merge-ort's submodule rule), so `git rebase` carries the rest; stackmgr's rebase does the same."""
    sub, old, new = _with_submodule(lab, tmp_path)
    base = _head(lab.tree)
    _upgrade(sub, new)
    (lab.tree / "README").write_text("built against 3.5\n")
    assert lab.sm("save", "bump", "--series", "s", "-m", "bump").code == 0
    assert lab.sm("reset").code == 0
    origin = tmp_path / "oneDNN"
    (origin / "version.txt").write_text("3.6\n")
    git(origin, "commit", "-qam", "v3.6")
    newer = _head(origin)
    git(sub, "fetch", "-q", "origin")
    git(sub, "checkout", "-q", newer)
    git(lab.tree, "add", "third_party/oneDNN")
    git(lab.tree, "commit", "-qm", "upstream takes oneDNN 3.6")
    onto = _head(lab.tree)
    git(lab.tree, "checkout", "-q", base)
    git(sub, "checkout", "-q", old)
    rebased = lab.sm("rebase", "s", "--onto", onto)
    assert rebased.code == 0, rebased.err
    assert lab.sm("apply", "s").code == 0
    assert _head(sub) == newer and (lab.tree / "README").read_text() == "built against 3.5\n"
    mirror = tmp_path / "mirror"
    git(tmp_path, "clone", "-q", str(lab.tree), str(mirror))
    git(mirror, "checkout", "-q", onto)
    (mirror / "README").write_text("built against 3.5\n")
    git(mirror, "add", "README")
    assert lab.worktree_id() == git_text(mirror, "write-tree")
