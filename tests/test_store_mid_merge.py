"""A store between a `git pull` and its resolution, and a clone with no tree placed yet: every command says what
it is looking at, never a silent pass or a count that cannot be."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import Lab, git, run_stackmgr
from tests.test_sharing import append, applied_on_both, pull_conflicting, share, two_engineers


def both_updated_fix(lab: Lab, tmp_path: Path) -> Lab:
    """patches/fix.patch updated by Alice and by Bob; Alice's pull left it with conflict markers."""
    bob = applied_on_both(lab, tmp_path, "fix", "hello\nv1\n")
    theirs, tree = bob.store, bob.tree
    (lab.tree / "README").write_text("hello\nalice's v2\n")
    assert lab.sm("save", "fix", "--update").code == 0
    (tree / "README").write_text("hello\nbob's v2\n")
    assert bob.sm("save", "fix", "--update").code == 0
    pull_conflicting(lab, tmp_path, theirs, "patches/fix.patch")
    return bob


@pytest.mark.regression("`series S` listed a conflicted patch as '? +0 -0' and exited 0; status said '0 of 0 applied'")
def test_a_patch_left_mid_merge_fails_every_command_that_reads_it(lab: Lab, tmp_path: Path) -> None:
    both_updated_fix(lab, tmp_path)
    for args in (("series", "S"), ("status",), ("interdiff", "fix", "fix"), ("show", "fix")):
        result = lab.sm(*args)
        assert result.code == 3, (args, result.out, result.err)
        said = result.err.strip().splitlines()
        assert len(said) == 1 and said[0].startswith("stackmgr: unresolved merge conflict in patches/fix.patch (lines")
        assert "`git checkout --ours patches/fix.patch`" in said[0], said[0]
    assert "0 of 0" not in lab.sm("status").out
    assert lab.sm("reset", "--force").code == 0  # the tree set aside: apply still names the conflict
    result = lab.sm("apply", "S")
    assert result.code == 3 and "unresolved merge conflict in patches/fix.patch (lines" in result.err, result.err


@pytest.mark.regression("check and reset said a change was 'not preserved' without naming the patch left mid-merge")
def test_check_and_reset_name_the_conflicted_patch_that_may_hold_the_change(lab: Lab, tmp_path: Path) -> None:
    both_updated_fix(lab, tmp_path)
    for _ in range(2):  # the first check reads the store, the next answers from its cache: the same words
        check = lab.sm("check", "-v")
        assert check.code == 1
        assert "vllm: README (modified)" in check.out
        assert "patches/fix.patch (in the store: unresolved merge conflict" in check.out
    reset = lab.sm("reset")
    assert reset.code == 1 and "patches/fix.patch (in the store: unresolved merge conflict" in reset.err
    assert (lab.tree / "README").read_text() == "hello\nalice's v2\n"


@pytest.mark.regression("on a clone with no tree placed, `check` passed silently, having checked nothing")
def test_check_on_a_clone_with_no_tree_placed_checks_nothing_and_says_so(lab: Lab, tmp_path: Path) -> None:
    theirs, _ = share(lab, tmp_path)
    result = run_stackmgr("--store", str(theirs), "check")  # nothing of this machine's to lose, and said
    assert result.code == 0 and "nothing checked: no tree of this store has a path on this machine (vllm)" in result.err
    assert "`stackmgr tree set vllm PATH`" in result.err
    kernels = tmp_path / "kernels"
    git(tmp_path, "clone", "-q", str(lab.tree), str(kernels))
    assert run_stackmgr("--store", str(theirs), "tree", "add", "kernels", str(kernels)).code == 0
    verbose = run_stackmgr("--store", str(theirs), "check", "-v")
    assert verbose.code == 0
    assert "kernels: all changes preserved" in verbose.out
    assert "vllm: not checked, no path on this machine" in verbose.out


def merge(tmp_path: Path, base: bytes, ours: bytes, theirs: bytes) -> tuple[bool, bytes]:
    """The series merge driver on three versions, as git runs it: (merged cleanly, what it left in ours)."""
    from stackmgr.commands.merge_series import merge_series

    paths = [tmp_path / n for n in ("base", "ours", "theirs")]
    for path, text in zip(paths, (base, ours, theirs), strict=True):
        path.write_bytes(text)
    return merge_series(*(str(p) for p in paths)), paths[1].read_bytes()


