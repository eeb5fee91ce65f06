"""`reset`: only when every change is preserved (else it refuses and touches nothing); ignored, unprotected and
staged work is kept; `--to` never orphans a commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Lab, git, git_text, head_name, porcelain, run_stackmgr, save_day, unsaved_work
from tests.conftest import tree_files as _files

# --- refusals and targets ---------------------------------------------------------------------------------------------


def test_reset_refuses_and_touches_nothing_while_work_is_unsaved(lab: Lab) -> None:
    unsaved_work(lab)
    before = _files(lab.tree)
    index = (lab.tree / ".git" / "index").read_bytes()
    result = lab.sm("reset")
    assert result.code == 1
    first, *files = result.err.splitlines()  # one line, then its files one per line (as `check -v`)
    assert first.startswith("stackmgr: reset refused, nothing changed: tree vllm has changes no patch preserves")
    assert "  results.log (added)" in files and all(f.startswith("  ") for f in files)
    as_json = json.loads(lab.sm("--json", "reset").err)["error"]
    assert "results.log (added)" in as_json["details"] and as_json["exit_code"] == 1
    assert _files(lab.tree) == before
    assert (lab.tree / ".git" / "index").read_bytes() == index


def test_reset_keeps_ignored_and_unprotected_files(lab: Lab) -> None:
    config = lab.store / "stackmgr.local.toml"  # this machine's: a shared one never lowers it
    config.write_text("max_untracked_bytes = 100\n" + config.read_text())
    (lab.tree / ".git" / "info" / "exclude").write_text("*.so\n")
    (lab.tree / "kernel.so").write_bytes(b"\x7fELF")
    (lab.tree / "weights.bin").write_bytes(b"w" * 101)
    (lab.tree / "notes.txt").write_text("saved\n")
    lab.sm("save", "notes", "-m", "notes")
    assert lab.sm("reset").code == 0
    assert (lab.tree / "kernel.so").read_bytes() == b"\x7fELF"
    assert (lab.tree / "weights.bin").read_bytes() == b"w" * 101
    assert not (lab.tree / "notes.txt").exists(), "a preserved untracked file lives in its patch"


def test_reset_to_another_commit_refuses_to_orphan_local_commits(lab: Lab) -> None:
    first = git_text(lab.tree, "rev-parse", "HEAD")
    git(lab.tree, "checkout", "-q", "--detach")
    (lab.tree / "README").write_text("committed on no branch\n")
    git(lab.tree, "commit", "-qam", "experiment")
    result = lab.sm("reset", "--to", first)
    assert result.code == 1 and "local commit" in result.err
    git(lab.tree, "branch", "keep")
    assert lab.sm("reset", "--to", first).code == 0
    assert git_text(lab.tree, "rev-parse", "HEAD") == first
    assert (lab.tree / "README").read_text() == "hello\n"


def test_reset_refuses_a_tree_mid_merge_and_bad_targets(lab: Lab) -> None:
    assert lab.sm("reset", "--to", "no-such-rev").code == 3
    assert lab.sm("reset", "nope").code == 2
    (lab.tree / ".git" / "MERGE_HEAD").write_text(git_text(lab.tree, "rev-parse", "HEAD") + "\n")
    result = lab.sm("reset")
    assert result.code == 3 and "in the middle of a merge" in result.err


@pytest.mark.regression("edge case: reset --to another branch's tip")
def test_reset_to_another_branch_tip_detaches_and_leaves_both_branches(lab: Lab) -> None:
    base = git_text(lab.tree, "rev-parse", "HEAD")
    git(lab.tree, "checkout", "-qb", "feature")
    (lab.tree / "feat.txt").write_text("f\n")
    git(lab.tree, "add", "feat.txt")
    git(lab.tree, "commit", "-qm", "feat")
    tip = git_text(lab.tree, "rev-parse", "HEAD")
    git(lab.tree, "checkout", "-q", "main")
    assert lab.sm("reset", "--to", "feature").code == 0
    assert head_name(lab.tree) == "HEAD" and git_text(lab.tree, "rev-parse", "HEAD") == tip
    assert git_text(lab.tree, "rev-parse", "main") == base and porcelain(lab.tree) == b""
    assert (lab.tree / "feat.txt").read_text() == "f\n"
    assert lab.sm("reset", "--to", "main").code == 0
    assert git_text(lab.tree, "rev-parse", "HEAD") == base and porcelain(lab.tree) == b""
    assert not (lab.tree / "feat.txt").exists()


@pytest.mark.regression("edge case: two stores on one tree")
def test_a_second_store_on_the_same_tree_does_not_reset_what_only_the_first_preserves(lab: Lab, tmp_path: Path) -> None:
    store2 = tmp_path / "store2"
    assert run_stackmgr("init", str(store2)).code == 0
    assert run_stackmgr("--store", str(store2), "tree", "add", "vllm", str(lab.tree)).code == 0
    wanted = save_day(lab)
    assert lab.sm("apply", "day").code == 0
    refused = run_stackmgr("--store", str(store2), "reset")
    assert refused.code == 1 and "results.log (added)" in refused.err
    assert lab.worktree_id() == wanted
    assert run_stackmgr("--store", str(store2), "check").code == 1


# --- what reset keeps -------------------------------------------------------------------------------------------------


@pytest.mark.regression("reset --to an older commit overwrote a now-ignored local file")
def test_reset_to_an_older_commit_keeps_an_ignored_file(lab: Lab) -> None:
    """tempindex.TempIndex.switch via reset.\\_reset_one: `reset --to` an older commit that tracked a now-ignored file
    overwrites the user's local ignored copy."""
    (lab.tree / "settings.json").write_text("{}\n")
    git(lab.tree, "add", "settings.json")
    git(lab.tree, "commit", "-qm", "add settings")
    old = git_text(lab.tree, "rev-parse", "HEAD")
    git(lab.tree, "rm", "-q", "--cached", "settings.json")
    (lab.tree / ".gitignore").write_text("settings.json\n")
    git(lab.tree, "add", ".gitignore")
    git(lab.tree, "commit", "-qm", "settings.json is local now")
    (lab.tree / "settings.json").write_text('{"token": "local secret"}\n')
    assert lab.sm("check").code == 0
    lab.sm("reset", "--to", old)
    assert (lab.tree / "settings.json").read_text() == '{"token": "local secret"}\n'


