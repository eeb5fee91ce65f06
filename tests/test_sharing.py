"""One store, a whole team: the store is a git repository two engineers clone, each with the trees at paths of
their own. The shared config names the trees; where each lives on this machine is in stackmgr.local.toml, which
git never carries."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Lab, commit, git, git_text, link_id, make_repo, run_stackmgr


def share(lab: Lab, tmp_path: Path) -> tuple[Path, Path]:
    """The store committed and pushed to a bare remote, and a teammate's clone of it with a checkout of the
    same tree at a path of their own."""
    git(lab.store, "init", "-q")
    git(lab.store, "add", "-A")
    git(lab.store, "commit", "-q", "-m", "the lab's store")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(lab.store), str(remote))
    theirs = tmp_path / "bob" / "store"
    git(tmp_path, "clone", "-q", str(remote), str(theirs))
    tree = tmp_path / "bob" / "checkouts" / "vllm"
    git(tmp_path, "clone", "-q", str(lab.tree), str(tree))
    return theirs, tree


def test_tree_add_shares_the_name_and_keeps_the_path_on_this_machine(lab: Lab) -> None:
    shared = (lab.store / "stackmgr.toml").read_text()
    assert "[trees.vllm]" in shared and str(lab.tree) not in shared
    local = (lab.store / "stackmgr.local.toml").read_text()
    assert f'[trees."vllm"]\npath = "{lab.tree}"' in local
    assert "stackmgr.local.toml" in (lab.store / ".gitignore").read_text().splitlines()
    assert git_text(lab.tree, "rev-parse", "--show-toplevel") == str(lab.tree)


def test_a_teammate_s_clone_names_the_tree_without_a_path_until_they_set_theirs(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "README").write_text("hello\nfrom alice\n")
    assert lab.sm("save", "greet", "--series", "S", "-m", "greet").code == 0
    alice = lab.worktree_id()
    assert lab.sm("reset").code == 0
    theirs, tree = share(lab, tmp_path)
    assert not (theirs / "stackmgr.local.toml").exists()  # git did not carry alice's paths
    bob = Lab(theirs, tree)

    status = bob.sm("status")
    assert status.code == 0 and "no path on this machine: `stackmgr tree set vllm PATH`" in status.out
    assert str(lab.tree) not in status.out  # never alice's tree
    refused = bob.sm("apply", "S")
    assert refused.code == 2 and "tree vllm has no path on this machine" in refused.err
    assert "tree set vllm PATH" in refused.err and len(refused.err.strip().splitlines()) == 1
    assert bob.sm("check").code == 0  # no tree here: nothing of bob's to lose

    added = bob.sm("tree", "add", "vllm", str(tree))  # the name is taken by the store: bob's path for it
    assert added.code == 0, added.err
    assert bob.sm("apply", "S").code == 0
    assert bob.worktree_id() == alice
    assert git_text(theirs, "status", "--porcelain") == ""  # bob's path is git-ignored, the shared config unchanged


def test_tree_set_moves_a_tree_and_tree_rm_forgets_one_without_patches(lab: Lab, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / "vllm"
    git(tmp_path, "clone", "-q", str(lab.tree), str(moved))
    result = lab.sm("tree", "set", "vllm", str(moved))
    assert result.code == 0 and str(moved) in result.out
    assert lab.sm("--json", "status").out.count(str(moved)) == 1
    assert lab.sm("tree", "set", "nope", str(moved)).code == 2

    (moved / "README").write_text("moved\n")
    assert lab.sm("save", "note", "-m", "a note").code == 0
    refused = lab.sm("tree", "rm", "vllm")
    assert refused.code == 2 and "1 patch of tree vllm" in refused.err and "\n  note\n" in refused.err

    other = make_repo(tmp_path / "kernels")
    assert lab.sm("tree", "add", "kernels", str(other)).code == 0
    assert lab.sm("tree", "rm", "kernels").code == 0
    assert "kernels" not in (lab.store / "stackmgr.toml").read_text()
    assert "kernels" not in (lab.store / "stackmgr.local.toml").read_text()
    assert "kernels" not in lab.sm("trees").out
    assert lab.sm("undo").code == 0 and "kernels" in lab.sm("trees").out  # undoable, as every store change


def test_a_store_with_paths_in_its_shared_config_keeps_working_and_can_be_pointed_elsewhere(
    lab: Lab, tmp_path: Path
) -> None:
    """Stores made before stackmgr.local.toml: the shared config's path is the default, a local one wins."""
    (lab.store / "stackmgr.local.toml").unlink()
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text().replace("[trees.vllm]\n", f'[trees.vllm]\npath = "{lab.tree}"\n'))
    assert lab.sm("check").code == 0 and str(lab.tree) in lab.sm("trees").out
    mine = tmp_path / "mine" / "vllm"
    git(tmp_path, "clone", "-q", str(lab.tree), str(mine))
    assert lab.sm("tree", "add", "vllm", str(mine)).code == 0  # not "already registered": this machine's path
    assert str(mine) in lab.sm("trees").out and str(lab.tree) not in lab.sm("trees").out


