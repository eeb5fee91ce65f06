"""The operation log (docs/FORMATS.md#operation-journal): `log` lists every mutating command, `undo` reverts the last
one (and `redo` redoes it; tests/test_undo_walk.py walks further), snapshots are anchored against `git gc`, and
`gc` prunes only when asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Lab, git, git_text
from tests.conftest import stackmgr_process as stackmgr
from tests.reliability.conftest import REBUILDABLE, assert_one_line_error, changed_paths, fingerprint


def _state(lab: Lab) -> tuple[str, str, str, bytes]:
    branch = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=lab.tree, capture_output=True, text=True)
    return lab.worktree_id(), git_text(lab.tree, "rev-parse", "HEAD"), branch.stdout, git(lab.tree, "ls-files", "-s")


def _ops(lab: Lab) -> list[dict[str, object]]:
    result = lab.sm("log", "--json")
    assert result.code == 0, result.err
    return list(json.loads(result.out)["operations"])


def test_log_lists_each_mutating_command_with_trees_and_files(lab: Lab) -> None:
    """Every command that changed something is listed, newest first, with its trees and store files."""
    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    before = lab.worktree_id()
    assert lab.sm("reset").code == 0
    assert lab.sm("status").code == 0 and lab.sm("check").code == 0  # read-only: not logged
    ops = _ops(lab)
    assert [o["command"] for o in ops] == ["reset", "save p", "tree add vllm"]
    reset, save = ops[0], ops[1]
    assert reset["state"] == "done" and reset["trees"] == [
        {"tree": "vllm", "before": before, "after": git_text(lab.tree, "rev-parse", "HEAD^{tree}"),
         "head_before": git_text(lab.tree, "rev-parse", "HEAD"), "head_after": git_text(lab.tree, "rev-parse", "HEAD"),
         "moved": True}]  # fmt: skip
    assert {f["path"]: f["change"] for f in save["files"]} == {  # type: ignore[union-attr]
        "patches/p.patch": "A", "series/S": "A", ".stackmgr/applied.json": "A"}  # fmt: skip
    text = lab.sm("log").out
    assert "reset" in text and "A patches/p.patch" in text and "tree vllm:" in text


def test_a_refused_command_records_nothing(lab: Lab) -> None:
    """A command that changes nothing (refused, or nothing to do) leaves no operation behind."""
    (lab.tree / "README").write_text("unsaved\n")
    assert lab.sm("reset").code == 1
    assert lab.sm("save", "bad/name").code == 2
    assert [o["command"] for o in _ops(lab)] == ["tree add vllm"]


def test_undo_save_then_redo_it(lab: Lab) -> None:
    """Undo of a save removes the patch and the series entry; `redo` puts back the same bytes."""
    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    patch = (lab.store / "patches" / "p.patch").read_bytes()
    result = lab.sm("undo")
    assert result.code == 0 and "undid `save p`" in result.out
    assert not (lab.store / "patches" / "p.patch").exists() and not (lab.store / "series" / "S").exists()
    assert lab.sm("check").code == 1, "the edit is unpreserved again (and still in the tree)"
    assert (lab.tree / "README").read_text() == "edited\n"
    assert lab.sm("redo").code == 0
    assert (lab.store / "patches" / "p.patch").read_bytes() == patch and lab.sm("check").code == 0
    assert [o["command"] for o in _ops(lab)][:2] == [f"redo {_ops(lab)[2]['id']} (save p)",
                                                     f"undo {_ops(lab)[2]['id']} (save p)"]  # fmt: skip


def test_undo_apply_restores_tree_index_head_and_branch(lab: Lab) -> None:
    """apply detaches HEAD at the base and rewrites the tree; undo brings back the tree, the exact index, the branch."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (lab.tree / "new.txt").write_text("new\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "README").write_text("staged elsewhere\n")
    git(lab.tree, "add", "README")
    assert lab.sm("save", "readme").code == 0
    before = _state(lab)
    assert before[2] == "refs/heads/main\n"
    assert lab.sm("apply", "S").code == 0
    assert _state(lab) != before
    assert lab.sm("undo").code == 0
    assert _state(lab) == before


