"""Preserved: a change counts as saved only when a patch in the store still delivers it, applied to its base in
this tree; a malformed patch preserves nothing and crashes nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import Lab, commit, git, git_text, rebuilt_tree, run_stackmgr


def _blob_at(lab: Lab, patch: str, path: str) -> str:
    """The blob `path` has after applying the patch to its base (what a reset + apply would give back)."""
    tree = rebuilt_tree(lab, patch)
    return git_text(lab.tree, "rev-parse", f"{tree}:{path}")


# --- what a patch can claim -------------------------------------------------------------------------------------------


@pytest.mark.regression("an edited hunk still preserved the blob its index line names")
def test_a_patch_whose_hunk_no_longer_produces_the_file_preserves_nothing(lab: Lab) -> None:
    """preserved.PatchIndex._parse trusts the full-index post-image id; a patch whose hunk was edited (or
    CRLF-normalised by the store repo) still 'preserves' the old blob."""
    (lab.tree / "README").write_text("saved\n")
    assert lab.sm("save", "readme", "-m", "readme").code == 0
    patch = lab.store / "patches" / "readme.patch"
    patch.write_bytes(patch.read_bytes().replace(b"+saved", b"+SAVED"))  # index line left as it was
    worktree_blob = git_text(lab.tree, "hash-object", "README")
    assert _blob_at(lab, "readme", "README") != worktree_blob, "a reset + apply would not give README back"
    assert lab.sm("check").code == 1


@pytest.mark.regression("the patch cache's stat signature missed in-place rewrites keeping size and mtime")
def test_a_patch_rewritten_in_place_with_its_mtime_kept_is_reread(lab: Lab) -> None:
    """preserved.PatchIndex.record: the stat signature (size, mtime_ns, ino) has no ctime: in- place rewrites keeping
    size and mtime (cp -p, touch -r) go unseen."""
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


@pytest.mark.regression("a patch whose base is not a commit of the tree preserved")
def test_a_patch_whose_base_is_not_in_the_tree_preserves_nothing(lab: Lab) -> None:
    """preserved._match ignores Stackmgr-Base: a patch whose base is not a commit of the tree cannot be 'applied to its
    base' (docs/ARCHITECTURE.md#invariants, 2), yet it preserves."""
    (lab.tree / "README").write_text("saved\n")
    assert lab.sm("save", "readme", "-m", "readme").code == 0
    patch = lab.store / "patches" / "readme.patch"
    patch.write_bytes(re.sub(rb"Stackmgr-Base: [0-9a-f]{40}", b"Stackmgr-Base: " + b"1" * 40, patch.read_bytes()))
    assert lab.sm("check").code == 1


@pytest.mark.regression("edge case: a patch header naming another tree")
def test_a_patch_whose_header_names_another_tree_preserves_nothing_here(lab: Lab) -> None:
    (lab.tree / "README").write_text("saved\n")
    assert lab.sm("save", "readme", "-m", "readme").code == 0
    patch = lab.store / "patches" / "readme.patch"
    patch.write_bytes(patch.read_bytes().replace(b"Stackmgr-Tree: vllm", b"Stackmgr-Tree: other"))
    assert lab.sm("check").code == 1


@pytest.mark.regression("patches of a SHA-256 repository preserved only until the cache was rebuilt")
def test_patches_of_a_sha256_repository_survive_a_cache_rebuild(tmp_path: Path) -> None:
    """patchfile._post_image only accepts 40-hex ids: in a SHA-256 repository a patch preserves only while save's cache
    entry survives; a re-read drops it."""
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


@pytest.mark.regression("edge case: HEAD moving between checks")
def test_patches_keep_preserving_while_head_moves_between_checks(lab: Lab) -> None:
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


@pytest.mark.regression("edge case: two patches of one path and a hand-made copy")
def test_two_patches_of_one_path_and_a_hand_made_copy_preserve_in_turn(lab: Lab) -> None:
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


# --- malformed patches in the store -----------------------------------------------------------------------------------


_HEADER = (b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: J <j@example.com>\n"
           b"Date: x\nSubject: [PATCH] s\n\nStackmgr-Tree: vllm\nStackmgr-Base: " + b"1" * 40
           + b"\n---\n\n")  # fmt: skip
_ZERO, _ONE = b"0" * 40, b"1" * 40


@pytest.mark.regression("a malformed patch in the store crashed every check")
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
    """unquote_c/_post_image raised IndexError, ValueError, UnicodeDecodeError → exit 3."""
    (lab.store / "patches" / "bad.patch").write_bytes(_HEADER + diff)
    (lab.tree / "README").write_text("unsaved\n")
    check = lab.sm("check", "-v")
    assert check.code == 1 and "README (modified)" in check.out and "internal error" not in check.err


