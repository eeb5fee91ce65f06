"""`stackmgr push`, `pop`, `refresh`, `top`, `rename`, `drop`: moving along a tree's current series as quilt does.

The lab's series S holds three patches (fix: an edit; notes: a CRLF file and README; swap: model.py deleted, an
executable script added). Each move must land on exactly the tree quilt builds for the same number of patches,
carry unrelated edits along, refuse (nothing changed) when an edit is in the way, and be undoable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import (
    Lab,
    applied_state,
    git,
    git_text,
    link_id,
    one_line_error,
    porcelain,
    save_three_patch_series,
)


@pytest.fixture
def stack(lab: Lab) -> dict[int, str]:
    """Series S applied on vllm; the working-tree id with the first k patches, for k = 0..3 (built by stackmgr's
    own saves, one patch at a time)."""
    ids = {0: lab.worktree_id()}
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    ids[1] = lab.worktree_id()
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix: return 2").code == 0
    (lab.tree / "notes.txt").write_bytes(b"windows\r\nline endings\r\n")
    (lab.tree / "README").write_text("hello\nand more\n")
    ids[2] = lab.worktree_id()
    assert lab.sm("save", "notes", "--series", "S", "-m", "notes").code == 0
    (lab.tree / "src" / "model.py").unlink()
    (lab.tree / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (lab.tree / "run.sh").chmod(0o755)
    ids[3] = lab.worktree_id()
    assert lab.sm("save", "swap", "--series", "S", "-m", "swap model for a script").code == 0
    return ids


def where(lab: Lab) -> tuple[int, object]:
    applied = applied_state(lab)
    assert applied is not None and applied["series"] == "S"
    return len(applied["patches"]), applied["top"]  # type: ignore[arg-type]


def test_pop_and_push_step_through_the_series_tree_by_tree(lab: Lab, stack: dict[int, str]) -> None:
    assert lab.worktree_id() == stack[3]
    assert lab.sm("pop").out == "vllm: S: 2 of 3 applied, top notes\n"
    assert lab.worktree_id() == stack[2] and where(lab) == (2, "notes")
    assert lab.sm("pop", "-a").code == 0
    assert lab.worktree_id() == stack[0] and where(lab) == (0, None)
    assert porcelain(lab.tree) == b""
    assert lab.sm("push").out == "vllm: S: 1 of 3 applied, top fix\n"
    assert lab.worktree_id() == stack[1]
    assert lab.sm("push", "swap").code == 0
    assert lab.worktree_id() == stack[3] and where(lab) == (3, "swap")
    assert lab.sm("pop", "fix").code == 0  # quilt's `pop PATCH` leaves PATCH on top
    assert lab.worktree_id() == stack[1] and where(lab) == (1, "fix")
    assert lab.sm("push", "-a").code == 0
    assert lab.worktree_id() == stack[3]
    assert lab.sm("check").code == 0
    assert git_text(lab.tree, "status", "--porcelain=v1").count("\n") >= 3  # changes live in the working tree


def test_status_says_k_of_n_applied_with_the_top_patch(lab: Lab, stack: dict[int, str]) -> None:
    assert lab.sm("pop").code == 0
    out = lab.sm("status").out
    assert "  S: 2 of 3 applied, top notes (on " in out and "tree matches" in out
    assert "appended" not in out, "a patch still to push is not one appended since"
    assert lab.sm("pop", "-a").code == 0
    assert "  S: 0 of 3 applied (on " in lab.sm("status").out
    applied = applied_state(lab)
    assert applied is not None and (applied["total"], applied["top"]) == (3, None)


def test_nothing_to_push_or_pop_is_refused_with_nothing_changed(lab: Lab, stack: dict[int, str]) -> None:
    one_line_error(lab.sm("push"), 3)
    assert "S: 3 of 3 applied, top swap; nothing to push" in lab.sm("push").err
    assert lab.sm("pop", "-a").code == 0
    one_line_error(lab.sm("pop"), 3)
    assert lab.sm("push").code == 0
    one_line_error(lab.sm("pop", "swap"), 2)  # not applied
    assert lab.sm("pop").code == 0
    one_line_error(lab.sm("push", "nope"), 2)
    one_line_error(lab.sm("push", "-a", "swap"), 2)
    assert lab.worktree_id() == stack[0]


def test_an_unrelated_edit_is_carried_along_by_pop_and_push(lab: Lab, stack: dict[int, str]) -> None:
    (lab.tree / "scratch.txt").write_text("mine, not saved\n")
    (lab.tree / "notes.txt").write_bytes(b"windows\r\nline endings\r\nand an edit\r\n")  # notes is below swap
    moved = lab.sm("pop")
    assert moved.out == "vllm: S: 2 of 3 applied, top notes; 2 changed files carried along\n", moved.err
    assert (lab.tree / "scratch.txt").read_text() == "mine, not saved\n"
    assert (lab.tree / "src" / "model.py").exists() and not (lab.tree / "run.sh").exists()
    assert lab.sm("push").code == 0
    assert (lab.tree / "notes.txt").read_bytes().endswith(b"and an edit\r\n")
    assert os.access(lab.tree / "run.sh", os.X_OK)
    os.unlink(lab.tree / "scratch.txt")
    (lab.tree / "notes.txt").write_bytes(b"windows\r\nline endings\r\n")
    assert lab.worktree_id() == stack[3]


def test_an_edit_in_a_file_the_move_changes_refuses_it_with_nothing_changed(lab: Lab, stack: dict[int, str]) -> None:
    (lab.tree / "run.sh").write_text("#!/bin/sh\necho edited\n")
    before = lab.worktree_id()
    refused = lab.sm("pop")
    one_line_error(refused, 3)
    assert "run.sh" in refused.err and "stackmgr refresh" in refused.err
    assert lab.worktree_id() == before and where(lab) == (3, "swap")
    assert lab.sm("pop", "-a").code == 3 and lab.worktree_id() == before


def test_refresh_folds_the_edit_into_the_top_patch_keeping_its_description(lab: Lab, stack: dict[int, str]) -> None:
    swap = lab.store / "patches" / "swap.patch"
    (lab.tree / "run.sh").write_text("#!/bin/sh\necho refreshed\n")
    (lab.tree / "run.sh").chmod(0o755)
    wanted = lab.worktree_id()
    refreshed = lab.sm("refresh")
    assert refreshed.code == 0 and "patch swap refreshed" in refreshed.out, refreshed.err
    data = swap.read_bytes()
    assert b"Subject: [PATCH] swap model for a script\n" in data and b"+echo refreshed\n" in data
    assert b"-def f():" in data, "the patch still deletes model.py: diffed from the patches below it"
    assert (lab.store / "series" / "S").read_text() == "fix.patch\nnotes.patch\nswap.patch\n"
    assert lab.sm("check").code == 0 and where(lab) == (3, "swap")
    assert "tree matches" in lab.sm("status").out
    assert lab.sm("reset").code == 0 and lab.sm("push", "-a").code == 0
    assert lab.worktree_id() == wanted
    assert len(list((lab.store / "patches" / ".versions" / "swap").iterdir())) == 1  # the old version, kept


def test_refresh_in_the_middle_of_the_series_rewrites_that_patch_only(lab: Lab, stack: dict[int, str]) -> None:
    assert lab.sm("pop").code == 0
    (lab.tree / "README").write_text("hello\nand more\nand a fix\n")
    (lab.tree / "scratch.txt").write_text("not for this patch\n")
    assert lab.sm("refresh", "README").code == 0
    notes = (lab.store / "patches" / "notes.patch").read_bytes()
    assert b"+and a fix\n" in notes and b"notes.txt" in notes and b"scratch.txt" not in notes
    assert where(lab) == (2, "notes") and "appended" not in lab.sm("status").out
    assert lab.sm("check").code == 1  # scratch.txt is still nobody's
    os.unlink(lab.tree / "scratch.txt")
    assert lab.sm("push").code == 0 and where(lab) == (3, "swap")


def test_refresh_with_nothing_applied_is_refused(lab: Lab, stack: dict[int, str]) -> None:
    assert lab.sm("pop", "-a").code == 0
    (lab.tree / "README").write_text("edit\n")
    one_line_error(lab.sm("refresh"), 3)


def test_top_prints_the_top_patch_and_says_no_when_none(lab: Lab, stack: dict[int, str]) -> None:
    assert lab.sm("top").out == "swap\n"
    assert json.loads(lab.sm("top", "--json").out)["applied"] == 3
    assert lab.sm("pop", "-a").code == 0
    assert lab.sm("top").code == 1


def test_reset_to_the_base_keeps_the_series_current_and_push_goes_on(lab: Lab, stack: dict[int, str]) -> None:
    assert lab.sm("reset").code == 0
    assert where(lab) == (0, None)
    assert lab.sm("push", "-a").code == 0 and lab.worktree_id() == stack[3]
    head = git_text(lab.tree, "rev-parse", "HEAD")
    assert lab.sm("reset").code == 0
    (lab.tree / "other.txt").write_text("x\n")
    git_text(lab.tree, "add", "other.txt")
    git_text(lab.tree, "commit", "-qm", "elsewhere")
    git_text(lab.tree, "branch", "elsewhere")
    assert head != git_text(lab.tree, "rev-parse", "HEAD")
    assert lab.sm("reset", "--to", "elsewhere").code == 0  # another revision: the series is no longer current
    assert applied_state(lab) is None
    one_line_error(lab.sm("push"), 2)


def test_push_and_pop_are_undone_by_undo(lab: Lab, stack: dict[int, str]) -> None:
    (lab.tree / "scratch.txt").write_text("mine\n")
    before = lab.worktree_id()
    assert lab.sm("pop", "-a").code == 0
    assert lab.sm("undo").code == 0
    assert lab.worktree_id() == before and where(lab) == (3, "swap")


def test_a_partly_pushed_series_refuses_save_on_top_until_pushed(lab: Lab, stack: dict[int, str]) -> None:
    assert lab.sm("pop").code == 0
    (lab.tree / "scratch.txt").write_text("x\n")
    refused = lab.sm("save", "more", "--series", "S", "-m", "more")
    one_line_error(refused, 2)
    assert "push -a" in refused.err and not (lab.store / "patches" / "more.patch").exists()


def test_status_notices_a_patch_appended_to_a_partly_pushed_series(lab: Lab, stack: dict[int, str]) -> None:
    assert lab.sm("pop").code == 0
    shutil.copy(lab.store / "patches" / "swap.patch", lab.store / "patches" / "again.patch")
    with open(lab.store / "series" / "S", "a") as f:
        f.write("again.patch\n")
    out = lab.sm("status").out
    assert "S: 2 of 4 applied, top notes" in out and "again appended" in out and "swap appended" not in out


def test_quilt_builds_the_same_tree_at_every_step(lab: Lab, stack: dict[int, str], tmp_path: Path) -> None:
    if shutil.which("quilt") is None:
        pytest.skip("quilt is not installed")
    assert lab.sm("pop", "-a").code == 0
    copy = tmp_path / "quilt-tree"
    subprocess.run(["git", "clone", "-q", str(lab.tree), str(copy)], check=True)
    env = dict(os.environ, QUILT_PATCHES=str(lab.store / "patches"), QUILT_SERIES=str(lab.store / "series" / "S"),
               QUILT_PC=str(tmp_path / "pc"))  # fmt: skip
    for k in (1, 2, 3):
        assert lab.sm("push").code == 0
        subprocess.run(["quilt", "--quiltrc", "-", "push", "-q"], cwd=copy, env=env, check=True, capture_output=True)
        assert Lab(lab.store, copy).worktree_id() == lab.worktree_id() == stack[k]


# --- rename and drop --------------------------------------------------------------------------------------------------


def test_rename_moves_the_patch_its_links_and_every_series_line(ev: Lab) -> None:
    (ev.store / "results" / "n.log").write_text("ok\n")
    old_link = link_id(ev, "replay-fix", "results/n.log", "--verdict", "promoted", "--lesson", "keep it")
    (ev.store / "series" / "other").write_text("# kept for the record\nreplay-fix.patch #+xpu\n")
    done = ev.sm("rename", "replay-fix", "route-fix")
    assert done.code == 0 and "series other, replay updated" in done.out, done.err
    assert not (ev.store / "patches" / "replay-fix.patch").exists() and not (ev.store / "links" / "replay-fix").exists()
    assert (ev.store / "series" / "replay").read_text() == "route-fix.patch\nreplay-probe.patch\n"
    assert (ev.store / "series" / "other").read_text() == "# kept for the record\nroute-fix.patch #+xpu\n"
    shown = json.loads(ev.sm("show", "route-fix", "--json").out)
    assert [k["id"] for k in shown["links"]] == [old_link] and shown["links"][0]["state"] == "fresh"
    assert (ev.store / "links" / "route-fix" / "renamed-from-replay-fix").exists()
    assert ev.sm("lint").code == 0, ev.sm("lint").out
    assert json.loads(ev.sm("--json", "status", "vllm").out)["trees"][0]["applied"]["patches"][0] == "route-fix"
    assert ev.sm("check").code == 0
    assert ev.sm("undo").code == 0
    patches = ev.store / "patches"
    assert (patches / "replay-fix.patch").exists() and not (patches / "route-fix.patch").exists()
    assert (ev.store / "series" / "replay").read_text() == "replay-fix.patch\nreplay-probe.patch\n"


def test_rename_to_a_taken_name_is_refused(ev: Lab) -> None:
    one_line_error(ev.sm("rename", "replay-fix", "replay-probe"), 3)
    one_line_error(ev.sm("rename", "nope", "other"), 2)
    one_line_error(ev.sm("rename", "replay-fix", "bad/name"), 2)


def test_drop_refuses_a_listed_patch_and_keeps_the_links_of_a_dropped_one(ev: Lab) -> None:
    (ev.store / "results" / "n.log").write_text("ok\n")
    link_id(ev, "gemm-tile", "results/n.log", "--verdict", "rejected", "--lesson", "tile 128 spills")
    refused = ev.sm("drop", "gemm-tile")
    one_line_error(refused, 3)
    assert "applied to tree vllm-xpu-kernels and in series kernels; nothing changed" in refused.err, "every blocker"
    assert "stackmgr pop gemm-tile" in refused.err and "`stackmgr series remove kernels gemm-tile`" in refused.err
    assert ev.sm("reset", "vllm-xpu-kernels", "--to", "HEAD").code == 0
    refused = ev.sm("drop", "gemm-tile")
    one_line_error(refused, 3)
    assert "series kernels" in refused.err
    assert ev.sm("series", "remove", "kernels", "gemm-tile").code == 0
    data = (ev.store / "patches" / "gemm-tile.patch").read_bytes()
    dropped = ev.sm("drop", "gemm-tile")
    assert dropped.code == 0, dropped.err
    assert not (ev.store / "patches" / "gemm-tile.patch").exists()
    assert [p.read_bytes() for p in (ev.store / "patches" / ".versions" / "gemm-tile").iterdir()] == [data]
    assert (ev.store / "links" / "gemm-tile" / "dropped").exists()
    assert "gemm-tile" not in ev.sm("lint").out
    assert ev.sm("undo").code == 0 and (ev.store / "patches" / "gemm-tile.patch").read_bytes() == data


def test_save_three_patch_series_helper_still_builds_the_stack(lab: Lab) -> None:
    """The shared helper and this file's fixture build the same series: push/pop work on both."""
    save_three_patch_series(lab)
    assert lab.sm("pop", "-a").code == 0 and lab.sm("push", "-a").code == 0
    assert lab.sm("check").code == 0