@pytest.mark.regression("the merge driver kept `x.patch` and `x.patch -p0`, one patch twice")
def test_one_patch_both_engineers_appended_with_other_options_is_a_conflict(tmp_path: Path) -> None:
    clean, merged = merge(tmp_path, b"a.patch\n", b"a.patch\nx.patch\n", b"a.patch\nx.patch -p0\n")
    assert not clean and b"<<<<<<< ours\nx.patch\n" in merged and b"x.patch -p0\n>>>>>>> theirs" in merged
    same = b"a.patch\nx.patch #fast\n"  # the same line on both sides: kept once
    assert merge(tmp_path, b"a.patch\n", b"a.patch\nx.patch #fast\ny.patch\n", same) == (
        True, b"a.patch\nx.patch #fast\ny.patch\n")


@pytest.mark.regression("status said 'S: 3 of 2 applied' after a pull took an applied patch out of the series")
def test_status_after_a_pull_removed_an_applied_patch_counts_what_the_series_holds(lab: Lab, tmp_path: Path) -> None:
    bob, _ = two_engineers(lab, tmp_path)
    append(lab, "two.txt", "two\n", "two")
    git(lab.store, "push", "-q", "origin", "HEAD")
    assert subprocess.run(["git", "pull", "-q", "--no-rebase"], cwd=bob.store).returncode == 0
    assert lab.sm("apply", "S").code == 0  # base and two applied in Alice's tree
    (bob.store / "series" / "S").write_text("base.patch\n")  # Bob takes `two` out
    git(bob.store, "commit", "-q", "-am", "two goes")
    git(bob.store, "push", "-q", "origin", "HEAD")
    assert subprocess.run(["git", "pull", "-q", "--no-rebase"], cwd=lab.store).returncode == 0
    status = lab.sm("status")
    assert status.code == 0
    assert "S: 1 of 1 applied" in status.out and "two no longer in the series" in status.out, status.out


@pytest.mark.regression("the merge driver settled two orders silently, and listed a patch twice (appended vs first)")
@pytest.mark.parametrize(("ours", "theirs"), [(b"a.patch\nx.patch\ny.patch\n", b"a.patch\ny.patch\nx.patch\n"),
                                              (b"a.patch\nb.patch\n", b"b.patch\na.patch\n")])  # fmt: skip
def test_two_engineers_ordering_the_same_patches_differently_is_a_conflict(
    tmp_path: Path, ours: bytes, theirs: bytes
) -> None:
    clean, merged = merge(tmp_path, b"a.patch\n", ours, theirs)
    assert not clean and b"<<<<<<< ours\n" in merged


@pytest.mark.regression("two appends to a series file without a final newline were a conflict")
def test_appends_after_a_last_line_without_its_newline_merge(tmp_path: Path) -> None:
    merged = merge(tmp_path, b"a.patch", b"a.patch\nx.patch", b"a.patch\ny.patch")
    assert merged == (True, b"a.patch\nx.patch\ny.patch\n")


@pytest.mark.regression("rename moved a patch file still holding conflict markers; link said 'save it again'")
def test_rename_drop_and_link_refuse_a_patch_left_mid_merge(lab: Lab, tmp_path: Path) -> None:
    both_updated_fix(lab, tmp_path)
    before = (lab.store / "patches" / "fix.patch").read_bytes()
    for args in (("rename", "fix", "fix2"), ("drop", "fix"), ("link", "fix", str(lab.store / "stackmgr.toml"))):
        result = lab.sm(*args)
        assert result.code == 3, (args, result.err)
        assert result.err.startswith("stackmgr: unresolved merge conflict in patches/fix.patch (lines"), result.err
    assert (lab.store / "patches" / "fix.patch").read_bytes() == before
    assert not (lab.store / "patches" / "fix2.patch").exists()


@pytest.mark.regression("a series of a teammate's clone said its tree 'is not registered' when it had no path here")
def test_a_series_on_a_clone_without_the_tree_placed_says_so_then_shows_it_once_placed(
    lab: Lab, tmp_path: Path
) -> None:
    (lab.tree / "README").write_text("hello\nfix\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    theirs, tree = share(lab, tmp_path)
    listed = run_stackmgr("--store", str(theirs), "series", "S")
    assert "tree vllm has no path on this machine (`stackmgr tree set vllm PATH`)" in listed.out
    assert run_stackmgr("--store", str(theirs), "tree", "set", "vllm", str(tree)).code == 0
    placed = run_stackmgr("--store", str(theirs), "series", "S")
    assert "no path" not in placed.out and "vllm" in placed.out and "+1 -0" in placed.out
