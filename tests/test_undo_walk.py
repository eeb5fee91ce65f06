"""`undo` walks back through the journal one step at a time and `redo` walks forward again, as StGit's `stg undo`
and `stg redo` do (docs/FORMATS.md#operation-journal): each is an operation of its own, `log` reads as a history,
and a new operation clears the redo steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Lab, git_text, one_line_error
from tests.conftest import stackmgr_process as stackmgr
from tests.reliability.conftest import REBUILDABLE, changed_paths, fingerprint

FURTHER = "; `stackmgr redo` redoes it, `stackmgr undo` goes one step further back\n"


def _ops(lab: Lab) -> list[dict[str, object]]:
    result = lab.sm("log", "--json")
    assert result.code == 0, result.err
    return list(json.loads(result.out)["operations"])


def _store_bytes(lab: Lab) -> dict[str, bytes]:
    """Every patch and series file of the store, by name."""
    files = [p for folder in ("patches", "series") for p in sorted((lab.store / folder).glob("*")) if p.is_file()]
    return {str(p.relative_to(lab.store)): p.read_bytes() for p in files}


def _three_saves(lab: Lab) -> tuple[list[dict[str, bytes]], list[str]]:
    """save p1, p2, p3 into series S, each changing its own file: the store's bytes before and after each save,
    and the saves' op ids."""
    states = [_store_bytes(lab)]
    ids = []
    for i, path in enumerate(["README", "src/model.py", "notes.txt"], 1):
        (lab.tree / path).write_text(f"step {i}\n")
        assert lab.sm("save", f"p{i}", "--series", "S", "-m", f"p{i}").code == 0
        states.append(_store_bytes(lab))
        ids.append(str(_ops(lab)[0]["id"]))
    assert states[3]["series/S"] == b"p1.patch\np2.patch\np3.patch\n"
    return states, ids


def test_undo_walks_back_one_save_at_a_time(lab: Lab) -> None:
    """Three saves, then undo, undo, undo: each takes the store back one save (patch and series bytes), where
    the old `undo` toggled (its second call redid the first). The tree is never touched."""
    states, ids = _three_saves(lab)
    worktree = lab.worktree_id()
    for n, i in enumerate([3, 2, 1]):
        undone = lab.sm("undo")
        assert undone.code == 0, undone.err
        assert undone.out == f"undid `save p{i}` (op {ids[i - 1]}){FURTHER}"
        assert _store_bytes(lab) == states[i - 1], f"after undo {n + 1}"
        assert lab.worktree_id() == worktree
    assert not (lab.store / "series" / "S").exists() and not (lab.store / "patches" / "p1.patch").exists()


def test_redo_walks_forward_again_and_then_has_nothing_to_redo(lab: Lab) -> None:
    """After three undos, redo, redo, redo put each save back, oldest first, byte for byte; a fourth redo is
    refused (exit 3, nothing changed), and undo still walks back from where redo left the store."""
    states, ids = _three_saves(lab)
    for _ in range(3):
        assert lab.sm("undo").code == 0
    assert _store_bytes(lab) == states[0]
    for i in (1, 2, 3):
        redone = lab.sm("redo")
        assert redone.code == 0, redone.err
        assert redone.out.startswith(f"redid `save p{i}` (op {ids[i - 1]}); `stackmgr undo` undoes it again")
        assert _store_bytes(lab) == states[i]
    before = fingerprint(lab.store, lab.tree)
    nothing = lab.sm("redo")
    one_line_error(nothing, 3)
    assert "nothing to redo" in nothing.err
    assert changed_paths(before, fingerprint(lab.store, lab.tree), REBUILDABLE) == []
    assert lab.sm("undo").code == 0 and _store_bytes(lab) == states[2]


def test_log_reads_as_a_history_of_undo_and_redo(lab: Lab) -> None:
    """Each undo and redo is an operation `log` shows, naming the operation it undid or redid (not the undo
    record a redo reverted); `--json` says which step it was."""
    _, ids = _three_saves(lab)
    for args in (["undo"], ["undo"], ["redo"]):
        assert lab.sm(*args).code == 0
    ops = _ops(lab)
    assert [o["command"] for o in ops[:4]] == [f"redo {ids[1]} (save p2)", f"undo {ids[1]} (save p2)",
                                               f"undo {ids[2]} (save p3)", "save p3"]  # fmt: skip
    assert [o["step"] for o in ops[:4]] == [ids[1], ids[1], ids[2], None]
    assert ops[0]["undoes"] == ops[1]["id"], "a redo reverts the undo record"
    assert f"redo {ids[1]} (save p2)" in lab.sm("log").out


