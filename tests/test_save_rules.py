"""`save` and `refresh` never lose or duplicate saved work: a refresh does not overwrite a version of the patch
the tree never applied (a teammate's pulled refresh), nor take in a file another patch holds; a save on top of an
applied series holds only what is new, a mistyped series is refused with a did-you-mean, and a second series next
to the applied one starts only when asked for (`--new-series`), listing the patches it stands on."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Lab, applied_state, commit, git, git_text, make_repo, one_line_error
from tests.test_team_day import pull, team


def _series_s(lab: Lab) -> None:
    """Series S applied on vllm: fix (model.py returns 2)."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix: return 2").code == 0


def _diffed_files(data: bytes) -> list[bytes]:
    return [line.split(b" b/", 1)[1] for line in data.splitlines() if line.startswith(b"diff --git ")]


# --- refresh after a teammate's pulled refresh of the same patch ------------------------------------------------


def _alice_refreshes_what_bob_applied(lab: Lab, tmp_path: Path, readme: str) -> tuple[Lab, bytes]:
    """S = [base] applied on both sides; Alice refreshes base (README `readme`) and pushes; Bob pulls. Returns
    Bob and the pulled patch's bytes."""
    bob = team(lab, tmp_path)  # S = [base]: README "hello\nbase\n"
    assert bob.sm("apply", "S").code == 0  # Bob's tree holds base as it is now
    assert lab.sm("apply", "S").code == 0
    (lab.tree / "README").write_text(readme)
    assert lab.sm("refresh").code == 0
    git(lab.store, "add", "-A")
    git(lab.store, "commit", "-q", "-m", "alice refreshed base")
    git(lab.store, "push", "-q", "origin", "main")
    pull(bob)
    return bob, (bob.store / "patches" / "base.patch").read_bytes()


def test_refresh_after_a_pulled_refresh_of_the_same_patch_is_refused_and_keeps_theirs(lab: Lab, tmp_path: Path) -> None:
    bob, theirs = _alice_refreshes_what_bob_applied(lab, tmp_path, "hello\nbase, as Alice refreshed it\n")
    assert b"+base, as Alice refreshed it\n" in theirs
    (bob.tree / "bob.txt").write_text("bob's edit\n")
    before = bob.worktree_id(), applied_state(bob)
    refused = bob.sm("refresh")
    one_line_error(refused, 3)
    assert "base changed in the store since tree vllm applied it" in refused.err, refused.err
    assert "refresh --force" in refused.err and "push --merge" in refused.err
    assert (bob.store / "patches" / "base.patch").read_bytes() == theirs, "their change is still the patch"
    assert (bob.worktree_id(), applied_state(bob)) == before
    assert bob.sm("save", "base", "--update").code == 3, "`save --update` of the applied top is the same move"
    assert (bob.store / "patches" / "base.patch").read_bytes() == theirs
    # What the refusal says works: their version taken, Bob's edit carried on top, then the refresh holds both.
    assert bob.sm("pop").code == 0 and bob.sm("push").code == 0
    assert (bob.tree / "README").read_text() == "hello\nbase, as Alice refreshed it\n"
    assert bob.sm("refresh").code == 0
    both = (bob.store / "patches" / "base.patch").read_bytes()
    assert b"+base, as Alice refreshed it\n" in both and b"+bob's edit\n" in both


def test_refresh_force_replaces_a_pulled_version_and_keeps_it_for_interdiff(lab: Lab, tmp_path: Path) -> None:
    bob, theirs = _alice_refreshes_what_bob_applied(lab, tmp_path, "hello\nalice\n")
    (bob.tree / "README").write_text("hello\nbob\n")
    assert bob.sm("refresh", "--force").code == 0
    mine = (bob.store / "patches" / "base.patch").read_bytes()
    assert b"+bob\n" in mine and b"alice" not in mine
    kept = [p.read_bytes() for p in (bob.store / "patches" / ".versions" / "base").iterdir()]
    assert theirs in kept, "the version Bob overwrote on purpose is kept"


# --- refresh leaves out what another patch holds ----------------------------------------------------------------


