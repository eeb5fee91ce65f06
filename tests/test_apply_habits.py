"""`apply` and `reset` as a git user expects them: a swap of series is said, the detached HEAD is said, and `reset`
brings the tree back to the branch it was on before the first `apply` (as `git bisect reset` and
`git rebase --abort` do), never moving the branch itself."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Lab, commit, git, git_text, head_name, link_id, porcelain, recovery_id


def _two_series(lab: Lab) -> str:
    """Series A (a, a2: README, src/model.py) and B (b: new.txt), saved on the tree's main; the tree reset to main.
    Returns main's commit."""
    base = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "README").write_text("A\n")
    assert lab.sm("save", "a", "--series", "A", "-m", "a").code == 0
    (lab.tree / "src" / "model.py").write_text("A2\n")
    assert lab.sm("save", "a2", "--series", "A", "-m", "a2").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "new.txt").write_text("B\n")
    assert lab.sm("save", "b", "--series", "B", "-m", "b").code == 0
    assert lab.sm("reset").code == 0
    assert head_name(lab.tree) == "main" and porcelain(lab.tree) == b""
    return base


# --- a swap of series is said -----------------------------------------------------------------------------------


def test_apply_over_another_series_says_which_series_left_the_tree(lab: Lab) -> None:
    _two_series(lab)
    assert lab.sm("apply", "A").code == 0
    swapped = lab.sm("apply", "B")
    assert swapped.code == 0, swapped.err
    lines = swapped.out.splitlines()
    assert lines[0] == "vllm: series A left the tree (2 patches: a, a2; they stay saved in patches/)", lines
    assert lines[1].startswith("vllm: applied B (1 patch)"), lines
    assert (lab.tree / "README").read_text() == "hello\n" and (lab.tree / "new.txt").read_text() == "B\n"
    as_json = json.loads(lab.sm("--json", "apply", "A").out)["trees"][0]
    assert as_json["left"] == {"series": "B", "patches": ["b"]}
    assert (lab.tree / "README").read_text() == "A\n" and not (lab.tree / "new.txt").exists()


def test_apply_says_no_swap_when_nothing_else_was_applied(lab: Lab) -> None:
    _two_series(lab)  # B is current with none of it applied (reset to its base)
    first = lab.sm("apply", "A")
    assert first.code == 0 and "left the tree" not in first.out, first.out
    again = lab.sm("apply", "A")  # the same series again: already there, nothing left
    assert again.code == 0 and "left the tree" not in again.out and "working tree already there" in again.out
    assert json.loads(lab.sm("--json", "apply", "A").out)["trees"][0]["left"] is None


# --- the detached HEAD, and back to the branch --------------------------------------------------------------------


def test_apply_says_it_detached_head_and_reset_returns_to_the_branch(lab: Lab) -> None:
    main = _two_series(lab)
    applied = lab.sm("apply", "A")
    assert applied.code == 0, applied.err
    assert f"vllm: HEAD detached at {main[:12]} (was on branch main); `stackmgr reset` returns to main" in applied.err
    assert head_name(lab.tree) == "HEAD" and git_text(lab.tree, "rev-parse", "HEAD") == main
    swapped = lab.sm("apply", "B")  # a second apply: still the branch before the first one is remembered
    assert swapped.code == 0 and "HEAD detached" not in swapped.err, swapped.err
    back = lab.sm("reset")
    assert back.code == 0, back.err
    assert back.out == f"vllm: reset to {main[:12]}\n"
    assert "vllm: back on branch main" in back.err
    assert head_name(lab.tree) == "main" and git_text(lab.tree, "rev-parse", "refs/heads/main") == main
    assert porcelain(lab.tree) == b""
    again = lab.sm("reset")  # on the branch already: nothing more to say
    assert again.code == 0 and again.err == "" and head_name(lab.tree) == "main"


def test_reset_stays_detached_when_the_branch_moved_and_says_how_to_return(lab: Lab) -> None:
    main = _two_series(lab)
    assert lab.sm("apply", "A").code == 0
    elsewhere = lab.tree.parent / "other"
    git(lab.tree, "worktree", "add", "-q", "--detach", str(elsewhere), main)
    moved = commit(elsewhere, {"later.txt": "later\n"}, "later")
    git(elsewhere, "update-ref", "refs/heads/main", moved, main)
    back = lab.sm("reset")
    assert back.code == 0, back.err
    assert f"vllm: main is at {moved[:12]}, not at {main[:12]}: HEAD stays detached there" in back.err, back.err
    assert "`git switch main` (or `stackmgr reset --to main`) returns to it" in back.err
    assert head_name(lab.tree) == "HEAD" and git_text(lab.tree, "rev-parse", "HEAD") == main
    assert git_text(lab.tree, "rev-parse", "refs/heads/main") == moved  # never moved by stackmgr
    assert porcelain(lab.tree) == b""