def test_a_relative_default_path_in_the_shared_config_is_the_store_s_neighbour_once_accepted(tmp_path: Path) -> None:
    """A lab that keeps its trees beside the store can say so once for everyone: `path = "../vllm"`. Each machine
    accepts it once (`tree set vllm`): until then it is only a suggestion, as a pull could point it anywhere."""
    tree = make_repo(tmp_path / "vllm")
    store = tmp_path / "store"
    assert run_stackmgr("init", str(store)).code == 0
    (store / "stackmgr.toml").write_text('[trees.vllm]\npath = "../vllm"\n')
    commit(tree, {"README": "edited\n"}, "work")
    listed = run_stackmgr("--store", str(store), "trees")
    assert listed.code == 0 and str(tree) not in listed.out and "suggests ../vllm" in listed.out
    assert run_stackmgr("--store", str(store), "save", "p").code == 2  # no tree has a path here
    accepted = run_stackmgr("--store", str(store), "tree", "set", "vllm")
    assert accepted.code == 0 and str(tree) in accepted.out
    listed = run_stackmgr("--store", str(store), "trees")
    assert listed.code == 0 and str(tree) in listed.out
    assert str(tree) in (store / "stackmgr.local.toml").read_text()


def test_the_lab_s_pyproject_store_registers_trees_under_tool_stackmgr(tmp_path: Path) -> None:
    root = tmp_path / "lab"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "lab"\n\n[tool.stackmgr]\nmax_untracked_bytes = 1000\n')
    tree = make_repo(tmp_path / "vllm")
    assert run_stackmgr("--store", str(root), "tree", "add", "vllm", str(tree)).code == 0
    assert "[tool.stackmgr.trees.vllm]" in (root / "pyproject.toml").read_text()
    assert str(tree) in (root / "stackmgr.local.toml").read_text()
    assert run_stackmgr("--store", str(root), "check").code == 0


def pull_conflicting(lab: Lab, tmp_path: Path, theirs: Path, path: str) -> None:
    """Alice and Bob both changed `path` of the store; Bob pushed first; Alice's pull conflicts."""
    git(theirs, "add", "-A")
    git(theirs, "commit", "-q", "-m", f"bob's {path}")
    git(theirs, "push", "-q", "origin", "HEAD")
    git(lab.store, "add", "-A")
    git(lab.store, "commit", "-q", "-m", f"alice's {path}")
    git(lab.store, "remote", "add", "origin", str(tmp_path / "remote.git"))
    git(lab.store, "fetch", "-q", "origin")
    branch = git_text(lab.store, "symbolic-ref", "--short", "HEAD")
    merged = subprocess.run(["git", "merge", "-q", f"origin/{branch}"], cwd=lab.store, capture_output=True)
    assert merged.returncode != 0, "the pull was expected to conflict"