def test_refresh_leaves_out_a_file_another_patch_of_the_series_holds(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "a", "--series", "S", "-m", "a").code == 0
    (lab.tree / "later.txt").write_text("b creates this\n")
    assert lab.sm("save", "b", "--series", "S", "-m", "b").code == 0
    assert lab.sm("pop").code == 0 and not (lab.tree / "later.txt").exists()
    (lab.tree / "later.txt").write_text("b creates this\n")  # b's file, back in the tree (b keeps it)
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    refreshed = lab.sm("refresh")
    assert refreshed.code == 0, refreshed.err
    a = (lab.store / "patches" / "a.patch").read_bytes()
    assert _diffed_files(a) == [b"src/model.py"] and b"+    return 3\n" in a
    assert "later.txt" in refreshed.err and "b" in refreshed.err, "what was left out, and who holds it"
    assert (lab.store / "series" / "S").read_bytes() == b"a.patch\nb.patch\n"
    assert lab.sm("check").code == 0
    assert lab.sm("refresh", "later.txt").code == 0, "named, it is taken in, as quilt's `add` does"
    assert _diffed_files((lab.store / "patches" / "a.patch").read_bytes()) == [b"later.txt", b"src/model.py"]


# --- save on top of an applied series ---------------------------------------------------------------------------


def test_save_without_series_on_a_fully_saved_applied_series_refuses_nothing_new(lab: Lab) -> None:
    _series_s(lab)
    series = (lab.store / "series" / "S").read_bytes()
    refused = lab.sm("save", "dup", "-m", "dup")
    one_line_error(refused, 3)
    assert "nothing to save" in refused.err and "series S" in refused.err, refused.err
    assert not (lab.store / "patches" / "dup.patch").exists()
    assert (lab.store / "series" / "S").read_bytes() == series


def test_save_without_series_on_an_applied_series_appends_only_the_new_change(lab: Lab) -> None:
    _series_s(lab)
    base = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "README").write_text("hello\nmore\n")
    wanted = lab.worktree_id()
    saved = lab.sm("save", "more", "-m", "more")
    assert saved.code == 0, saved.err
    more = (lab.store / "patches" / "more.patch").read_bytes()
    assert _diffed_files(more) == [b"README"] and b" hello\n+more\n" in more, "not S's model.py again"
    assert b"Stackmgr-Base: " + base.encode() in more
    assert (lab.store / "series" / "S").read_bytes() == b"fix.patch\nmore.patch\n", "appended to the applied series"
    applied = applied_state(lab)
    assert applied is not None and applied["series"] == "S" and applied["patches"] == ["fix", "more"]
    assert lab.sm("check").code == 0 and lab.worktree_id() == wanted
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "S").code == 0 and lab.worktree_id() == wanted


def test_save_without_series_of_a_file_the_applied_series_changes_stacks_on_it(lab: Lab) -> None:
    _series_s(lab)
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    wanted = lab.worktree_id()
    assert lab.sm("save", "on-top", "-m", "x").code == 0
    on_top = (lab.store / "patches" / "on-top.patch").read_bytes()
    assert b"-    return 2\n+    return 3\n" in on_top, "the change on top of fix, not fix's again"
    assert (lab.store / "series" / "S").read_bytes() == b"fix.patch\non-top.patch\n"
    assert lab.sm("reset").code == 0 and lab.sm("apply", "S").code == 0 and lab.worktree_id() == wanted


def test_save_into_a_mistyped_series_is_refused_with_did_you_mean(lab: Lab) -> None:
    _series_s(lab)
    (lab.tree / "README").write_text("hello\nmore\n")
    before = lab.worktree_id(), applied_state(lab)
    refused = lab.sm("save", "w", "--series", "s", "-m", "w")
    one_line_error(refused, 2)
    assert "did you mean \"S\"?" in refused.err and "--new-series s" in refused.err, refused.err
    assert not (lab.store / "patches" / "w.patch").exists() and not (lab.store / "series" / "s").exists()
    assert (lab.worktree_id(), applied_state(lab)) == before
    other = lab.sm("save", "w", "--series", "NEW", "-m", "w")
    one_line_error(other, 2)
    assert "--new-series NEW" in other.err and not (lab.store / "series" / "NEW").exists()


# --- a second series started on top of the applied one ----------------------------------------------------------