def test_push_and_pop_keep_the_guards_the_series_was_applied_with(lab: Lab, stack: dict[int, str]) -> None:
    (lab.store / "series" / "S").write_text("fix.patch\nnotes.patch #+windows\nswap.patch\n")
    assert lab.sm("reset").code == 0
    assert lab.sm("push", "-a").out == "vllm: S: 2 of 2 applied, top swap\n"  # no guard active: notes is skipped
    assert not (lab.tree / "notes.txt").exists()
    assert lab.sm("reset").code == 0 and lab.sm("apply", "S", "--guard", "windows").code == 0
    assert lab.sm("pop").out == "vllm: S: 2 of 3 applied, top notes\n"
    assert lab.sm("push").code == 0 and lab.worktree_id() == stack[3]
    assert "S: 3 of 3 applied, top swap" in lab.sm("status").out and "appended" not in lab.sm("status").out


# --- what a review found ----------------------------------------------------------------------------------------------


@pytest.mark.regression("push/pop threw away a staged version and unmerged entries of files they did not touch")
@pytest.mark.parametrize("state", ["staged-differs", "unmerged"])
def test_index_state_a_move_would_lose_refuses_it(lab: Lab, stack: dict[int, str], state: str) -> None:
    if state == "staged-differs":
        (lab.tree / "scratch.txt").write_text("staged\n")
        git(lab.tree, "add", "scratch.txt")
        (lab.tree / "scratch.txt").write_text("staged\nand not\n")
    else:
        blob = git_text(lab.tree, "hash-object", "-w", "--stdin")
        entries = "".join(f"100644 {blob} {n}\tscratch.txt\n" for n in (1, 2, 3))
        git(lab.tree, "update-index", "--index-info", input=entries.encode())
        (lab.tree / "scratch.txt").write_text("<<<<<<< ours\n")
    index = (lab.tree / ".git" / "index").read_bytes()
    refused = lab.sm("pop")
    one_line_error(refused, 3)
    assert "scratch.txt" in refused.err
    assert (lab.tree / ".git" / "index").read_bytes() == index and where(lab) == (3, "swap")


