"""The operation log (docs/FORMATS.md#operation-journal): `log` lists every mutating command, `undo` reverts the last
one (and is undoable itself), snapshots are anchored against `git gc`, and `gc` prunes only when asked."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import Lab, git, git_text
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


def test_undo_save_then_undo_the_undo(lab: Lab) -> None:
    """Undo of a save removes the patch and the series entry; undoing the undo puts back the same bytes."""
    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    patch = (lab.store / "patches" / "p.patch").read_bytes()
    result = lab.sm("undo")
    assert result.code == 0 and "undid `save p`" in result.out
    assert not (lab.store / "patches" / "p.patch").exists() and not (lab.store / "series" / "S").exists()
    assert lab.sm("check").code == 1, "the edit is unpreserved again (and still in the tree)"
    assert (lab.tree / "README").read_text() == "edited\n"
    assert lab.sm("undo").code == 0
    assert (lab.store / "patches" / "p.patch").read_bytes() == patch and lab.sm("check").code == 0
    assert [o["command"] for o in _ops(lab)][:2] == [f"redo {_ops(lab)[1]['id']} (save p)",
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
