"""Fresh-eyes review of the operation journal and undo (journal.py, undo.py, the hooks in checkout.py and
fsutil.py) and of apply's result check (verify.py). Each test pinned one bug the review found; all are fixed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Lab, git, git_text


def stackmgr(store: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(store), *args],
                          capture_output=True, text=True, env={**os.environ, **env})  # fmt: skip


def _saved_and_reset(lab: Lab) -> None:
    """Series S (one patch changing src/model.py) saved, and the tree reset to its base: ready for `apply S`."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    assert lab.sm("reset").code == 0


def _current_record(lab: Lab) -> str:
    ops = lab.store / ".stackmgr" / "ops"
    return (ops / (ops / "CURRENT").read_text().strip() / "op").read_text()


def test_undo_keeps_a_version_staged_after_the_operation(lab: Lab) -> None:
    """After `apply S` the user stages a version of README (`git add`), then keeps editing it. README is not a
    path the apply touched, yet `undo` restores the index bytes saved before the apply: the staged version,
    which existed only in the index, is silently gone (a dangling blob). `check` had called it unpreserved;
    `reset` would have refused; undo flattens it without a word (docs/ARCHITECTURE.md#invariants, 4: a
    staged-and-unstaged difference is never flattened silently). Cause: undo._tree_back restores `index/<tree>`
    unconditionally and never assesses the tree."""
    _saved_and_reset(lab)
    assert lab.sm("apply", "S").code == 0
    (lab.tree / "README").write_text("staged version\n")
    git(lab.tree, "add", "README")
    (lab.tree / "README").write_text("working-tree version\n")
    staged = git_text(lab.tree, "rev-parse", ":README")
    assert lab.sm("check").code == 1
    result = lab.sm("undo")
    assert git_text(lab.tree, "rev-parse", ":README") == staged or result.code != 0, result


def test_recover_keeps_a_series_edit_made_after_the_crash(lab: Lab) -> None:
    """`save b --series S` is killed after it rewrote series/S. The user opens series/S, sees b, and adds a
    line of their own. `stackmgr recover` (or any next command) puts back the pre-crash bytes without looking:
    the user's line is lost, with exit 0. For trees the rollback refuses when a path holds neither its old nor
    its new version; store files get no such check (undo._file_back, roll_back; the record keeps no `after` stat
    until finish)."""
    (lab.tree / "README").write_text("a\n")
    assert lab.sm("save", "a", "--series", "S", "-m", "a").code == 0
    (lab.tree / "src" / "model.py").write_text("b = 1\n")
    killed = stackmgr(lab.store, "save", "b", "src/model.py", "--series", "S", "-m", "b", STACKMGR_CRASH_AT="save:3")
    assert killed.returncode == -9
    assert (lab.store / "series" / "S").read_text() == "a.patch\nb.patch\n"
    with (lab.store / "series" / "S").open("a") as f:
        f.write("# b needs a rebase before the next run\n")
    stackmgr(lab.store, "recover")
    assert "needs a rebase" in (lab.store / "series" / "S").read_text()