@pytest.mark.regression("push reported success with a file where the patch makes a directory, the change missing")
def test_a_file_where_the_patch_makes_a_directory_refuses_the_push(lab: Lab, stack: dict[int, str]) -> None:
    (lab.tree / "tools").mkdir()
    (lab.tree / "tools" / "a.sh").write_text("a\n")
    assert lab.sm("save", "tools", "--series", "S", "-m", "tools").code == 0
    assert lab.sm("pop").code == 0
    (lab.tree / "tools").write_text("mine: a file\n")
    before = lab.worktree_id()
    refused = lab.sm("push")
    one_line_error(refused, 3)
    assert lab.worktree_id() == before and where(lab) == (3, "swap")
    os.unlink(lab.tree / "tools")
    (lab.tree / "run.sh").unlink()  # and the other way round: a directory where the move puts back a file
    (lab.tree / "run.sh").mkdir()
    (lab.tree / "run.sh" / "x").write_text("x\n")
    one_line_error(lab.sm("pop"), 3)


def refreshed_below(lab: Lab) -> str:
    """Series Q (q1: line 2, q2: line 18 of f) with q2 popped and line 3 edited, ready to `refresh` q1 under q2;
    f's lines before the series."""
    lines = "".join(f"{n}\n" for n in range(1, 21))
    (lab.tree / "f").write_text(lines)
    git(lab.tree, "add", "f")
    git(lab.tree, "commit", "-qm", "f")
    (lab.tree / "f").write_text(lines.replace("2\n", "two\n", 1))
    assert lab.sm("save", "q1", "--series", "Q", "-m", "q1").code == 0
    (lab.tree / "f").write_text(lines.replace("2\n", "two\n", 1).replace("18\n", "e\n"))
    assert lab.sm("save", "q2", "--series", "Q", "-m", "q2").code == 0
    assert lab.sm("pop").code == 0
    (lab.tree / "f").write_text(lines.replace("2\n", "two\n", 1).replace("3\n", "three\n", 1))
    return lines


