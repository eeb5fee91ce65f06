"""Where `git rebase` conflicts at the first commits of a branch that upstream already took (squashed with the next
one, so no patch-id matches and the 3-way merge overlaps), stackmgr finds them upstream as `stg rebase --merged`
does and goes on. Proven against git: the series' result equals git's tree after each of git's conflicts is
resolved the upstream way (upstream's version of every conflicted file, which in a rebase is `--ours`, then
`git rebase --continue`, repeated)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import Lab, commit, git, git_text

LINES = "".join(f"line {i}\n" for i in range(1, 21))


def git_rebase_the_upstream_way(repo: Path, onto: str, branch: str) -> tuple[str, int]:
    """`git rebase onto branch`, each conflict resolved by taking upstream's side; the tree it ends at and the
    number of conflicts it stopped at."""
    stops = 0
    done = subprocess.run(["git", "rebase", "-q", onto, branch], cwd=repo, capture_output=True)
    while done.returncode != 0:
        stops += 1
        assert stops < 20, done.stderr
        conflicted = git_text(repo, "diff", "--name-only", "--diff-filter=U").splitlines()
        assert conflicted, done.stderr
        git(repo, "checkout", "--ours", "--", *conflicted)  # in a rebase, "ours" is upstream's side
        git(repo, "add", "--", *conflicted)
        done = subprocess.run(["git", "-c", "core.editor=true", "rebase", "--continue"], cwd=repo,
                              capture_output=True)  # fmt: skip
    return git_text(repo, "rev-parse", "HEAD^{tree}"), stops


def _branch_upstream_took_squashed(lab: Lab) -> tuple[str, str, list[str]]:
    """Branch `work` at the base: c1 and c2 edit neighbouring lines of f.txt, c3 edits README. Upstream squashes
    c1 and c2 into one commit (with NEWS): `git rebase` conflicts at c1."""
    base = commit(lab.tree, {"f.txt": LINES}, "f")
    git(lab.tree, "checkout", "-q", "-b", "work")
    commit(lab.tree, {"f.txt": LINES.replace("line 10\n", "line 10 by c1\n")}, "c1")
    commit(lab.tree, {"f.txt": LINES.replace("line 10\n", "line 10 by c1\n").replace("line 11\n", "line 11 c2\n")},
           "c2")  # fmt: skip
    commit(lab.tree, {"README": "hello\nc3\n"}, "c3")
    git(lab.tree, "checkout", "-q", "-b", "upstream", base)
    squashed = LINES.replace("line 10\n", "line 10 by c1\n").replace("line 11\n", "line 11 c2\n")
    onto = commit(lab.tree, {"f.txt": squashed, "NEWS": "news\n"}, "upstream: c1 and c2, squashed")
    git(lab.tree, "checkout", "-q", base)
    mails = lab.store.parent / "mails"
    git(lab.tree, "format-patch", "-q", "--no-signature", "-o", str(mails), f"{base}..work")
    return base, onto, [str(p) for p in sorted(mails.glob("*.patch"))]


def test_a_squash_merged_start_is_upstream_and_the_tree_is_gits_upstream_way(lab: Lab, tmp_path: Path) -> None:
    base, onto, mails = _branch_upstream_took_squashed(lab)
    imported = lab.sm("import", "--series", "S", "--base", base, *mails)
    assert imported.code == 0, imported.err
    git_side = tmp_path / "git-side"
    git(tmp_path, "clone", "-q", "--no-local", str(lab.tree), str(git_side))
    git(git_side, "branch", "-q", "work", "origin/work")
    theirs, stops = git_rebase_the_upstream_way(git_side, onto, "work")
    assert stops == 1, "git conflicts at c1 (the case this proves)"
    assert git_text(git_side, "log", "--format=%s", f"{onto}..work").splitlines() == ["c3"]
    done = lab.sm("rebase", "S", "--onto", onto, "--json")
    assert done.code == 0, done.err
    outcomes = [p["outcome"] for p in json.loads(done.out)["patches"]]
    assert outcomes == ["already upstream", "already upstream", "unchanged"]
    assert lab.sm("apply", "S").code == 0
    assert git_text(lab.tree, "rev-parse", "HEAD") == onto
    assert lab.worktree_id() == theirs


def test_an_upstream_that_took_the_start_and_changed_it_again_still_stops(lab: Lab, tmp_path: Path) -> None:
    """Not merged by StGit's test (upstream's lines are not the patches'): stackmgr stops at the conflict as git
    does, and resolving it the upstream way gives git's tree."""
    base = commit(lab.tree, {"f.txt": LINES}, "f")
    git(lab.tree, "checkout", "-q", "-b", "work")
    commit(lab.tree, {"f.txt": LINES.replace("line 10\n", "line 10 by c1\n")}, "c1")
    commit(lab.tree, {"README": "hello\nc2\n"}, "c2")
    git(lab.tree, "checkout", "-q", "-b", "upstream", base)
    onto = commit(lab.tree, {"f.txt": LINES.replace("line 10\n", "line 10 by c1, reviewed\n")}, "upstream: c1 edited")
    theirs, stops = imported_and_git_side(lab, tmp_path, base, onto)
    assert stops == 1
    stopped = lab.sm("rebase", "S", "--onto", onto)
    assert stopped.code == 3 and "conflicts in f.txt" in stopped.err, stopped.err
    worktree = Path(stopped.err.split("resolve in ")[1].split(",")[0])
    git(worktree, "checkout", "--ours", "--", "f.txt")  # upstream's side, as for git
    git(worktree, "add", "f.txt")
    done = lab.sm("rebase", "S", "--continue")
    assert done.code == 0, done.err
    assert lab.sm("apply", "S").code == 0
    assert lab.worktree_id() == theirs