def test_undo_keeps_edits_made_after_the_operation(lab: Lab) -> None:
    """Only the paths the operation moved go back; a file edited afterwards elsewhere is left as it is."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "S").code == 0
    (lab.tree / "README").write_text("typed after apply\n")
    assert lab.sm("undo").code == 0
    assert (lab.tree / "src" / "model.py").read_text() == "def f():\n    return 1\n"
    assert (lab.tree / "README").read_text() == "typed after apply\n"


def test_undo_refuses_when_a_moved_path_changed_since(lab: Lab) -> None:
    """A path the operation wrote and the user then edited: undo refuses, naming it, and changes nothing."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "S").code == 0
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    before = fingerprint(lab.store, lab.tree)
    result = lab.sm("undo")
    assert result.code == 3
    assert_one_line_error(result.err, "src/model.py")
    assert changed_paths(before, fingerprint(lab.store, lab.tree), REBUILDABLE) == []


def test_undo_refuses_when_a_store_file_changed_since(lab: Lab) -> None:
    """A series file edited by hand after the save: undo refuses and names it."""
    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    with (lab.store / "series" / "S").open("a") as f:
        f.write("# a note\n")
    before = fingerprint(lab.store, lab.tree)
    result = lab.sm("undo")
    assert result.code == 3
    assert_one_line_error(result.err, "series/S")
    assert changed_paths(before, fingerprint(lab.store, lab.tree), REBUILDABLE) == []


def test_undo_a_forced_reset_brings_back_unsaved_work(lab: Lab) -> None:
    """reset --force of unsaved work, then undo: every byte is back, untracked file included."""
    (lab.tree / "README").write_text("never saved\n")
    (lab.tree / "scratch.bin").write_bytes(b"\x00\xff" * 100)
    before = _state(lab)
    assert lab.sm("reset", "--force").code == 0
    assert not (lab.tree / "scratch.bin").exists()
    assert lab.sm("undo").code == 0
    assert _state(lab) == before and (lab.tree / "scratch.bin").read_bytes() == b"\x00\xff" * 100


def test_undo_link_removes_the_record(evidence_lab: Lab) -> None:
    lab = evidence_lab
    assert lab.sm("link", "replay-fix", "results/probe.log", "--verdict", "rejected").code == 0
    assert len(list((lab.store / "links" / "replay-fix").glob("*.toml"))) == 1
    assert lab.sm("undo").code == 0
    assert not (lab.store / "links" / "replay-fix").exists()


def test_undo_an_older_operation_by_id_and_nothing_to_undo(lab: Lab) -> None:
    """`undo OP` reverts that operation when nothing it touched changed since; unknown ids are usage errors."""
    (lab.tree / "README").write_text("a\n")
    assert lab.sm("save", "a", "-m", "a").code == 0
    (lab.tree / "src" / "model.py").write_text("b = 1\n")
    assert lab.sm("save", "b", "src/model.py", "-m", "b").code == 0
    first = next(o for o in _ops(lab) if o["command"] == "save a")
    assert lab.sm("undo", str(first["id"])).code == 0
    assert not (lab.store / "patches" / "a.patch").exists() and (lab.store / "patches" / "b.patch").exists()
    result = lab.sm("undo", "ffffffff")
    assert result.code == 2
    assert_one_line_error(result.err, "ffffffff")


def test_snapshots_survive_git_gc_and_undo_still_works(lab: Lab) -> None:
    """The before/after snapshots of tree moves are anchored under refs/stackmgr/ops/: `git gc --prune=now`
    keeps them, so undo long after still restores an untracked file that exists nowhere else."""
    (lab.tree / "only-here.txt").write_text("precious\n")
    assert lab.sm("save", "keep", "-m", "k").code == 0
    assert lab.sm("reset").code == 0
    (lab.store / "patches" / "keep.patch").unlink()  # the patch is gone too: only the anchors hold it
    refs = git_text(lab.tree, "for-each-ref", "--format=%(refname)", "refs/stackmgr/ops/")
    assert sorted(r.rsplit("/", 1)[1] for r in refs.splitlines()) == ["after", "before"]
    git(lab.tree, "reflog", "expire", "--expire=now", "--all")
    git(lab.tree, "gc", "-q", "--prune=now")
    reset_op = _ops(lab)[0]
    assert reset_op["command"] == "reset"
    assert git_text(lab.tree, "cat-file", "-t", str(reset_op["trees"][0]["before"])) == "tree"  # type: ignore[index]
    assert lab.sm("undo").code == 0
    assert (lab.tree / "only-here.txt").read_text() == "precious\n"