@pytest.mark.regression("pop, edit, refresh, push failed when a later patch touches the same file")
def test_push_after_refreshing_a_lower_patch_builds_what_quilt_builds(lab: Lab) -> None:
    lines = refreshed_below(lab)
    assert lab.sm("refresh").code == 0
    pushed = lab.sm("push")
    assert pushed.code == 0, pushed.err
    assert "q2: made on an older version of a patch below it" in pushed.err
    want = lines.replace("2\n", "two\n", 1).replace("3\n", "three\n", 1).replace("18\n", "e\n")
    assert (lab.tree / "f").read_text() == want
    assert lab.sm("check").code == 1  # nothing records f as it is now …
    assert lab.sm("pop").code == 0 and lab.sm("push").code == 0  # … but the patches build it again
    assert lab.sm("refresh").code == 0 and lab.sm("check").code == 0  # refreshed: recorded
    assert lab.sm("reset").code == 0 and lab.sm("apply", "Q").code == 0
    assert (lab.tree / "f").read_text() == want


@pytest.mark.regression("rename cut an indented series line (one.patchch)")
def test_rename_keeps_an_indented_series_line_whole(lab: Lab, stack: dict[int, str]) -> None:
    (lab.store / "series" / "S").write_text("  fix.patch\n\tnotes.patch #+x\nswap.patch\n")
    assert lab.sm("rename", "fix", "one").code == 0 and lab.sm("rename", "notes", "two").code == 0
    assert (lab.store / "series" / "S").read_text() == "  one.patch\n\ttwo.patch #+x\nswap.patch\n"


