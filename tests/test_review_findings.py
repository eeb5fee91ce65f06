"""Hostile review of the preserved-work core (snapshot, preserved, patchfile, save, git/spawn).

Tests whose docstring starts "Regression (review)" pinned a real bug found in review (then fixed); each says
what went wrong. The others pin edge cases that behaved correctly and must keep doing so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Lab, git, git_text, make_repo, run_stackmgr


def _rebuilt_tree(lab: Lab, patch: str) -> str:
    """Apply patches/<patch>.patch to its Stackmgr-Base in a scratch index; return the tree id."""
    data = (lab.store / "patches" / f"{patch}.patch").read_bytes()
    base = re.search(rb"^Stackmgr-Base: ([0-9a-f]{40})$", data, re.M).group(1).decode()  # type: ignore[union-attr]
    index = lab.tree / ".git" / "review-rebuild-index"
    env = dict(os.environ, GIT_INDEX_FILE=str(index))
    try:
        subprocess.run(["git", "read-tree", base], cwd=lab.tree, env=env, check=True)
        subprocess.run(["git", "apply", "--cached", str(lab.store / "patches" / f"{patch}.patch")], cwd=lab.tree,
                       env=env, check=True, capture_output=True)  # fmt: skip
        out = subprocess.run(["git", "write-tree"], cwd=lab.tree, env=env, check=True, capture_output=True)
        return out.stdout.decode().strip()
    finally:
        index.unlink(missing_ok=True)


def _blob_at(lab: Lab, patch: str, path: str) -> str:
    """The blob `path` has after applying the patch to its base (what a reset + apply would give back)."""
    tree = _rebuilt_tree(lab, patch)
    return git_text(lab.tree, "rev-parse", f"{tree}:{path}")


def _check_codes(lab: Lab, n: int = 3) -> list[int]:
    return [lab.sm("check").code for _ in range(n)]


# ---------------------------------------------------------------------------------------------------------------
# 1. `check` answers "everything preserved" (exit 0) whenever a tree cannot be snapshotted
# ---------------------------------------------------------------------------------------------------------------


def test_check_does_not_pass_when_the_private_index_is_locked(lab: Lab) -> None:
    """Regression (review): commands.check: a tree in state 'error' has no blockers, so check exits 0."""
    assert lab.sm("check").code == 0  # creates .git/stackmgr/index
    (lab.tree / ".git" / "stackmgr" / "index.lock").write_bytes(b"")  # a git killed mid-write (kill -9, OOM)
    (lab.tree / "README").write_text("unsaved work\n")
    assert lab.sm("check").code != 0
    assert json.loads(lab.sm("check", "--json").out)["preserved"] is False
    assert lab.sm("save", "work", "-m", "work").code == 0, "the stale lock of the private index is cleared"
    assert lab.sm("check").code == 0


def test_check_does_not_pass_when_the_private_index_is_corrupt(lab: Lab) -> None:
    """Regression (review): commands.check: a corrupt private index makes the tree 'error' → exit 0."""
    assert lab.sm("check").code == 0
    (lab.tree / ".git" / "stackmgr" / "index").write_bytes(b"DIRC garbage")
    (lab.tree / "README").write_text("unsaved work\n")
    assert lab.sm("check").code != 0, "the private index is a cache: rebuild it, or at least fail"
    assert lab.sm("save", "work", "-m", "work").code == 0
    assert lab.sm("check").code == 0


def test_check_does_not_pass_for_an_unborn_tree_holding_work(lab: Lab, tmp_path: Path) -> None:
    """Regression (review): commands.check: an unborn tree with untracked work is 'error' → exit 0."""
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    git(unborn, "init", "-q")
    (unborn / "work.txt").write_text("weeks of work\n")
    git(unborn, "add", "work.txt")
    assert lab.sm("tree", "add", "unborn", str(unborn)).code == 0
    assert lab.sm("check", "unborn").code == 3  # named: no commits yet is refused, exit 3
    assert lab.sm("check").code != 0  # unnamed (the shell guard's form): must not say "all preserved"


def test_check_does_not_pass_when_a_required_clean_filter_fails(lab: Lab) -> None:
    """Regression (review): update-index fails in the clean filter → tree 'error' → check exits 0."""
    git(lab.tree, "config", "filter.lfsx.required", "true")
    git(lab.tree, "config", "filter.lfsx.clean", "false")
    (lab.tree / ".gitattributes").write_text("*.bin filter=lfsx\n")
    (lab.tree / "x.bin").write_text("data\n")
    assert lab.sm("check").code != 0


# ---------------------------------------------------------------------------------------------------------------
# 2. Type changes the snapshot cannot digest (update-index order, lstat errors, check-ignore on symlinked paths)
# ---------------------------------------------------------------------------------------------------------------


def test_tracked_file_replaced_by_a_directory(lab: Lab) -> None:
    """Regression (review): snapshot._reconcile: update-index gets README/x before README → 'is a directory' → tree
    'error' → check 0; a git reset --hard then deletes README/x.
    """
    (lab.tree / "README").unlink()
    (lab.tree / "README").mkdir()
    (lab.tree / "README" / "x").write_text("new work inside\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "README/x (added)" in check.out
    assert lab.sm("save", "f2d", "-m", "file to dir").code == 0
    assert lab.sm("check").code == 0
    assert _rebuilt_tree(lab, "f2d") == lab.worktree_id()


def test_tracked_directory_replaced_by_a_symlink(lab: Lab) -> None:
    """Regression (review): snapshot._reconcile: update-index src/model.py → 'beyond a symbolic link' → tree 'error' →
    check 0.
    """
    (lab.tree / "other").mkdir()
    (lab.tree / "other" / "model.py").write_text("elsewhere\n")
    assert lab.sm("check").code == 1
    shutil.rmtree(lab.tree / "src")
    os.symlink("other", lab.tree / "src")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "src (added)" in check.out and "src/model.py (deleted)" in check.out


def test_tracked_file_replaced_by_a_fifo(lab: Lab) -> None:
    """Regression (review): snapshot._reconcile: update-index on a FIFO → 'unsupported file type' → tree 'error' →
    check 0, although README's content is gone.
    """
    (lab.tree / "README").unlink()
    os.mkfifo(lab.tree / "README")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "README (deleted)" in check.out


def test_untracked_directory_replaced_by_a_file(lab: Lab) -> None:
    """Regression (review): snapshot._untracked_verdict catches FileNotFoundError only: NotADirectoryError escapes →
    'internal error', exit 3, on every check.
    """
    (lab.tree / "d").mkdir()
    (lab.tree / "d" / "a").write_text("a\n")
    assert lab.sm("check").code == 1  # d/a now sits in the private index
    shutil.rmtree(lab.tree / "d")
    (lab.tree / "d").write_text("a file now\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "d (added)" in check.out and "internal error" not in check.err


def test_untracked_directory_replaced_by_a_symlink(lab: Lab) -> None:
    """Regression (review): snapshot._now_ignored: check-ignore dies on 'd/model.py is beyond a symbolic link' → tree
    'error' → check 0 with the new symlink unsaved.
    """
    (lab.tree / "d").mkdir()
    (lab.tree / "d" / "model.py").write_text("a\n")
    assert lab.sm("check").code == 1
    shutil.rmtree(lab.tree / "d")
    os.symlink("src", lab.tree / "d")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "d (added)" in check.out


# ---------------------------------------------------------------------------------------------------------------
# 3. File names that check-ignore reads as pathspec magic
# ---------------------------------------------------------------------------------------------------------------


def test_untracked_file_whose_name_starts_with_a_colon_is_never_dropped(lab: Lab) -> None:
    """Regression (review): snapshot._now_ignored feeds paths to check-ignore as pathspecs: ':build' is read as 'build'
    (ignored), dropped from the snapshot, so check alternates 1/0.
    """
    (lab.tree / ".gitignore").write_text("/build\n")
    git(lab.tree, "add", ".gitignore")
    git(lab.tree, "commit", "-qm", "ignore build")
    (lab.tree / ":build").write_text("not ignored: git status lists it\n")
    assert b"?? :build" in git(lab.tree, "status", "--porcelain")
    assert _check_codes(lab) == [1, 1, 1]


def test_untracked_file_named_like_pathspec_magic(lab: Lab) -> None:
    """Regression (review): snapshot._now_ignored: check-ignore dies on ':(glob)x' ('pathspec magic not supported') →
    tree 'error' → the second check exits 0.
    """
    (lab.tree / ":(glob)x").write_text("unsaved\n")
    assert _check_codes(lab) == [1, 1, 1]


# ---------------------------------------------------------------------------------------------------------------
# 4. Preserved is claimed from `index` lines and cache signatures without checking the patch still delivers
# ---------------------------------------------------------------------------------------------------------------


def test_a_patch_whose_hunk_no_longer_produces_the_file_preserves_nothing(lab: Lab) -> None:
    """Regression (review): preserved.PatchIndex._parse trusts the full-index post-image id; a patch whose hunk was
    edited (or CRLF-normalised by the store repo) still 'preserves' the old blob.
    """
    (lab.tree / "README").write_text("saved\n")
    assert lab.sm("save", "readme", "-m", "readme").code == 0
    patch = lab.store / "patches" / "readme.patch"
    patch.write_bytes(patch.read_bytes().replace(b"+saved", b"+SAVED"))  # index line left as it was
    worktree_blob = git_text(lab.tree, "hash-object", "README")
    assert _blob_at(lab, "readme", "README") != worktree_blob, "a reset + apply would not give README back"
    assert lab.sm("check").code == 1


def test_a_patch_rewritten_in_place_with_its_mtime_kept_is_reread(lab: Lab) -> None:
    """Regression (review): preserved.PatchIndex.record: the stat signature (size, mtime_ns, ino) has no ctime: in-
    place rewrites keeping size and mtime (cp -p, touch -r) go unseen.
    """
    (lab.tree / "README").write_text("saved\n")
    assert lab.sm("save", "readme", "-m", "readme").code == 0
    assert lab.sm("check").code == 0
    patch = lab.store / "patches" / "readme.patch"
    st = os.stat(patch)
    other = patch.read_bytes().replace(b"README", b"READMX").replace(b"+saved", b"+other")
    assert len(other) == st.st_size
    with open(patch, "r+b") as f:
        f.write(other)
    os.utime(patch, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert lab.sm("check").code == 1, "the patch no longer mentions README at all"


def test_a_patch_whose_base_is_not_in_the_tree_preserves_nothing(lab: Lab) -> None:
    """Regression (review): preserved._match ignores Stackmgr-Base: a patch whose base is not a commit of the tree
    cannot be 'applied to its base' (docs/ARCHITECTURE.md#invariants, 2), yet it preserves.
    """
    (lab.tree / "README").write_text("saved\n")
    assert lab.sm("save", "readme", "-m", "readme").code == 0
    patch = lab.store / "patches" / "readme.patch"
    patch.write_bytes(re.sub(rb"Stackmgr-Base: [0-9a-f]{40}", b"Stackmgr-Base: " + b"1" * 40, patch.read_bytes()))
    assert lab.sm("check").code == 1


def test_a_local_commit_only_reachable_from_a_detached_head_is_a_change(lab: Lab) -> None:
    """Regression (review): local commits a reset would leave unreachable count as changes; snapshot only
    diffs against HEAD, so a detached local commit passes check.
    """
    git(lab.tree, "checkout", "-q", "--detach")
    (lab.tree / "README").write_text("committed, on no branch\n")
    git(lab.tree, "commit", "-qam", "local experiment")
    assert lab.sm("check").code == 1


# ---------------------------------------------------------------------------------------------------------------
# 5. Bad input: a malformed patch in the store crashes every check
# ---------------------------------------------------------------------------------------------------------------

_HEADER = (b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: J <j@example.com>\n"
           b"Date: x\nSubject: [PATCH] s\n\nStackmgr-Tree: vllm\nStackmgr-Base: " + b"1" * 40
           + b"\n---\n\n")  # fmt: skip
_ZERO, _ONE = b"0" * 40, b"1" * 40


@pytest.mark.parametrize(
    "diff",
    [
        b'diff --git "a/foo\\',  # quoted name cut after a backslash
        b'diff --git "a/\\0x" "b/\\0x"\nnew file mode 100644\n',  # bad octal escape
        b"diff --git a/f b/f\nnew file mode 10064\xff\nindex " + _ZERO + b".." + _ONE + b"\n",
        b"diff --git a/f b/f\nindex " + _ZERO + b".." + _ONE + b" 100\xff44\n",
    ],
    ids=["cut-quote", "bad-octal", "non-utf8-new-mode", "non-utf8-index-mode"],
)
def test_a_malformed_patch_in_the_store_does_not_crash_check(lab: Lab, diff: bytes) -> None:
    """Regression (review): unquote_c/_post_image raised IndexError, ValueError, UnicodeDecodeError → exit 3."""
    (lab.store / "patches" / "bad.patch").write_bytes(_HEADER + diff)
    (lab.tree / "README").write_text("unsaved\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "README (modified)" in check.out and "internal error" not in check.err


@pytest.mark.parametrize(
    "diff",
    [b"diff --git a/f b/f\nindex " + _ZERO + b".." + _ONE + b"\n", b"\xff\xfe garbage \x00"],
    ids=["no-mode", "binary-garbage"],
)
def test_malformed_patches_that_are_handled(lab: Lab, diff: bytes) -> None:
    (lab.store / "patches" / "bad.patch").write_bytes(_HEADER + diff)
    (lab.tree / "README").write_text("unsaved\n")
    assert lab.sm("check").code == 1


# ---------------------------------------------------------------------------------------------------------------
# 6. Smaller correctness bugs
# ---------------------------------------------------------------------------------------------------------------


def test_a_file_ignored_and_edited_since_the_last_snapshot_is_not_saved(lab: Lab) -> None:
    """Regression (review): snapshot._reconcile: a stale index-only path goes to both `add` and `remove`; update-index
    removes then re-adds it, so an ignored file is saved.
    """
    (lab.tree / "scratch.log").write_text("log\n")
    assert lab.sm("check").code == 1  # scratch.log enters the private index
    (lab.tree / ".git" / "info" / "exclude").write_text("*.log\n")
    (lab.tree / "scratch.log").write_text("log, longer now\n")
    (lab.tree / "README").write_text("real work\n")
    assert lab.sm("save", "work", "-m", "work").code == 0
    assert b"scratch.log" not in (lab.store / "patches" / "work.patch").read_bytes()


def test_a_body_line_starting_with_from_keeps_the_patch_git_am_able(lab: Lab, tmp_path: Path) -> None:
    """Regression (review): patchfile.check_message lets a body line git mailsplit reads as an mbox 'From ' separator
    through; git am then says 'Patch is empty'.
    """
    (lab.tree / "README").write_text("x\n")
    saved = lab.sm("save", "p", "-m", "subject\n\nFrom run at 12:34:56 2026 the numbers were\nbetter.")
    if saved.code != 0:
        assert saved.code in (2, 3) and "From" in saved.err  # refusing is fine too
        return
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(lab.tree), str(clone))
    am = subprocess.run(["git", "am", str(lab.store / "patches" / "p.patch")], cwd=clone, capture_output=True)
    assert am.returncode == 0, am.stdout + am.stderr


def test_sha256_repository_patches_survive_a_cache_rebuild(tmp_path: Path) -> None:
    """Regression (review): patchfile._post_image only accepts 40-hex ids: in a SHA-256 repository a patch preserves
    only while save's cache entry survives; a re-read drops it.
    """
    tree = tmp_path / "t"
    tree.mkdir()
    git(tree, "init", "-q", "--object-format=sha256")
    (tree / "a").write_text("a\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "a")
    store = tmp_path / "store"
    assert run_stackmgr("init", str(store)).code == 0
    assert run_stackmgr("--store", str(store), "tree", "add", "t", str(tree)).code == 0
    (tree / "a").write_text("b\n")
    assert run_stackmgr("--store", str(store), "save", "p", "-m", "p").code == 0
    assert run_stackmgr("--store", str(store), "check").code == 0
    shutil.rmtree(store / ".stackmgr" / "cache")
    assert run_stackmgr("--store", str(store), "check").code == 0


# ---------------------------------------------------------------------------------------------------------------
# Edge cases that behave correctly today (keep them that way)
# ---------------------------------------------------------------------------------------------------------------

_ODD_NAMES = [b"new\nline.txt", b"tab\there", b'qu"ote', b"-leading", b"bad\xe9.txt", b"back\\slash",
              b" space ", b"a b/c d", b"*", b"[ab]", b"x\rcr"]  # fmt: skip


def test_odd_file_names_save_round_trip_and_check(lab: Lab) -> None:
    for name in _ODD_NAMES:
        path = os.path.join(os.fsencode(lab.tree), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"content " + name + b"\n")
    assert _check_codes(lab, 2) == [1, 1]
    assert lab.sm("save", "names", "-m", "odd names").code == 0
    assert _check_codes(lab, 2) == [0, 0]
    assert _rebuilt_tree(lab, "names") == lab.worktree_id()


def test_save_takes_odd_names_as_literal_paths(lab: Lab) -> None:
    (lab.tree / "-dash").write_text("d\n")
    (lab.tree / "*").write_text("star\n")
    (lab.tree / "other.txt").write_text("o\n")
    assert lab.sm("save", "star", "-m", "star", "--", "*").code == 0
    data = (lab.store / "patches" / "star.patch").read_bytes()
    assert b"b/*\n" in data and b"other.txt" not in data and b"-dash" not in data
    assert lab.sm("save", "dash", "-m", "dash", "--", "-dash").code == 0
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.strip() == "vllm: other.txt (added)"


def test_type_changes_that_work(lab: Lab) -> None:
    (lab.tree / "README").unlink()
    os.symlink("src/model.py", lab.tree / "README")  # tracked file -> symlink
    os.symlink("src", lab.tree / "dirlink")  # untracked symlink to a directory
    (lab.tree / "empty").write_bytes(b"")
    assert lab.sm("save", "links", "-m", "links").code == 0
    assert lab.sm("check").code == 0
    assert _rebuilt_tree(lab, "links") == lab.worktree_id()
    (lab.tree / "README").unlink()
    (lab.tree / "README").write_text("src/model.py")  # same bytes as the link target string, but a file
    assert lab.sm("check").code == 1


def test_tracked_directory_replaced_by_a_file(lab: Lab) -> None:
    shutil.rmtree(lab.tree / "src")
    (lab.tree / "src").write_text("a file now\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "src (added)" in check.out and "src/model.py (deleted)" in check.out
    assert lab.sm("save", "d2f", "-m", "dir to file").code == 0
    assert lab.sm("check").code == 0
    assert _rebuilt_tree(lab, "d2f") == lab.worktree_id()


def test_exec_bit_is_not_a_change_with_filemode_false(lab: Lab) -> None:
    git(lab.tree, "config", "core.fileMode", "false")
    (lab.tree / "README").chmod(0o755)
    assert lab.sm("check").code == 0
    (lab.tree / "README").write_text("changed\n")
    assert lab.sm("save", "m", "-m", "m").code == 0
    assert b"100755" not in (lab.store / "patches" / "m.patch").read_bytes()
    assert lab.sm("check").code == 0


def test_untracked_directory_that_becomes_ignored_leaves_the_snapshot(lab: Lab) -> None:
    (lab.tree / "scratch").mkdir()
    (lab.tree / "scratch" / "a.txt").write_text("a\n")
    assert lab.sm("check").code == 1
    (lab.tree / ".git" / "info" / "exclude").write_text("scratch/\n")
    assert _check_codes(lab) == [0, 0, 0]


def test_untracked_then_staged_then_committed(lab: Lab) -> None:
    (lab.tree / "n.txt").write_text("n\n")
    assert lab.sm("check").code == 1
    assert lab.sm("save", "n", "-m", "n").code == 0
    git(lab.tree, "add", "n.txt")
    assert lab.sm("check").code == 0
    git(lab.tree, "commit", "-qm", "n")
    assert lab.sm("check").code == 0
    (lab.tree / "n.txt").write_text("n2\n")
    assert lab.sm("check").code == 1


def test_head_moves_between_checks(lab: Lab) -> None:
    (lab.tree / "README").write_text("B\n")
    (lab.tree / "new.txt").write_text("n\n")
    assert lab.sm("save", "p", "-m", "p").code == 0
    git(lab.tree, "add", "-A")
    git(lab.tree, "commit", "-qm", "committed what p holds")
    assert lab.sm("check").code == 0
    git(lab.tree, "checkout", "-q", "-b", "older", "HEAD~1")  # new.txt disappears, README back to hello
    assert lab.sm("check").code == 0
    (lab.tree / "README").write_text("B\n")
    assert lab.sm("check").code == 0, "p (saved against the older HEAD) still ends README as B"
    (lab.tree / "README").write_text("A\n")
    assert lab.sm("check").code == 1
    git(lab.tree, "checkout", "-q", "-f", "main")
    (lab.tree / "new.txt").unlink()
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.strip() == "vllm: new.txt (deleted)"


def test_two_patches_one_path_and_a_hand_made_copy(lab: Lab) -> None:
    (lab.tree / "README").write_text("one\n")
    assert lab.sm("save", "one", "-m", "one").code == 0
    (lab.tree / "README").write_text("two\n")
    assert lab.sm("check").code == 1
    assert lab.sm("save", "two", "-m", "two").code == 0
    shutil.copy(lab.store / "patches" / "two.patch", lab.store / "patches" / "two-copy.patch")
    status = json.loads(lab.sm("--json", "status").out)["trees"][0]
    assert status["changes"][0]["preserved_by"] == ["two", "two-copy"]
    (lab.store / "patches" / "two.patch").unlink()
    assert lab.sm("check").code == 0
    (lab.store / "patches" / "two-copy.patch").rename(lab.store / "patches" / "renamed.patch")
    assert lab.sm("check").code == 0
    (lab.store / "patches" / "renamed.patch").unlink()
    assert lab.sm("check").code == 1, "'one' holds another content of README"


def test_a_patch_whose_header_names_another_tree_preserves_nothing_here(lab: Lab) -> None:
    (lab.tree / "README").write_text("saved\n")
    assert lab.sm("save", "readme", "-m", "readme").code == 0
    patch = lab.store / "patches" / "readme.patch"
    patch.write_bytes(patch.read_bytes().replace(b"Stackmgr-Tree: vllm", b"Stackmgr-Tree: other"))
    assert lab.sm("check").code == 1


def test_same_size_rewrite_with_the_old_mtime_is_still_seen(lab: Lab) -> None:
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


def test_crlf_conversion_autocrlf_and_eol_attribute(lab: Lab) -> None:
    git(lab.tree, "config", "core.autocrlf", "true")
    # written with CRLF, as a checkout here would write it (an LF file is reported unpreserved: row 68)
    (lab.tree / ".gitattributes").write_bytes(b"*.txt text eol=crlf\r\n")
    (lab.tree / "README").write_bytes(b"hello\r\nworld\r\n")
    (lab.tree / "new.txt").write_bytes(b"a\r\nb\r\n")
    assert lab.sm("save", "crlf", "-m", "crlf").code == 0
    assert lab.sm("check").code == 0
    assert _rebuilt_tree(lab, "crlf") == lab.worktree_id()
    assert b"\r" not in (lab.store / "patches" / "crlf.patch").read_bytes(), "blobs are stored normalised"


def test_submodule_gitlink_change_and_dirty_submodule(lab: Lab, tmp_path: Path) -> None:
    sub = make_repo(tmp_path / "subsrc", {"s.txt": "s\n"})
    git(lab.tree, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    git(lab.tree, "commit", "-qm", "add sub")
    assert lab.sm("check").code == 0
    (lab.tree / "sub" / "s.txt").write_text("s2\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "sub (submodule has uncommitted changes inside)" in check.out
    git(lab.tree / "sub", "commit", "-qam", "s2")
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.strip() == "vllm: sub (submodule)"
    saved = lab.sm("save", "bump", "-m", "bump sub")  # no reset or apply could move the submodule: refused
    assert saved.code == 3 and "stackmgr does not save submodule commits" in saved.err
    (lab.tree / "sub" / "untracked").write_text("u\n")
    assert lab.sm("check").code == 1


def test_nested_repositories_are_unprotected_not_saved(lab: Lab) -> None:
    for nested in (lab.tree / "nested", lab.tree / "d" / "deeper"):
        nested.mkdir(parents=True)
        git(nested, "init", "-q")
        (nested / "f").write_text("f\n")
    status = json.loads(lab.sm("--json", "status").out)["trees"][0]
    assert {(u["path"], u["reason"]) for u in status["unprotected"]} == {
        ("nested", "nested repository"), ("d/deeper", "nested repository")}  # fmt: skip
    assert lab.sm("check").code == 0


def test_sparse_checkout(lab: Lab) -> None:
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


def test_linked_worktree_as_a_tree(lab: Lab, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(lab.tree, "worktree", "add", "-q", str(wt))
    assert lab.sm("tree", "add", "wt", str(wt)).code == 0
    (wt / "README").write_text("in the worktree\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "wt: README (modified)" in check.out and "vllm: all changes preserved" in check.out
    assert lab.sm("save", "w", "-t", "wt", "-m", "w").code == 0
    assert lab.sm("check").code == 0
    assert (lab.tree / ".git" / "worktrees" / "wt" / "stackmgr" / "index").exists()


def test_paths_from_a_subdirectory(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(lab.tree / "src")
    (lab.tree / "src" / "model.py").write_text("x\n")
    (lab.tree / "README").write_text("r\n")
    assert lab.sm("save", "model", "-m", "model", "model.py").code == 0
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.strip() == "vllm: README (modified)"
    assert lab.sm("save", "readme", "-m", "readme", "../README").code == 0
    assert lab.sm("check").code == 0
    assert lab.sm("save", "outside", "-m", "x", "../../elsewhere").code == 2


def test_split_index_and_untracked_cache(lab: Lab) -> None:
    git(lab.tree, "config", "core.untrackedCache", "true")
    git(lab.tree, "update-index", "--split-index", "--untracked-cache")
    (lab.tree / "src" / "u1").write_text("1\n")
    git(lab.tree, "status")
    assert lab.sm("save", "u1", "-m", "u1").code == 0
    assert lab.sm("check").code == 0
    (lab.tree / "src" / "u2").write_text("2\n")
    assert _check_codes(lab, 2) == [1, 1]
    os.unlink(lab.tree / "src" / "u2")
    assert lab.sm("check").code == 0


def test_concurrent_checks_agree(lab: Lab) -> None:
    (lab.tree / "README").write_text("x\n")
    for i in range(50):
        (lab.tree / f"f{i}").write_text(f"{i}\n")
    cmd = [sys.executable, "-m", "stackmgr", "--store", str(lab.store), "check"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(8)]
    results = [(p.wait(), p.communicate()[1]) for p in procs]
    assert results == [(1, b"")] * 8
    assert lab.sm("save", "all", "-m", "all").code == 0
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(8)]
    assert [(p.wait(), p.communicate()[1]) for p in procs] == [(0, b"")] * 8


def test_a_detached_head_on_a_branch_commit_is_fine_and_a_branch_clears_local_commits(lab: Lab) -> None:
    git(lab.tree, "checkout", "-q", "--detach")
    assert lab.sm("check").code == 0, "HEAD detached at a branch tip: nothing is on no ref"
    (lab.tree / "README").write_text("committed, on no branch\n")
    git(lab.tree, "commit", "-qam", "local experiment")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "1 local commit on no branch" in check.out and "git branch NAME" in check.out
    git(lab.tree, "branch", "keep-experiment")
    assert lab.sm("check").code == 0
