"""The shell guard against a pulled store (docs/SECURITY.md): whatever a pull changes in the store or brings into
a tree, a guarded `git reset --hard` in a tree this machine placed still asks the store that guards it, and is
refused while work there is unsaved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_stackmgr
from tests.security.conftest import Team


def guard(where: Path, *git_args: str, store: Path | None = None) -> int:
    """`stackmgr guard -- GIT ARGS` as the shell function runs it in `where` (pinned to `store`, or with none
    pinned): its exit code (0 lets git run)."""
    here = os.getcwd()
    os.chdir(where)
    try:
        return run_stackmgr(*(["--store", str(store)] if store else []), "guard", "--", *git_args).code
    finally:
        os.chdir(here)


@pytest.mark.regression("a pulled config without the tree let the guard pass a reset that lost unsaved work")
def test_a_pull_that_drops_the_tree_from_the_shared_config_leaves_it_guarded(team: Team) -> None:
    team.attack({"stackmgr.toml": "# the trees are gone\n"})
    (team.victim.tree / "README").write_text("unsaved work\n")
    assert team.sm("check").code == 1
    assert guard(team.victim.tree, "reset", "--hard", store=team.victim.store) == 1


@pytest.mark.regression("a stackmgr.toml inside the tree hid the store above it from the guard")
def test_a_store_config_inside_the_tree_does_not_hide_the_store_that_guards_it(tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    tree = lab / "vllm"
    tree.mkdir(parents=True)
    from tests.conftest import git

    git(tree, "init", "-q")
    (tree / "README").write_text("hello\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "base")
    assert run_stackmgr("init", str(lab)).code == 0  # the store sits above its tree
    assert run_stackmgr("--store", str(lab), "tree", "add", "vllm", str(tree)).code == 0
    (tree / "stackmgr.toml").write_text("# brought by the tree's upstream, or a teammate's patch\n")
    (tree / "README").write_text("unsaved work\n")
    assert guard(tree, "reset", "--hard") == 1
    (tree / "pyproject.toml").write_text("[tool.stackmgr]\n")
    os.unlink(tree / "stackmgr.toml")
    assert guard(tree, "reset", "--hard") == 1


@pytest.mark.regression("a pulled `max_untracked_bytes = 0` made every new file unprotected: check 0, git clean ran")
def test_a_pulled_limit_never_lowers_what_is_protected(team: Team) -> None:
    config = (team.attacker / "stackmgr.toml").read_text()
    team.attack({"stackmgr.toml": "max_untracked_bytes = 0\n" + config})
    (team.victim.tree / "newmod.py").write_text("unsaved new work\n")
    assert team.sm("check").code == 1
    assert guard(team.victim.tree, "clean", "-fd", store=team.victim.store) == 1