@pytest.mark.regression("an undone rename left empty folders that made the name look taken")
def test_a_rename_undone_can_be_done_again(lab: Lab, stack: dict[int, str]) -> None:
    (lab.tree / "run.sh").write_text("#!/bin/sh\necho again\n")
    assert lab.sm("refresh").code == 0  # swap now has a kept version
    assert lab.sm("rename", "swap", "q").code == 0 and lab.sm("undo").code == 0
    assert not (lab.store / "patches" / ".versions" / "q").exists()
    assert lab.sm("rename", "swap", "q").code == 0


@pytest.mark.regression("a dropped patch's name was half taken: a new patch of that name showed the old evidence")
def test_a_dropped_patch_name_is_kept_for_its_evidence_until_let_go(ev: Lab) -> None:
    (ev.store / "results" / "n.log").write_text("ok\n")
    link_id(ev, "gemm-tile", "results/n.log", "--verdict", "rejected", "--lesson", "never again")
    assert ev.sm("reset", "vllm-xpu-kernels", "--to", "HEAD").code == 0
    assert ev.sm("series", "remove", "kernels", "gemm-tile").code == 0
    assert ev.sm("drop", "gemm-tile").code == 0
    (ev.tree / "another.txt").write_text("another change\n")  # beside series replay, applied: a file it leaves alone
    refused = ev.sm("save", "gemm-tile", "-t", "vllm", "-m", "new")
    one_line_error(refused, 3)
    assert "drop gemm-tile --with-links" in refused.err
    assert "drop gemm-tile --with-links" in ev.sm("rename", "replay-fix", "gemm-tile").err
    assert ev.sm("drop", "gemm-tile", "--with-links").code == 0 and not (ev.store / "links" / "gemm-tile").exists()
    assert ev.sm("save", "gemm-tile", "-t", "vllm", "-m", "new").code == 0
    assert json.loads(ev.sm("show", "gemm-tile", "--json").out)["links"] == []