@pytest.mark.regression("edge case: malformed patches that never crashed check")
@pytest.mark.parametrize(
    "diff",
    [b"diff --git a/f b/f\nindex " + _ZERO + b".." + _ONE + b"\n", b"\xff\xfe garbage \x00"],
    ids=["no-mode", "binary-garbage"],
)
def test_other_malformed_patches_in_the_store_preserve_nothing(lab: Lab, diff: bytes) -> None:
    (lab.store / "patches" / "bad.patch").write_bytes(_HEADER + diff)
    (lab.tree / "README").write_text("unsaved\n")
    assert lab.sm("check").code == 1


def test_patches_verified_in_batches_get_the_verdicts_one_at_a_time_gives(lab: Lab) -> None:
    """The first look at a store of many patches verifies them in batches of patches with disjoint paths, one
    `git apply --cached` each (safety/batch_verify.py). Every record (what each path ends as, the error) must be
    what verifying each patch alone gives: patches of one file stacked, a file deleted beside a patch adding a file
    under that name, a hunk whose index line lies, a hunk that does not apply, binary content."""
    from stackmgr.safety import batch_verify
    from stackmgr.safety.preserved import PatchIndex
    from stackmgr.store import patchfile
    from stackmgr.store.config import open_store

    base = git(lab.tree, "rev-parse", "HEAD").decode().strip()
    files = {f"f{i:02d}.txt": "".join(f"line {n}\n" for n in range(30)) for i in range(16)}
    files["d"] = "a file that becomes a directory\n"
    base = commit(lab.tree, files, "many files")

    def patch(name: str, edits: dict[str, str | bytes | None], start: str = base) -> str:
        git(lab.tree, "checkout", "-q", "--detach", start)
        head = commit(lab.tree, edits, name)
        diff = git(lab.tree, "diff", "--stat", "--summary", "-p", "--binary", "--full-index", start, head)
        data = patchfile.render(tree="vllm", base=base, subject=name, body="", name="A", email="a@example.com",
                                date="Sat, 13 Jun 2026 10:02:11 +0000", stat_and_diff=diff)  # fmt: skip
        (lab.store / "patches" / f"{name}.patch").write_bytes(data)
        return head

    for i in range(12):
        patch(f"one{i:02d}", {f"f{i:02d}.txt": files[f"f{i:02d}.txt"].replace("line 7\n", f"line 7 by {i}\n")})
    first = patch("stack1", {"f12.txt": files["f12.txt"] + "one more\n"})
    patch("stack2", {"f12.txt": files["f12.txt"] + "one more\nand another\n"}, start=first)
    patch("gone", {"d": None})
    patch("dir", {"d": None, "d/x": "under d\n"})
    patch("binary", {"f13.txt": bytes(range(256)) * 8})
    liar = lab.store / "patches" / "liar.patch"
    patch("liar", {"f14.txt": files["f14.txt"].replace("line 3\n", "line three\n")})
    liar.write_bytes(liar.read_bytes().replace(b"+line three\n", b"+line 3!!!\n"))
    broken = lab.store / "patches" / "broken.patch"
    patch("broken", {"f15.txt": files["f15.txt"].replace("line 9\n", "line nine\n")})
    broken.write_bytes(broken.read_bytes().replace(b" line 8\n", b" line eight\n"))
    git(lab.tree, "checkout", "-q", "main")

    store = open_store(str(lab.store))
    names = sorted(p.name for p in (lab.store / "patches").glob("*.patch"))
    broken.rename(broken.with_suffix(".aside"))  # a batch holding it refuses whole: each of its patches goes alone
    assert len(batch_verify.prefetch(store, [n for n in names if n != "broken.patch"])) == 18
    broken.with_suffix(".aside").rename(broken)
    batched = PatchIndex(store)
    batched.refresh()
    alone = PatchIndex(store)
    old = batch_verify.WORTH_IT
    batch_verify.WORTH_IT = 10**9
    try:
        alone.refresh()
    finally:
        batch_verify.WORTH_IT = old
    assert len(batched.records) == 19
    assert {n: (r["entries"], r["error"]) for n, r in batched.records.items()} == \
        {n: (r["entries"], r["error"]) for n, r in alone.records.items()}  # fmt: skip
    assert batched.records["liar.patch"]["error"] and batched.records["broken.patch"]["error"]
    assert not batched.records["dir.patch"]["error"] and not batched.records["stack2.patch"]["error"]