def applied_on_both(lab: Lab, tmp_path: Path, patch: str, readme: str) -> Lab:
    """Series S with one patch (README as `readme`), shared with Bob; S applied on both engineers' trees."""
    (lab.tree / "README").write_text(readme)
    assert lab.sm("save", patch, "--series", "S", "-m", patch).code == 0
    assert lab.sm("reset").code == 0
    theirs, tree = share(lab, tmp_path)
    bob = Lab(theirs, tree)
    assert bob.sm("tree", "add", "vllm", str(tree)).code == 0
    assert lab.sm("apply", "S").code == 0 and bob.sm("apply", "S").code == 0
    return bob


def test_a_store_left_mid_merge_says_which_file_has_an_unresolved_conflict(lab: Lab, tmp_path: Path) -> None:
    bob = applied_on_both(lab, tmp_path, "base", "hello\nbase\n")
    theirs, tree = bob.store, bob.tree
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 'alice'\n")
    assert lab.sm("save", "alice", "--series", "S", "-m", "alice's").code == 0
    (tree / "src" / "model.py").write_text("def f():\n    return 'bob'\n")
    assert bob.sm("save", "bob", "--series", "S", "-m", "bob's").code == 0
    pull_conflicting(lab, tmp_path, theirs, "series/S")
    assert "<<<<<<<" in (lab.store / "series" / "S").read_text()
    for args in (("apply", "S"), ("series", "S"), ("save", "more", "--series", "S", "-m", "x"), ("status",)):
        result = lab.sm(*args)
        assert result.code == 3, (args, result.err)
        assert "unresolved merge conflict in series/S (lines 2–6)" in result.err, result.err
        assert len(result.err.strip().splitlines()) == 1
    lint = lab.sm("lint")
    assert lint.code == 1 and "series/S: unresolved merge conflict (lines 2–6)" in lint.out
    assert "orphaned" not in lint.out  # what a series mid-merge lists is not known: no false orphans


def two_engineers(lab: Lab, tmp_path: Path) -> tuple[Lab, Path]:
    """A series S with one patch, shared; both clones set up with `git-setup` (bob's right after cloning)."""
    (lab.tree / "README").write_text("hello\nbase\n")
    assert lab.sm("save", "base", "--series", "S", "-m", "base").code == 0
    assert lab.sm("reset").code == 0
    theirs, tree = share(lab, tmp_path)
    git(lab.store, "remote", "add", "origin", str(tmp_path / "remote.git"))
    git(lab.store, "fetch", "-q", "origin")
    git(lab.store, "branch", "-q", "--set-upstream-to", f"origin/{git_text(lab.store, 'branch', '--show-current')}")
    bob = Lab(theirs, tree)
    assert bob.sm("tree", "add", "vllm", str(tree)).code == 0
    for who in (lab, bob):
        done = who.sm("git-setup")
        assert done.code == 0, done.err
    return bob, tree


def append(who: Lab, path: str, text: str, name: str) -> None:
    assert who.sm("apply", "S").code == 0
    (who.tree / path).parent.mkdir(parents=True, exist_ok=True)
    (who.tree / path).write_text(text)
    assert who.sm("save", name, "--series", "S", "-m", name).code == 0
    assert who.sm("reset").code == 0
    git(who.store, "add", "-A")
    git(who.store, "commit", "-q", "-m", f"{name} appended")


