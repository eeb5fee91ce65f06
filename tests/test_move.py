"""Moving a tree (safety.tree_move.move_tree, under apply, reset and recover): a file that changes between the check
and the switch, a lock another git holds, an error after the switch, or a second tree that refuses leaves every
tree as it was; HEAD moves by compare-and-swap; a concurrent `check` never sees unpreserved work."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from stackmgr.git import real_index
from stackmgr.safety import tree_move
from tests.conftest import Lab, git, git_text, head_name, make_repo, save_day, unsaved_work
from tests.conftest import tree_files as _files


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


# --- one tree: the window between the check and the switch ------------------------------------------------------------


def test_a_file_changed_between_check_and_switch_is_refused_and_kept(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    unsaved_work(lab)
    lab.sm("save", "work", "-m", "m")

    def editor_autosave(_snap: object) -> None:
        (lab.tree / "src" / "model.py").write_text("def f():\n    return 3  # typed after the check\n")

    monkeypatch.setattr(tree_move, "before_switch", editor_autosave)
    result = lab.sm("reset")
    assert result.code == 3
    assert "refused, nothing changed" in result.err and "src/model.py" in result.err
    assert (lab.tree / "src" / "model.py").read_text() == "def f():\n    return 3  # typed after the check\n"
    assert (lab.tree / "results.log").read_text() == "107.77 tok/s\n"
    monkeypatch.setattr(tree_move, "before_switch", None)
    assert lab.sm("check").code == 1, "the late edit is unsaved, and check says so"


def test_an_untracked_file_appearing_in_the_way_of_apply_is_refused(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    (lab.tree / "new.txt").write_text("from the series\n")
    lab.sm("save", "add-new", "--series", "s", "-m", "m")
    lab.sm("reset")

    def build_output_lands(_snap: object) -> None:
        (lab.tree / "new.txt").write_text("written by a running build\n")

    monkeypatch.setattr(tree_move, "before_switch", build_output_lands)
    result = lab.sm("apply", "s")
    assert result.code == 3 and "files in the way (1 path)" in result.err and "\n  new.txt\n" in result.err
    assert (lab.tree / "new.txt").read_text() == "written by a running build\n"


def test_an_index_lock_held_by_another_git_refuses_before_any_file_changes(lab: Lab) -> None:
    unsaved_work(lab)
    lab.sm("save", "work", "-m", "m")
    before = _files(lab.tree)
    (lab.tree / ".git" / "index.lock").write_bytes(b"")
    result = lab.sm("reset")
    assert result.code == 3 and "index.lock exists" in result.err
    assert _files(lab.tree) == before
    (lab.tree / ".git" / "index.lock").unlink()
    assert lab.sm("reset").code == 0


@pytest.mark.regression("HEAD moved without compare-and-swap, orphaning a commit made in the window")
def test_a_commit_made_between_the_check_and_the_head_move_is_not_orphaned(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tree_move.move_tree / refs.detach_head: `update-ref --no-deref HEAD new` has no old value, so a commit made on a
    detached HEAD after the check is orphaned by the move."""
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


