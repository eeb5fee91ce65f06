"""Hostile review of the destructive commands: apply, reset, recover, `save --series` and tree_move.move_tree.

Tests whose docstring starts "Regression (review)" pinned a bug found in review, since fixed; tests still marked
xfail(strict=True) expose one not fixed yet (the reason says what goes wrong and where); the others pin
edge cases that behave correctly and must keep doing so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from stackmgr.git import tempindex
from stackmgr.safety import tree_move
from tests.conftest import Lab, git, git_text, make_repo, run_stackmgr
from tests.conftest import tree_files as _files


def _rid(err: str) -> str:
    """The recovery id `reset --force` printed."""
    return err.split("recovery snapshot ")[1].split(";")[0]


def _status(tree: Path) -> bytes:
    return git(tree, "status", "--porcelain", "--untracked-files=all")


def _head_name(tree: Path) -> str:
    return git_text(tree, "rev-parse", "--abbrev-ref", "HEAD")


def _worktree_id(tree: Path) -> str:
    """Like Lab.worktree_id, for a linked worktree too (its .git is a file)."""
    index = git_text(tree, "rev-parse", "--path-format=absolute", "--git-path", "review-snapshot-index")
    env = dict(os.environ, GIT_INDEX_FILE=index)
    try:
        for args in (["read-tree", "HEAD"], ["add", "-A"]):
            subprocess.run(["git", *args], cwd=tree, env=env, check=True)
        return (
            subprocess.run(["git", "write-tree"], cwd=tree, env=env, check=True, capture_output=True)
            .stdout.decode()
            .strip()
        )
    finally:
        Path(index).unlink(missing_ok=True)


def _applied(lab: Lab) -> dict[str, object] | None:
    applied: dict[str, object] | None = json.loads(lab.sm("--json", "status").out)["trees"][0]["applied"]
    return applied


def _save_day(lab: Lab) -> str:
    """A dirty tree saved as series `day`, then reset; returns the working-tree id the series rebuilds."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (lab.tree / "results.log").write_text("107.77 tok/s\n")
    (lab.tree / "README").unlink()
    wanted = lab.worktree_id()
    assert lab.sm("save", "work", "--series", "day", "-m", "work").code == 0
    assert lab.sm("reset").code == 0
    return wanted


def _add_kernels(lab: Lab, tmp_path: Path) -> Path:
    kernels = make_repo(tmp_path / "kernels", {"k.cpp": "int k;\n"})
    assert lab.sm("tree", "add", "kernels", str(kernels)).code == 0
    return kernels


def _series_on_two_trees(lab: Lab, kernels: Path) -> None:
    """Series `both`: a vllm patch, then a kernels patch; both trees reset."""
    (lab.tree / "README").write_text("vllm side\n")
    assert lab.sm("save", "v", "-t", "vllm", "-m", "v").code == 0
    (kernels / "k.cpp").write_text("int k = 1;\n")
    assert lab.sm("save", "k", "-t", "kernels", "-m", "k").code == 0
    assert lab.sm("reset").code == 0
    (lab.store / "series" / "both").write_text("v.patch\nk.patch\n")


# ---------------------------------------------------------------------------------------------------------------
# Bugs: ignored files are overwritten or deleted (docs/RELIABILITY.md, promise 1)
# ---------------------------------------------------------------------------------------------------------------


def test_apply_overwrites_an_ignored_file_at_a_path_the_series_creates(lab: Lab) -> None:
    """Regression (review): tempindex.TempIndex.switch: git >= 2.35 `read-tree -m -u` treats ignored files as
    expendable and overwrites one at a path the target adds; nothing checks for it.
    """
    (lab.tree / "tuned.json").write_text('{"from": "the series"}\n')
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    # on this machine *.json is ignored (info/exclude or a global excludesFile) and a local, ignored copy exists
    (lab.tree / ".git" / "info" / "exclude").write_text("*.json\n")
    (lab.tree / "tuned.json").write_text('{"mine": "hand-tuned, never committed"}\n')
    result = lab.sm("apply", "s")
    assert (lab.tree / "tuned.json").read_text() == '{"mine": "hand-tuned, never committed"}\n'
    assert result.code == 3 and "tuned.json" in result.err