def test_two_engineers_appending_to_one_series_both_keep_their_patches(lab: Lab, tmp_path: Path) -> None:
    bob, _ = two_engineers(lab, tmp_path)
    append(lab, "alice.txt", "alice's\n", "alice")
    append(bob, "bob.txt", "bob's\n", "bob")
    git(bob.store, "push", "-q", "origin", "HEAD")
    pulled = subprocess.run(["git", "pull", "-q", "--no-rebase", "--no-edit"], cwd=lab.store, capture_output=True)
    assert pulled.returncode == 0, pulled.stderr.decode()
    series = (lab.store / "series" / "S").read_text()
    assert series == "base.patch\nalice.patch\nbob.patch\n"
    assert lab.sm("lint").code == 0
    assert lab.sm("apply", "S").code == 0
    assert (lab.tree / "alice.txt").exists() and (lab.tree / "bob.txt").exists()
    git(lab.store, "push", "-q", "origin", "HEAD")  # and bob's pull of the merge gives him the same file
    assert subprocess.run(["git", "pull", "-q", "--no-rebase"], cwd=bob.store).returncode == 0
    assert (bob.store / "series" / "S").read_text() == series


def test_a_series_one_engineer_reordered_and_the_other_cut_is_left_as_a_conflict(lab: Lab, tmp_path: Path) -> None:
    bob, _ = two_engineers(lab, tmp_path)
    append(lab, "two.txt", "two\n", "two")
    git(lab.store, "push", "-q", "origin", "HEAD")
    assert subprocess.run(["git", "pull", "-q", "--no-rebase"], cwd=bob.store).returncode == 0
    (lab.store / "series" / "S").write_text("two.patch\nbase.patch\n")  # alice moves base below two
    git(lab.store, "commit", "-q", "-am", "base last")
    (bob.store / "series" / "S").write_text("two.patch\n")  # bob drops base
    git(bob.store, "commit", "-q", "-am", "base goes")
    git(bob.store, "push", "-q", "origin", "HEAD")
    pulled = subprocess.run(["git", "pull", "-q", "--no-rebase", "--no-edit"], cwd=lab.store, capture_output=True)
    assert pulled.returncode != 0 and b"CONFLICT" in pulled.stdout + pulled.stderr
    result = lab.sm("apply", "S")
    assert result.code == 3 and "unresolved merge conflict in series/S" in result.err


def test_a_record_rewritten_with_its_size_and_mtime_put_back_is_read_again_and_flagged(ev: Lab) -> None:
    """A teammate's edit of a record's verdict, arriving by `git pull` (or made in place, keeping size and
    mtime): show, links and verify print the new verdict with no cache deleted; lint and verify say the record,
    write-once, changed after it was written."""

    link = link_id(ev, "replay-fix", "results/probe.log", "--verdict", "promoted", "--lesson", "keep it")
    assert json.loads(ev.sm("links", "--json").out)["links"][0]["verdict"]["status"] == "promoted"  # cached now
    assert ev.sm("lint").code == 0
    record = next((ev.store / "links" / "replay-fix").glob("*.toml"))
    before = record.stat()
    text = record.read_text()
    edited = text.replace('"promoted"', '"rejected"').replace('"keep it"', '"drop it"')
    assert len(edited) == len(text)
    with open(record, "r+") as f:  # in place: same inode, same size
        f.write(edited)
    os.utime(record, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the old mtime put back
    listed = json.loads(ev.sm("links", "--json").out)["links"]
    assert [(k["id"], k["verdict"]["status"], k["verdict"]["lesson"]) for k in listed] == [(link, "rejected",
                                                                                            "drop it")]
    shown = ev.sm("show", "replay-fix")
    assert "drop it" in shown.out and "keep it" not in shown.out
    lint = ev.sm("lint")
    assert lint.code == 1 and "changed after it was written" in lint.out + lint.err
    verify = ev.sm("verify")
    assert verify.code != 0 and "changed after it was written" in verify.out + verify.err


@pytest.mark.regression("the series merge driver said 'merged' on a CRLF series file and git committed the markers")
def test_the_merge_driver_never_calls_a_file_with_markers_merged(tmp_path: Path) -> None:
    from stackmgr.commands.merge_series import merge_series

    base, ours, theirs = (tmp_path / n for n in ("base", "ours", "theirs"))
    base.write_bytes(b"a1.patch\r\n")
    ours.write_bytes(b"a1.patch\r\nx.patch\r\n")
    theirs.write_bytes(b"a1.patch\r\ny.patch\r\n")
    assert merge_series(str(base), str(ours), str(theirs))
    assert ours.read_bytes() == b"a1.patch\r\nx.patch\r\ny.patch\r\n"
    ours.write_bytes(b"b.patch\r\na1.patch\r\n")  # ours moved a1 below b; theirs drops a1
    theirs.write_bytes(b"")
    base.write_bytes(b"a1.patch\r\nb.patch\r\n")
    assert not merge_series(str(base), str(ours), str(theirs))
    assert b"<<<<<<<" in ours.read_bytes()


@pytest.mark.regression("a conflicted stackmgr.toml made lint, which lists conflicts, refuse too")
def test_lint_lists_every_conflicted_file_even_when_the_config_is_one(lab: Lab) -> None:
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + "<<<<<<< ours\n[trees.a]\n=======\n[trees.b]\n>>>>>>> theirs\n")
    (lab.store / "series" / "S").write_text("<<<<<<< ours\nx.patch\n=======\ny.patch\n>>>>>>> theirs\n")
    assert lab.sm("status").code == 3
    lint = lab.sm("lint")
    assert lint.code == 1
    assert "stackmgr.toml: unresolved merge conflict (lines" in lint.out
    assert "series/S: unresolved merge conflict (lines 1–5)" in lint.out


