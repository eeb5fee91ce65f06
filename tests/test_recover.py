"""`reset --force` stores unsaved work as a recovery snapshot; `recover` lists them and puts one back, exactly."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Lab, applied_state, git, git_text, head_name, porcelain, recovery_id, unsaved_work


def test_reset_force_then_recover_gives_the_exact_tree_back(lab: Lab) -> None:
    unsaved_work(lab)
    os.symlink("src/model.py", lab.tree / "alias")
    git(lab.tree, "add", "results.log")
    before = lab.worktree_id()
    index_tree = git_text(lab.tree, "write-tree")
    forced = lab.sm("reset", "--force")
    assert forced.code == 0
    rid = forced.err.split("recovery snapshot ")[1].split(";")[0]
    assert f"stackmgr recover {rid}" in forced.err
    assert git(lab.tree, "status", "--porcelain", "--untracked-files=all") == b""
    listing = json.loads(lab.sm("recover", "--json").out)["recoveries"]
    assert [r["id"] for r in listing] == [rid] and listing[0]["tree"] == "vllm" and listing[0]["files"] == 5
    assert git_text(lab.tree, "rev-parse", f"refs/stackmgr/recovery/{rid}")[:12] == rid
    restored = lab.sm("recover", rid)
    assert restored.code == 0, restored.err
    assert lab.worktree_id() == before
    assert git_text(lab.tree, "write-tree") == index_tree, "the staged state comes back too"
    assert git(lab.tree, "rev-parse", "--abbrev-ref", "HEAD").strip() == b"main"


def test_recover_refuses_into_a_tree_with_unsaved_work_and_bad_ids(lab: Lab) -> None:
    (lab.tree / "README").write_text("first\n")
    rid = lab.sm("reset", "--force").err.split("recovery snapshot ")[1].split(";")[0]
    (lab.tree / "README").write_text("second, unsaved\n")
    refused = lab.sm("recover", rid)
    assert refused.code == 1 and "README (modified)" in refused.err
    assert (lab.tree / "README").read_text() == "second, unsaved\n"
    assert lab.sm("recover", "zzzz").code == 2
    assert lab.sm("recover", "0000000000ab").code == 2


@pytest.mark.regression("edge case: recover after the branch gained a commit")
def test_recover_when_the_original_branch_moved_on(lab: Lab) -> None:
    old_head = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "README").write_text("unsaved\n")
    (lab.tree / "u.txt").write_text("untracked\n")
    wanted = lab.worktree_id()
    rid = recovery_id(lab.sm("reset", "--force").err)
    (lab.tree / "c.txt").write_text("c\n")
    git(lab.tree, "add", "c.txt")
    git(lab.tree, "commit", "-qm", "moved on")
    tip = git_text(lab.tree, "rev-parse", "HEAD")
    assert lab.sm("recover", rid).code == 0
    assert lab.worktree_id() == wanted
    assert head_name(lab.tree) == "HEAD" and git_text(lab.tree, "rev-parse", "HEAD") == old_head
    assert git_text(lab.tree, "rev-parse", "main") == tip, "the branch keeps its new commit"
    assert lab.sm("check").code == 1, "the recovered work is unsaved again, and check says so"


@pytest.mark.regression("edge case: recover into a tree on another branch")
def test_recover_into_a_tree_on_another_branch(lab: Lab) -> None:
    (lab.tree / "README").write_text("unsaved\n")
    rid = recovery_id(lab.sm("reset", "--force").err)
    git(lab.tree, "checkout", "-qb", "feature")
    (lab.tree / "f.txt").write_text("f\n")
    git(lab.tree, "add", "f.txt")
    git(lab.tree, "commit", "-qm", "feature work")
    feature = git_text(lab.tree, "rev-parse", "feature")
    assert lab.sm("recover", rid).code == 0
    assert head_name(lab.tree) == "main" and (lab.tree / "README").read_text() == "unsaved\n"
    assert not (lab.tree / "f.txt").exists() and git_text(lab.tree, "rev-parse", "feature") == feature


@pytest.mark.regression("edge case: reset --force of a conflicted stash pop, then recover")
def test_reset_force_after_a_stash_pop_conflict_then_recover(lab: Lab) -> None:
    (lab.tree / "README").write_text("stashed edit\n")
    git(lab.tree, "stash", "-q")
    (lab.tree / "README").write_text("committed edit\n")
    git(lab.tree, "commit", "-qam", "c")
    assert subprocess.run(["git", "stash", "pop"], cwd=lab.tree, capture_output=True).returncode != 0
    assert porcelain(lab.tree) == b"UU README\n" and not (lab.tree / ".git" / "MERGE_HEAD").exists()
    conflicted = (lab.tree / "README").read_text()
    refused = lab.sm("reset")
    assert refused.code == 1 and "README (unmerged)" in refused.err
    forced = lab.sm("reset", "--force")
    assert forced.code == 0 and porcelain(lab.tree) == b""
    assert lab.sm("recover", recovery_id(forced.err)).code == 0
    assert (lab.tree / "README").read_text() == conflicted and porcelain(lab.tree) == b" M README\n"
    assert git(lab.tree, "stash", "list") != b"", "git kept the stash after the failed pop"


@pytest.mark.regression("recover listed a recovery under every linked worktree and called it ambiguous")
def test_recover_when_a_linked_worktree_of_the_same_repository_is_registered(lab: Lab, tmp_path: Path) -> None:
    """recover.list_recoveries lists refs/stackmgr/recovery/* per registered tree, but a linked worktree shares refs
    with its main tree: every recovery shows under both trees and `recover ID` says 'ambiguous' (exit 2) — it cannot be
    restored."""
    wt = tmp_path / "wt"
    git(lab.tree, "worktree", "add", "-q", "-b", "side", str(wt))
    assert lab.sm("tree", "add", "wt", str(wt)).code == 0
    (lab.tree / "README").write_text("unsaved\n")
    rid = recovery_id(lab.sm("reset", "vllm", "--force").err)
    listing = json.loads(lab.sm("recover", "--json").out)["recoveries"]
    assert [(r["id"], r["tree"]) for r in listing] == [(rid, "vllm")]
    assert lab.sm("recover", rid).code == 0
    assert (lab.tree / "README").read_text() == "unsaved\n" and (wt / "README").read_text() == "hello\n"


@pytest.mark.regression("recover left applied.json naming the series applied before")
def test_recover_forgets_the_series_that_was_applied(lab: Lab) -> None:
    """recover.restore moves the tree but leaves .stackmgr/applied.json alone: status keeps naming the series applied
    before, and reset then targets that series' base."""
    (lab.tree / "README").write_text("unsaved\n")
    rid = recovery_id(lab.sm("reset", "--force").err)
    (lab.tree / "new.txt").write_text("B\n")
    assert lab.sm("save", "b", "--series", "B", "-m", "b").code == 0
    assert lab.sm("reset").code == 0 and lab.sm("apply", "B").code == 0
    assert lab.sm("recover", rid).code == 0
    assert applied_state(lab) is None


@pytest.mark.regression("after reset --force and recover, the work could not go back onto its series")
def test_recover_puts_the_work_back_onto_the_series_it_was_on(lab: Lab) -> None:
    (lab.tree / "README").write_text("hello\nfix\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 7\n")  # unsaved, on top of S
    forced = lab.sm("reset", "--force")
    assert forced.code == 0, forced.err
    recovery = lab.sm("--json", "recover")
    rec_id = json.loads(recovery.out)["recoveries"][0]["id"]
    assert lab.sm("recover", rec_id).code == 0
    status = lab.sm("--json", "status")
    applied = json.loads(status.out)["trees"][0]["applied"]
    assert applied["series"] == "S" and applied["patches"] == ["fix"]
    assert lab.sm("save", "more", "--series", "S", "-m", "more").code == 0
    assert (lab.store / "series" / "S").read_text() == "fix.patch\nmore.patch\n"
    assert lab.sm("check").code == 0


def _converting(lab: Lab, case: str) -> dict[str, bytes]:
    """A tree where git's checkout would not write back the bytes on disk (`case`), and the files the user wrote."""
    if case == "autocrlf":
        git(lab.tree, "config", "core.autocrlf", "true")
        return {"README": b"lf\nonly\n", "new.txt": b"untracked lf\n", "crlf.txt": b"kept\r\ncrlf\r\n"}
    if case == "eol=crlf":
        (lab.tree / ".gitattributes").write_text("* text eol=crlf\n")
    elif case == "filter":
        (lab.tree / ".gitattributes").write_text("*.txt filter=x\n")
        git(lab.tree, "config", "filter.x.smudge", "sed s/a/A/")
        git(lab.tree, "config", "filter.x.clean", "cat")
    else:
        (lab.tree / ".gitattributes").write_text("* ident\n")
    git(lab.tree, "add", ".gitattributes")
    git(lab.tree, "commit", "-qm", "attributes")
    return {"README": b"$Id$ lf\n", "new.txt": b"a line\n", "src/model.py": b"def f():\n    return 'a'\n"}


@pytest.mark.regression("recover gave LF files back as CRLF under core.autocrlf=true (and smudged others)")
@pytest.mark.parametrize("case", ["autocrlf", "eol=crlf", "filter", "ident"])
def test_recover_gives_back_the_bytes_on_disk_whatever_git_converts(lab: Lab, case: str) -> None:
    """`reset --force` then `recover ID`: every changed file comes back byte for byte as it was on disk, though
    git's checkout of the snapshot would convert it (LF → CRLF under core.autocrlf=true or `eol=crlf`, a smudge
    filter, `$Id$` expanded by `ident`). Cause: the recovery commit kept only what git stores (the cleaned
    content), and the move writes it through git's checkout conversions."""
    wrote = _converting(lab, case)
    for name, data in wrote.items():
        (lab.tree / name).write_bytes(data)
    before = lab.worktree_id()
    forced = lab.sm("reset", "--force")
    assert forced.code == 0, forced.err
    assert lab.sm("recover", recovery_id(forced.err)).code == 0
    assert {name: (lab.tree / name).read_bytes() for name in wrote} == wrote
    assert lab.worktree_id() == before


@pytest.mark.slow
@pytest.mark.regression("a killed reset --force, rolled back, gave LF files back as CRLF under core.autocrlf=true")
def test_a_killed_forced_reset_is_rolled_back_to_the_bytes_on_disk_under_autocrlf(lab: Lab, tmp_path: Path) -> None:
    """`reset --force` killed at each of its journal steps, then `recover`: the files come back byte for byte as
    they were on disk (LF under core.autocrlf=true, where git's checkout writes CRLF), as `undo` and `recover ID`
    give them back. The crash rollback used to write git's checkout of them."""
    from tests.conftest import stackmgr_process

    git(lab.tree, "config", "core.autocrlf", "true")
    wrote = {"README": b"lf\nonly\n", "new.txt": b"untracked lf\n", "crlf.txt": b"kept\r\ncrlf\r\n"}
    trace = tmp_path / "steps"
    for name, data in wrote.items():
        (lab.tree / name).write_bytes(data)
    before = lab.worktree_id()
    assert stackmgr_process(lab.store, "reset", "--force", STACKMGR_TRACE_STEPS=str(trace)).returncode == 0
    steps = trace.read_text().splitlines()
    assert lab.sm("undo").code == 0
    assert {name: (lab.tree / name).read_bytes() for name in wrote} == wrote
    for step in steps:
        crash = ":".join(step.split(":")[:2])
        killed = stackmgr_process(lab.store, "reset", "--force", STACKMGR_CRASH_AT=crash)
        assert killed.returncode == -9, (step, killed.stderr)
        recovered = lab.sm("recover")
        assert recovered.code == 0, (step, recovered.err)
        if "had completed" in recovered.err:  # killed after its last change: the reset stands, `undo` reverts it
            assert step == steps[-1] and lab.sm("undo").code == 0
        assert {name: (lab.tree / name).read_bytes() for name in wrote} == wrote, step
        assert lab.worktree_id() == before, step


@pytest.mark.regression("undo with a split index restored bytes whose .git/sharedindex.* git had expired")
@pytest.mark.parametrize("links", ["hard links", "no hard links (another file system)"])
def test_undo_of_an_apply_puts_back_a_split_index_git_can_read(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, links: str
) -> None:
    """The journal kept the real index's bytes for the rollback, not the shared index they name: the user's next
    `git status` wrote a new one and deleted the old (splitIndex.sharedIndexExpire), so after `undo` git said
    'index file open failed' and the tree's staged state was gone. With the store on another file system the
    hard link to the shared index failed (EXDEV) and every apply ended in an internal error."""
    if links != "hard links":
        link = os.link

        def no_link(src: str, dst: str, **kw: object) -> None:
            if os.path.basename(src).startswith("sharedindex.") and "/.stackmgr/" in dst:
                raise OSError(errno.EXDEV, "Invalid cross-device link")
            link(src, dst, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "link", no_link)
    git(lab.tree, "config", "core.splitIndex", "true")
    git(lab.tree, "config", "splitIndex.sharedIndexExpire", "now")
    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("save", "p", "--series", "ser", "-m", "p").code == 0
    assert lab.sm("reset", "vllm").code == 0
    (lab.tree / "src" / "model.py").write_text("upstream moved\n")
    git(lab.tree, "commit", "-qam", "upstream")
    before = (porcelain(lab.tree), git_text(lab.tree, "ls-files", "-s"), lab.worktree_id())
    assert lab.sm("apply", "ser").code == 0
    git(lab.tree, "status")  # the user's git writes a new shared index and expires the one the saved bytes name
    assert lab.sm("undo").code == 0
    assert (porcelain(lab.tree), git_text(lab.tree, "ls-files", "-s"), lab.worktree_id()) == before