def test_apply_deletes_an_ignored_directory_where_the_series_puts_a_file(lab: Lab) -> None:
    """Regression (review): tempindex.TempIndex.switch: read-tree -m -u deletes an ignored directory (benchmark
    results) to put a file of the target tree there.
    """
    (lab.tree / ".git" / "info" / "exclude").write_text("results/\n")
    (lab.tree / "results").write_text("a file named results\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "results").mkdir()
    (lab.tree / "results" / "probe.log").write_text("107.77 tok/s, JSON gate failed\n")
    lab.sm("apply", "s")
    assert (lab.tree / "results" / "probe.log").read_text() == "107.77 tok/s, JSON gate failed\n"


def test_reset_to_an_older_commit_overwrites_an_ignored_file(lab: Lab) -> None:
    """Regression (review): tempindex.TempIndex.switch via reset.\\_reset_one: `reset --to` an older commit that
    tracked a now-ignored file overwrites the user's local ignored copy.
    """
    (lab.tree / "settings.json").write_text("{}\n")
    git(lab.tree, "add", "settings.json")
    git(lab.tree, "commit", "-qm", "add settings")
    old = git_text(lab.tree, "rev-parse", "HEAD")
    git(lab.tree, "rm", "-q", "--cached", "settings.json")
    (lab.tree / ".gitignore").write_text("settings.json\n")
    git(lab.tree, "add", ".gitignore")
    git(lab.tree, "commit", "-qm", "settings.json is local now")
    (lab.tree / "settings.json").write_text('{"token": "local secret"}\n')
    assert lab.sm("check").code == 0
    lab.sm("reset", "--to", old)
    assert (lab.tree / "settings.json").read_text() == '{"token": "local secret"}\n'


# ---------------------------------------------------------------------------------------------------------------
# Bugs: --force loses staged work; a failure after the switch leaves a tree half-moved
# ---------------------------------------------------------------------------------------------------------------


def test_reset_force_keeps_a_staged_version_whose_working_tree_is_back_at_head(lab: Lab) -> None:
    """Regression (review): reset.\\_reset_one stores a recovery only when snap.changes/local_commits or HEAD moves; a
    staged-only version (working tree == HEAD) is a blocker, --force overrides it, and write_real_index drops it:
    the blob is left unreachable.
    """
    (lab.tree / "README").write_text("staged work\n")
    git(lab.tree, "add", "README")
    (lab.tree / "README").write_text("hello\n")  # the working tree is back at HEAD; the index holds the work
    staged = git_text(lab.tree, "rev-parse", ":README")
    assert lab.sm("reset").code == 1, "the staged version is a blocker"
    forced = lab.sm("reset", "--force")
    assert forced.code == 0
    assert "stackmgr recover" in forced.err, "a forced step prints how to undo it"
    anchored = git(lab.tree, "rev-list", "--objects", "--glob=refs/stackmgr/*")
    assert staged.encode() in anchored


def test_apply_of_two_trees_when_another_git_holds_the_second_index(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (review): the index lock was checked before the switch but taken after it. It is now held from
    before the first file changes; another git holding the second tree's index rolls the first tree back."""
    kernels = _add_kernels(lab, tmp_path)
    _series_on_two_trees(lab, kernels)
    vllm_before, kernels_before = _files(lab.tree), _files(kernels)

    def ide_locks_kernels(snap: object) -> None:
        if getattr(snap, "tree", "") == "vllm":
            (kernels / ".git" / "index.lock").write_bytes(b"")

    monkeypatch.setattr(tree_move, "before_switch", ide_locks_kernels)
    result = lab.sm("apply", "both")
    assert result.code == 3 and "index.lock exists" in result.err
    assert _files(lab.tree) == vllm_before, "the first tree is rolled back"
    assert _files(kernels) == kernels_before


def test_an_error_after_the_switch_puts_the_tree_back(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (review): an exception after the switch (disk full, Ctrl-C) left the working tree moved."""
    wanted = _save_day(lab)
    before, index, head = _files(lab.tree), (lab.tree / ".git" / "index").read_bytes(), _head_name(lab.tree)

    def disk_full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempindex.RealIndexLock, "commit", disk_full)
    result = lab.sm("apply", "day")
    assert result.code == 3 and "No space left on device" in result.err and "put back" in result.err
    assert _files(lab.tree) == before and (lab.tree / ".git" / "index").read_bytes() == index
    assert _head_name(lab.tree) == head and not (lab.tree / ".git" / "index.lock").exists()
    monkeypatch.undo()
    assert lab.sm("check").code == 0
    assert lab.sm("apply", "day").code == 0 and lab.worktree_id() == wanted


def test_reset_force_of_two_trees_where_the_second_refuses_at_the_switch(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (review): a later tree refusing at move time left the earlier tree reset, with a message saying
    'nothing changed'. Now the journal puts the earlier tree back, so the message is true.
    """
    kernels = _add_kernels(lab, tmp_path)
    (kernels / "k.cpp").write_text("int k = 1; // unsaved\n")
    (lab.tree / "README").write_text("vllm work, unsaved\n")

    def vllm_autosave(snap: object) -> None:
        if getattr(snap, "tree", "") == "vllm":
            (lab.tree / "README").write_text("typed after the check\n")

    monkeypatch.setattr(tree_move, "before_switch", vllm_autosave)
    result = lab.sm("reset", "--force")
    assert result.code == 3 and "README" in result.err
    # Since the operation journal a multi-tree reset is all or nothing: kernels is put back.
    assert (kernels / "k.cpp").read_text() == "int k = 1; // unsaved\n"
    assert (lab.tree / "README").read_text() == "typed after the check\n"
    assert lab.sm("check", "kernels").code == 1 and lab.sm("log", "-n", "1").out.count("[rolled-back]") == 1


def test_reset_of_two_trees_where_the_second_refuses_at_the_switch_names_what_changed(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (review): a refusal of the second tree at move time reported 'refused, nothing changed' although
    the first tree was reset. Now the first tree is put back (the journal's rollback).
    """
    kernels = _add_kernels(lab, tmp_path)
    (lab.tree / "README").write_text("vllm work\n")
    (kernels / "k.cpp").write_text("int k = 1;\n")
    assert lab.sm("save", "v", "-t", "vllm", "-m", "v").code == 0
    assert lab.sm("save", "k", "-t", "kernels", "-m", "k").code == 0

    def vllm_autosave(snap: object) -> None:
        if getattr(snap, "tree", "") == "vllm":
            (lab.tree / "README").write_text("typed after the check\n")

    monkeypatch.setattr(tree_move, "before_switch", vllm_autosave)
    result = lab.sm("reset")
    assert result.code == 3 and (lab.tree / "README").read_text() == "typed after the check\n"
    assert (kernels / "k.cpp").read_text() == "int k = 1;\n", "rolled back: the reset is all or nothing"
    assert "README" in result.err


def test_a_commit_made_between_the_check_and_the_head_move_is_not_orphaned(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (review): tree_move.move_tree / refs.detach_head: `update-ref --no-deref HEAD new` has no old
    value, so a commit made on a detached HEAD after the check is orphaned by the move.
    """
    first = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "c.txt").write_text("c\n")
    git(lab.tree, "add", "c.txt")
    git(lab.tree, "commit", "-qm", "second")
    git(lab.tree, "checkout", "-q", "--detach")

    def commit_in_the_window(_snap: object) -> None:
        git(lab.tree, "commit", "-q", "--allow-empty", "-m", "made while reset was checking")

    monkeypatch.setattr(tree_move, "before_switch", commit_in_the_window)
    lab.sm("reset", "--to", first)
    assert git(lab.tree, "fsck", "--unreachable", "--no-reflogs") == b""


# ---------------------------------------------------------------------------------------------------------------
# Bugs: recover, stale private-index flags, force-added ignored files in a series
# ---------------------------------------------------------------------------------------------------------------


def test_recover_when_a_linked_worktree_of_the_same_repository_is_registered(lab: Lab, tmp_path: Path) -> None:
    """Regression (review): recover.list_recoveries lists refs/stackmgr/recovery/* per registered tree, but a linked
    worktree shares refs with its main tree: every recovery shows under both trees and `recover ID` says 'ambiguous'
    (exit 2) — it cannot be restored.
    """
    wt = tmp_path / "wt"
    git(lab.tree, "worktree", "add", "-q", "-b", "side", str(wt))
    assert lab.sm("tree", "add", "wt", str(wt)).code == 0
    (lab.tree / "README").write_text("unsaved\n")
    rid = _rid(lab.sm("reset", "vllm", "--force").err)
    listing = json.loads(lab.sm("recover", "--json").out)["recoveries"]
    assert [(r["id"], r["tree"]) for r in listing] == [(rid, "vllm")]
    assert lab.sm("recover", rid).code == 0
    assert (lab.tree / "README").read_text() == "unsaved\n" and (wt / "README").read_text() == "hello\n"


def test_recover_forgets_the_series_that_was_applied(lab: Lab) -> None:
    """Regression (review): recover.restore moves the tree but leaves .stackmgr/applied.json alone: status keeps naming
    the series applied before, and reset then targets that series' base.
    """
    (lab.tree / "README").write_text("unsaved\n")
    rid = _rid(lab.sm("reset", "--force").err)
    (lab.tree / "new.txt").write_text("B\n")
    assert lab.sm("save", "b", "--series", "B", "-m", "b").code == 0
    assert lab.sm("reset").code == 0 and lab.sm("apply", "B").code == 0
    assert lab.sm("recover", rid).code == 0
    assert _applied(lab) is None


def test_an_edit_in_a_formerly_sparse_path_is_seen_and_not_hidden_by_reset(lab: Lab) -> None:
    """Regression (review): tempindex.TempIndex.seed copies the real index once; its skip-worktree bits go stale after
    `git sparse-checkout disable`, so check passes over an edit there (a guarded `git reset --hard` would then
    destroy it) and move_tree writes the stale bits into the real index, hiding the edit from git status too.
    """
    (lab.tree / "docs").mkdir()
    (lab.tree / "docs" / "a.md").write_text("a\n")
    git(lab.tree, "add", "docs")
    git(lab.tree, "commit", "-qm", "docs")
    git(lab.tree, "sparse-checkout", "set", "--no-cone", "/*", "!/docs/")
    assert lab.sm("check").code == 0  # the private index is seeded now, with docs/a.md skip-worktree
    git(lab.tree, "sparse-checkout", "disable")
    (lab.tree / "docs" / "a.md").write_text("edited once sparse checkout was off\n")
    assert _status(lab.tree) == b" M docs/a.md\n"
    check = lab.sm("check")
    lab.sm("reset")
    assert _status(lab.tree) == b" M docs/a.md\n", "reset must not hide the edit from git"
    assert check.code == 1


def test_a_force_added_ignored_file_of_a_series_survives_save_on_top(lab: Lab) -> None:
    """Regression (review): apply writes the base as the real index, so a force-added ignored file of the series is
    untracked+ignored afterwards: snapshot drops it, status reports drift, and `save --series` on top records a
    deletion the user never made (stacking.stack_for).
    """
    (lab.tree / ".gitignore").write_text("*.log\n")
    git(lab.tree, "add", ".gitignore")
    git(lab.tree, "commit", "-qm", "ignore logs")
    (lab.tree / "config.log").write_text("force-added on purpose\n")
    git(lab.tree, "add", "-f", "config.log")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "s").code == 0
    (lab.tree / "README").write_text("on top\n")
    assert lab.sm("save", "q", "--series", "s", "-m", "q").code == 0
    assert b"config.log" not in (lab.store / "patches" / "q.patch").read_bytes()


# ---------------------------------------------------------------------------------------------------------------
# Behaviour that is right and must stay so
# ---------------------------------------------------------------------------------------------------------------


def test_the_real_index_after_apply_holds_the_base_with_stat_data_kept(lab: Lab) -> None:
    for i in range(200):
        (lab.tree / "src" / f"m{i}.py").write_text(f"x = {i}\n")
    git(lab.tree, "add", "-A")
    git(lab.tree, "commit", "-qm", "many files")
    base = git_text(lab.tree, "rev-parse", "HEAD")
    wanted = _save_day(lab)
    assert lab.sm("apply", "day").code == 0
    assert lab.worktree_id() == wanted
    assert _status(lab.tree) == b" D README\n M src/model.py\n?? results.log\n"
    assert git_text(lab.tree, "write-tree") == git_text(lab.tree, "rev-parse", f"{base}^{{tree}}")
    # no refresh: only entries whose stat data does not match are listed, so the 200 others kept theirs
    assert git(lab.tree, "diff-files", "--name-only") == b"README\nsrc/model.py\n"


def test_an_unprotected_file_at_a_path_the_series_creates_is_refused_and_kept(lab: Lab) -> None:
    config = lab.store / "stackmgr.toml"
    config.write_text("max_untracked_bytes = 100\n" + config.read_text())
    (lab.tree / "w.bin").write_bytes(b"small")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "w.bin").write_bytes(b"W" * 500)
    result = lab.sm("apply", "s")
    assert result.code == 3 and "files in the way: w.bin" in result.err
    assert (lab.tree / "w.bin").read_bytes() == b"W" * 500


def test_an_unprotected_file_in_a_directory_the_series_turns_into_a_symlink_is_refused(lab: Lab) -> None:
    config = lab.store / "stackmgr.toml"
    config.write_text("max_untracked_bytes = 100\n" + config.read_text())
    shutil.rmtree(lab.tree / "src")
    os.symlink("README", lab.tree / "src")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "src" / "weights.bin").write_bytes(b"W" * 500)
    result = lab.sm("apply", "s")
    assert result.code == 3 and "src" in result.err
    assert (lab.tree / "src" / "weights.bin").read_bytes() == b"W" * 500


def test_an_ignored_file_in_a_tracked_directory_that_reset_turns_into_a_file_is_refused(lab: Lab) -> None:
    (lab.tree / ".git" / "info" / "exclude").write_text("__pycache__/\n")
    (lab.tree / "README").unlink()
    (lab.tree / "README").mkdir()
    (lab.tree / "README" / "index.md").write_text("docs\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    (lab.tree / "README" / "__pycache__").mkdir()
    (lab.tree / "README" / "__pycache__" / "x.pyc").write_text("cache\n")
    result = lab.sm("reset")
    assert result.code == 3 and "README" in result.err
    assert (lab.tree / "README" / "__pycache__" / "x.pyc").read_text() == "cache\n"


def test_symlink_and_directory_type_changes_round_trip(lab: Lab) -> None:
    shutil.rmtree(lab.tree / "src")
    os.symlink("elsewhere", lab.tree / "src")
    (lab.tree / "elsewhere").mkdir()
    (lab.tree / "elsewhere" / "x.py").write_text("x\n")
    (lab.tree / "README").unlink()
    (lab.tree / "README").mkdir()
    (lab.tree / "README" / "index.md").write_text("docs\n")
    wanted, files = lab.worktree_id(), _files(lab.tree)
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    assert set(_files(lab.tree)) == {"README", "src/model.py"} and _status(lab.tree) == b""
    assert lab.sm("apply", "s").code == 0
    assert lab.worktree_id() == wanted and _files(lab.tree) == files
    assert lab.sm("check").code == 0
    assert lab.sm("reset").code == 0 and set(_files(lab.tree)) == {"README", "src/model.py"}


def test_apply_b_while_a_is_applied_then_again_then_reset_twice(lab: Lab) -> None:
    base = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "README").write_text("A\n")
    assert lab.sm("save", "a", "--series", "A", "-m", "a").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "new.txt").write_text("B\n")
    assert lab.sm("save", "b", "--series", "B", "-m", "b").code == 0
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "A").code == 0
    assert lab.sm("apply", "B").code == 0
    assert (lab.tree / "README").read_text() == "hello\n" and (lab.tree / "new.txt").read_text() == "B\n"
    again = lab.sm("apply", "B")
    assert again.code == 0 and "working tree already there" in again.out
    applied = _applied(lab)
    assert applied is not None and applied["series"] == "B" and applied["matches"] is True
    assert lab.sm("reset").out == f"vllm: reset to {base[:12]}\n"
    assert lab.sm("reset").out == f"vllm: already at {base[:12]}\n"
    assert _status(lab.tree) == b"" and _applied(lab) is None


