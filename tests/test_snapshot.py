"""The snapshot: what `check` and `status` see as a change in a tree — type changes, names git reads as pathspec
magic, ignored and racy files, local commits, submodules, nested repositories, sparse checkouts, worktrees."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from stackmgr.git.refs import head_on_a_ref
from stackmgr.git.repo import Repo, open_repo
from stackmgr.store import fs
from tests.conftest import Lab, check_codes, commit, git, git_text, make_repo, rebuilt_tree

# --- type changes -----------------------------------------------------------------------------------------------------


@pytest.mark.regression("update-index got README/x before README: the tree was 'error' and check passed")
def test_a_tracked_file_replaced_by_a_directory_is_seen_and_saved(lab: Lab) -> None:
    """snapshot._reconcile: update-index gets README/x before README → 'is a directory' → tree 'error' → check 0; a git
    reset --hard then deletes README/x."""
    (lab.tree / "README").unlink()
    (lab.tree / "README").mkdir()
    (lab.tree / "README" / "x").write_text("new work inside\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "README/x (added)" in check.out
    assert lab.sm("save", "f2d", "-m", "file to dir").code == 0
    assert lab.sm("check").code == 0
    assert rebuilt_tree(lab, "f2d") == lab.worktree_id()


@pytest.mark.regression("update-index beyond a symbolic link: the tree was 'error' and check passed")
def test_a_tracked_directory_replaced_by_a_symlink_is_seen(lab: Lab) -> None:
    """snapshot._reconcile: update-index src/model.py → 'beyond a symbolic link' → tree 'error' → check 0."""
    (lab.tree / "other").mkdir()
    (lab.tree / "other" / "model.py").write_text("elsewhere\n")
    assert lab.sm("check").code == 1
    shutil.rmtree(lab.tree / "src")
    os.symlink("other", lab.tree / "src")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "src (added)" in check.out and "src/model.py (deleted)" in check.out


@pytest.mark.regression("a FIFO over a tracked file made the tree 'error' and check pass")
def test_a_tracked_file_replaced_by_a_fifo_is_a_deletion(lab: Lab) -> None:
    """snapshot._reconcile: update-index on a FIFO → 'unsupported file type' → tree 'error' → check 0, although README's
    content is gone."""
    (lab.tree / "README").unlink()
    os.mkfifo(lab.tree / "README")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "README (deleted)" in check.out


@pytest.mark.regression("NotADirectoryError escaped the snapshot as an internal error")
def test_an_untracked_directory_replaced_by_a_file_is_seen(lab: Lab) -> None:
    """snapshot._untracked_verdict catches FileNotFoundError only: NotADirectoryError escapes → 'internal error', exit
    3, on every check."""
    (lab.tree / "d").mkdir()
    (lab.tree / "d" / "a").write_text("a\n")
    assert lab.sm("check").code == 1  # d/a now sits in the private index
    shutil.rmtree(lab.tree / "d")
    (lab.tree / "d").write_text("a file now\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "d (added)" in check.out and "internal error" not in check.err


@pytest.mark.regression("check-ignore died beyond a symbolic link and check passed")
def test_an_untracked_directory_replaced_by_a_symlink_is_seen(lab: Lab) -> None:
    """snapshot._now_ignored: check-ignore dies on 'd/model.py is beyond a symbolic link' → tree 'error' → check 0 with
    the new symlink unsaved."""
    (lab.tree / "d").mkdir()
    (lab.tree / "d" / "model.py").write_text("a\n")
    assert lab.sm("check").code == 1
    shutil.rmtree(lab.tree / "d")
    os.symlink("src", lab.tree / "d")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "d (added)" in check.out


@pytest.mark.regression("edge case: a tracked directory replaced by a file")
def test_a_tracked_directory_replaced_by_a_file_is_seen_and_saved(lab: Lab) -> None:
    shutil.rmtree(lab.tree / "src")
    (lab.tree / "src").write_text("a file now\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "src (added)" in check.out and "src/model.py (deleted)" in check.out
    assert lab.sm("save", "d2f", "-m", "dir to file").code == 0
    assert lab.sm("check").code == 0
    assert rebuilt_tree(lab, "d2f") == lab.worktree_id()


@pytest.mark.regression("edge case: file to symlink, symlink to a directory, empty file")
def test_symlinks_replacing_files_are_saved_and_a_file_replacing_one_is_a_change(lab: Lab) -> None:
    (lab.tree / "README").unlink()
    os.symlink("src/model.py", lab.tree / "README")  # tracked file -> symlink
    os.symlink("src", lab.tree / "dirlink")  # untracked symlink to a directory
    (lab.tree / "empty").write_bytes(b"")
    assert lab.sm("save", "links", "-m", "links").code == 0
    assert lab.sm("check").code == 0
    assert rebuilt_tree(lab, "links") == lab.worktree_id()
    (lab.tree / "README").unlink()
    (lab.tree / "README").write_text("src/model.py")  # same bytes as the link target string, but a file
    assert lab.sm("check").code == 1


# --- file names that look like pathspec magic -------------------------------------------------------------------------


@pytest.mark.regression("check-ignore read ':build' as pathspec magic and dropped the file")
def test_untracked_file_whose_name_starts_with_a_colon_is_never_dropped(lab: Lab) -> None:
    """snapshot._now_ignored feeds paths to check-ignore as pathspecs: ':build' is read as 'build' (ignored), dropped
    from the snapshot, so check alternates 1/0."""
    (lab.tree / ".gitignore").write_text("/build\n")
    git(lab.tree, "add", ".gitignore")
    git(lab.tree, "commit", "-qm", "ignore build")
    (lab.tree / ":build").write_text("not ignored: git status lists it\n")
    assert b"?? :build" in git(lab.tree, "status", "--porcelain")
    assert check_codes(lab) == [1, 1, 1]


@pytest.mark.regression("check-ignore died on ':(glob)x' and the second check passed")
def test_an_untracked_file_named_like_pathspec_magic_stays_unsaved(lab: Lab) -> None:
    """snapshot._now_ignored: check-ignore dies on ':(glob)x' ('pathspec magic not supported') → tree 'error' → the
    second check exits 0."""
    (lab.tree / ":(glob)x").write_text("unsaved\n")
    assert check_codes(lab) == [1, 1, 1]


# --- ignored, staged, racy and mode-only changes ----------------------------------------------------------------------


@pytest.mark.regression("a stale index-only path went to both add and remove, so an ignored file was saved")
def test_a_file_ignored_and_edited_since_the_last_snapshot_is_not_saved(lab: Lab) -> None:
    """snapshot._reconcile: a stale index-only path goes to both `add` and `remove`; update-index removes then re-adds
    it, so an ignored file is saved."""
    (lab.tree / "scratch.log").write_text("log\n")
    assert lab.sm("check").code == 1  # scratch.log enters the private index
    (lab.tree / ".git" / "info" / "exclude").write_text("*.log\n")
    (lab.tree / "scratch.log").write_text("log, longer now\n")
    (lab.tree / "README").write_text("real work\n")
    assert lab.sm("save", "work", "-m", "work").code == 0
    assert b"scratch.log" not in (lab.store / "patches" / "work.patch").read_bytes()


@pytest.mark.regression("edge case: an untracked directory that becomes ignored")
def test_an_untracked_directory_that_becomes_ignored_leaves_the_snapshot(lab: Lab) -> None:
    (lab.tree / "scratch").mkdir()
    (lab.tree / "scratch" / "a.txt").write_text("a\n")
    assert lab.sm("check").code == 1
    (lab.tree / ".git" / "info" / "exclude").write_text("scratch/\n")
    assert check_codes(lab) == [0, 0, 0]


@pytest.mark.regression("edge case: a new file saved, staged, then committed")
def test_a_new_file_saved_then_staged_then_committed_stays_preserved(lab: Lab) -> None:
    (lab.tree / "n.txt").write_text("n\n")
    assert lab.sm("check").code == 1
    assert lab.sm("save", "n", "-m", "n").code == 0
    git(lab.tree, "add", "n.txt")
    assert lab.sm("check").code == 0
    git(lab.tree, "commit", "-qm", "n")
    assert lab.sm("check").code == 0
    (lab.tree / "n.txt").write_text("n2\n")
    assert lab.sm("check").code == 1


@pytest.mark.regression("edge case: racy git, a same-size rewrite keeping the mtime")
def test_a_same_size_rewrite_with_the_old_mtime_is_still_seen(lab: Lab) -> None:
    """Racy git: A -> B with the same size and the same mtime is caught (ctime/inode), A -> B -> A is fine."""
    readme = lab.tree / "README"
    readme.write_text("AAAAA\n")
    assert lab.sm("save", "a", "-m", "a").code == 0
    for _ in range(10):
        st = os.stat(readme)
        assert lab.sm("check").code == 0
        readme.write_text("BBBBB\n")
        os.utime(readme, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert lab.sm("check").code == 1
        readme.write_text("AAAAA\n")
    assert lab.sm("check").code == 0


@pytest.mark.regression("edge case: core.fileMode=false")
def test_the_exec_bit_is_not_a_change_with_filemode_false(lab: Lab) -> None:
    git(lab.tree, "config", "core.fileMode", "false")
    (lab.tree / "README").chmod(0o755)
    assert lab.sm("check").code == 0
    (lab.tree / "README").write_text("changed\n")
    assert lab.sm("save", "m", "-m", "m").code == 0
    assert b"100755" not in (lab.store / "patches" / "m.patch").read_bytes()
    assert lab.sm("check").code == 0


# --- HEAD and local commits -------------------------------------------------------------------------------------------


@pytest.mark.regression("a local commit on a detached HEAD was not a change")
def test_a_local_commit_only_reachable_from_a_detached_head_is_a_change(lab: Lab) -> None:
    """docs/ARCHITECTURE.md#invariants, 4: local commits a reset would leave unreachable count as changes;
    snapshot only diffs against HEAD, so a detached local commit passes check."""
    git(lab.tree, "checkout", "-q", "--detach")
    (lab.tree / "README").write_text("committed, on no branch\n")
    git(lab.tree, "commit", "-qam", "local experiment")
    assert lab.sm("check").code == 1


@pytest.mark.regression("edge case: a detached HEAD at a branch tip, then a local commit")
def test_a_detached_head_on_a_branch_commit_is_fine_and_a_branch_clears_local_commits(lab: Lab) -> None:
    git(lab.tree, "checkout", "-q", "--detach")
    assert lab.sm("check").code == 0, "HEAD detached at a branch tip: nothing is on no ref"
    (lab.tree / "README").write_text("committed, on no branch\n")
    git(lab.tree, "commit", "-qam", "local experiment")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "1 local commit on no branch" in check.out and "git branch NAME" in check.out
    git(lab.tree, "branch", "keep-experiment")
    assert lab.sm("check").code == 0


def _on_a_ref_agrees_with_git(tree: Path) -> bool:
    """refs.head_on_a_ref, checked against git: a yes must never hide a commit that is on no ref."""
    answer = head_on_a_ref(open_repo(str(tree)))
    if answer:
        assert git(tree, "rev-list", "HEAD", "--not", "--glob=refs/*") == b"", "a yes with a commit on no ref"
    return answer


@pytest.mark.regression("speed: a detached HEAD (where `apply` leaves it) cost every check a `git rev-list`")
def test_a_detached_head_at_a_branch_packed_ref_or_tag_is_known_on_a_ref_without_git(lab: Lab) -> None:
    first = git_text(lab.tree, "rev-parse", "HEAD")
    assert _on_a_ref_agrees_with_git(lab.tree), "on a branch"
    git(lab.tree, "checkout", "-q", "--detach")
    assert _on_a_ref_agrees_with_git(lab.tree), "at a loose branch's tip"
    git(lab.tree, "tag", "-a", "-m", "release", "v1", first)  # an annotated tag: packed with its peeled commit
    commit(lab.tree, {"README": "two\n"}, "two")
    git(lab.tree, "pack-refs", "--all")
    assert not (lab.tree / ".git" / "refs" / "heads" / "main").exists()
    git(lab.tree, "checkout", "-q", "--detach", "main")
    assert _on_a_ref_agrees_with_git(lab.tree), "at a packed branch's tip"
    git(lab.tree, "checkout", "-q", "--detach", "v1")
    assert _on_a_ref_agrees_with_git(lab.tree), "at the commit an annotated packed tag peels to"
    assert lab.sm("check").code == 0
    commit(lab.tree, {"README": "on no branch\n"}, "local")
    assert not _on_a_ref_agrees_with_git(lab.tree), "a new commit on the detached HEAD"
    assert lab.sm("check").code == 1


@pytest.mark.regression("edge case: a packed ref that a loose ref overrides names an orphaned commit")
def test_a_packed_ref_overridden_by_a_loose_one_does_not_count(lab: Lab) -> None:
    base = git_text(lab.tree, "rev-parse", "HEAD")
    git(lab.tree, "checkout", "-q", "-b", "side")
    side = commit(lab.tree, {"README": "side\n"}, "side")
    git(lab.tree, "checkout", "-q", "main")
    git(lab.tree, "pack-refs", "--all")  # packed-refs: side -> the side commit
    git(lab.tree, "update-ref", "refs/heads/side", base)  # loose now: side moved back, its commit orphaned
    git(lab.tree, "checkout", "-q", "--detach", side)
    assert git(lab.tree, "rev-list", "HEAD", "--not", "--glob=refs/*").split() == [side.encode()]
    assert not _on_a_ref_agrees_with_git(lab.tree)
    check = lab.sm("check", "-v")
    assert check.code == 1 and "1 local commit on no branch" in check.out


@pytest.mark.regression("review: a temp file under refs/ (rsync, Syncthing) that git does not list was taken for a ref")
@pytest.mark.parametrize("name", ["refs/heads/.main.Xa91Zq", "refs/remotes/.sync/main", "refs/tags/a.lock/b",
                                  "refs/heads/main.lock"])  # fmt: skip
def test_a_file_git_does_not_list_as_a_ref_does_not_count(lab: Lab, name: str) -> None:
    git(lab.tree, "checkout", "-q", "--detach")
    local = commit(lab.tree, {"README": "on no branch\n"}, "local")
    loose = lab.tree / ".git" / name
    loose.parent.mkdir(parents=True, exist_ok=True)
    loose.write_text(local + "\n")
    assert git(lab.tree, "rev-list", "HEAD", "--not", "--glob=refs/*").split() == [local.encode()]
    assert not _on_a_ref_agrees_with_git(lab.tree)
    check = lab.sm("check", "-v")
    assert check.code == 1 and "1 local commit on no branch" in check.out


@pytest.mark.regression("review: a broken ref made `git rev-list` fail and its empty answer read as no local commits")
@pytest.mark.parametrize("name", ["main~", "a..b"])
def test_a_broken_ref_git_cannot_read_refuses_instead_of_passing(lab: Lab, name: str) -> None:
    git(lab.tree, "checkout", "-q", "--detach")
    commit(lab.tree, {"README": "on no branch\n"}, "local")
    (lab.tree / ".git" / "refs" / "heads" / name).write_text("garbage\n")
    check = lab.sm("check")
    assert check.code == 1 and "git cannot list the commits on no branch" in check.err, "not all preserved"
    assert "Traceback" not in check.err and len(check.err.strip().splitlines()) == 1
    head = git_text(lab.tree, "rev-parse", "HEAD")
    reset = lab.sm("reset", "--force")
    assert reset.code == 3 and "git cannot list the commits on no branch" in reset.err
    assert git_text(lab.tree, "rev-parse", "HEAD") == head


@pytest.mark.regression("review: packed-refs not as git writes it (no final newline, CRLF) is not read")
def test_packed_refs_not_as_git_writes_them_are_left_to_git(lab: Lab) -> None:
    git(lab.tree, "pack-refs", "--all")
    git(lab.tree, "checkout", "-q", "--detach")
    packed = lab.tree / ".git" / "packed-refs"
    assert _on_a_ref_agrees_with_git(lab.tree)
    packed.write_bytes(packed.read_bytes().rstrip(b"\n"))
    assert not head_on_a_ref(open_repo(str(lab.tree)))
    packed.write_bytes(packed.read_bytes().replace(b"\n", b"\r\n") + b"\r\n")
    assert not head_on_a_ref(open_repo(str(lab.tree)))


@pytest.mark.regression("edge case: reftable keeps HEAD in its tables, the HEAD file names refs/heads/.invalid")
def test_the_reftable_placeholder_head_is_not_taken_for_a_branch(tmp_path: Path) -> None:
    git_dir = tmp_path / "tree" / ".git"
    git_dir.mkdir(parents=True)
    (git_dir / "HEAD").write_bytes(b"ref: refs/heads/.invalid\n")
    assert not head_on_a_ref(Repo(str(tmp_path / "tree"), str(git_dir)))
    (git_dir / "HEAD").write_bytes(b"ref: refs/heads/main\n")
    assert head_on_a_ref(Repo(str(tmp_path / "tree"), str(git_dir)))


@pytest.mark.regression("edge case: a linked worktree detached at a branch tip (refs in the main repository)")
def test_a_linked_worktree_detached_at_a_branch_tip_is_on_a_ref(lab: Lab, tmp_path: Path) -> None:
    git(lab.tree, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"))
    assert _on_a_ref_agrees_with_git(tmp_path / "wt")
    commit(tmp_path / "wt", {"README": "in the worktree\n"}, "wt")
    assert not _on_a_ref_agrees_with_git(tmp_path / "wt")


# --- odd repositories -------------------------------------------------------------------------------------------------


@pytest.mark.regression("edge case: a submodule moved and dirty")
def test_a_submodule_moved_is_a_change_and_dirty_inside_is_unprotected(lab: Lab, tmp_path: Path) -> None:
    sub = make_repo(tmp_path / "subsrc", {"s.txt": "s\n"})
    git(lab.tree, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    git(lab.tree, "commit", "-qm", "add sub")
    assert lab.sm("check").code == 0
    (lab.tree / "sub" / "s.txt").write_text("s2\n")
    status = json.loads(lab.sm("--json", "status").out)["trees"][0]
    assert [u["path"] for u in status["unprotected"]] == ["sub"] and lab.sm("check").code == 0
    git(lab.tree / "sub", "commit", "-qam", "s2")
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.strip() == "vllm: sub (submodule)"
    assert lab.sm("save", "bump", "-m", "bump sub").code == 0
    assert lab.sm("check").code == 0


@pytest.mark.regression("edge case: nested repositories")
def test_nested_repositories_are_unprotected_not_saved(lab: Lab) -> None:
    for nested in (lab.tree / "nested", lab.tree / "d" / "deeper"):
        nested.mkdir(parents=True)
        git(nested, "init", "-q")
        (nested / "f").write_text("f\n")
    status = json.loads(lab.sm("--json", "status").out)["trees"][0]
    assert {(u["path"], u["reason"]) for u in status["unprotected"]} == {
        ("nested", "nested repository"), ("d/deeper", "nested repository")}  # fmt: skip
    assert lab.sm("check").code == 0


@pytest.mark.regression("edge case: sparse checkout")
def test_a_sparse_checkout_is_checked_and_saved_like_a_full_one(lab: Lab) -> None:
    (lab.tree / "other").mkdir()
    (lab.tree / "other" / "o.txt").write_text("o\n")
    git(lab.tree, "add", "-A")
    git(lab.tree, "commit", "-qm", "other")
    git(lab.tree, "sparse-checkout", "set", "src")
    assert lab.sm("check").code == 0, "paths outside the cone are not deletions"
    (lab.tree / "src" / "model.py").write_text("x\n")
    assert lab.sm("save", "sp", "-m", "sp").code == 0
    assert lab.sm("check").code == 0
    (lab.tree / "other").mkdir()
    (lab.tree / "other" / "o.txt").write_text("present despite skip-worktree\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "other/o.txt (modified)" in check.out


@pytest.mark.regression("edge case: a linked worktree as a second tree")
def test_a_linked_worktree_registered_as_a_tree_is_checked_and_saved(lab: Lab, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(lab.tree, "worktree", "add", "-q", str(wt))
    assert lab.sm("tree", "add", "wt", str(wt)).code == 0
    (wt / "README").write_text("in the worktree\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "wt: README (modified)" in check.out and "vllm: all changes preserved" in check.out
    assert lab.sm("save", "w", "-t", "wt", "-m", "w").code == 0
    assert lab.sm("check").code == 0
    assert (lab.tree / ".git" / "worktrees" / "wt" / "stackmgr" / "index").exists()


@pytest.mark.regression("edge case: split index and untracked cache")
def test_a_split_index_with_untracked_cache_is_checked_right(lab: Lab) -> None:
    git(lab.tree, "config", "core.untrackedCache", "true")
    git(lab.tree, "update-index", "--split-index", "--untracked-cache")
    (lab.tree / "src" / "u1").write_text("1\n")
    git(lab.tree, "status")
    assert lab.sm("save", "u1", "-m", "u1").code == 0
    assert lab.sm("check").code == 0
    (lab.tree / "src" / "u2").write_text("2\n")
    assert check_codes(lab, 2) == [1, 1]
    os.unlink(lab.tree / "src" / "u2")
    assert lab.sm("check").code == 0


@pytest.mark.regression("the private index went split: git expired the user's shared index, or stackmgr's own")
def test_a_split_index_whose_shared_files_expire_stays_readable_for_git_and_stackmgr(lab: Lab) -> None:
    """With core.splitIndex on, a git writing stackmgr's private index wrote a new `.git/sharedindex.*` and
    deleted the others older than splitIndex.sharedIndexExpire, the user's among them: the user's next
    `git status` said 'index file open failed' (the staged entries in it gone). stackmgr's indexes are never
    split now, so neither side's git can expire a file the other needs."""
    git(lab.tree, "config", "core.splitIndex", "true")
    git(lab.tree, "config", "splitIndex.sharedIndexExpire", "now")
    git(lab.tree, "status")
    (lab.tree / "src" / "model.py").write_text("edited\n")
    (lab.tree / "new.txt").write_text("new\n")
    for day in range(3):  # each round: stackmgr's private index written, then the user's git writes its own
        assert lab.sm("check").code == 1
        assert lab.sm("status").code == 0
        git(lab.tree, "status")  # reads the user's split index: its shared file is still there
        git(lab.tree, "update-index", "--split-index", "--add", "new.txt" if day == 1 else "src/model.py")
    private = (lab.tree / ".git" / "stackmgr" / "index").read_bytes()
    assert b"link" not in private[-200:] and not list((lab.tree / ".git" / "stackmgr").glob("sharedindex.*"))
    assert lab.sm("save", "s", "-m", "s").code == 0 and lab.sm("check").code == 0
    assert rebuilt_tree(lab, "s") == lab.worktree_id()