def imported_and_git_side(lab: Lab, tmp_path: Path, base: str, onto: str) -> tuple[str, int]:
    """Branch `work` (made at `base`) as `git format-patch` mails imported as series S at `base`, the user's tree
    back at `base`; and git's own rebase of it onto `onto` in a clone, resolved the upstream way: (its tree, the
    number of stops)."""
    git(lab.tree, "checkout", "-q", base)
    mails = tmp_path / "mails"
    git(lab.tree, "format-patch", "-q", "--no-signature", "-o", str(mails), f"{base}..work")
    assert lab.sm("import", "--series", "S", "--base", base, *map(str, sorted(mails.glob("*.patch")))).code == 0
    git_side = tmp_path / "git-side"
    git(tmp_path, "clone", "-q", "--no-local", str(lab.tree), str(git_side))
    git(git_side, "branch", "-q", "work", "origin/work")
    return git_rebase_the_upstream_way(git_side, onto, "work")


def test_a_deletion_and_recreation_upstream_took_as_one_edit_is_upstream(lab: Lab, tmp_path: Path) -> None:
    """Found on idna 3.4 → 3.6, carried release by release: 3.5 deleted tests/, 3.6 brought the files back
    changed. c1 deletes f.txt, c2 creates it again with new lines; upstream has the new lines (one edit). git's
    rebase stops at c1 (modify/delete); the merged test finds c1 and c2 upstream, as `stg rebase --merged`."""
    base = commit(lab.tree, {"f.txt": LINES}, "f")
    git(lab.tree, "checkout", "-q", "-b", "work")
    commit(lab.tree, {"f.txt": None}, "c1: f goes")
    again = LINES.replace("line 5\n", "line 5, back\n")
    commit(lab.tree, {"f.txt": again}, "c2: f comes back")
    commit(lab.tree, {"README": "hello\nc3\n"}, "c3")
    git(lab.tree, "checkout", "-q", "-b", "upstream", base)
    onto = commit(lab.tree, {"f.txt": again, "NEWS": "news\n"}, "upstream: f edited")
    theirs, stops = imported_and_git_side(lab, tmp_path, base, onto)
    assert stops == 1
    done = lab.sm("rebase", "S", "--onto", onto, "--json")
    assert done.code == 0, done.err
    assert [p["outcome"] for p in json.loads(done.out)["patches"]] == ["already upstream", "already upstream",
                                                                       "unchanged"]  # fmt: skip
    assert lab.sm("apply", "S").code == 0
    assert lab.worktree_id() == theirs