@pytest.mark.regression("a conflicted link record was 'not a readable link record (unresolved merge conflict …)'")
def test_a_conflicted_link_record_is_named_once_as_a_conflict(ev: Lab) -> None:
    link_id(ev, "replay-fix", "results/probe.log", "--verdict", "promoted")
    assert ev.sm("lint").code == 0  # seen once
    record = next((ev.store / "links" / "replay-fix").glob("*.toml"))
    text = record.read_text()
    record.write_text(text.replace('status = "promoted"', '<<<<<<< ours\nstatus = "promoted"\n=======\n'
                                   'status = "rejected"\n>>>>>>> theirs'))  # fmt: skip
    listed = ev.sm("links")
    assert listed.code == 3 and listed.err.startswith(f"stackmgr: unresolved merge conflict in links/replay-fix/"
                                                      f"{record.name} (lines")  # fmt: skip
    assert "not a readable" not in listed.err and str(ev.store) not in listed.err.split(";")[0]
    lint = ev.sm("lint")
    assert (lint.out + lint.err).count(record.name) == 1, lint.out


def test_a_fresh_clone_sees_a_record_edited_before_it_was_cloned(ev: Lab, tmp_path: Path) -> None:
    """The first-seen shas are this clone's; a record edited before another clone first read it is caught by
    its id, which is the hash of its content."""
    link_id(ev, "replay-fix", "results/probe.log", "--verdict", "promoted", "--lesson", "keep it")
    record = next((ev.store / "links" / "replay-fix").glob("*.toml"))
    record.write_text(record.read_text().replace('"keep it"', '"drop it"'))
    (ev.store / ".stackmgr" / "record-shas.marshal").unlink()  # as a fresh clone has it: nothing seen yet
    lint = ev.sm("lint")
    assert lint.code == 1 and "its content no longer gives its id" in lint.out
    assert ev.sm("lint").code == 1  # and again: remembered as it is, still not what it was written as


@pytest.mark.regression("tree add accepted a second name for a checkout already registered")
def test_one_checkout_is_one_tree(lab: Lab, tmp_path: Path) -> None:
    again = lab.sm("tree", "add", "other", str(lab.tree / "src"))  # any directory inside it is the same tree
    assert again.code == 2 and f"{lab.tree} is already tree vllm" in again.err
    second = make_repo(tmp_path / "kernels")
    assert lab.sm("tree", "add", "kernels", str(second)).code == 0
    moved = lab.sm("tree", "set", "kernels", str(lab.tree))
    assert moved.code == 2 and "is already tree vllm" in moved.err