def test_the_staged_answer_is_reused_only_while_the_index_head_and_refs_stay_as_they_were(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git/staged.py: `diff-index --cached HEAD` is asked again after any change to the index, HEAD, the branch
    ref (loose or packed) or replace refs; meanwhile its answer is reused, and `check` says what a fresh one would."""
    from stackmgr.git import staged

    monkeypatch.setattr(fs, "SETTLED_NS", 0)  # the tmp file system keeps ns timestamps
    asked = []
    start = staged.StagedChanges._start
    monkeypatch.setattr(staged.StagedChanges, "_start", lambda self: asked.append(1) or start(self))
    base = git_text(lab.tree, "rev-parse", "HEAD")
    v2 = commit(lab.tree, {"README": "v2\n"}, "v2")
    git(lab.tree, "reset", "-q", "--soft", base)  # README v2 staged, HEAD at base
    (lab.tree / "README").write_text("v3\n")
    assert lab.sm("save", "p", "-m", "v3").code == 0
    cache = lab.tree / ".git" / "stackmgr" / "staged.cache"

    def check_as_fresh() -> None:
        cached = lab.sm("check", "-v")
        cache.unlink()
        fresh = lab.sm("check", "-v")
        assert (cached.code, cached.out) == (fresh.code, fresh.out)

    assert lab.sm("check", "-v").code == 1 and cache.exists()  # the staged v2 is in no patch
    before = len(asked)
    assert lab.sm("check").code == 1 and len(asked) == before  # nothing moved: the answer is reused
    mutations = (
        ("update-ref", "refs/heads/main", v2), ("pack-refs", "--all"), ("update-ref", "refs/heads/main", base),
        ("replace", base, v2), ("add", "README"), ("checkout", "-q", "--detach", v2),
        ("config", "core.useReplaceRefs", "false"),
    )  # fmt: skip
    for args in mutations:
        assert lab.sm("check").code in (0, 1) and cache.exists()
        before = len(asked)
        git(lab.tree, *args)
        check_as_fresh()
        assert len(asked) > before, args


@pytest.mark.parametrize("rules", ["root", "nested", "info/exclude", "user default", "core.excludesFile",
                                   "symlinked user default", "included core.excludesFile"])  # fmt: skip
def test_an_ignore_answer_is_reused_only_while_every_rule_file_stays_as_it_was(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, rules: str
) -> None:
    """git/ignore.rules_key: `check-ignore` about the files only the private index holds is asked again after any
    of the rule files it reads changed; meanwhile its answer is reused. The file ignored leaves the snapshot, and
    comes back, unsaved, when the rule goes (a dotfiles symlink and an included config were answered from a
    stale 'ignored': check said 0 and the guard let `git clean` delete the file)."""
    from stackmgr.git import ignore

    monkeypatch.setattr(fs, "SETTLED_NS", 0)  # the tmp file system keeps ns timestamps
    asked = []
    start = ignore._start_stdin
    monkeypatch.setattr(ignore, "_start_stdin", lambda repo: asked.append(1) or start(repo))
    home = tmp_path / "home"
    if rules == "core.excludesFile":
        git(lab.tree, "config", "core.excludesFile", "~/my-ignores")
    if rules == "symlinked user default":
        (home / "dotfiles").mkdir()
        (home / "dotfiles" / "gitignore").write_text("")
        (home / ".config" / "git").mkdir(parents=True)
        os.symlink(home / "dotfiles" / "gitignore", home / ".config" / "git" / "ignore")
    ignoring, not_ignoring = "*.log\n", "# nothing ignored\n"
    if rules == "included core.excludesFile":  # the included file switches between two excludes files
        (home / "my-ignores").write_text("*.log\n")
        ignoring, not_ignoring = (f"[core]\n\texcludesFile = ~/{name}\n" for name in ("my-ignores", "none"))
        (home / ".gitconfig.local").write_text(not_ignoring)
        with open(home / ".gitconfig", "a") as f:
            f.write("[include]\n\tpath = ~/.gitconfig.local\n")
    (lab.tree / "src" / "deep").mkdir()
    (lab.tree / "src" / "deep" / "scratch.log").write_text("notes\n")
    for _ in range(2):
        assert lab.sm("check", "-v").code == 1
    before = len(asked)
    assert "src/deep/scratch.log (added)" in lab.sm("check", "-v").out
    assert len(asked) == before or rules == "included core.excludesFile"  # reused, unless config includes others
    target = {"root": lab.tree / ".gitignore", "nested": lab.tree / "src" / "deep" / ".gitignore",
              "info/exclude": lab.tree / ".git" / "info" / "exclude", "user default": home / ".config" / "git" /
              "ignore", "core.excludesFile": home / "my-ignores", "symlinked user default": home / "dotfiles" /
              "gitignore", "included core.excludesFile": home / ".gitconfig.local"}[rules]  # fmt: skip
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(ignoring)
    for _ in range(2):
        check = lab.sm("check", "-v")
        assert "scratch.log" not in check.out and len(asked) > before
        assert check.code == (1 if rules in ("root", "nested") else 0)  # a new .gitignore is unsaved itself
    target.write_text(not_ignoring)
    for _ in range(3):
        check = lab.sm("check", "-v")
        assert check.code == 1 and "src/deep/scratch.log (added)" in check.out


def test_the_private_index_keeps_an_untracked_cache_when_the_users_repository_has_one_on(lab: Lab) -> None:
    """docs/SCALING.md: git's untracked cache (core.untrackedCache) carries over to the snapshot's private index,
    where `git status` then skips the directories that did not change; off, the private index has none."""
    private = lab.tree / ".git" / "stackmgr" / "index"
    (lab.tree / "src" / "new.py").write_text("new\n")
    assert lab.sm("check").code == 1 and b"UNTR" not in private.read_bytes()
    git(lab.tree, "config", "core.untrackedCache", "true")
    assert lab.sm("check").code == 1 and b"UNTR" in private.read_bytes()
    (lab.tree / "src" / "newer.py").write_text("newer\n")  # the cache never hides a new file
    assert "src/newer.py (added)" in lab.sm("check", "-v").out


@pytest.mark.parametrize("given", ["environment", "%(prefix)"])
def test_an_excludes_file_given_by_environment_or_prefix_is_never_answered_stale(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, given: str
) -> None:
    """core.excludesFile set through GIT_CONFIG_KEY_n/VALUE_n (no config file changes), or written `%(prefix)/…`
    (git resolves it; the ignore cache watched a path that does not exist): check said 0 for an unsaved file
    git does not ignore."""

    monkeypatch.setattr(fs, "SETTLED_NS", 0)
    (tmp_path / "on").write_text("*.log\n")
    (tmp_path / "off").write_text("# nothing\n")
    exec_path = git_text(lab.tree, "--exec-path")
    prefix = exec_path.rsplit("/lib", 1)[0] if "/lib" in exec_path else "/usr"

    def excludes(name: str) -> None:
        path = str(tmp_path / name)
        if given == "environment":
            monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
            monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.excludesFile")
            monkeypatch.setenv("GIT_CONFIG_VALUE_0", path)
        else:  # one file, its rules rewritten
            (tmp_path / "px").write_text((tmp_path / name).read_text())

    if given == "%(prefix)":
        git(lab.tree, "config", "core.excludesFile", "%(prefix)/" + os.path.relpath(tmp_path / "px", prefix))
    excludes("off")
    (lab.tree / "scratch.log").write_text("notes\n")
    for name, code in (("off", 1), ("off", 1), ("on", 0), ("on", 0), ("off", 1), ("off", 1), ("off", 1)):
        excludes(name)
        check = lab.sm("check", "-v")
        assert check.code == code and ("scratch.log (added)" in check.out) == (code == 1), name
