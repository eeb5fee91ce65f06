"""One answer everywhere, for trees, stores, patch names and series membership: a teammate's `tree rm` never
unguards this machine's checkout; one rule picks the tree a command acts on; a patch by name is one check in every
command; which series list a patch is one answer; the store a command acts on is said when two are in sight; and a
clone without the series merge driver is told so."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Lab, git, make_repo, one_line_error, run_stackmgr
from tests.test_team_day import pull, team


def guard(where: Path, store: Path, *git_args: str) -> int:
    """`stackmgr guard -- GIT ARGS` as the shell function runs it in `where`, pinned to `store`."""
    cwd = os.getcwd()
    os.chdir(where)
    try:
        return run_stackmgr("--store", str(store), "guard", "--", *git_args).code
    finally:
        os.chdir(cwd)


def commit_store(who: Lab, message: str) -> None:
    git(who.store, "add", "-A")
    git(who.store, "commit", "-q", "-m", message)


# --- a teammate's `tree rm` -------------------------------------------------------------------------------------


def test_a_teammates_tree_rm_leaves_my_checkout_of_it_guarded_until_i_remove_it(lab: Lab, tmp_path: Path) -> None:
    bob = team(lab, tmp_path)
    sgl = make_repo(tmp_path / "alice-sgl", {"kernel.cu": "base\n"})
    assert lab.sm("tree", "add", "sgl", str(sgl)).code == 0
    commit_store(lab, "alice's second tree")
    git(lab.store, "push", "-q", "origin", "main")
    pull(bob)
    # Bob has no checkout of sgl: his `tree rm` forgets the name, and says that machines which placed it keep it.
    removed = bob.sm("tree", "rm", "sgl")
    assert removed.code == 0, removed
    assert "keep" in removed.out + removed.err and "tree rm sgl" in removed.out + removed.err
    commit_store(bob, "bob forgets sgl")
    git(bob.store, "push", "-q", "origin", "main")
    pull(lab)
    assert b"sgl" not in (lab.store / "stackmgr.toml").read_bytes()
    (sgl / "kernel.cu").write_text("alice's unsaved edit\n")
    check = lab.sm("check")
    assert check.code == 1, check
    assert lab.sm("check", "sgl").code == 1
    assert guard(sgl, lab.store, "reset", "--hard") == 1
    assert guard(sgl, lab.store, "clean", "-fdx") == 1
    assert (sgl / "kernel.cu").read_bytes() == b"alice's unsaved edit\n"
    assert "sgl" in lab.sm("trees").out
    # Alice saves it, then removes the tree on her machine: now it is hers to forget.
    assert lab.sm("save", "sgl-edit", "-t", "sgl", "-m", "an edit").code == 0
    assert lab.sm("drop", "sgl-edit").code == 0
    assert lab.sm("reset", "sgl").code == 0
    assert lab.sm("tree", "rm", "sgl").code == 0
    assert "sgl" not in lab.sm("trees").out
    assert guard(sgl, lab.store, "reset", "--hard") == 0


# --- the default tree -----------------------------------------------------------------------------------------


@pytest.fixture
def two_trees(lab: Lab, tmp_path: Path) -> Lab:
    """vllm with series S applied, and a second tree `other`, both with unsaved edits."""
    other = make_repo(tmp_path / "other", {"main.c": "int main;\n"})
    assert lab.sm("tree", "add", "other", str(other)).code == 0
    (lab.tree / "README").write_text("hello\nfirst\n")
    assert lab.sm("save", "first", "-t", "vllm", "--series", "S", "-m", "first").code == 0
    assert lab.sm("apply", "S").code == 0
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (other / "main.c").write_text("int main(void);\n")
    return lab


def test_save_into_the_series_a_tree_holds_picks_that_tree(two_trees: Lab) -> None:
    lab = two_trees
    saved = lab.sm("save", "second", "--series", "S", "-m", "second")
    assert saved.code == 0, saved
    data = (lab.store / "patches" / "second.patch").read_bytes()
    assert b"\nStackmgr-Tree: vllm\n" in data and b"src/model.py" in data and b"main.c" not in data
    assert (lab.store / "series" / "S").read_text() == "first.patch\nsecond.patch\n"


def test_with_no_rule_to_go_by_the_refusal_lists_the_trees(two_trees: Lab) -> None:
    lab = two_trees
    saved = lab.sm("save", "loose", "-m", "which tree?")
    one_line_error(saved, 2)
    assert "other" in saved.err and "vllm" in saved.err and "-t TREE" in saved.err
    assert not (lab.store / "patches" / "loose.patch").exists()


def test_the_default_tree_is_one_public_rule() -> None:
    from stackmgr.commands import navigate, save
    from stackmgr.store import tree_paths

    assert callable(tree_paths.tree_to_act_on)
    assert not hasattr(navigate, "pick_tree") and not hasattr(save, "pick_tree")


# --- a patch by name ------------------------------------------------------------------------------------------


@pytest.fixture
def linked_out(lab: Lab, tmp_path: Path) -> Lab:
    """patches/evil.patch, a symbolic link to a valid patch outside the store."""
    (lab.tree / "README").write_text("hello\nevil\n")
    assert lab.sm("save", "evil", "-m", "evil").code == 0
    assert lab.sm("reset").code == 0
    outside = tmp_path / "outside.patch"
    (lab.store / "patches" / "evil.patch").rename(outside)
    (lab.store / "patches" / "evil.patch").symlink_to(outside)
    return lab


@pytest.mark.parametrize("command", [
    ("show", "evil"), ("series", "add", "S", "evil"), ("link", "evil", "--verdict", "rejected"),
    ("rename", "evil", "good"), ("apply", "E"),
])  # fmt: skip
def test_a_patch_linked_out_of_patches_is_refused_alike_by_every_command(linked_out: Lab, command: tuple[str, ...]
                                                                         ) -> None:  # fmt: skip
    lab = linked_out
    (lab.store / "series" / "E").write_text("evil.patch\n")
    before = {p.name: p.read_bytes() for p in (lab.store / "patches").iterdir() if p.is_file()}
    result = lab.sm(*command)
    one_line_error(result, 3)
    assert "patches/evil.patch is a symbolic link out of patches/" in result.err, result.err
    assert not (lab.store / "series" / "S").exists()
    assert not (lab.store / "patches" / "good.patch").exists()
    assert (lab.tree / "README").read_bytes() == b"hello\n"
    assert {p.name: p.read_bytes() for p in (lab.store / "patches").iterdir() if p.is_file()} == before


def test_the_patch_file_rule_names_a_missing_patch_in_one_line(lab: Lab) -> None:
    from stackmgr.errors import UsageProblem
    from stackmgr.store.config import open_store
    from stackmgr.store.names import patch_file

    store = open_store(str(lab.store))
    with pytest.raises(UsageProblem, match="no patch named nope"):
        patch_file(store, "nope.patch")


# --- which series list a patch --------------------------------------------------------------------------------


def test_which_series_list_a_patch_is_one_answer_and_an_unreadable_series_is_refused(lab: Lab) -> None:
    (lab.tree / "README").write_text("hello\nfirst\n")
    assert lab.sm("save", "first", "--series", "S", "-m", "first").code == 0
    assert lab.sm("reset").code == 0
    assert lab.sm("series", "add", "T", "first").code == 0
    from stackmgr.store.config import open_store
    from stackmgr.store.series import series_listing

    assert series_listing(open_store(str(lab.store)), "first") == ["S", "T"]
    # T mid-merge: whether it lists `first` is not known, so `drop` must not take the patch out from under it.
    (lab.store / "series" / "T").write_text("<<<<<<< ours\nfirst.patch\n=======\n>>>>>>> theirs\n")
    assert lab.sm("series", "remove", "S", "first").code == 0
    dropped = lab.sm("drop", "first")
    one_line_error(dropped, 3)
    assert "series/T" in dropped.err
    assert (lab.store / "patches" / "first.patch").is_file()


# --- which store -----------------------------------------------------------------------------------------------


def test_a_mutating_command_says_which_store_when_env_and_cwd_differ(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "here-store"
    assert run_stackmgr("init", str(here)).code == 0
    monkeypatch.chdir(here)
    monkeypatch.setenv("STACKMGR_STORE", str(lab.store))
    made = run_stackmgr("series", "new", "X")
    assert made.code == 0, made
    assert (lab.store / "series" / "X").exists() and not (here / "series" / "X").exists()
    said = [line for line in made.err.splitlines() if "STACKMGR_STORE" in line]
    assert len(said) == 1 and str(lab.store) in said[0] and str(here) in said[0], made.err
    read = run_stackmgr("series")  # a read says nothing
    assert read.code == 0 and "STACKMGR_STORE" not in read.err
    monkeypatch.chdir(lab.store)
    same = run_stackmgr("series", "new", "Y")
    assert same.code == 0 and same.err == ""


# --- the series merge driver ----------------------------------------------------------------------------------


def test_a_clone_without_git_setup_is_told_why_series_appends_conflict(lab: Lab, tmp_path: Path) -> None:
    bob = team(lab, tmp_path)
    carol_store = tmp_path / "carol" / "store"
    git(tmp_path, "clone", "-q", str(tmp_path / "remote.git"), str(carol_store))
    carol = Lab(carol_store, bob.tree)
    for who in (carol,):
        said = who.sm("status")
        assert "git-setup" in said.out + said.err, said
        linted = who.sm("lint")
        assert linted.code != 0 and "merge driver" in linted.out and "stackmgr git-setup" in linted.out, linted
    assert bob.sm("lint").code == 0 and "git-setup" not in bob.sm("status").err
    # Both append to S; carol, without the driver, merges: the conflict message names the fix.
    for who, name in ((lab, "a"), (carol, "c")):
        series = who.store / "series" / "S"
        series.write_text(series.read_text() + f"{name}.patch\n")
        (who.store / "patches" / f"{name}.patch").write_bytes((who.store / "patches" / "base.patch").read_bytes())
        commit_store(who, f"{name} appended")
    git(lab.store, "push", "-q", "origin", "main")
    pulled = subprocess.run(["git", "pull", "-q", "--no-rebase", "--no-edit"], cwd=carol.store, capture_output=True)
    assert pulled.returncode != 0  # git's own merge conflicts
    shown = carol.sm("series", "S")
    one_line_error(shown, 3)
    assert "merge driver" in shown.err and "stackmgr git-setup" in shown.err, shown.err


def test_a_store_made_before_git_init_is_told_to_run_git_setup_until_it_does(lab: Lab) -> None:
    git(lab.store, "init", "-q", "-b", "main")
    linted = lab.sm("lint")
    assert linted.code == 1 and "stackmgr git-setup" in linted.out, linted
    assert "stackmgr git-setup" in lab.sm("status").err
    assert lab.sm("git-setup").code == 0
    assert lab.sm("lint").code == 0
    assert "git-setup" not in lab.sm("status").err