def test_save_series_refreshing_the_top_patch_then_apply(lab: Lab) -> None:
    (lab.tree / "README").write_text("one\n")
    assert lab.sm("save", "one", "--series", "s", "-m", "one").code == 0
    (lab.tree / "new.txt").write_text("two\n")
    assert lab.sm("save", "two", "--series", "s", "-m", "two").code == 0
    (lab.tree / "new.txt").write_text("two, refreshed\n")
    assert lab.sm("save", "two", "--series", "s", "-m", "two").code == 3, "an existing name needs --update"
    assert lab.sm("save", "two", "--series", "s", "-m", "two", "--update").code == 0
    two = (lab.store / "patches" / "two.patch").read_text()
    assert "+two, refreshed" in two and "README" not in two, "the refreshed top patch holds only its own change"
    assert (lab.store / "series" / "s").read_text().count("two.patch") == 1
    wanted = lab.worktree_id()
    applied = _applied(lab)
    assert applied is not None and applied["patches"] == ["one", "two"] and applied["matches"] is True
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "s").code == 0 and lab.worktree_id() == wanted
    applied = _applied(lab)
    assert applied is not None and applied["matches"] is True


def test_recover_when_the_original_branch_moved_on(lab: Lab) -> None:
    old_head = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "README").write_text("unsaved\n")
    (lab.tree / "u.txt").write_text("untracked\n")
    wanted = lab.worktree_id()
    rid = _rid(lab.sm("reset", "--force").err)
    (lab.tree / "c.txt").write_text("c\n")
    git(lab.tree, "add", "c.txt")
    git(lab.tree, "commit", "-qm", "moved on")
    tip = git_text(lab.tree, "rev-parse", "HEAD")
    assert lab.sm("recover", rid).code == 0
    assert lab.worktree_id() == wanted
    assert _head_name(lab.tree) == "HEAD" and git_text(lab.tree, "rev-parse", "HEAD") == old_head
    assert git_text(lab.tree, "rev-parse", "main") == tip, "the branch keeps its new commit"
    assert lab.sm("check").code == 1, "the recovered work is unsaved again, and check says so"