def test_recover_leaves_another_gits_index_lock_alone(lab: Lab) -> None:
    """`apply S` is killed after its index.lock was renamed into place as the index. The record still names
    that lock's dev:ino (tree_progress never writes `lock -`). The user's `git add` then replaces the index,
    freeing the inode, and the next git (an IDE's) creates index.lock, which ext4 gives the same inode number.
    `stackmgr recover` takes it for its own, unlinks it under the other git, and rewrites the index. Cause:
    journal.Operation.tree_progress keeps lock_released in memory only; undo._drop_own_index_lock trusts an inode
    number that no longer names a file stackmgr holds."""
    _saved_and_reset(lab)
    assert stackmgr(lab.store, "apply", "S", STACKMGR_CRASH_AT="apply:3").returncode == -9  # after index commit
    lock_field = next(ln for ln in _current_record(lab).splitlines() if ln.startswith("tree\t")).split("\t")[9]
    (lab.tree / "x.txt").write_text("x\n")
    git(lab.tree, "add", "x.txt")  # a new index by rename: the recorded inode is free again
    fd = os.open(lab.tree / ".git" / "index.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # another git at work
    try:
        st = os.fstat(fd)
        if f"{st.st_dev}:{st.st_ino}" != lock_field:
            pytest.skip("the filesystem did not reuse the inode number")
        stackmgr(lab.store, "recover")
        assert (lab.tree / ".git" / "index.lock").exists(), "another git's index.lock was removed"
    finally:
        os.close(fd)


def test_rollback_of_an_interrupted_reset_survives_git_gc(lab: Lab) -> None:
    """`reset` is killed right after the switch: the saved edit and the untracked notes.txt are gone from the
    tree. Before recovering, the user runs `git gc --prune=now` (anchors are promised to keep snapshots from gc).
    The before-snapshot was only ever referenced by stackmgr's private index, so gc deletes it; `recover` then
    fails with `fatal: bad object`, and every later command fails the same way (its hint says to run recover):
    the store is stuck until CURRENT is removed by hand. Cause: undo.anchor_moves runs only in
    Operation.finish; tree_moving records the move but anchors nothing."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (lab.tree / "notes.txt").write_text("untracked, saved\n")
    assert lab.sm("save", "p", "-m", "p").code == 0
    assert stackmgr(lab.store, "reset", STACKMGR_CRASH_AT="reset:2").returncode == -9
    git(lab.tree, "gc", "-q", "--prune=now")
    recovered = stackmgr(lab.store, "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert (lab.tree / "notes.txt").read_text() == "untracked, saved\n"


def test_after_a_crash_an_edit_to_a_moved_file_can_be_saved(lab: Lab) -> None:
    """`apply S` is killed after the switch; the user, not noticing, edits src/model.py (a path the apply wrote).
    Every mutating command first rolls the apply back, which refuses because of that edit, and says: "save the
    change (`stackmgr save NAME`) or put the file back, then retry". `stackmgr save NAME` fails with that same
    message (exit 3): the user cannot save their work with stackmgr at all, only by discarding the edit or
    deleting ops/CURRENT by hand. Cause: journal.operation.__enter__ makes the rollback a precondition of every
    command; the hint in undo._old_versions assumes save can run."""
    _saved_and_reset(lab)
    assert stackmgr(lab.store, "apply", "S", STACKMGR_CRASH_AT="apply:4").returncode == -9
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 42  # my edit\n")
    saved = stackmgr(lab.store, "save", "mine", "-m", "mine")
    assert saved.returncode == 0, saved.stderr


def test_a_type_change_reverted_by_a_later_patch_applies(lab: Lab) -> None:
    """p1 turns README into a symlink, p2 (saved on top, same series) turns it back into the original file. Both
    were saved and round-trip verified; `apply S` refuses: "patch p2 does not build README as it records
    (100644 … expected, no file built)", exit 3. Cause: patchfile.post_images keeps only the creation section of
    a type change, so verify.claims records README as absent before the series (first = None) instead of the
    base's regular file; when the series ends where it started, check_result compares against that."""
    (lab.tree / "README").unlink()
    (lab.tree / "README").symlink_to("src/model.py")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    (lab.tree / "README").unlink()
    (lab.tree / "README").write_text("hello\n")
    assert lab.sm("save", "p2", "--series", "S", "-m", "p2").code == 0
    assert lab.sm("reset").code == 0
    result = lab.sm("apply", "S")
    assert result.code == 0, result.err


def test_undo_does_not_check_out_a_branch_twice(lab: Lab, tmp_path: Path) -> None:
    """Tree vllm is on main; a linked worktree is on feature. `apply S` detaches vllm's HEAD, so main is free and
    the user checks it out in the linked worktree. `undo` re-attaches vllm to main without asking git: main is
    now checked out in two worktrees (git itself refuses this), and a commit in one silently makes the other's
    tree and index look like it reverts that commit. Cause: undo._tree_back → refs.attach_head (symbolic-ref)
    only checks that the branch still points at head_before."""
    wt = tmp_path / "wt"
    git(lab.tree, "branch", "feature")
    git(lab.tree, "worktree", "add", "-q", str(wt), "feature")
    _saved_and_reset(lab)
    assert lab.sm("apply", "S").code == 0
    git(wt, "checkout", "-q", "main")
    lab.sm("undo")
    listing = git_text(lab.tree, "worktree", "list", "--porcelain")
    assert listing.count("branch refs/heads/main") == 1, listing


def test_undo_that_moves_only_head_is_recorded(lab: Lab) -> None:
    """Save a change into series S, then `apply S` straight away (the tree already is the result): apply only
    detaches HEAD. `undo` re-attaches HEAD to main, but prints "nothing to change: `apply S` … left no trace to
    revert" and records no operation, so `log` does not show it and `undo` again cannot redo it (it undoes the
    apply again). Cause: undo._tree_back changes HEAD/branch/index with refs.detach_head, attach_head and
    checkout.restore_index outside move_tree, so nothing reaches the journal."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    assert lab.sm("apply", "S").code == 0
    assert git_text(lab.tree, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # detached
    result = lab.sm("undo")
    assert result.code == 0, result.err
    assert git_text(lab.tree, "rev-parse", "--abbrev-ref", "HEAD") == "main"  # it did change something
    assert "nothing to change" not in result.out, result.out


def test_log_of_a_rolled_back_save_does_not_claim_deletions(lab: Lab) -> None:
    """`save p --series S` is killed and rolled back. `log` (and `log --json`) then lists it with `D
    patches/p.patch`, `D series/S`: deletions that never happened (it created them; now they do not exist). A
    rolled-back or interrupted record keeps after = "-", which cli_journal._file_letter reads as "deleted"."""
    (lab.tree / "README").write_text("edited\n")
    assert stackmgr(lab.store, "save", "p", "--series", "S", "-m", "p", STACKMGR_CRASH_AT="save:3").returncode == -9
    assert stackmgr(lab.store, "recover").returncode == 0
    ops = json.loads(lab.sm("log", "--json").out)["operations"]
    rolled = next(o for o in ops if o["state"] == "rolled-back")
    assert all(f["change"] != "D" for f in rolled["files"]), rolled