@pytest.mark.regression("push/pop/top refused a series applied with --guard")
def test_a_series_applied_with_a_guard_moves_and_counts_right(lab: Lab, stack: dict[int, str]) -> None:
    (lab.store / "series" / "S").write_text("fix.patch\nnotes.patch\nswap.patch #+foo\n")
    assert lab.sm("reset").code == 0 and lab.sm("apply", "S", "--guard", "foo").code == 0
    assert lab.sm("top").out == "swap\n"
    assert "S: 3 of 3 applied, top swap" in lab.sm("status").out
    assert lab.sm("pop").out == "vllm: S: 2 of 3 applied, top notes\n"
    (lab.store / "series" / "S").write_text("fix.patch\nnotes.patch\nswap.patch #-foo\n")
    assert lab.sm("reset").code == 0 and lab.sm("apply", "S").code == 0
    assert "S: 3 of 3 applied, top swap" in lab.sm("status").out


@pytest.mark.regression("refresh folded local commits into the top patch")
def test_refresh_off_the_series_base_is_refused(lab: Lab, stack: dict[int, str]) -> None:
    (lab.tree / "other.txt").write_text("committed\n")
    git(lab.tree, "add", "other.txt")
    git(lab.tree, "commit", "-qm", "local")
    git(lab.tree, "branch", "local")
    swap = (lab.store / "patches" / "swap.patch").read_bytes()
    one_line_error(lab.sm("refresh"), 3)
    assert (lab.store / "patches" / "swap.patch").read_bytes() == swap