def test_recover_into_a_tree_on_another_branch(lab: Lab) -> None:
    (lab.tree / "README").write_text("unsaved\n")
    rid = _rid(lab.sm("reset", "--force").err)
    git(lab.tree, "checkout", "-qb", "feature")
    (lab.tree / "f.txt").write_text("f\n")
    git(lab.tree, "add", "f.txt")
    git(lab.tree, "commit", "-qm", "feature work")
    feature = git_text(lab.tree, "rev-parse", "feature")
    assert lab.sm("recover", rid).code == 0
    assert _head_name(lab.tree) == "main" and (lab.tree / "README").read_text() == "unsaved\n"
    assert not (lab.tree / "f.txt").exists() and git_text(lab.tree, "rev-parse", "feature") == feature


def test_reset_force_after_a_stash_pop_conflict_then_recover(lab: Lab) -> None:
    (lab.tree / "README").write_text("stashed edit\n")
    git(lab.tree, "stash", "-q")
    (lab.tree / "README").write_text("committed edit\n")
    git(lab.tree, "commit", "-qam", "c")
    assert subprocess.run(["git", "stash", "pop"], cwd=lab.tree, capture_output=True).returncode != 0
    assert _status(lab.tree) == b"UU README\n" and not (lab.tree / ".git" / "MERGE_HEAD").exists()
    conflicted = (lab.tree / "README").read_text()
    refused = lab.sm("reset")
    assert refused.code == 1 and "README (unmerged)" in refused.err
    forced = lab.sm("reset", "--force")
    assert forced.code == 0 and _status(lab.tree) == b""
    assert lab.sm("recover", _rid(forced.err)).code == 0
    assert (lab.tree / "README").read_text() == conflicted and _status(lab.tree) == b" M README\n"
    assert git(lab.tree, "stash", "list") != b"", "git kept the stash after the failed pop"