def test_new_series_next_to_an_applied_one_holds_only_the_new_change_and_rebuilds(lab: Lab) -> None:
    _series_s(lab)
    s_bytes, fix = (lab.store / "series" / "S").read_bytes(), (lab.store / "patches" / "fix.patch").read_bytes()
    (lab.tree / "README").write_text("hello\nnew lane\n")
    wanted = lab.worktree_id()
    started = lab.sm("save", "p", "--new-series", "NEW", "-m", "new lane")
    assert started.code == 0, started.err
    p = (lab.store / "patches" / "p.patch").read_bytes()
    assert _diffed_files(p) == [b"README"] and b" hello\n+new lane\n" in p, "only the change, not S's patches"
    assert (lab.store / "series" / "NEW").read_bytes() == b"fix.patch\np.patch\n", "NEW stands on S's patches"
    assert (lab.store / "series" / "S").read_bytes() == s_bytes
    assert (lab.store / "patches" / "fix.patch").read_bytes() == fix
    applied = applied_state(lab)
    assert applied is not None and applied["series"] == "NEW" and applied["matches"] is True
    assert lab.worktree_id() == wanted and lab.sm("check").code == 0
    assert lab.sm("reset").code == 0 and lab.sm("apply", "NEW").code == 0
    assert lab.worktree_id() == wanted
    assert lab.sm("reset").code == 0 and lab.sm("apply", "S").code == 0
    (lab.tree / "README").write_text("again\n")
    taken = lab.sm("save", "q", "--new-series", "NEW", "-m", "q")
    one_line_error(taken, 2)
    assert "series NEW exists" in taken.err
    assert not (lab.store / "patches" / "q.patch").exists()
    both = lab.sm("save", "q", "--series", "S", "--new-series", "X")
    one_line_error(both, 2)
    assert lab.sm("series", "new", "E").code == 0
    empty = lab.sm("save", "q", "--series", "E", "-m", "q")  # an empty series beside S: a copy of S's patches
    one_line_error(empty, 2)
    assert "--new-series E" in empty.err and not (lab.store / "patches" / "q.patch").exists()
    assert lab.sm("save", "q", "--new-series", "E", "-m", "q").code == 0
    assert (lab.store / "series" / "E").read_bytes() == b"fix.patch\nq.patch\n"
    assert _diffed_files((lab.store / "patches" / "q.patch").read_bytes()) == [b"README"]


def test_new_series_with_nothing_applied_starts_from_head(lab: Lab) -> None:
    (lab.tree / "README").write_text("alone\n")
    assert lab.sm("save", "solo", "--new-series", "L", "-m", "solo").code == 0
    assert (lab.store / "series" / "L").read_bytes() == b"solo.patch\n"
    shown = json.loads(lab.sm("--json", "status").out)["trees"][0]["applied"]
    assert shown["series"] == "L"


# --- both engineers change one patch: the pulled version, and mine merged on top -------------------------------

TEN = "".join(f"line {n}\n" for n in range(1, 11))


def _both_change_big(lab: Lab, tmp_path: Path) -> Lab:
    """S = [base, big] applied on both sides; Alice refreshes big (line 9) and pushes; Bob, who edited line 1 of
    big.txt meanwhile, pulls."""
    bob = team(lab, tmp_path)
    assert lab.sm("apply", "S").code == 0
    (lab.tree / "big.txt").write_text(TEN)
    assert lab.sm("save", "big", "--series", "S", "-m", "ten lines").code == 0
    git(lab.store, "add", "-A")
    git(lab.store, "commit", "-q", "-m", "big")
    git(lab.store, "push", "-q", "origin", "main")
    pull(bob)
    assert bob.sm("apply", "S").code == 0
    (lab.tree / "big.txt").write_text(TEN.replace("line 9\n", "line 9, alice\n"))
    assert lab.sm("refresh").code == 0
    git(lab.store, "commit", "-qam", "alice refreshed big")
    git(lab.store, "push", "-q", "origin", "main")
    (bob.tree / "big.txt").write_text(TEN.replace("line 1\n", "line 1, bob\n"))
    pull(bob)
    return bob


