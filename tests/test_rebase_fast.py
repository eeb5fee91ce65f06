"""A rebase where every patch carries cleanly runs without a scratch worktree (commands/rebase_fast.py), and must
give what the worktree way gives, byte for byte: the same rewritten patch files and series, the same outcome for
every patch (unchanged, context drift, merged (3-way), already upstream by patch-id or by an identical change).
A series that conflicts anywhere is carried the worktree way from its first patch."""

from __future__ import annotations

import json

import pytest

from stackmgr.commands import rebase
from tests.conftest import Lab, commit, git, git_text
from tests.test_rebase import _edit, _fingerprint, _lines


@pytest.fixture
def carried_cleanly(lab: Lab) -> tuple[Lab, str]:
    """Twelve patches (two of them stacked on one file) and an upstream that moves, merges, already has two of
    them (one as the same commit, one as the same lines) and conflicts with none."""
    files = {f"f{i:02d}.txt": _lines(40) for i in range(10)}
    commit(lab.tree, files, "ten files")
    for i in range(10):
        _edit(lab.tree / f"f{i:02d}.txt", "line 20\n", f"line 20 patched by p{i:02d}\n")
        assert lab.sm("save", f"p{i:02d}", "--series", "S", "-m", f"patch {i}").code == 0
    _edit(lab.tree / "f00.txt", "line 30\n", "line 30 patched again\n")
    assert lab.sm("save", "p10", "--series", "S", "-m", "patch 10, on f00 again").code == 0
    _edit(lab.tree / "f00.txt", "line 21\n", "line 21 patched a third time\n")
    assert lab.sm("save", "p11", "--series", "S", "-m", "patch 11, on f00 again").code == 0
    assert lab.sm("reset").code == 0
    t = lab.tree
    _edit(t / "f01.txt", "line 1\n", "new first line\nline 1\n")  # drift
    _edit(t / "f02.txt", "line 18\n", "line 18 upstream\n")  # inside the context: 3-way
    _edit(t / "f03.txt", "line 20\n", "line 20 patched by p03\n")  # the same lines: no change to carry
    _edit(t / "f00.txt", "line 1\n", "upstream's first line\nline 1\n")  # the stacked file moves too
    git(t, "commit", "-q", "-am", "upstream moves")
    _edit(t / "f04.txt", "line 20\n", "line 20 patched by p04\n")  # p04's own commit, cherry-picked: patch-id
    git(t, "commit", "-q", "-am", "patch 4")
    (t / "NEWS").write_text("news\n")
    git(t, "add", "NEWS")
    git(t, "commit", "-q", "-m", "news")
    return lab, git_text(t, "rev-parse", "HEAD")


OUTCOMES = {f"p{i:02d}": "unchanged" for i in range(12)} | {
    "p00": "context drift", "p10": "context drift", "p11": "context drift", "p01": "context drift",
    "p02": "merged (3-way)", "p03": "already upstream", "p04": "already upstream",
}  # fmt: skip


def test_a_clean_rebase_without_a_worktree_writes_what_the_worktree_way_writes(
    carried_cleanly: tuple[Lab, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lab, onto = carried_cleanly
    before = _fingerprint(lab)
    made: list[str] = []
    real_add = rebase.add_worktree
    monkeypatch.setattr(rebase, "add_worktree", lambda *a: (made.append(a[1]), real_add(*a))[1])
    fast = lab.sm("rebase", "S", "--onto", onto, "--json")
    assert fast.code == 0, fast.err
    assert made == [], "a clean rebase made a scratch worktree"
    fast_outcomes = {p["name"]: p["outcome"] for p in json.loads(fast.out)["patches"]}
    assert fast_outcomes == OUTCOMES
    fast_store = _fingerprint(lab)
    assert lab.sm("undo").code == 0 and _fingerprint(lab) == before

    monkeypatch.setattr(rebase, "carry_at_once", lambda store, state: None)
    slow = lab.sm("rebase", "S", "--onto", onto, "--json")
    assert slow.code == 0, slow.err
    assert made, "the worktree way was not taken"
    assert {p["name"]: p["outcome"] for p in json.loads(slow.out)["patches"]} == OUTCOMES
    assert _fingerprint(lab) == fast_store
    assert b"layers-" not in git(lab.tree, "for-each-ref", "refs/stackmgr")
    assert git_text(lab.tree, "worktree", "list").count("\n") == 0


def test_a_series_that_conflicts_anywhere_is_carried_the_worktree_way_from_its_first_patch(
    carried_cleanly: tuple[Lab, str],
) -> None:
    lab, _ = carried_cleanly
    _edit(lab.tree / "f09.txt", "line 20\n", "line 20 rewritten upstream\n")
    git(lab.tree, "commit", "-q", "-am", "upstream rewrites p09's line")
    stopped = lab.sm("rebase", "S", "--onto", "HEAD", "--json")
    assert stopped.code == 3 and "p09 (10 of 12) conflicts in f09.txt" in stopped.err
    state = json.loads(stopped.out)
    assert [p["outcome"] for p in state["patches"][:5]] == [OUTCOMES[f"p{i:02d}"] for i in range(5)]
    assert lab.sm("rebase", "--abort").code == 0


@pytest.mark.regression("a series upstream took whole, moves included, went the worktree way patch by patch")
def test_a_move_upstream_took_as_a_creation_and_a_deletion_below_it_carries_without_a_worktree(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found on tomli 2.0.0 -> 2.0.1 (modules moved under src/), carried as per-file patches: the creation of the
    new path comes first, so git's merge sees no rename and both deletions agree. A deletion of a moved file
    with no such creation below it is still git's merge's to decide (a rename/delete conflict)."""
    body = "".join(f"line {n}\n" for n in range(30))
    commit(lab.tree, {"pkg/mod.py": body}, "a module")
    (lab.tree / "pkg" / "mod.py").unlink()
    (lab.tree / "src" / "pkg").mkdir(parents=True)
    (lab.tree / "src" / "pkg" / "mod.py").write_text(body)
    assert lab.sm("save", "move", "--series", "S", "src/pkg/mod.py", "-m", "the new path").code == 0
    assert lab.sm("save", "gone", "--series", "S", "-m", "the old path goes").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "src" / "pkg").mkdir(parents=True)
    git(lab.tree, "mv", "pkg/mod.py", "src/pkg/mod.py")
    git(lab.tree, "commit", "-q", "-m", "upstream moves the module")
    assert git_text(lab.tree, "diff", "-M", "--name-status", "HEAD~1", "HEAD").startswith("R100")
    made: list[str] = []
    monkeypatch.setattr(rebase, "add_worktree", lambda *a: made.append(a[1]))
    done = lab.sm("rebase", "S", "--onto", "HEAD", "--json")
    assert done.code == 0, done.err
    assert [p["outcome"] for p in json.loads(done.out)["patches"]] == ["already upstream", "already upstream"]
    assert made == []