def test_a_linked_worktree_alone_applies_and_resets(lab: Lab, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(lab.tree, "worktree", "add", "-q", "-b", "side", str(wt))
    store = tmp_path / "store-wt"
    assert run_stackmgr("init", str(store)).code == 0
    wlab = Lab(store, wt)
    assert wlab.sm("tree", "add", "vllm", str(wt)).code == 0
    (wt / "README").write_text("in the worktree\n")
    (wt / "n.txt").write_text("new\n")
    wanted = _worktree_id(wt)
    assert wlab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert wlab.sm("reset").code == 0 and _status(wt) == b""
    assert wlab.sm("apply", "s").code == 0 and _worktree_id(wt) == wanted
    assert _head_name(wt) == "HEAD" and _head_name(lab.tree) == "main", "only the worktree's HEAD moves"
    (wt / "README").write_text("unsaved\n")
    rid = _rid(wlab.sm("reset", "--force").err)
    assert wlab.sm("recover", rid).code == 0 and (wt / "README").read_text() == "unsaved\n"
    assert _status(lab.tree) == b""


def test_paths_with_spaces(tmp_path: Path) -> None:
    tree = make_repo(tmp_path / "my trees" / "vllm tree", {"a b.txt": "x\n", "d ir/f": "y\n"})
    store = tmp_path / "my store"
    assert run_stackmgr("init", str(store)).code == 0
    lab = Lab(store, tree)
    assert lab.sm("tree", "add", "vllm", str(tree)).code == 0
    (tree / "a b.txt").write_text("changed\n")
    (tree / "d ir" / "new file").write_text("n\n")
    wanted = lab.worktree_id()
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0 and _status(tree) == b""
    assert lab.sm("apply", "s").code == 0 and lab.worktree_id() == wanted
    (tree / "a b.txt").write_text("unsaved\n")
    forced = lab.sm("reset", "--force")
    assert forced.code == 0
    assert lab.sm("recover", _rid(forced.err)).code == 0 and (tree / "a b.txt").read_text() == "unsaved\n"


def test_a_second_store_on_the_same_tree_does_not_reset_what_only_the_first_preserves(lab: Lab, tmp_path: Path) -> None:
    store2 = tmp_path / "store2"
    assert run_stackmgr("init", str(store2)).code == 0
    assert run_stackmgr("--store", str(store2), "tree", "add", "vllm", str(lab.tree)).code == 0
    wanted = _save_day(lab)
    assert lab.sm("apply", "day").code == 0
    refused = run_stackmgr("--store", str(store2), "reset")
    assert refused.code == 1 and "results.log (added)" in refused.err
    assert lab.worktree_id() == wanted
    assert run_stackmgr("--store", str(store2), "check").code == 1


def test_reset_to_another_branch_tip_detaches_and_leaves_both_branches(lab: Lab) -> None:
    base = git_text(lab.tree, "rev-parse", "HEAD")
    git(lab.tree, "checkout", "-qb", "feature")
    (lab.tree / "feat.txt").write_text("f\n")
    git(lab.tree, "add", "feat.txt")
    git(lab.tree, "commit", "-qm", "feat")
    tip = git_text(lab.tree, "rev-parse", "HEAD")
    git(lab.tree, "checkout", "-q", "main")
    assert lab.sm("reset", "--to", "feature").code == 0
    assert _head_name(lab.tree) == "HEAD" and git_text(lab.tree, "rev-parse", "HEAD") == tip
    assert git_text(lab.tree, "rev-parse", "main") == base and _status(lab.tree) == b""
    assert (lab.tree / "feat.txt").read_text() == "f\n"
    assert lab.sm("reset", "--to", "main").code == 0
    assert git_text(lab.tree, "rev-parse", "HEAD") == base and _status(lab.tree) == b""
    assert not (lab.tree / "feat.txt").exists()


def test_check_running_while_apply_and_reset_run(lab: Lab) -> None:
    """Every state a concurrent `check` can observe is preserved: it never says otherwise, never crashes."""
    for i in range(300):
        (lab.tree / "src" / f"m{i}.py").write_text(f"x = {i}\n")
    git(lab.tree, "add", "-A")
    git(lab.tree, "commit", "-qm", "many files")
    for i in range(0, 300, 3):
        (lab.tree / "src" / f"m{i}.py").write_text(f"x = {i} + 1\n")
    for i in range(50):
        (lab.tree / f"new{i}.txt").write_text(f"{i}\n")
    wanted = lab.worktree_id()
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    stop = threading.Event()
    seen: list[tuple[int, bytes]] = []

    def checker() -> None:
        while not stop.is_set():
            proc = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), "check"],
                                  capture_output=True)  # fmt: skip
            seen.append((proc.returncode, proc.stderr))

    threads = [threading.Thread(target=checker) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(4):
            assert lab.sm("apply", "s").code == 0
            assert lab.sm("reset").code == 0
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert seen and all(s == (0, b"") for s in seen), seen
    assert lab.sm("apply", "s").code == 0 and lab.worktree_id() == wanted