def test_a_new_save_after_an_undo_clears_the_redo_steps(lab: Lab) -> None:
    """save p1, p2, p3, undo, undo, then a new save: the undone saves can no longer be redone (as in StGit and
    every editor); `redo` says so, exit 3, nothing changed; undo walks back over the new save first."""
    states, _ = _three_saves(lab)
    assert lab.sm("undo").code == 0 and lab.sm("undo").code == 0
    (lab.tree / "other.txt").write_text("new work\n")
    assert lab.sm("save", "q", "--series", "S", "-m", "q").code == 0
    before = fingerprint(lab.store, lab.tree)
    nothing = lab.sm("redo")
    one_line_error(nothing, 3)
    assert "nothing to redo" in nothing.err and "`save q`" in nothing.err
    assert changed_paths(before, fingerprint(lab.store, lab.tree), REBUILDABLE) == []
    assert lab.sm("undo").code == 0 and _store_bytes(lab) == states[1]
    assert lab.sm("undo").code == 0 and _store_bytes(lab) == states[0]


def test_undo_n_and_redo_n_walk_several_steps(lab: Lab) -> None:
    """`undo -n 2` walks two steps back (two operations in the log, one line each); `redo -n 2` walks them
    forward; asking for more steps than there are is refused with nothing changed."""
    states, ids = _three_saves(lab)
    back = lab.sm("undo", "-n", "2")
    assert back.code == 0, back.err
    assert back.out.splitlines() == [f"undid `save p3` (op {ids[2]}){FURTHER}".strip(),
                                     f"undid `save p2` (op {ids[1]}){FURTHER}".strip()]  # fmt: skip
    assert _store_bytes(lab) == states[1]
    assert [o["command"] for o in _ops(lab)[:2]] == [f"undo {ids[1]} (save p2)", f"undo {ids[2]} (save p3)"]
    forward = lab.sm("--json", "redo", "-n", "2")
    assert forward.code == 0, forward.err
    said = json.loads(forward.out)
    assert [s["step"] for s in said["steps"]] == [ids[1], ids[2]] and said["redo_left"] == 0
    assert said["verb"] == "redo" and said["undo_left"] == 4  # the three saves and `tree add`
    assert _store_bytes(lab) == states[3]
    before = fingerprint(lab.store, lab.tree)
    one_line_error(lab.sm("redo", "-n", "1"), 3)
    too_far = lab.sm("undo", "-n", "9")
    one_line_error(too_far, 3)
    assert "4" in too_far.err
    assert changed_paths(before, fingerprint(lab.store, lab.tree), REBUILDABLE) == []