def test_apply_from_a_branch_ahead_of_the_base_promises_only_what_reset_does(lab: Lab) -> None:
    main = _two_series(lab)
    git(lab.tree, "switch", "-q", "-c", "feature")
    ahead = commit(lab.tree, {"feature.txt": "f\n"}, "feature work")
    applied = lab.sm("apply", "A")  # detaches at A's base, main's commit: behind feature
    assert applied.code == 0, applied.err
    assert (f"vllm: HEAD detached at {main[:12]} (was on branch feature); `stackmgr reset --to feature` returns "
            f"to it ({ahead[:12]})") in applied.err, applied.err  # fmt: skip
    back = lab.sm("reset")  # to the base: feature is not there, and it is said without claiming it moved
    assert back.code == 0 and "moved" not in back.err and f"feature is at {ahead[:12]}" in back.err, back.err
    assert head_name(lab.tree) == "HEAD"
    assert lab.sm("reset", "--to", "feature").code == 0
    assert head_name(lab.tree) == "feature" and git_text(lab.tree, "rev-parse", "HEAD") == ahead


def test_git_status_names_where_apply_detached_head(lab: Lab) -> None:
    _two_series(lab)
    git(lab.tree, "checkout", "-q", "--detach", "HEAD")  # an older checkout in the reflog: git must not name it
    git(lab.tree, "checkout", "-q", "main")
    assert lab.sm("apply", "A").code == 0
    base = git_text(lab.tree, "rev-parse", "--short", "HEAD")
    said = git_text(lab.tree, "status").splitlines()[0]
    assert said == f"HEAD detached at {base}", said
    assert "(stackmgr apply A)" in git_text(lab.tree, "reflog", "-1")


def test_reset_to_the_branch_commit_returns_to_the_branch(lab: Lab) -> None:
    main = _two_series(lab)
    assert lab.sm("apply", "A").code == 0
    back = lab.sm("reset", "--to", "main")
    assert back.code == 0, back.err
    assert head_name(lab.tree) == "main" and git_text(lab.tree, "rev-parse", "HEAD") == main


def test_undo_of_apply_and_of_reset_put_head_back_exactly(lab: Lab) -> None:
    main = _two_series(lab)
    assert lab.sm("apply", "A").code == 0
    applied_tree = lab.worktree_id()
    assert lab.sm("reset").code == 0 and head_name(lab.tree) == "main"
    undone = lab.sm("undo")  # the reset undone: detached at the base again, A's changes back
    assert undone.code == 0, undone.err
    assert head_name(lab.tree) == "HEAD" and git_text(lab.tree, "rev-parse", "HEAD") == main
    assert lab.worktree_id() == applied_tree
    redone = lab.sm("redo")  # the reset again: back on the branch, as the reset left it
    assert redone.code == 0, redone.err
    assert head_name(lab.tree) == "main" and porcelain(lab.tree) == b""
    assert lab.sm("undo").code == 0 and head_name(lab.tree) == "HEAD"
    back = lab.sm("reset")  # and the branch is still remembered
    assert back.code == 0 and head_name(lab.tree) == "main", back.err


def test_undo_of_the_first_apply_goes_back_onto_the_branch(lab: Lab) -> None:
    main = _two_series(lab)
    clean = lab.worktree_id()
    assert lab.sm("apply", "A").code == 0 and head_name(lab.tree) == "HEAD"
    undone = lab.sm("undo")
    assert undone.code == 0, undone.err
    assert head_name(lab.tree) == "main" and git_text(lab.tree, "rev-parse", "HEAD") == main
    assert lab.worktree_id() == clean