def test_gc_prunes_only_when_asked_and_never_recovery_snapshots(lab: Lab) -> None:
    (lab.tree / "README").write_text("unsaved\n")
    assert lab.sm("reset", "--force").code == 0
    for i in range(3):
        (lab.tree / "README").write_text(f"v{i}\n")
        assert lab.sm("save", f"p{i}", "-m", "p").code == 0
    assert lab.sm("gc").code == 2
    assert len(_ops(lab)) == 5
    dry = lab.sm("gc", "--keep", "2", "--dry-run")
    assert dry.code == 0 and "would forget 3 operations" in dry.out and len(_ops(lab)) == 5
    assert lab.sm("gc", "--keep", "2").code == 0
    assert [o["command"] for o in _ops(lab)] == ["save p2", "save p1"]
    assert git_text(lab.tree, "for-each-ref", "refs/stackmgr/ops/") == ""
    assert git_text(lab.tree, "for-each-ref", "refs/stackmgr/recovery/") != ""
    assert lab.sm("gc", "--older-than", "0").code == 0 and _ops(lab) == []


def test_interrupted_operation_blocks_check_until_recover(lab: Lab, tmp_path: Path) -> None:
    """A record left `running` (its command died) makes `check` exit 1 and say so; `recover` clears it."""
    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("save", "p", "-m", "p").code == 0
    ops = lab.store / ".stackmgr" / "ops"
    name = next(n.name for n in ops.iterdir() if n.name.endswith(str(_ops(lab)[0]["id"])))
    record = ops / name / "op"
    record.write_text(record.read_text().replace("state\tdone", "state\trunning"))
    (ops / "CURRENT").write_text(name + "\n")
    result = lab.sm("check")
    assert result.code == 1 and "was interrupted" in result.err and "stackmgr recover" in result.err
    recovered = lab.sm("recover")
    assert recovered.code == 0 and "rolled back" in recovered.err
    assert not (lab.store / "patches" / "p.patch").exists() and lab.sm("check").code == 1
    assert (lab.tree / "README").read_text() == "edited\n"


# --- edits made after an operation or a crash, branches, HEAD-only moves ----------------------------------------------


def _saved_and_reset(lab: Lab) -> None:
    """Series S (one patch changing src/model.py) saved, and the tree reset to its base: ready for `apply S`."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    assert lab.sm("reset").code == 0


def _current_record(lab: Lab) -> str:
    ops = lab.store / ".stackmgr" / "ops"
    return (ops / (ops / "CURRENT").read_text().strip() / "op").read_text()


@pytest.mark.regression("undo restored the index and dropped a version staged after the operation")
def test_undo_keeps_a_version_staged_after_the_operation(lab: Lab) -> None:
    """After `apply S` the user stages a version of README (`git add`), then keeps editing it. README is not a
    path the apply touched, yet `undo` restores the index bytes saved before the apply: the staged version,
    which existed only in the index, is silently gone (a dangling blob). `check` had called it unpreserved;
    `reset` would have refused; undo flattens it without a word (docs/ARCHITECTURE.md#invariants, 4:
    staged-and-unstaged differences are not flattened silently). Cause: the rollback's tree_back restored
    `index/<tree>` unconditionally and never assessed the tree."""
    _saved_and_reset(lab)
    assert lab.sm("apply", "S").code == 0
    (lab.tree / "README").write_text("staged version\n")
    git(lab.tree, "add", "README")
    (lab.tree / "README").write_text("working-tree version\n")
    staged = git_text(lab.tree, "rev-parse", ":README")
    assert lab.sm("check").code == 1
    result = lab.sm("undo")
    assert git_text(lab.tree, "rev-parse", ":README") == staged or result.code != 0, result


@pytest.mark.regression("undo re-attached a branch checked out in another worktree")
def test_undo_does_not_check_out_a_branch_twice(lab: Lab, tmp_path: Path) -> None:
    """Tree vllm is on main; a linked worktree is on feature. `apply S` detaches vllm's HEAD, so main is free and
    the user checks it out in the linked worktree. `undo` re-attaches vllm to main without asking git: main is
    now checked out in two worktrees (git itself refuses this), and a commit in one silently makes the other's
    tree and index look like it reverts that commit. Cause: rollback.tree_back → refs.attach_head (symbolic-ref)
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