def test_my_edit_merges_onto_a_pulled_refresh_and_the_refresh_holds_both(lab: Lab, tmp_path: Path) -> None:
    bob = _both_change_big(lab, tmp_path)
    before = bob.worktree_id()
    refused = bob.sm("refresh")
    one_line_error(refused, 3)
    assert "push --merge" in refused.err, refused.err
    plain = bob.sm("pop", "-a")
    one_line_error(plain, 3)
    assert "--merge" in plain.err and bob.worktree_id() == before, "the plain pop says how, and changes nothing"
    assert bob.sm("push", "--merge").code == 0
    both = TEN.replace("line 1\n", "line 1, bob\n").replace("line 9\n", "line 9, alice\n")
    assert (bob.tree / "big.txt").read_text() == both, "their version, mine merged on top"
    assert bob.sm("refresh").code == 0
    big = (bob.store / "patches" / "big.patch").read_bytes()
    assert b"+line 1, bob\n" in big and b"+line 9, alice\n" in big
    assert bob.sm("check").code == 0
    assert bob.sm("reset").code == 0 and bob.sm("apply", "S").code == 0
    assert (bob.tree / "big.txt").read_text() == both


def test_a_merge_that_conflicts_is_refused_and_changes_nothing(lab: Lab, tmp_path: Path) -> None:
    bob = _both_change_big(lab, tmp_path)
    (bob.tree / "big.txt").write_text(TEN.replace("line 9\n", "line 9, bob\n"))  # the line Alice changed too
    before = bob.worktree_id(), (bob.store / "patches" / "big.patch").read_bytes(), applied_state(bob)
    refused = bob.sm("push", "--merge")
    one_line_error(refused, 3)
    assert "do not merge in 1 path" in refused.err and "\n  big.txt (conflicts)\n" in refused.err, refused.err
    assert (bob.tree / "big.txt").read_text() == TEN.replace("line 9\n", "line 9, bob\n"), "my edit untouched"
    assert (bob.worktree_id(), (bob.store / "patches" / "big.patch").read_bytes(), applied_state(bob)) == before


def test_undo_of_a_merged_push_gives_my_bytes_back(lab: Lab, tmp_path: Path) -> None:
    bob = _both_change_big(lab, tmp_path)
    before = bob.worktree_id()
    assert bob.sm("push", "--merge").code == 0 and bob.worktree_id() != before
    assert bob.sm("undo").code == 0
    assert bob.worktree_id() == before and (bob.tree / "big.txt").read_text() == TEN.replace(
        "line 1\n", "line 1, bob\n"
    )


def test_a_save_on_top_of_a_patch_changed_in_the_store_is_refused(lab: Lab, tmp_path: Path) -> None:
    bob = _both_change_big(lab, tmp_path)
    (bob.tree / "other.txt").write_text("bob's other file\n")
    before = bob.worktree_id(), (bob.store / "series" / "S").read_bytes()
    for args in (("save", "more", "-m", "more"), ("save", "more", "--series", "S", "-m", "more"),
                 ("save", "more", "--new-series", "T", "-m", "more")):  # fmt: skip
        refused = bob.sm(*args)
        one_line_error(refused, 3)
        assert "big changed in the store since tree vllm applied it" in refused.err, (args, refused.err)
        assert "made against the old version" in refused.err and "--merge" in refused.err
        assert not (bob.store / "patches" / "more.patch").exists()
        assert (bob.worktree_id(), (bob.store / "series" / "S").read_bytes()) == before