def test_pop_after_save_detaches_and_reset_returns_to_the_branch(lab: Lab) -> None:
    """`save --series` leaves the tree on its branch; the first `pop` (or `push`) detaches HEAD at the series'
    base as `apply` does, and `reset` comes back to the branch the same way."""
    main = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "README").write_text("one\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    assert head_name(lab.tree) == "main"
    popped = lab.sm("pop")
    assert popped.code == 0 and head_name(lab.tree) == "HEAD"
    assert f"vllm: HEAD detached at {main[:12]} (was on branch main); `stackmgr reset` returns to main" in popped.err
    pushed = lab.sm("push")
    assert pushed.code == 0 and (lab.tree / "README").read_text() == "one\n" and "detached" not in pushed.err
    back = lab.sm("reset")
    assert back.code == 0, back.err
    assert head_name(lab.tree) == "main" and git_text(lab.tree, "rev-parse", "HEAD") == main
    assert porcelain(lab.tree) == b""


def test_reset_after_apply_link_returns_to_the_branch(evidence_lab: Lab) -> None:
    lab = evidence_lab
    lid = link_id(lab, "replay-fix", "results/probe.log")
    main = git_text(lab.tree, "rev-parse", "HEAD")
    assert lab.sm("reset", "vllm").code == 0 and head_name(lab.tree) == "main"
    rebuilt = lab.sm("apply", "--link", lid)
    assert rebuilt.code == 0, rebuilt.err
    assert head_name(lab.tree) == "HEAD" and (lab.tree / "README").read_text() == "probe\n"
    back = lab.sm("reset", "vllm")
    assert back.code == 0, back.err
    assert head_name(lab.tree) == "main" and git_text(lab.tree, "rev-parse", "HEAD") == main


def test_reset_that_moves_no_file_still_returns_to_the_branch_and_undo_detaches_again(lab: Lab) -> None:
    main = _two_series(lab)
    assert lab.sm("apply", "A").code == 0
    git(lab.tree, "checkout", "--", ".")  # the patches' changes dropped by hand (they are saved): at the base
    assert porcelain(lab.tree) == b"" and head_name(lab.tree) == "HEAD"
    back = lab.sm("reset")
    assert back.code == 0 and "vllm: back on branch main" in back.err, back
    assert head_name(lab.tree) == "main" and git_text(lab.tree, "rev-parse", "HEAD") == main
    assert lab.sm("undo").code == 0
    assert head_name(lab.tree) == "HEAD" and git_text(lab.tree, "rev-parse", "HEAD") == main


def test_apply_link_says_it_detached_head_too(lab: Lab) -> None:
    main = _two_series(lab)
    assert lab.sm("apply", "A").code == 0
    result = lab.store / "results" / "r.log"
    result.parent.mkdir()
    result.write_text("tput 1\n")
    lid = link_id(lab, "a2", str(result))
    assert lab.sm("reset").code == 0 and head_name(lab.tree) == "main"
    rebuilt = lab.sm("apply", "--link", lid)
    assert rebuilt.code == 0, rebuilt.err
    assert f"stackmgr: vllm: HEAD detached at {main[:12]} (was on branch main); `stackmgr reset` returns to main" \
        in rebuilt.err.splitlines(), rebuilt.err  # fmt: skip


def test_save_after_a_git_switch_off_the_series_base_refuses_to_take_in_the_branchs_commits(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "mine", "--series", "s", "-m", "mine").code == 0
    assert lab.sm("reset").code == 0
    base = git_text(lab.tree, "rev-parse", "HEAD")
    upstream = commit(lab.tree, {"README": "upstream line\n"}, "upstream commit on main")
    assert lab.sm("apply", "s").code == 0
    git(lab.tree, "switch", "-q", "main")  # the guard lets a switch through: the edits come along
    assert git_text(lab.tree, "rev-parse", "HEAD") == upstream
    status = lab.sm("status")
    assert f"note: HEAD moved off the series' base {base[:12]} since it was applied" in status.out
    (lab.tree / "notes.txt").write_text("more of mine\n")
    saved = lab.sm("save", "more", "-m", "more")
    assert saved.code == 3 and f"HEAD of tree vllm moved off series s's base {base[:12]}" in saved.err
    assert f"`git switch --detach {base[:12]}`" in saved.err
    assert not (lab.store / "patches" / "more.patch").exists()
    git(lab.tree, "switch", "-q", "--detach", base)
    saved = lab.sm("save", "more", "-m", "more")
    assert saved.code == 0, saved.err
    assert b"upstream line" not in (lab.store / "patches" / "more.patch").read_bytes()


def test_a_first_save_on_a_machine_without_a_git_identity_signs_with_login_and_host(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.delenv(f"GIT_{who}_NAME", raising=False)
        monkeypatch.delenv(f"GIT_{who}_EMAIL", raising=False)
    monkeypatch.setenv("EMAIL", "")
    git(lab.tree, "config", "user.useConfigOnly", "true")  # git itself refuses to guess here
    (lab.tree / "README").write_text("first edit\n")
    saved = lab.sm("save", "first", "-m", "first")
    assert saved.code == 0, saved.err
    assert "note: git does not know who you are; signed as " in saved.err
    assert 'git config --global user.name "Your Name"' in saved.err
    header = (lab.store / "patches" / "first.patch").read_bytes().split(b"\n")[1]
    assert header.startswith(b"From: ") and b"@" in header
    assert lab.sm("check").code == 0
    (lab.tree / "README").write_text("unsaved\n")  # a forced reset commits a recovery snapshot: no identity needed
    forced = lab.sm("reset", "--force")
    assert forced.code == 0, forced.err
    assert lab.sm("recover", recovery_id(forced.err)).code == 0
    assert (lab.tree / "README").read_text() == "unsaved\n"


def test_reset_after_a_git_switch_to_a_branch_stays_on_that_branch(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "mine", "--series", "s", "-m", "mine").code == 0
    assert lab.sm("reset").code == 0
    upstream = commit(lab.tree, {"README": "upstream line\n"}, "upstream commit on main")
    assert lab.sm("apply", "s").code == 0 and head_name(lab.tree) == "HEAD"
    git(lab.tree, "switch", "-q", "main")
    back = lab.sm("reset")
    assert back.code == 0, back.err
    assert head_name(lab.tree) == "main" and git_text(lab.tree, "rev-parse", "HEAD") == upstream
    assert porcelain(lab.tree) == b"" and (lab.tree / "README").read_text() == "upstream line\n"