def _saved_reset_applied(lab: Lab) -> tuple[str, str]:
    """Series S (one patch), reset, apply S: the dirty tree id (= applied) and the clean one."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    dirty = lab.worktree_id()
    assert lab.sm("reset").code == 0
    clean = lab.worktree_id()
    assert lab.sm("apply", "S").code == 0 and lab.worktree_id() == dirty
    return dirty, clean


def test_undo_and_redo_of_apply_and_reset_move_the_tree(lab: Lab) -> None:
    """apply, reset and their undos move the tree: undo, undo walks the tree back through the apply (clean)
    and the reset (dirty, on main); redo, redo forward again (clean, then the series applied and detached)."""
    dirty, clean = _saved_reset_applied(lab)
    applied_head = git_text(lab.tree, "rev-parse", "HEAD")
    assert lab.sm("undo").code == 0 and lab.worktree_id() == clean
    assert git_text(lab.tree, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert lab.sm("undo").code == 0 and lab.worktree_id() == dirty
    assert (lab.tree / "src" / "model.py").read_bytes() == b"def f():\n    return 2\n"
    assert lab.sm("redo").code == 0 and lab.worktree_id() == clean
    assert (lab.tree / "src" / "model.py").read_bytes() == b"def f():\n    return 1\n"
    assert lab.sm("redo").code == 0 and lab.worktree_id() == dirty
    assert git_text(lab.tree, "rev-parse", "HEAD") == applied_head
    assert git_text(lab.tree, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # detached, as apply left it


def test_undo_and_redo_refuse_to_lose_an_unsaved_edit(lab: Lab) -> None:
    """An edit made after an undo to a path the next step would move: the walk refuses that step (exit 3,
    naming the file), the edit and the tree stay byte for byte, and so does the store."""
    _saved_reset_applied(lab)
    assert lab.sm("undo").code == 0  # the apply: the tree is clean again
    (lab.tree / "src" / "model.py").write_text("my unsaved edit\n")
    edited = lab.worktree_id()
    before = fingerprint(lab.store, lab.tree)
    for args in (["undo"], ["redo"]):  # undoing the reset, or redoing the apply, would write src/model.py
        refused = lab.sm(*args)
        one_line_error(refused, 3)
        assert "src/model.py" in refused.err
        assert lab.worktree_id() == edited
        assert (lab.tree / "src" / "model.py").read_bytes() == b"my unsaved edit\n"
        assert changed_paths(before, fingerprint(lab.store, lab.tree), REBUILDABLE) == []


def test_the_walk_steps_over_a_failed_command_and_says_so(lab: Lab) -> None:
    """save, reset, apply S, undo, then `apply T` fails: the next undo reverts the reset (not a redo of the
    apply), saying that `apply T` changed nothing; `redo` redoes the reset, then the apply."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    dirty = lab.worktree_id()
    bad = (lab.store / "patches" / "p.patch").read_bytes().replace(b"-    return 1", b"-    return 9")
    (lab.store / "patches" / "bad.patch").write_bytes(bad)
    (lab.store / "series" / "T").write_text("bad.patch\n")
    assert lab.sm("reset").code == 0
    clean = lab.worktree_id()
    assert lab.sm("apply", "S").code == 0
    assert lab.sm("undo").code == 0 and lab.worktree_id() == clean
    assert lab.sm("apply", "T").code == 3 and lab.worktree_id() == clean
    reset = next(o for o in _ops(lab) if o["command"] == "reset")
    second = lab.sm("undo")
    assert second.code == 0, second.err
    assert second.out == (f"undid `reset` (op {reset['id']}), the last operation that stands: `apply T` failed "
                          f"and changed nothing{FURTHER}")  # fmt: skip
    assert lab.worktree_id() == dirty
    assert lab.sm("redo").code == 0 and lab.worktree_id() == clean
    assert lab.sm("redo").code == 0 and lab.worktree_id() == dirty  # the apply S
    assert git_text(lab.tree, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"


def test_the_walk_passes_over_a_rolled_back_operation_in_the_middle(lab: Lab) -> None:
    """save p1, a `save p2` killed and rolled back, save p3: undo, undo take back p3 then p1 (the rolled-back
    save did nothing, there is nothing of it to undo); redo, redo give them back."""
    (lab.tree / "README").write_text("one\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    after_p1 = _store_bytes(lab)
    (lab.tree / "src" / "model.py").write_text("two\n")
    killed = stackmgr(lab.store, "save", "p2", "--series", "S", "-m", "p2", STACKMGR_CRASH_AT="save:3")
    assert killed.returncode == -9
    assert stackmgr(lab.store, "recover").returncode == 0
    assert _store_bytes(lab) == after_p1
    assert lab.sm("save", "p3", "--series", "S", "-m", "p3").code == 0
    after_p3 = _store_bytes(lab)
    assert lab.sm("undo").code == 0 and _store_bytes(lab) == after_p1
    undone = lab.sm("undo")
    assert undone.code == 0 and undone.out.startswith("undid `save p1`"), undone
    assert not (lab.store / "series" / "S").exists()
    assert lab.sm("redo").code == 0 and _store_bytes(lab) == after_p1
    assert lab.sm("redo").code == 0 and _store_bytes(lab) == after_p3


def test_undo_of_a_named_operation_still_works_and_redo_takes_it_back(lab: Lab) -> None:
    """`undo OP` reverts that operation (an older one, nothing it touched changed since); `redo` then redoes
    it, byte for byte."""
    (lab.tree / "README").write_text("a\n")
    assert lab.sm("save", "a", "-m", "a").code == 0
    a = (lab.store / "patches" / "a.patch").read_bytes()
    (lab.tree / "src" / "model.py").write_text("b = 1\n")
    assert lab.sm("save", "b", "src/model.py", "-m", "b").code == 0
    first = next(o for o in _ops(lab) if o["command"] == "save a")
    assert lab.sm("undo", str(first["id"])).code == 0
    assert not (lab.store / "patches" / "a.patch").exists() and (lab.store / "patches" / "b.patch").exists()
    assert lab.sm("redo").code == 0 and (lab.store / "patches" / "a.patch").read_bytes() == a


def test_nothing_to_undo_in_an_empty_journal(tmp_path: Path) -> None:
    from tests.conftest import run_stackmgr

    assert run_stackmgr("init", str(tmp_path / "s")).code == 0
    one_line_error(run_stackmgr("--store", str(tmp_path / "s"), "undo"), 3)
    one_line_error(run_stackmgr("--store", str(tmp_path / "s"), "redo"), 3)


def test_undo_n_is_all_or_nothing_when_a_later_step_is_refused(lab: Lab) -> None:
    """save a, save b, then patches/a.patch edited by hand: `undo -n 2` takes b back, finds a's patch changed
    since and refuses; b's undo is put back (its record says rolled-back), so nothing changed, exit 3; a plain
    `undo` then takes b back, without calling that put-back an interrupted command."""
    (lab.tree / "README").write_text("a\n")
    assert lab.sm("save", "a", "-m", "a").code == 0
    (lab.tree / "src" / "model.py").write_text("b = 1\n")
    assert lab.sm("save", "b", "src/model.py", "-m", "b").code == 0
    with (lab.store / "patches" / "a.patch").open("ab") as f:
        f.write(b"\n")
    before = fingerprint(lab.tree) | {k: v for k, v in fingerprint(lab.store).items() if "/.stackmgr/" not in k}
    refused = lab.sm("undo", "-n", "2")
    one_line_error(refused, 3)
    assert "patches/a.patch changed since" in refused.err and "step 2 of 2" in refused.err
    after = fingerprint(lab.tree) | {k: v for k, v in fingerprint(lab.store).items() if "/.stackmgr/" not in k}
    assert changed_paths(before, after, REBUILDABLE) == []
    assert _ops(lab)[0]["state"] == "rolled-back"
    again = lab.sm("undo")
    assert again.code == 0 and again.out.startswith("undid `save b`") and "interrupted" not in again.out
    assert not (lab.store / "patches" / "b.patch").exists()


@pytest.mark.slow  # seconds: run by `pytest -m slow` (CI runs it)
def test_a_killed_redo_is_rolled_back_and_redo_still_works(tmp_path: Path) -> None:
    """`reset` of saved work, `undo` (the dirty tree back), then `redo` killed at each of its journal steps:
    `recover` rolls it back (the tree stays dirty, by tree id) or, killed after it completed, keeps it (clean);
    either way the walk goes on: `redo` again, or `undo`, works and moves the tree."""
    from tests.reliability.test_journal import _reset_of_saved_work

    lab, dirty = _reset_of_saved_work(tmp_path / "trace")
    clean = lab.worktree_id()
    assert lab.sm("undo").code == 0 and lab.worktree_id() == dirty
    trace = tmp_path / "steps.txt"
    assert stackmgr(lab.store, "redo", STACKMGR_TRACE_STEPS=str(trace)).returncode == 0
    steps = trace.read_text().splitlines()
    assert steps and all(s.startswith("redo:") for s in steps)
    for n, step in enumerate(steps, 1):
        lab, dirty = _reset_of_saved_work(tmp_path / f"crash{n}")
        assert lab.sm("undo").code == 0
        assert stackmgr(lab.store, "redo", STACKMGR_CRASH_AT=f"redo:{n}").returncode == -9, step
        assert stackmgr(lab.store, "recover").returncode == 0, step
        if step.endswith(":finish"):
            assert lab.worktree_id() == clean, step
            assert lab.sm("undo").code == 0 and lab.worktree_id() == dirty, step
            continue
        assert lab.worktree_id() == dirty, step
        again = lab.sm("redo")
        assert again.code == 0 and again.out.startswith("redid `reset`"), (step, again)
        assert lab.worktree_id() == clean, step


def test_the_walk_goes_on_after_gc_forgot_what_an_undo_reverted(lab: Lab) -> None:
    """Three saves, undo (p3), then `gc --keep 1` forgets every record but that undo's: `redo` still redoes p3
    from the undo's own record, byte for byte, and `undo` takes it back again."""
    states, _ = _three_saves(lab)
    assert lab.sm("undo").code == 0 and _store_bytes(lab) == states[2]
    assert lab.sm("gc", "--keep", "1").code == 0 and len(_ops(lab)) == 1
    redone = lab.sm("redo")
    assert redone.code == 0 and redone.out.startswith("redid `save p3`"), redone
    assert _store_bytes(lab) == states[3]
    assert lab.sm("undo").code == 0 and _store_bytes(lab) == states[2]


def test_undo_of_a_refresh_says_the_tree_keeps_edits_no_patch_preserves_now(lab: Lab) -> None:
    """The patch file goes back; the tree's newer edit stays and is unsaved again: said, never silent."""
    (lab.tree / "README").write_text("first\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    (lab.tree / "README").write_text("first\nsecond\n")
    assert lab.sm("refresh").code == 0 and lab.sm("check").code == 0
    undone = lab.sm("undo")
    assert undone.code == 0, undone.err
    assert undone.err == ("stackmgr: note: tree vllm keeps its edits; 1 path no patch preserves now (README): "
                          "`stackmgr redo`, or `stackmgr save NAME`\n")  # fmt: skip
    assert (lab.tree / "README").read_text() == "first\nsecond\n" and lab.sm("check").code == 1
    redone = lab.sm("--json", "redo")
    assert redone.code == 0 and json.loads(redone.out)["unsaved"] == [] and lab.sm("check").code == 0


def test_undo_of_an_apply_adds_no_unsaved_note(lab: Lab) -> None:
    (lab.tree / "README").write_text("first\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    assert lab.sm("reset").code == 0 and lab.sm("apply", "S").code == 0
    undone = lab.sm("undo")
    assert undone.code == 0 and "note:" not in undone.err
