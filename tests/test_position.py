"""The tree's applied position in its series, one answer in `status`, `push`, `pop` and `top`.

A teammate's pull changes the series file under an applied tree: the ordinary append/append merge puts their
patch between yours, a rename or a removal takes an applied name out of it. What is applied is what the tree
holds (as quilt's `.pc/applied-patches`): `status` says so and where those patches now sit, `pop` works from it,
and `push` re-applies in the series' new order (it never takes an applied patch off).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Lab, commit, git, link_id
from tests.test_team_day import pull, team


def applied(who: Lab) -> dict[str, Any]:
    said = who.sm("--json", "status")
    assert said.code == 0, said.err
    state: dict[str, Any] = json.loads(said.out)["trees"][0]["applied"]
    return state


def save_on_top(who: Lab, name: str, path: str) -> str:
    (who.tree / path).write_text(f"{name}'s change\n")
    assert who.sm("save", name, "--series", "S", "-m", f"{name}'s change").code == 0
    git(who.store, "add", "-A")
    git(who.store, "commit", "-q", "-m", f"{name}: saved")
    return who.worktree_id()


def appended_on_both_sides(lab: Lab, tmp_path: Path) -> tuple[Lab, dict[str, str]]:
    """Alice and Bob each save a patch on top of S = [base] from the same state; Bob pushes first, Alice merges
    (base, alice, bob), pushes, and Bob pulls that: his applied [base, bob] are no longer S's first two."""
    bob = team(lab, tmp_path)
    assert lab.sm("apply", "S").code == 0 and bob.sm("apply", "S").code == 0
    ids = {"base": bob.worktree_id()}
    ids["alice"] = save_on_top(lab, "alice", "alice.txt")
    ids["bob"] = save_on_top(bob, "bob", "bob.txt")
    git(bob.store, "push", "-q", "origin", "main")
    pull(lab)
    git(lab.store, "push", "-q", "origin", "main")
    pull(bob)
    assert (bob.store / "series" / "S").read_text() == "base.patch\nalice.patch\nbob.patch\n"
    return bob, ids


def test_status_after_an_append_append_merge_says_the_applied_patches_are_out_of_series_order(
    lab: Lab, tmp_path: Path
) -> None:
    bob, ids = appended_on_both_sides(lab, tmp_path)
    state = applied(bob)
    assert state["patches"] == ["base", "bob"] and state["top"] == "bob"
    assert state["in_order"] is False and state["matches"] is False
    assert state["series_patches"] == ["base", "alice", "bob"]
    assert any("alice" in e for e in state["series_edited"])
    said = bob.sm("status")
    assert said.code == 0 and "tree matches" not in said.out
    assert "S: 2 of 3 applied, top bob" in said.out and "alice" in said.out and "push" in said.out
    assert bob.worktree_id() == ids["bob"]  # status changed nothing
    (bob.tree / "bob.txt").write_text("bob's change, more\n")
    refused = bob.sm("refresh")  # would rewrite bob as if alice were not below it
    assert refused.code == 3 and "push" in refused.err and len(refused.err.splitlines()) == 1
    refused = bob.sm("save", "more", "--series", "S", "-m", "more")
    assert refused.code == 3 and "push" in refused.err and len(refused.err.splitlines()) == 1
    assert not (bob.store / "patches" / "more.patch").exists()
    assert (bob.store / "series" / "S").read_text() == "base.patch\nalice.patch\nbob.patch\n"


def test_push_after_an_append_append_merge_reapplies_in_the_new_order(lab: Lab, tmp_path: Path) -> None:
    bob, _ids = appended_on_both_sides(lab, tmp_path)
    pushed = bob.sm("push")
    assert pushed.code == 0, pushed.err
    assert pushed.out == "vllm: S: 3 of 3 applied, top bob\n"
    assert (bob.tree / "alice.txt").read_text() == "alice's change\n"
    assert (bob.tree / "bob.txt").read_text() == "bob's change\n"
    state = applied(bob)
    assert state["patches"] == ["base", "alice", "bob"] and state["in_order"] is True and state["matches"] is True
    merged = bob.worktree_id()
    assert bob.sm("reset").code == 0 and bob.sm("apply", "S").code == 0
    assert bob.worktree_id() == merged  # what `apply S` builds