@pytest.mark.regression("undo of a HEAD-only move was not recorded")
def test_undo_that_moves_only_head_is_recorded(lab: Lab) -> None:
    """Save a change into series S, then `apply S` straight away (the tree already is the result): apply only
    detaches HEAD. `undo` re-attaches HEAD to main, but prints "nothing to change: `apply S` … left no trace to
    revert" and records no operation, so `log` does not show it and `undo` again cannot redo it (it undoes the
    apply again). Cause: rollback.tree_back changes HEAD/branch/index with refs.detach_head, attach_head and
    tree_move.restore_index outside move_tree, so nothing reaches the journal."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    assert lab.sm("apply", "S").code == 0
    assert git_text(lab.tree, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # detached
    result = lab.sm("undo")
    assert result.code == 0, result.err
    assert git_text(lab.tree, "rev-parse", "--abbrev-ref", "HEAD") == "main"  # it did change something
    assert "nothing to change" not in result.out, result.out


@pytest.mark.slow
@pytest.mark.regression("recover put the pre-crash series bytes back over the user's edit")
def test_recover_keeps_a_series_edit_made_after_the_crash(lab: Lab) -> None:
    """`save b --series S` is killed after it rewrote series/S. The user opens series/S, sees b, and adds a
    line of their own. `stackmgr recover` (or any next command) puts back the pre-crash bytes without looking:
    the user's line is lost, with exit 0. For trees the rollback refuses when a path holds neither its old nor
    its new version; store files get no such check (rollback.file_back, roll_back; the record keeps no `after` stat
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


@pytest.mark.slow
@pytest.mark.regression("recover unlinked another git's index.lock that reused the inode")
def test_recover_leaves_another_gits_index_lock_alone(lab: Lab) -> None:
    """`apply S` is killed after its index.lock was renamed into place as the index. The record still names
    that lock's dev:ino (tree_progress never writes `lock -`). The user's `git add` then replaces the index,
    freeing the inode, and the next git (an IDE's) creates index.lock, which ext4 gives the same inode number.
    `stackmgr recover` takes it for its own, unlinks it under the other git, and rewrites the index. Cause:
    Operation.tree_progress keeps lock_released in memory only; rollback._drop_own_index_lock trusts an inode
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


@pytest.mark.slow
@pytest.mark.regression("the before-snapshot of a killed reset was not anchored against gc")
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


@pytest.mark.slow
@pytest.mark.regression("after a crash, save refused until the edit to a moved file was discarded")
def test_after_a_crash_an_edit_to_a_moved_file_can_be_saved(lab: Lab) -> None:
    """`apply S` is killed after the switch; the user, not noticing, edits src/model.py (a path the apply wrote).
    Every mutating command first rolls the apply back, which refuses because of that edit, and says: "save the
    change (`stackmgr save NAME`) or put the file back, then retry". `stackmgr save NAME` fails with that same
    message (exit 3): the user cannot save their work with stackmgr at all, only by discarding the edit or
    deleting ops/CURRENT by hand. Cause: journal.operation.__enter__ makes the rollback a precondition of every
    command; the hint in rollback._old_versions assumes save can run."""
    _saved_and_reset(lab)
    assert stackmgr(lab.store, "apply", "S", STACKMGR_CRASH_AT="apply:4").returncode == -9
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 42  # my edit\n")
    saved = stackmgr(lab.store, "save", "mine", "-m", "mine")
    assert saved.returncode == 0, saved.stderr


@pytest.mark.slow
@pytest.mark.regression("log listed a rolled-back save as deleting its files")
def test_log_of_a_rolled_back_save_does_not_claim_deletions(lab: Lab) -> None:
    """`save p --series S` is killed and rolled back. `log` (and `log --json`) then lists it with `D
    patches/p.patch`, `D series/S`: deletions that never happened (it created them; now they do not exist). A
    rolled-back or interrupted record keeps after = "-", which the log's file letter (commands/undo.py) read as
    "deleted"."""
    (lab.tree / "README").write_text("edited\n")
    assert stackmgr(lab.store, "save", "p", "--series", "S", "-m", "p", STACKMGR_CRASH_AT="save:3").returncode == -9
    assert stackmgr(lab.store, "recover").returncode == 0
    ops = json.loads(lab.sm("log", "--json").out)["operations"]
    rolled = next(o for o in ops if o["state"] == "rolled-back")
    assert all(f["change"] != "D" for f in rolled["files"]), rolled


@pytest.mark.regression("undo after a failed command redid the undo before it")
def test_undo_after_a_failed_command_undoes_the_last_operation_that_stands(lab: Lab) -> None:
    """save, reset, apply, undo, a failing apply, undo: the second undo reverts the reset (the newest operation
    still standing) and says why; it does not redo the apply the first undo reverted. `redo` then redoes the
    reset."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    dirty = lab.worktree_id()
    # Series T: p with a context line that is not in the tree (written by hand, so no operation records it).
    bad = (lab.store / "patches" / "p.patch").read_bytes().replace(b"-    return 1", b"-    return 9")
    (lab.store / "patches" / "bad.patch").write_bytes(bad)
    (lab.store / "series" / "T").write_text("bad.patch\n")
    assert lab.sm("reset").code == 0
    clean = lab.worktree_id()
    assert lab.sm("apply", "S").code == 0
    first = lab.sm("undo")
    assert first.code == 0 and first.out.startswith("undid `apply S`")
    assert lab.sm("apply", "T").code == 3
    assert lab.worktree_id() == clean
    ops = _ops(lab)
    assert [o["command"] for o in ops] == [f"undo {ops[1]['id']} (apply S)", "apply S", "reset", "save p",
                                           "tree add vllm"]  # fmt: skip
    second = lab.sm("undo")
    assert second.code == 0, second.err
    assert second.out == (f"undid `reset` (op {ops[2]['id']}), the last operation that stands: `apply T` failed "
                          "and changed nothing; `stackmgr redo` redoes it, `stackmgr undo` goes one step further "
                          "back\n")  # fmt: skip
    assert lab.worktree_id() == dirty and git_text(lab.tree, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert _ops(lab)[0]["command"] == f"undo {ops[2]['id']} (reset)"
    third = lab.sm("redo")
    assert third.code == 0 and third.out.startswith("redid `reset`") and lab.worktree_id() == clean


@pytest.mark.regression("undo reverted the operation before the last when both began in the same millisecond")
@pytest.mark.parametrize("clock", ["same millisecond", "stepped back"])
def test_undo_reverts_the_last_operation_whatever_the_clock_says(lab: Lab, monkeypatch: pytest.MonkeyPatch,
                                                                 clock: str) -> None:  # fmt: skip
    """Two operations in a row, their names' clock equal (a fast script, in-process commands) or going backwards
    (NTP), and random ids that sort the wrong way round: `log` and `undo` still take the second as the newest."""
    import time

    from stackmgr.journal import operation as journal_operation

    now = time.time_ns()
    stamps = iter([now, now if clock == "same millisecond" else now - 5_000_000_000])
    ids = iter([b"\xff" * 6, b"\x00" * 6])  # the second operation's id sorts before the first's
    real_urandom = os.urandom
    fake_time = type("Clock", (), {"time_ns": staticmethod(lambda: next(stamps)), "time": staticmethod(time.time)})
    faked = pytest.MonkeyPatch()  # its own: undoing it keeps the hermetic git environment (tests/conftest.py)
    faked.setattr(journal_operation, "time", fake_time)
    faked.setattr(os, "urandom", lambda n: next(ids) if n == 6 else real_urandom(n))
    assert lab.sm("series", "new", "A").code == 0
    assert lab.sm("series", "new", "B").code == 0
    faked.undo()
    assert [o["command"] for o in _ops(lab)][:2] == ["series new B", "series new A"]
    undone = lab.sm("undo")
    assert undone.code == 0 and undone.out.startswith("undid `series new B`"), undone
    assert (lab.store / "series" / "A").exists() and not (lab.store / "series" / "B").exists()


@pytest.mark.regression("undo of reset --force gave LF files back as CRLF under core.autocrlf=true")
def test_undo_of_a_forced_reset_gives_back_the_bytes_on_disk_under_autocrlf(lab: Lab) -> None:
    """core.autocrlf=true: a file written with LF (git stores LF, a checkout writes CRLF) and an untracked LF
    file are forced away, then `undo` brings back the same bytes, not CRLF ones; a CRLF file saved, reset,
    applied and the apply undone keeps its CRLF bytes at each step (apply writes what a checkout writes)."""
    git(lab.tree, "config", "core.autocrlf", "true")
    wrote = {"README": b"lf\nonly\n", "new.txt": b"untracked lf\n", "crlf.txt": b"kept\r\ncrlf\r\n"}
    for name, data in wrote.items():
        (lab.tree / name).write_bytes(data)
    assert lab.sm("reset", "--force").code == 0
    assert lab.sm("undo").code == 0
    assert {name: (lab.tree / name).read_bytes() for name in wrote} == wrote
    assert lab.sm("reset", "--force").code == 0
    (lab.tree / "src" / "model.py").write_bytes(b"def f():\r\n    return 2\r\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    assert lab.sm("reset").code == 0 and lab.sm("apply", "S").code == 0
    assert (lab.tree / "src" / "model.py").read_bytes() == b"def f():\r\n    return 2\r\n"
    assert lab.sm("undo").code == 0
    assert (lab.tree / "src" / "model.py").read_bytes() == b"def f():\r\n    return 1\r\n"


def _undo_steps(tmp_path: Path) -> list[str]:
    lab = _reset_of_saved_work(tmp_path / "trace")[0]
    trace = tmp_path / "steps.txt"
    assert stackmgr(lab.store, "undo", STACKMGR_TRACE_STEPS=str(trace)).returncode == 0
    return trace.read_text().splitlines()


def _reset_of_saved_work(root: Path) -> tuple[Lab, str]:
    """A dirty tree saved into series S (so preserved), then `reset`: the dirty tree's id is returned."""
    from tests.conftest import make_repo, run_stackmgr

    tree = make_repo(root / "vllm", {"README": "hello\n", "src/model.py": "def f():\n    return 1\n"})
    lab = Lab(root / "store", tree)
    assert run_stackmgr("init", str(lab.store)).code == 0 and lab.sm("tree", "add", "vllm", str(tree)).code == 0
    (tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (tree / "notes.txt").write_text("untracked, saved\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    dirty = lab.worktree_id()
    assert lab.sm("reset").code == 0
    return lab, dirty


@pytest.mark.slow
@pytest.mark.regression("after a killed undo was rolled back, the reset could never be undone")
def test_after_a_killed_undo_is_rolled_back_undo_still_works(tmp_path: Path) -> None:
    """`reset` of saved work, then `undo` killed at each of its steps (and once more with its record put back to
    `running` after applied.json was replaced, as a kill inside a git call of its finish would leave it), then
    `recover` rolls it back: the next `undo` reverts the reset (the dirty tree is back, by tree id), rather than
    failing forever with "applied.json changed since" because the rollback rewrote the file."""
    steps = _undo_steps(tmp_path)
    for n, step in enumerate([*steps, "after the rename"], 1):
        lab, dirty = _reset_of_saved_work(tmp_path / f"crash{n}")
        killed = stackmgr(lab.store, "undo", STACKMGR_CRASH_AT=f"undo:{min(n, len(steps))}")
        assert killed.returncode == -9, (step, killed.stderr)
        if step == "after the rename":
            ops = lab.store / ".stackmgr" / "ops"
            record = ops / (ops / "CURRENT").read_text().strip() / "op"
            record.write_text(record.read_text().replace("state\tdone", "state\trunning"))
        assert stackmgr(lab.store, "recover").returncode == 0, step
        if step.endswith(":finish"):  # it had completed: the undo stands, and redo redoes the reset
            assert lab.worktree_id() == dirty, step
            again = stackmgr(lab.store, "redo")
            assert again.returncode == 0 and again.stdout.startswith("redid `reset`"), (step, again.stdout)
            continue
        again = stackmgr(lab.store, "undo")
        assert again.returncode == 0, (step, again.stderr)
        assert again.stdout.startswith("undid `reset`"), (step, again.stdout)
        assert lab.worktree_id() == dirty, step
        redo = stackmgr(lab.store, "redo")  # and that undo is redone as any other
        assert redo.returncode == 0 and redo.stdout.startswith("redid `reset`"), (step, redo.stderr)
        assert stackmgr(lab.store, "undo").returncode == 0 and lab.worktree_id() == dirty, step


@pytest.mark.slow
@pytest.mark.regression("undo after a rolled-back reset --force reverted `tree add`, hiding the recovery snapshot")
def test_undo_after_a_rolled_back_operation_never_hides_recovery_snapshots(lab: Lab) -> None:
    """`tree add vllm`, then `reset --force` of unsaved work killed mid-move (its recovery snapshot is stored)
    and rolled back by `recover`. The last operation that took effect is `tree add`: a plain `undo` unregistered
    the tree without a word, and `recover` then listed no snapshot at all. It must refuse, saying which operation
    it would revert and why not, and change nothing; `undo OP` naming it does it, with a note."""
    (lab.tree / "README").write_text("never saved\n")
    killed = stackmgr(lab.store, "reset", "--force", STACKMGR_CRASH_AT="reset:2")
    assert killed.returncode == -9
    assert stackmgr(lab.store, "recover").returncode == 0
    assert (lab.tree / "README").read_text() == "never saved\n"
    listed = json.loads(lab.sm("recover", "--json").out)["recoveries"]
    assert len(listed) == 1
    before = fingerprint(lab.store, lab.tree)
    result = lab.sm("undo")
    assert result.code == 3
    assert_one_line_error(result.err, "`reset --force` was interrupted and rolled back", "`tree add vllm`",
                          "1 recovery snapshot")  # fmt: skip
    assert changed_paths(before, fingerprint(lab.store, lab.tree), REBUILDABLE) == []
    assert json.loads(lab.sm("recover", "--json").out)["recoveries"] == listed
    tree_add = next(o for o in _ops(lab) if o["command"] == "tree add vllm")
    named = lab.sm("undo", str(tree_add["id"]))
    assert named.code == 0, named.err
    assert "1 recovery snapshot(s) are no longer listed" in named.err


@pytest.mark.slow
@pytest.mark.regression("undo after a rolled-back operation reverted the one before it without saying so")
def test_undo_after_a_rolled_back_operation_says_which_it_reverts(lab: Lab) -> None:
    """save, reset, then `apply S` killed and rolled back: the apply did nothing, so `undo` reverts the reset
    (the last operation that took effect, as git and jj would) and says that, naming the rolled-back apply."""
    _saved_and_reset(lab)
    assert stackmgr(lab.store, "apply", "S", STACKMGR_CRASH_AT="apply:2").returncode == -9
    assert stackmgr(lab.store, "recover").returncode == 0
    reset = _ops(lab)[1]
    assert reset["command"] == "reset" and _ops(lab)[0]["state"] == "rolled-back"
    result = lab.sm("undo")
    assert result.code == 0, result.err
    assert result.out == (f"undid `reset` (op {reset['id']}), the last operation that took effect: `apply S` was "
                          "interrupted and rolled back, changing nothing; `stackmgr redo` redoes it, `stackmgr undo` "
                          "goes one step further back\n")
    assert (lab.tree / "src" / "model.py").read_text() == "def f():\n    return 2\n"


@pytest.mark.regression("a command killed before its first journal step left its scratch indexes in .git/stackmgr")
def test_a_killed_commands_scratch_indexes_are_removed_by_the_next_command(lab: Lab) -> None:
    dead = subprocess.Popen(["true"])  # a pid that has ended
    dead.wait()
    live = subprocess.Popen(["sleep", "30"])
    try:
        folder = lab.tree / ".git" / "stackmgr"
        folder.mkdir(exist_ok=True)
        litter = [folder / f"frozen.{dead.pid}.index", folder / f"verify.{dead.pid}.index"]
        for path in litter:
            path.write_bytes(b"DIRC")
        theirs = folder / f"frozen.{live.pid}.index"
        theirs.write_bytes(b"DIRC")
        (lab.tree / "README").write_text("edited\n")
        assert lab.sm("save", "fix", "-m", "fix").code == 0 and lab.sm("reset").code == 0
        assert [p.exists() for p in litter] == [False, False] and theirs.exists(), "a live command's is its own"
    finally:
        live.kill()
        live.wait()


@pytest.mark.regression("a link or run killed while verifying left .git/stackmgr/verify.PID.index; neither a link "
                        "nor recover removed it")  # fmt: skip
@pytest.mark.parametrize("command", [("check",), ("status",), ("recover",)])
def test_a_killed_commands_scratch_indexes_go_with_any_look_at_the_tree(lab: Lab, command: tuple[str, ...]) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    folder = lab.tree / ".git" / "stackmgr"
    folder.mkdir(exist_ok=True)
    litter = [folder / f"verify.{dead.pid}.index", folder / f"verify.{dead.pid}.index.lock"]
    for path in litter:
        path.write_bytes(b"DIRC")
    assert lab.sm(*command).code == 0
    assert [p.exists() for p in litter] == [False, False]


@pytest.mark.regression("a killed import left .git/stackmgr/import.PID/ forever")
def test_a_killed_imports_scratch_folder_goes_with_the_next_look_at_the_tree(lab: Lab) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    folder = lab.tree / ".git" / "stackmgr" / f"import.{dead.pid}"
    folder.mkdir(parents=True)
    (folder / "index").write_bytes(b"DIRC")
    (folder / "0.diff").write_bytes(b"diff")
    assert lab.sm("check").code == 0
    assert not folder.exists()


@pytest.mark.regression("a snapshot index locked by a live git was discarded with its lock when git status failed")
def test_a_live_processs_lock_on_the_snapshot_index_is_never_removed(lab: Lab) -> None:
    lock = lab.tree / ".git" / "stackmgr" / "index.lock"
    assert lab.sm("check").code == 0
    holder = subprocess.Popen([sys.executable, "-c", f"import os, time; os.open({str(lock)!r}, "
                               "os.O_CREAT | os.O_EXCL | os.O_WRONLY); print(1, flush=True); time.sleep(30)"],
                              stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline()
        (lab.tree / "README").write_text("touched\n")  # status wants to refresh the index: it cannot
        result = lab.sm("check")
        assert lock.exists(), "a live process's lock was removed"
        assert result.code == 1 and "Traceback" not in result.err
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.regression("a git killed updating a journal anchor left .git/refs/stackmgr/ops/ID/TREE/after.lock "
                        "(kill-anywhere, undo seed 11)")  # fmt: skip
def test_recover_removes_a_killed_gits_lock_on_stackmgrs_own_refs(lab: Lab) -> None:
    refs = lab.tree / ".git" / "refs" / "stackmgr" / "ops" / "0123456789ab" / "vllm"
    refs.mkdir(parents=True)
    dead = refs / "after.lock"
    dead.write_text("0" * 40 + "\n")
    os.utime(dead, (1, 1))
    held = refs / "before.lock"
    holder = subprocess.Popen([sys.executable, "-c", f"f = open({str(held)!r}, 'w'); print(1, flush=True); "
                               "import time; time.sleep(30)"], stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline()
        assert lab.sm("recover").code == 0
        assert not dead.exists() and held.exists(), "a live process's lock is its own"
    finally:
        holder.kill()
        holder.wait()


def _interrupt_last(lab: Lab) -> None:
    """The last operation's record left `running`, as a kill leaves it."""
    ops = lab.store / ".stackmgr" / "ops"
    name = next(n.name for n in ops.iterdir() if n.name.endswith(str(_ops(lab)[0]["id"])))
    record = ops / name / "op"
    record.write_text(record.read_text().replace("state\tdone", "state\trunning"))
    (ops / "CURRENT").write_text(name + "\n")


@pytest.mark.regression("a git killed moving HEAD during undo left .git/HEAD.lock; recover rolled back and the "
                        "re-run failed with git's 'Unable to create HEAD.lock' (kill-anywhere, undo seed 1)")
def test_recover_removes_the_head_lock_a_git_killed_moving_head_left(lab: Lab) -> None:
    _saved_and_reset(lab)
    before = _state(lab)
    assert lab.sm("apply", "S").code == 0
    _interrupt_last(lab)
    lock = lab.tree / ".git" / "HEAD.lock"
    lock.write_text("0" * 40 + "\n")  # made during the operation, and no process holds it
    recovered = lab.sm("recover")
    assert recovered.code == 0 and "rolled back" in recovered.err
    assert not lock.exists() and _state(lab) == before
    assert lab.sm("apply", "S").code == 0


def test_recover_leaves_a_head_lock_older_than_the_operation(lab: Lab) -> None:
    """A HEAD.lock made before the operation started is not its git's: whoever made it decides."""
    _saved_and_reset(lab)
    assert lab.sm("apply", "S").code == 0
    _interrupt_last(lab)
    lock = lab.tree / ".git" / "HEAD.lock"
    lock.write_text("0" * 40 + "\n")
    os.utime(lock, (1, 1))
    lab.sm("recover")
    assert lock.exists()


@pytest.mark.regression("recover could remove the HEAD.lock of a live git whose reference-transaction hook ran "
                        "(git holds no file open then)")  # fmt: skip
def test_recover_leaves_a_head_lock_while_a_git_is_at_work_in_the_tree(lab: Lab, tmp_path: Path) -> None:
    import shutil

    _saved_and_reset(lab)
    assert lab.sm("apply", "S").code == 0
    _interrupt_last(lab)
    lock = lab.tree / ".git" / "HEAD.lock"
    lock.write_text("0" * 40 + "\n")
    fake = tmp_path / "bin" / "git"  # a process named git, at work in the tree, holding nothing open
    fake.parent.mkdir()
    shutil.copy(shutil.which("sleep") or "/bin/sleep", fake)
    holder = subprocess.Popen([str(fake), "30"], cwd=lab.tree)
    try:
        lab.sm("recover")
        assert lock.exists(), "a live git's lock is its own"
    finally:
        holder.kill()
        holder.wait()
    assert lab.sm("recover").code == 0 and not lock.exists()