def test_push_takes_a_patch_file_name_and_names_an_unknown_patch(lab: Lab, stack: dict[int, str]) -> None:
    one_line_error(lab.sm("push", "nope"), 2)  # not "nothing to push"
    assert lab.sm("pop", "-a").code == 0
    assert lab.sm("push", "notes.patch").out == "vllm: S: 2 of 3 applied, top notes\n"


@pytest.mark.regression("apply of a series whose lower patch was refreshed blamed a hand-edited patch")
def test_apply_names_a_patch_made_on_an_older_version_of_one_below(lab: Lab) -> None:
    refreshed_below(lab)
    assert lab.sm("refresh").code == 0 and lab.sm("reset").code == 0
    refused = lab.sm("apply", "Q")
    one_line_error(refused, 3)
    assert "patch q2 was made on an older version of a patch below it" in refused.err
    assert lab.sm("push", "-a").code == 0 and lab.sm("refresh").code == 0 and lab.sm("check").code == 0


@pytest.mark.regression("save P --update of the applied top left the applied state on P's old version: the next "
                        "save into the series undid what P no longer does")
def test_save_update_of_the_applied_top_keeps_the_series_and_its_applied_state_one(lab: Lab) -> None:
    (lab.tree / "junk").write_text("junk\n")
    (lab.tree / "README").write_text("hello\nA\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    (lab.tree / "junk").unlink()
    updated = lab.sm("save", "p1", "--update")
    assert updated.code == 0 and "in series S" in updated.out
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p2", "--series", "S", "-m", "p2").code == 0
    assert b"junk" not in (lab.store / "patches" / "p2.patch").read_bytes()
    assert lab.sm("lint").code == 0
    wanted = lab.worktree_id()
    assert lab.sm("reset").code == 0 and lab.sm("apply", "S").code == 0
    assert lab.worktree_id() == wanted
    below = lab.sm("save", "p1", "--update")  # p1 is below p2 now: refused, with the way to do it
    assert below.code == 2 and "applied below p2" in below.err and "stackmgr pop p1" in below.err