def test_pop_after_an_append_append_merge_works_from_what_is_applied(lab: Lab, tmp_path: Path) -> None:
    bob, ids = appended_on_both_sides(lab, tmp_path)
    popped = bob.sm("pop")
    assert popped.code == 0, popped.err
    assert bob.worktree_id() == ids["base"]
    state = applied(bob)
    assert state["patches"] == ["base"] and state["in_order"] is True and state["matches"] is True
    assert bob.sm("push").code == 0
    assert applied(bob)["patches"] == ["base", "alice"]
    assert (bob.tree / "alice.txt").exists() and not (bob.tree / "bob.txt").exists()


def two_patches(lab: Lab) -> dict[str, str]:
    ids = {"none": lab.worktree_id()}
    (lab.tree / "one.txt").write_text("one\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "one").code == 0
    ids["p1"] = lab.worktree_id()
    (lab.tree / "two.txt").write_text("two\n")
    assert lab.sm("save", "p2", "--series", "S", "-m", "two").code == 0
    ids["p2"] = lab.worktree_id()
    return ids


def test_status_after_a_pulled_removal_names_the_applied_top_as_out_of_the_series(lab: Lab) -> None:
    ids = two_patches(lab)
    (lab.store / "series" / "S").write_text("p1.patch\n")  # what a pulled `series remove S p2` leaves
    state = applied(lab)
    assert state["patches"] == ["p1", "p2"] and state["top"] == "p2"
    assert state["not_in_series"] == ["p2"] and state["in_order"] is False and state["matches"] is False
    said = lab.sm("status")
    assert "S: 1 of 1 applied + p2 (not in S), top p2" in said.out and "tree matches" not in said.out
    assert "patch p2: applied (not in S)" in said.out and "patch p1: applied (S)" in said.out, "one answer"
    top = lab.sm("--json", "top")
    assert top.code == 0 and json.loads(top.out)["top"] == "p2"
    assert json.loads(top.out)["position"] == "S: 1 of 1 applied + p2 (not in S), top p2"
    refused = lab.sm("push")  # nothing of S to push onto a patch S does not list
    assert refused.code == 3 and "pop" in refused.err and len(refused.err.splitlines()) == 1
    assert lab.worktree_id() == ids["p2"]
    assert lab.sm("pop").code == 0  # from what is applied
    assert lab.worktree_id() == ids["p1"]
    assert applied(lab)["in_order"] is True


def test_status_after_a_pulled_rename_follows_the_patch_to_its_new_name(lab: Lab) -> None:
    ids = two_patches(lab)
    patches = lab.store / "patches"
    (patches / "p2.patch").rename(patches / "p2-new.patch")  # what a pulled `rename p2 p2-new` leaves
    (lab.store / "series" / "S").write_text("p1.patch\np2-new.patch\n")
    state = applied(lab)
    assert state["top"] == "p2-new" and state["in_order"] is True and state["not_in_series"] == []
    assert "S: 2 of 2 applied, top p2-new" in lab.sm("status").out
    assert lab.sm("pop").code == 0 and lab.worktree_id() == ids["p1"]
    assert lab.sm("push").code == 0 and lab.worktree_id() == ids["p2"]


def test_a_patch_a_later_applied_patch_changes_again_is_said_applied_not_partly_present(lab: Lab) -> None:
    (lab.tree / "notes.txt").write_text("notes\n")
    (lab.tree / "README").write_text("hello\nand more\n")
    assert lab.sm("save", "notes", "--series", "S", "-m", "notes").code == 0
    (lab.tree / "README").write_text("hello\nand more\nand again\n")
    assert lab.sm("save", "again", "--series", "S", "-m", "again").code == 0
    said = lab.sm("status")
    assert said.code == 0 and "S: 2 of 2 applied, top again" in said.out and "tree matches" in said.out
    assert "partly present" not in said.out
    assert "patch notes: applied (S)" in said.out
    shown = {p["name"]: p for p in json.loads(lab.sm("--json", "status").out)["trees"][0]["patches"]}
    assert shown["notes"]["applied"] is True and shown["again"]["applied"] is True


def test_status_after_a_rebase_found_an_applied_patch_upstream_says_so_and_apply_moves_onto_it(
    lab: Lab, tmp_path: Path
) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    (lab.tree / "README").write_text("hello\nmore\n")
    assert lab.sm("save", "p2", "--series", "S", "-m", "p2").code == 0
    held = lab.worktree_id()
    upstream = tmp_path / "upstream"
    git(tmp_path, "clone", "-q", str(lab.tree), str(upstream))
    commit(upstream, {"src/model.py": "def f():\n    return 2\n"}, "upstream has p1")
    git(lab.tree, "fetch", "-q", str(upstream), "HEAD:refs/heads/upstream")
    assert lab.sm("rebase", "S", "--onto", "upstream").code == 0
    listed = [ln for ln in (lab.store / "series" / "S").read_text().splitlines() if not ln.startswith("#")]
    assert listed == ["p2.patch"]  # p1 is upstream now
    assert lab.worktree_id() == held
    state = applied(lab)
    assert state["patches"] == ["p1", "p2"] and state["top"] == "p2" and state["not_in_series"] == ["p1"]
    assert state["upstream"] == ["p1"]
    assert state["position"] == "S: 1 of 1 applied + p1 (upstream now), top p2" and state["matches"] is False
    said = lab.sm("status").out
    assert "S: 1 of 1 applied + p1 (upstream now), top p2" in said and "p1 found upstream by a rebase" in said
    assert "`stackmgr apply S` moves the tree onto the rebased series" in said
    assert lab.sm("apply", "S").code == 0
    assert "S: 1 of 1 applied, top p2" in lab.sm("status").out


def test_status_after_apply_link_of_a_chain_holding_a_patch_of_no_series_names_it(lab: Lab) -> None:
    ids = two_patches(lab)
    (lab.store / "series" / "S").write_text("p1.patch\n")  # p2: a work-in-progress patch of no series
    link = link_id(lab, "p2", str(lab.store / "stackmgr.toml"))
    assert lab.sm("reset", "--force").code == 0 and lab.worktree_id() == ids["none"]
    assert lab.sm("apply", "--link", link).code == 0
    assert lab.worktree_id() == ids["p2"]
    state = applied(lab)
    assert state["patches"] == ["p1", "p2"] and state["top"] == "p2" and state["not_in_series"] == ["p2"]
    assert state["position"] == "S: 1 of 1 applied + p2 (not in S), top p2"
    said = lab.sm("status")
    assert said.code == 0 and "S: 1 of 1 applied + p2 (not in S), top p2 (on " in said.out


def test_push_after_a_pulled_reorder_of_applied_patches_reapplies_them_in_the_new_order(lab: Lab) -> None:
    ids = two_patches(lab)
    (lab.store / "series" / "S").write_text("p2.patch\np1.patch\n")  # what a pulled `series move` leaves
    state = applied(lab)
    assert state["in_order"] is False and "patches reordered" in state["series_edited"]
    assert state["position"] == "S: 2 of 2 applied, top p2"
    pushed = lab.sm("push")
    assert pushed.code == 0, pushed.err
    assert lab.worktree_id() == ids["p2"]  # the same files, applied in the new order
    state = applied(lab)
    assert state["patches"] == ["p2", "p1"] and state["in_order"] is True and state["matches"] is True
    assert lab.sm("pop").code == 0 and (lab.tree / "two.txt").exists() and not (lab.tree / "one.txt").exists()