@pytest.mark.regression("edge case: an ignored file under a directory reset turns into a file")
def test_an_ignored_file_in_a_tracked_directory_that_reset_turns_into_a_file_is_refused(lab: Lab) -> None:
    (lab.tree / ".git" / "info" / "exclude").write_text("__pycache__/\n")
    (lab.tree / "README").unlink()
    (lab.tree / "README").mkdir()
    (lab.tree / "README" / "index.md").write_text("docs\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    (lab.tree / "README" / "__pycache__").mkdir()
    (lab.tree / "README" / "__pycache__" / "x.pyc").write_text("cache\n")
    result = lab.sm("reset")
    assert result.code == 3 and "README" in result.err
    assert (lab.tree / "README" / "__pycache__" / "x.pyc").read_text() == "cache\n"


@pytest.mark.regression("reset --force dropped a staged-only version")
def test_reset_force_keeps_a_staged_version_whose_working_tree_is_back_at_head(lab: Lab) -> None:
    """reset.\\_reset_one stores a recovery only when snap.changes/local_commits or HEAD moves; a staged-only version
    (working tree == HEAD) is a blocker, --force overrides it, and write_real_index drops it: the blob is left
    unreachable."""
    (lab.tree / "README").write_text("staged work\n")
    git(lab.tree, "add", "README")
    (lab.tree / "README").write_text("hello\n")  # the working tree is back at HEAD; the index holds the work
    staged = git_text(lab.tree, "rev-parse", ":README")
    assert lab.sm("reset").code == 1, "the staged version is a blocker"
    forced = lab.sm("reset", "--force")
    assert forced.code == 0
    assert "stackmgr recover" in forced.err, "a forced step prints how to undo it"
    anchored = git(lab.tree, "rev-list", "--objects", "--glob=refs/stackmgr/*")
    assert staged.encode() in anchored


@pytest.mark.regression("stale skip-worktree bits hid an edit from check, and reset hid it from git status")
def test_an_edit_in_a_formerly_sparse_path_is_seen_and_not_hidden_by_reset(lab: Lab) -> None:
    """tempindex.TempIndex.seed copies the real index once; its skip-worktree bits go stale after `git sparse-checkout
    disable`, so check passes over an edit there (a guarded `git reset --hard` would then destroy it) and move_tree
    writes the stale bits into the real index, hiding the edit from git status too."""
    (lab.tree / "docs").mkdir()
    (lab.tree / "docs" / "a.md").write_text("a\n")
    git(lab.tree, "add", "docs")
    git(lab.tree, "commit", "-qm", "docs")
    git(lab.tree, "sparse-checkout", "set", "--no-cone", "/*", "!/docs/")
    assert lab.sm("check").code == 0  # the private index is seeded now, with docs/a.md skip-worktree
    git(lab.tree, "sparse-checkout", "disable")
    (lab.tree / "docs" / "a.md").write_text("edited once sparse checkout was off\n")
    assert porcelain(lab.tree) == b" M docs/a.md\n"
    check = lab.sm("check")
    lab.sm("reset")
    assert porcelain(lab.tree) == b" M docs/a.md\n", "reset must not hide the edit from git"
    assert check.code == 1


@pytest.mark.regression("a refused reset left a frozen copy of the index behind")
def test_a_reset_to_a_bad_revision_leaves_no_scratch_index(lab: Lab) -> None:
    (lab.tree / "README").write_text("edited\n")
    lab.sm("check")  # the private index exists; nothing else is expected beside it
    before = sorted(p.name for p in (lab.tree / ".git" / "stackmgr").iterdir())
    for _ in range(2):
        assert lab.sm("reset", "--to", "no-such-rev").code == 3
    assert sorted(p.name for p in (lab.tree / ".git" / "stackmgr").iterdir()) == before


def test_a_staged_version_alone_is_refused_with_a_way_out_git_gives(lab: Lab) -> None:
    """Index differs from the file, the file equals HEAD: `save` has nothing to take, so the hint names git's way."""
    (lab.tree / "README").write_text("staged\n")
    git(lab.tree, "add", "README")
    (lab.tree / "README").write_text("hello\n")
    refused = lab.sm("reset")
    assert refused.code == 1 and "git restore --staged PATH" in refused.err and "git add PATH" in refused.err
    git(lab.tree, "restore", "--staged", "README")
    assert lab.sm("reset").code == 0