@pytest.mark.regression("an error after the switch left the tree half-moved")
def test_an_error_after_the_switch_puts_the_tree_back(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """an exception after the switch (disk full, Ctrl-C) left the working tree moved."""
    wanted = save_day(lab)
    before, index, head = _files(lab.tree), (lab.tree / ".git" / "index").read_bytes(), head_name(lab.tree)

    def disk_full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    faults = pytest.MonkeyPatch()  # its own: undoing it keeps the hermetic git environment (tests/conftest.py)
    faults.setattr(real_index.RealIndexLock, "commit", disk_full)
    result = lab.sm("apply", "day")
    assert result.code == 3 and "No space left on device" in result.err and "put back" in result.err
    assert _files(lab.tree) == before and (lab.tree / ".git" / "index").read_bytes() == index
    assert head_name(lab.tree) == head and not (lab.tree / ".git" / "index.lock").exists()
    faults.undo()
    assert lab.sm("check").code == 0
    assert lab.sm("apply", "day").code == 0 and lab.worktree_id() == wanted


# --- two trees: all or nothing ----------------------------------------------------------------------------------------


def test_a_series_spanning_two_trees_rolls_the_first_back_when_the_second_refuses(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernels = make_repo(tmp_path / "kernels", {"k.cpp": "int k;\n"})
    lab.sm("tree", "add", "kernels", str(kernels))
    (lab.tree / "README").write_text("vllm side\n")
    lab.sm("save", "v", "-t", "vllm", "-m", "v")
    (kernels / "k.cpp").write_text("int k = 1;\n")
    lab.sm("save", "k", "-t", "kernels", "-m", "k")
    assert lab.sm("reset").code == 0
    (lab.store / "series" / "both").write_text("v.patch\nk.patch\n")
    vllm_before, vllm_index = _files(lab.tree), (lab.tree / ".git" / "index").read_bytes()
    vllm_head = git_text(lab.tree, "symbolic-ref", "HEAD")

    def kernels_build_writes(snap: object) -> None:
        if getattr(snap, "tree", "") == "kernels":
            (kernels / "k.cpp").write_text("int k = 2; // build\n")

    monkeypatch.setattr(tree_move, "before_switch", kernels_build_writes)
    result = lab.sm("apply", "both")
    assert result.code == 3 and "k.cpp" in result.err
    assert _files(lab.tree) == vllm_before, "the first tree is put back as it was"
    assert (lab.tree / ".git" / "index").read_bytes() == vllm_index
    assert git_text(lab.tree, "symbolic-ref", "HEAD") == vllm_head
    monkeypatch.setattr(tree_move, "before_switch", None)
    (kernels / "k.cpp").write_text("int k;\n")
    assert lab.sm("apply", "both").code == 0
    assert (lab.tree / "README").read_text() == "vllm side\n" and (kernels / "k.cpp").read_text() == "int k = 1;\n"


@pytest.mark.regression("the index lock was taken after the switch instead of before it")
def test_apply_of_two_trees_when_another_git_holds_the_second_index(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """the index lock was checked before the switch but taken after it. It is now held from before the first file
    changes; another git holding the second tree's index rolls the first tree back."""
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


@pytest.mark.regression("a two-tree reset --force left the first tree reset when the second refused")
def test_reset_force_of_two_trees_where_the_second_refuses_at_the_switch(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """a later tree refusing at move time left the earlier tree reset, with a message saying 'nothing changed'. Now the
    journal puts the earlier tree back, so the message is true."""
    kernels = _add_kernels(lab, tmp_path)
    (kernels / "k.cpp").write_text("int k = 1; // unsaved\n")
    (lab.tree / "README").write_text("vllm work, unsaved\n")

    def vllm_autosave(snap: object) -> None:
        if getattr(snap, "tree", "") == "vllm":
            (lab.tree / "README").write_text("typed after the check\n")

    monkeypatch.setattr(tree_move, "before_switch", vllm_autosave)
    result = lab.sm("reset", "--force")
    assert result.code == 3 and "README" in result.err
    # With the operation journal a multi-tree reset is all or nothing: kernels is put back.
    assert (kernels / "k.cpp").read_text() == "int k = 1; // unsaved\n"
    assert (lab.tree / "README").read_text() == "typed after the check\n"
    assert lab.sm("check", "kernels").code == 1 and lab.sm("log", "-n", "1").out.count("[rolled-back]") == 1


@pytest.mark.regression('"nothing changed" was reported after the first of two trees was reset')
def test_reset_of_two_trees_where_the_second_refuses_at_the_switch_names_what_changed(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """a refusal of the second tree at move time reported 'refused, nothing changed' although the first tree was reset.
    Now the first tree is put back (the journal's rollback)."""
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


@pytest.mark.slow
@pytest.mark.regression("edge case: check running while apply and reset run")
def test_a_check_running_while_apply_and_reset_run_never_sees_unpreserved_work(lab: Lab) -> None:
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