def test_a_save_for_a_tree_a_pulled_tree_rm_dropped_names_it_again_for_everyone(lab: Lab, tmp_path: Path) -> None:
    bob = team(lab, tmp_path)
    kern = make_repo(tmp_path / "kern", {"gemm.cpp": "int tile = 64;\n"})
    assert lab.sm("tree", "add", "kern", str(kern)).code == 0
    git(lab.store, "add", "-A")
    git(lab.store, "commit", "-q", "-m", "tree kern")
    git(lab.store, "push", "-q", "origin", "main")
    pull(bob)
    bobs = tmp_path / "bob" / "kern"
    git(tmp_path, "clone", "-q", str(kern), str(bobs))
    assert bob.sm("tree", "set", "kern", str(bobs)).code == 0
    assert lab.sm("tree", "rm", "kern").code == 0
    git(lab.store, "commit", "-qam", "alice: tree rm kern")
    git(lab.store, "push", "-q", "origin", "main")
    pull(bob)
    (bobs / "gemm.cpp").write_text("int tile = 128;\n")
    assert bob.sm("check").code == 1, "still guarded on the machine that placed it"
    saved = bob.sm("save", "k1", "-t", "kern", "-m", "tile 128")
    assert saved.code == 0, saved.err
    assert "named there again" in saved.err
    assert "[trees.kern]" in (bob.store / "stackmgr.toml").read_text()
    git(bob.store, "add", "-A")
    git(bob.store, "commit", "-q", "-m", "bob: k1")
    git(bob.store, "push", "-q", "origin", "main")
    pull(lab)
    assert "[trees.kern]" in (lab.store / "stackmgr.toml").read_text(), "the same answer on both clones"
    linted = lab.sm("lint")
    assert "not registered" not in linted.out + linted.err, linted


def test_push_merge_after_a_pulled_rebase_moves_head_to_the_new_base_with_my_edit(lab: Lab, tmp_path: Path) -> None:
    """A teammate rebased S onto a newer upstream commit; my tree still holds S on the old one, with an edit on
    top. `push --merge` takes the series as it is now: HEAD at its new base, the new patches, my edit merged on top;
    a save after it is made on the new base."""
    bob = team(lab, tmp_path)  # S = [base]: README "hello\nbase\n"
    assert bob.sm("apply", "S").code == 0
    (bob.tree / "src" / "model.py").write_text("def f():\n    return 'bob'\n")
    upstream = commit(lab.tree, {"UPSTREAM": "a newer upstream\n"}, "upstream moves on")
    assert lab.sm("rebase", "S", "--onto", upstream).code == 0
    git(lab.store, "add", "-A")
    git(lab.store, "commit", "-q", "-m", "alice rebased S")
    git(lab.store, "push", "-q", "origin", "main")
    git(bob.tree, "fetch", "-q", str(lab.tree), "HEAD:refs/heads/upstream")  # as `git fetch origin` brings it
    pull(bob)
    refused = bob.sm("save", "mine", "-m", "mine")
    one_line_error(refused, 3)
    assert "push --merge" in refused.err
    pushed = bob.sm("push", "--merge")
    assert pushed.code == 0, pushed.err
    assert "HEAD moved to its new base" in pushed.err
    assert git_text(bob.tree, "rev-parse", "HEAD") == upstream
    assert (bob.tree / "UPSTREAM").read_text() == "a newer upstream\n"
    assert (bob.tree / "README").read_text() == "hello\nbase\n"
    assert (bob.tree / "src" / "model.py").read_text() == "def f():\n    return 'bob'\n", "my edit, carried"
    changed = set(git(bob.tree, "status", "--porcelain").decode().splitlines())
    assert changed == {" M README", " M src/model.py"}, "S's patch and my edit on the new HEAD, nothing else"
    assert bob.sm("save", "mine", "-m", "mine").code == 0
    assert b"Stackmgr-Base: " + upstream.encode() in (bob.store / "patches" / "mine.patch").read_bytes()
    said = bob.sm("check", "-v")
    assert said.code == 0, said.out + said.err


def test_save_update_of_a_popped_patch_is_refused_and_changes_nothing(lab: Lab) -> None:
    """Series S = p1 (README) then p2 (src/model.py); p2 popped; an edit; `save --update p2` would have rewritten p2
    as everything against HEAD: p1's change in, p2's own change out."""
    (lab.tree / "README").write_text("p1\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    (lab.tree / "src" / "model.py").write_text("p2\n")
    assert lab.sm("save", "p2", "-m", "p2").code == 0
    assert lab.sm("pop").code == 0
    (lab.tree / "new.txt").write_text("c\n")
    before = {p.name: p.read_bytes() for p in (lab.store / "patches").iterdir() if p.is_file()}
    refused = lab.sm("save", "p2", "--update")
    assert refused.code == 2, refused
    assert "p2 is not applied in tree vllm" in refused.err and "`stackmgr push p2`" in refused.err, refused.err
    assert {p.name: p.read_bytes() for p in (lab.store / "patches").iterdir() if p.is_file()} == before
