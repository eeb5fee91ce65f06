"""`stackmgr import FILE… [-t TREE] [--series S] [--name N] [--base REV] [--json]`.

A colleague hands over patches in every shape a lab meets: `git format-patch` mails and mboxes, quilt patches with
DEP-3 or free-text headers, plain `diff -u` / `diff -ruN`, `git diff --binary`, whole quilt directories. Each must
come in as a normal stackmgr patch (full-index header, a 40-hex base where it applies) that rebuilds exactly the
tree the author had; bad files are refused one by one; the user's own tree, index and HEAD are never touched.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from stackmgr.store import patchfile
from tests.conftest import (
    GIT_DATE,
    Lab,
    Result,
    commit,
    git,
    git_text,
    make_repo,
    run_stackmgr,
    save_three_patch_series,
)

MODEL = "".join(f"x{n} = {n}\n" for n in range(30))
BLOB = bytes(range(256)) * 8
HEX40 = re.compile(rb"[0-9a-f]{40}")


# --- helpers ----------------------------------------------------------------------------------------------------------


def clone(lab: Lab, where: Path) -> Path:
    """A colleague's clone of the user's tree, detached at its HEAD: where the patches are made."""
    git(where.parent, "clone", "-q", str(lab.tree), str(where))
    git(where, "checkout", "-q", "--detach", git_text(lab.tree, "rev-parse", "HEAD"))
    return where


def tree_of(repo: Path, rev: str = "HEAD") -> str:
    return git_text(repo, "rev-parse", f"{rev}^{{tree}}")


def extract(repo: Path, rev: str, dest: Path) -> Path:
    """The files of `rev` in a plain directory (no git), for `diff -u` / `diff -ruN`."""
    dest.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=git(repo, "archive", rev), check=True)
    return dest


def run_diff(cwd: Path, *args: str) -> bytes:
    proc = subprocess.run(["diff", *args], cwd=cwd, capture_output=True)
    assert proc.returncode == 1, proc.stderr  # 1: the files differ
    return proc.stdout


def user_state(repo: Path) -> tuple[str, str, bytes, list[str]]:
    """HEAD, the real index as a tree, the working-tree status, leftovers in stackmgr's scratch area."""
    scratch = repo / ".git" / "stackmgr"
    leftovers = sorted(p.name for p in scratch.glob("import*")) if scratch.exists() else []
    return (git_text(repo, "rev-parse", "HEAD"), git_text(repo, "write-tree"),
            git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all"), leftovers)  # fmt: skip


def imp(lab: Lab, *args: str, store: Path | None = None, trees: tuple[Path, ...] = ()) -> Result:
    """`stackmgr import …`, checking that no tree was touched and nothing crashed."""
    watched = (lab.tree, *trees)
    before = [user_state(t) for t in watched]
    result = run_stackmgr("--store", str(store or lab.store), "import", *args)
    assert "Traceback" not in result.err, result.err
    assert [user_state(t) for t in watched] == before, "import touched a user's tree"
    return result


def refusals(result: Result) -> list[str]:
    lines = result.err.strip().splitlines()
    assert all(line.startswith("stackmgr: refused ") for line in lines), result.err
    return lines


def patches(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((store / "patches").glob("*.patch"))}


def header(data: bytes) -> dict[str, str]:
    """The mail header fields and Stackmgr trailers of an imported patch, checked against docs/FORMATS.md#patch-file."""
    head, sep, diff = data.partition(b"\ndiff --git ")
    assert data.startswith(b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n")
    assert sep and b"\n---\n" in head, "mail header, ---, diffstat, then a git diff"
    indexes = re.findall(rb"^index (\S+)", diff, re.M)
    assert indexes and all(re.fullmatch(rb"[0-9a-f]{40}\.\.[0-9a-f]{40}", i) for i in indexes), indexes
    text = head.decode()
    fields = dict(re.findall(r"^(From|Date|Subject|Stackmgr-Tree|Stackmgr-Base): (.*)$", text, re.M))
    assert HEX40.fullmatch(fields["Stackmgr-Base"].encode()), fields
    fields["body"] = text.split("\n\n", 1)[1].split("\nStackmgr-Tree:")[0]
    return fields


def applied_at_base(repo: Path, *datas: bytes, tmp: Path) -> str:
    """`git apply --cached` of the patches, in order, on the first one's Stackmgr-Base, in a scratch index."""
    env = dict(os.environ, GIT_INDEX_FILE=str(tmp / "check-index"))
    subprocess.run(["git", "read-tree", header(datas[0])["Stackmgr-Base"]], cwd=repo, env=env, check=True)
    for n, data in enumerate(datas):
        (tmp / f"check-{n}.patch").write_bytes(data)
        subprocess.run(["git", "apply", "--cached", "--whitespace=nowarn", str(tmp / f"check-{n}.patch")], cwd=repo,
                       env=env, check=True)  # fmt: skip
    return subprocess.run(["git", "write-tree"], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


@pytest.fixture
def shop(lab: Lab) -> Lab:
    """The lab's tree with a second commit: a longer module, a binary table, a script."""
    commit(lab.tree, {"src/model.py": MODEL, "data/table.bin": BLOB, "tools/run.sh": "#!/bin/sh\necho hi\n"}, "more")
    return lab


@pytest.fixture
def kernels(lab: Lab, tmp_path: Path) -> Path:
    """A second registered tree, sharing only a README with the first."""
    repo = make_repo(tmp_path / "kernels", {"README": "hello\n", "gemm.cpp": "int tile = 64;\n"})
    assert lab.sm("tree", "add", "kernels", str(repo)).code == 0
    return repo


def make_dirty(repo: Path) -> None:
    """What a user's tree usually looks like: a staged edit, an unstaged edit, an untracked file."""
    (repo / "README").write_text("hello\nstaged\n")
    git(repo, "add", "README")
    (repo / "README").write_text("hello\nstaged\nand not\n")
    (repo / "scratch.txt").write_text("mine\n")


def model_diff(new: str) -> bytes:
    """A plain `diff -u`-style patch of src/model.py from MODEL to `new` (a/ b/ prefixes, no dates)."""
    return "".join(difflib.unified_diff(MODEL.splitlines(True), new.splitlines(True), "a/src/model.py",
                                        "b/src/model.py")).encode()  # fmt: skip


def format_patch(repo: Path, tmp: Path, files: Mapping[str, str | bytes | None], message: str) -> Path:
    commit(repo, files, message)
    return tmp / git_text(repo, "format-patch", "-1", "-o", str(tmp), "HEAD").rsplit("/", 1)[-1]


# --- 1. every format comes in and rebuilds the author's tree ----------------------------------------------------------


def test_format_patch_file(shop: Lab, tmp_path: Path) -> None:
    work = clone(shop, tmp_path / "work")
    edits = {"src/model.py": MODEL.replace("x5 = 5", "x5 = 55"), "docs/notes.md": "tuned\n"}
    mail = format_patch(work, tmp_path, edits, "model: tune x5\n\nIt was too small.")
    result = imp(shop, str(mail))
    assert result.code == 0, result.err
    assert result.out.startswith(f"imported 0001-model-tune-x5 ({mail}): tree vllm, base ")
    data = patches(shop.store)["0001-model-tune-x5.patch"]
    fields = header(data)
    assert fields["Subject"] == "[PATCH] model: tune x5" and fields["From"] == "Jane Doe <jane@example.com>"
    assert fields["body"] == "It was too small.\n" and fields["Stackmgr-Tree"] == "vllm"
    assert fields["Stackmgr-Base"] == git_text(shop.tree, "rev-parse", "HEAD")
    assert applied_at_base(shop.tree, data, tmp=tmp_path) == tree_of(work)


def test_mbox_as_a_series_is_a_stack_that_stackmgr_apply_rebuilds(shop: Lab, tmp_path: Path) -> None:
    work = clone(shop, tmp_path / "work")
    start = git_text(work, "rev-parse", "HEAD")
    commit(work, {"src/model.py": MODEL.replace("x3 = 3", "x3 = 33")}, "first")
    commit(work, {"src/model.py": MODEL.replace("x3 = 3", "x3 = 34"), "README": None}, "second")
    commit(work, {"notes.txt": b"crlf\r\nkept\r\n"}, "third")
    mbox = tmp_path / "f.mbox"
    mbox.write_bytes(git(work, "format-patch", "--stdout", f"{start}..HEAD"))
    result = imp(shop, str(mbox), "--series", "stack")
    assert result.code == 0, result.err
    assert "series stack: 3 patches appended" in result.out
    assert (shop.store / "series" / "stack").read_text().split() == ["first.patch", "second.patch", "third.patch"]
    stack = [patches(shop.store)[f"{n}.patch"] for n in ("first", "second", "third")]
    assert {header(d)["Stackmgr-Base"] for d in stack} == {start}
    assert applied_at_base(shop.tree, *stack, tmp=tmp_path) == tree_of(work)
    assert shop.sm("apply", "stack").code == 0
    assert shop.worktree_id() == tree_of(work)


def test_quilt_patch_with_dep3_header(shop: Lab, tmp_path: Path) -> None:
    work = clone(shop, tmp_path / "work")
    old = extract(work, "HEAD", tmp_path / "a")
    commit(work, {"src/model.py": MODEL.replace("x7 = 7", "x7 = 8")})
    extract(work, "HEAD", tmp_path / "b")
    dep3 = ("Description: Fix the x7 constant\n It was off by one.\n .\n Found in review.\n"
            "Author: John Smith <john@example.org>\nForwarded: no\nLast-Update: 2026-06-01\n---\n")  # fmt: skip
    patch = tmp_path / "fix-x7.patch"
    patch.write_bytes(dep3.encode() + run_diff(old.parent, "-ruN", "a", "b"))
    assert imp(shop, str(patch)).code == 0
    data = patches(shop.store)["fix-x7.patch"]
    fields = header(data)
    assert fields["Subject"] == "[PATCH] Fix the x7 constant"
    assert fields["From"] == "John Smith <john@example.org>"
    assert fields["Date"] == "Mon, 01 Jun 2026 00:00:00 +0000"
    for line in ("Description: Fix the x7 constant", " It was off by one.", "Author: John Smith <john@example.org>",
                 "Forwarded: no", "Last-Update: 2026-06-01"):  # fmt: skip
        assert line in fields["body"].splitlines(), fields["body"]
    assert applied_at_base(shop.tree, data, tmp=tmp_path) == tree_of(work)


def test_quilt_patch_with_free_text_header(shop: Lab, tmp_path: Path) -> None:
    work = clone(shop, tmp_path / "work")
    old = extract(work, "HEAD", tmp_path / "a")
    commit(work, {"src/model.py": MODEL.replace("x9 = 9\n", "")})
    extract(work, "HEAD", tmp_path / "b")
    patch = tmp_path / "drop-x9.diff"
    text = b"Drop x9, nobody reads it\n\nChecked with grep over the whole tree.\n\n"
    patch.write_bytes(text + run_diff(old.parent, "-ru", "a", "b"))
    assert imp(shop, str(patch)).code == 0
    data = patches(shop.store)["drop-x9.patch"]
    fields = header(data)
    assert fields["Subject"] == "[PATCH] Drop x9, nobody reads it"
    assert fields["body"].strip() == "Checked with grep over the whole tree."
    assert fields["From"] == "Jane Doe <jane@example.com>", "no author given: the tree's git identity"
    assert applied_at_base(shop.tree, data, tmp=tmp_path) == tree_of(work)


def test_plain_diff_u_p0_style(shop: Lab, tmp_path: Path) -> None:
    copy = extract(shop.tree, "HEAD", tmp_path / "copy")
    (copy / "src" / "model.py").rename(copy / "src" / "model.py.orig")
    (copy / "src" / "model.py").write_text(MODEL.replace("x20 = 20", "x20 = 2.0"))
    patch = tmp_path / "x20.diff"
    patch.write_bytes(run_diff(copy, "-u", "src/model.py.orig", "src/model.py"))
    assert patch.read_bytes().startswith(b"--- src/model.py.orig\t")
    work = clone(shop, tmp_path / "work")
    commit(work, {"src/model.py": MODEL.replace("x20 = 20", "x20 = 2.0")})
    assert imp(shop, str(patch)).code == 0
    assert applied_at_base(shop.tree, patches(shop.store)["x20.patch"], tmp=tmp_path) == tree_of(work)


def test_diff_ruN_with_a_created_and_a_deleted_file(shop: Lab, tmp_path: Path) -> None:
    work = clone(shop, tmp_path / "work")
    old = extract(work, "HEAD", tmp_path / "old")
    commit(work, {"src/model.py": MODEL + "x30 = 30\n", "docs/new.md": "brand new\n", "README": None})
    extract(work, "HEAD", tmp_path / "new")
    patch = tmp_path / "tree.diff"
    patch.write_bytes(run_diff(old.parent, "-ruN", "old", "new"))
    assert imp(shop, str(patch)).code == 0
    data = patches(shop.store)["tree.patch"]
    assert b"new file mode 100644" in data and b"deleted file mode 100644" in data
    assert applied_at_base(shop.tree, data, tmp=tmp_path) == tree_of(work)


def test_git_diff_binary_with_binary_files_and_mode_changes(shop: Lab, tmp_path: Path) -> None:
    work = clone(shop, tmp_path / "work")
    (work / "tools" / "run.sh").chmod(0o755)
    commit(work, {"data/table.bin": BLOB[::-1], "data/new.bin": b"\0\1\2" * 100})
    patch = tmp_path / "binary.diff"
    patch.write_bytes(git(work, "diff", "--binary", "HEAD~1", "HEAD"))
    assert imp(shop, str(patch)).code == 0
    data = patches(shop.store)["binary.patch"]
    assert b"old mode 100644\nnew mode 100755" in data and data.count(b"GIT binary patch") == 2
    assert applied_at_base(shop.tree, data, tmp=tmp_path) == tree_of(work)


def test_quilt_directory_with_a_p0_patch(shop: Lab, tmp_path: Path) -> None:
    work = clone(shop, tmp_path / "work")
    extract(work, "HEAD", tmp_path / "s0")
    commit(work, {"src/model.py": MODEL.replace("x1 = 1", "x1 = 100")})
    extract(work, "HEAD", tmp_path / "s1")
    commit(work, {"src/model.py": MODEL.replace("x1 = 1", "x1 = 100").replace("x2 = 2", "x2 = 200")})
    copy = extract(work, "HEAD", tmp_path / "s2")  # with s1's model.py as model.py.orig: a -p0 `diff -u`
    quilt = tmp_path / "kernel-work" / "patches"
    quilt.mkdir(parents=True)
    (quilt / "one.patch").write_bytes(b"First step\n\n" + run_diff(tmp_path, "-ru", "s0", "s1"))
    (tmp_path / "s1" / "src" / "model.py").rename(copy / "src" / "model.py.orig")
    (quilt / "two.patch").write_bytes(run_diff(copy, "-u", "src/model.py.orig", "src/model.py"))
    (quilt / "series").write_text("# from the vendor\none.patch\ntwo.patch -p0\n")
    result = imp(shop, str(quilt))
    assert result.code == 0, result.err
    # the comment stays; `-p0` goes (stored patches are all -p1)
    assert (shop.store / "series" / "kernel-work").read_text() == "# from the vendor\none.patch\ntwo.patch\n"
    assert shop.sm("apply", "kernel-work").code == 0
    assert shop.worktree_id() == tree_of(work)


def test_a_later_patch_stacks_on_the_series_it_is_imported_into(shop: Lab, tmp_path: Path) -> None:
    work = clone(shop, tmp_path / "work")
    base = git_text(work, "rev-parse", "HEAD")
    first = format_patch(work, tmp_path / "1", {"src/model.py": MODEL.replace("x3 = 3", "x3 = 0")}, "x3")
    assert imp(shop, str(first), "--series", "S").code == 0
    both = MODEL.replace("x3 = 3", "x3 = 0").replace("x4 = 4\n", "")
    later = format_patch(work, tmp_path / "2", {"src/model.py": both}, "drop x4")
    result = imp(shop, str(later), "--series", "S")
    assert result.code == 0 and f"base {base[:12]} (series S)" in result.out
    assert (shop.store / "series" / "S").read_text().split() == ["0001-x3.patch", "0001-drop-x4.patch"]
    assert shop.sm("apply", "S").code == 0 and shop.worktree_id() == tree_of(work)


# --- 2. the base: the newest commit where the patch applies -----------------------------------------------------------


def test_base_search_walks_back_to_the_commit_the_patch_was_made_on(shop: Lab, tmp_path: Path) -> None:
    made_on = git_text(shop.tree, "rev-parse", "HEAD")
    work = clone(shop, tmp_path / "work")
    mail = format_patch(work, tmp_path, {"src/model.py": MODEL.replace("x10 = 10", "x10 = -1")}, "negate x10")
    commit(shop.tree, {"src/model.py": MODEL.replace("x11 = 11", "x11 = 0")}, "later: x11 (in the patch's context)")
    commit(shop.tree, {"README": "other\n"}, "later: README")
    commit(shop.tree, {"src/model.py": MODEL.replace("x11 = 11", "x11 = 1")}, "later: x11 again")
    make_dirty(shop.tree)
    refused = imp(shop, str(mail), "--base", "HEAD")
    assert refused.code == 3 and "does not apply" in refusals(refused)[0] and "commit HEAD" in refused.err
    assert patches(shop.store) == {}
    found = imp(shop, str(mail))
    assert found.code == 0 and found.out.startswith("imported 0001-negate-x10")
    assert f"base {made_on[:12]} (HEAD~3)" in found.out
    assert header(patches(shop.store)["0001-negate-x10.patch"])["Stackmgr-Base"] == made_on
    given = imp(shop, str(mail), "--base", "HEAD~3")
    assert given.code == 0 and given.out.startswith("already there: ") and f"{made_on[:12]} (--base)" in given.out


def test_base_search_skips_commits_that_did_not_touch_the_patched_files(shop: Lab, tmp_path: Path) -> None:
    mail = format_patch(clone(shop, tmp_path / "work"), tmp_path, {"src/model.py": MODEL.replace("x4 = 4", "x4 = 0")},
                        "zero x4")  # fmt: skip
    for n in range(5):
        commit(shop.tree, {f"notes/{n}.txt": f"note {n}\n"}, f"note {n}")
    result = imp(shop, str(mail))
    assert result.code == 0
    head = git_text(shop.tree, "rev-parse", "HEAD")
    assert f"base {head[:12]} (HEAD)" in result.out
    assert header(patches(shop.store)["0001-zero-x4.patch"])["Stackmgr-Base"] == head


def test_base_search_takes_the_newest_commit_with_the_same_state_of_the_files(shop: Lab, tmp_path: Path) -> None:
    mail = format_patch(clone(shop, tmp_path / "work"), tmp_path, {"src/model.py": MODEL.replace("x4 = 4", "x4 = 0")},
                        "zero x4")  # fmt: skip
    for n in range(4):
        commit(shop.tree, {f"notes/{n}.txt": f"note {n}\n"}, f"note {n}")
    newest_fit = git_text(shop.tree, "rev-parse", "HEAD")
    commit(shop.tree, {"src/model.py": MODEL.replace("x4 = 4", "x4 = 44")}, "x4 upstream")
    result = imp(shop, str(mail))
    assert result.code == 0 and f"base {newest_fit[:12]} (HEAD~1)" in result.out


# --- 3. round trips with export ---------------------------------------------------------------------------------------


def second_store(lab: Lab, tmp_path: Path) -> Path:
    """Another store (a colleague's) with the same tree registered under the same name."""
    other = tmp_path / "store2"
    assert run_stackmgr("init", str(other)).code == 0
    assert run_stackmgr("--store", str(other), "tree", "add", "vllm", str(lab.tree)).code == 0
    return other


def test_quilt_export_imported_into_another_store_is_byte_identical(lab: Lab, tmp_path: Path) -> None:
    save_three_patch_series(lab)
    assert lab.sm("reset").code == 0
    handoff = tmp_path / "handoff"
    assert lab.sm("export", "S", "--quilt", str(handoff)).code == 0
    other = second_store(lab, tmp_path)
    result = imp(lab, str(handoff), store=other)
    assert result.code == 0, result.err
    assert patches(other) == patches(lab.store) and len(patches(other)) == 3
    assert (other / "series" / "handoff").read_text().split() == ["fix.patch", "notes.patch", "swap.patch"]


def exported_mbox(lab: Lab, tmp_path: Path) -> tuple[Path, Path]:
    """Series S exported as an mbox, and a second store that imported it as its series S."""
    save_three_patch_series(lab)
    assert lab.sm("reset").code == 0
    mbox = tmp_path / "S.mbox"
    assert lab.sm("export", "S", "--mbox", str(mbox)).code == 0
    other = second_store(lab, tmp_path)
    assert imp(lab, str(mbox), "--series", "S", store=other).code == 0
    return mbox, other


def test_mbox_export_imported_as_a_series_is_byte_identical(lab: Lab, tmp_path: Path) -> None:
    _, other = exported_mbox(lab, tmp_path)
    names = (other / "series" / "S").read_text().split()  # an mbox has no file names: named after the subjects
    assert names == ["fix-return-2.patch", "notes.patch", "swap-model-for-a-script.patch"]
    ours = [(lab.store / "patches" / n).read_bytes() for n in ("fix.patch", "notes.patch", "swap.patch")]
    assert [(other / "patches" / n).read_bytes() for n in names] == ours


def test_importing_the_same_mbox_series_again_changes_nothing(lab: Lab, tmp_path: Path) -> None:
    mbox, other = exported_mbox(lab, tmp_path)
    before = patches(other), (other / "series" / "S").read_bytes()
    again = imp(lab, str(mbox), "--series", "S", store=other)
    assert (patches(other), (other / "series" / "S").read_bytes()) == before
    assert again.code == 0, again.err
    assert again.out.count("already there: ") == 3
    assert "series S: already holds them; nothing appended" in again.out  # was "3 patches appended"


def test_importing_the_same_file_again_changes_nothing(shop: Lab, tmp_path: Path) -> None:
    mail = format_patch(clone(shop, tmp_path / "work"), tmp_path, {"README": "hello\nworld\n"}, "greet the world")
    assert imp(shop, str(mail)).code == 0
    before = patches(shop.store)
    again = imp(shop, str(mail))
    assert again.code == 0 and again.out.startswith("already there: 0001-greet-the-world") and not again.err
    assert patches(shop.store) == before


def test_a_plain_diff_imported_again_after_a_touch_changes_nothing(shop: Lab, tmp_path: Path) -> None:
    """A diff without an author or date takes the file's time; imported again (copied, touched) it keeps the one
    it got the first time, so the patch stays byte for byte."""
    diff = tmp_path / "x3.diff"
    diff.write_bytes(model_diff(MODEL.replace("x3 = 3", "x3 = 33")))
    assert imp(shop, str(diff)).code == 0
    before = patches(shop.store)
    os.utime(diff, (1, 1))
    again = imp(shop, str(diff))
    assert again.code == 0 and again.out.startswith("already there: x3") and patches(shop.store) == before


def test_a_stack_in_a_two_tree_store_goes_to_the_tree_it_applies_to(shop: Lab, kernels: Path, tmp_path: Path) -> None:
    one, two = tmp_path / "one.diff", tmp_path / "two.diff"
    one.write_bytes(b"--- a/gemm.cpp\n+++ b/gemm.cpp\n@@ -1 +1 @@\n-int tile = 64;\n+int tile = 128;\n")
    two.write_bytes(b"--- a/gemm.cpp\n+++ b/gemm.cpp\n@@ -1 +1 @@\n-int tile = 128;\n+int tile = 256;\n")
    result = imp(shop, str(one), str(two), "--series", "K", trees=(kernels,))
    assert result.code == 0, result.err
    assert (shop.store / "series" / "K").read_text() == "one.patch\ntwo.patch\n"
    assert header(patches(shop.store)["two.patch"])["Stackmgr-Tree"] == "kernels"
    both = tmp_path / "readme.diff"
    both.write_bytes(b"--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hello there\n")
    ambiguous = imp(shop, str(both), "--series", "R", trees=(kernels,))
    assert ambiguous.code == 2 and "pass -t TREE" in ambiguous.err


# --- 4. refusals, one file at a time ----------------------------------------------------------------------------------


def _two_file_mail(shop: Lab, tmp: Path) -> bytes:
    work = clone(shop, tmp / "work2")
    return format_patch(work, tmp / "mails2", {"src/model.py": MODEL.replace("x8 = 8", "x8 = 0"),
                                               "README": "hello\nagain\n"}, "two files").read_bytes()  # fmt: skip


def _taken_name(shop: Lab, tmp: Path) -> bytes:
    """patches/x12.patch already holds another change; this file would be imported under the same name."""
    first = tmp / "first.diff"
    first.write_bytes(b"--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hi\n")
    assert imp(shop, str(first), "--name", "x12").code == 0
    return model_diff(MODEL.replace("x12 = 12", "x12 = 0"))


def _fixed(data: bytes) -> Callable[[Lab, Path], bytes]:
    return lambda shop, tmp: data


DOTDOT = (b"diff --git a/../escape.txt b/../escape.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../escape.txt\n"
          b"@@ -0,0 +1 @@\n+out\n")  # fmt: skip
ABSOLUTE = b"--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-root:x:0:0\n+me:x:0:0\n"
KERNEL = b"--- a/csrc/gemm.cpp\n+++ b/csrc/gemm.cpp\n@@ -1 +1 @@\n-int tile = 64;\n+int tile = 128;\n"
BAD = {  # file name: (how to make its bytes, what the refusal says)
    "notes.txt": (_fixed(b"Meeting notes\n\n- try the bigger tile\n- ask about the --- option\n"), "not a patch"),
    "truncated.patch": (lambda shop, tmp: _two_file_mail(shop, tmp).split(b"-x8 = 8")[0], "truncated"),
    "short-mail.patch": (lambda shop, tmp: _two_file_mail(shop, tmp).split(b"diff --git a/src")[0], "lists 2 files"),
    "cut-after-header.patch": (lambda shop, tmp: _two_file_mail(shop, tmp).split(b"--- a/src")[0],
                               "the diff of b/src/model.py stops after its header"),
    "dotdot.patch": (_fixed(DOTDOT), "'..'"),
    "absolute.patch": (_fixed(ABSOLUTE), "absolute path /etc/passwd"),
    "other-tree.patch": (_fixed(KERNEL), "does not apply to tree vllm"),
    "x12.patch": (_taken_name, "patches/x12.patch already exists"),
}


@pytest.mark.parametrize("bad_name", sorted(BAD))
def test_a_bad_file_is_refused_alone_while_the_others_import(shop: Lab, tmp_path: Path, bad_name: str) -> None:
    make_dirty(shop.tree)
    bad = tmp_path / bad_name
    make, reason = BAD[bad_name]
    bad.write_bytes(make(shop, tmp_path))
    good = format_patch(clone(shop, tmp_path / "work"), tmp_path / "mails",
                        {"src/model.py": MODEL.replace("x2 = 2", "x2 = 0")}, "zero x2")  # fmt: skip
    before = patches(shop.store)
    mixed = imp(shop, str(good), str(bad))
    assert mixed.code == 1, mixed.err
    assert len(refusals(mixed)) == 1 and mixed.err.startswith(f"stackmgr: refused {bad}: ")
    assert reason in mixed.err, mixed.err
    after = patches(shop.store)
    assert sorted(set(after) - set(before)) == ["0001-zero-x2.patch"]
    assert {n: after[n] for n in before} == before, "the refused file wrote nothing"
    alone = imp(shop, str(bad))
    assert alone.code == 3 and len(refusals(alone)) == 1 and not alone.out
    assert patches(shop.store) == after and not list((shop.store / "series").iterdir())


def test_usage_errors_stop_before_anything_is_read(shop: Lab, tmp_path: Path) -> None:
    one, two = tmp_path / "one.diff", tmp_path / "two.diff"
    one.write_bytes(b"--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hi\n")
    two.write_bytes(model_diff(MODEL.replace("x12 = 12", "x12 = 0")))
    for args in (("--name", "both", str(one), str(two)), (str(one), str(tmp_path / "missing.patch")), ()):
        result = imp(shop, *args)
        assert result.code == 2 and len(result.err.strip().splitlines()) == 1, (args, result.err)
    assert patches(shop.store) == {}


def test_a_stackmgr_patch_of_another_tree_is_refused_with_t(shop: Lab, kernels: Path, tmp_path: Path) -> None:
    (kernels / "README").write_text("hello\nkernels\n")
    assert shop.sm("save", "kreadme", "-t", "kernels", "-m", "kernels readme").code == 0
    assert shop.sm("reset", "kernels").code == 0
    handed = tmp_path / "kreadme.patch"
    handed.write_bytes((shop.store / "patches" / "kreadme.patch").read_bytes())
    (shop.store / "patches" / "kreadme.patch").unlink()
    good = format_patch(clone(shop, tmp_path / "work"), tmp_path, {"src/model.py": MODEL + "x30 = 0\n"}, "x30")
    result = imp(shop, "-t", "vllm", str(good), str(handed), trees=(kernels,))
    assert result.code == 1 and refusals(result) == [f"stackmgr: refused {handed}: a patch for tree kernels "
                                                     "(its Stackmgr-Tree), not vllm"]  # fmt: skip
    assert sorted(patches(shop.store)) == ["0001-x30.patch"]


def test_with_two_trees_the_one_where_it_applies_is_picked(shop: Lab, kernels: Path, tmp_path: Path) -> None:
    tile, readme = tmp_path / "tile.diff", tmp_path / "readme.diff"
    tile.write_bytes(b"--- a/gemm.cpp\n+++ b/gemm.cpp\n@@ -1 +1 @@\n-int tile = 64;\n+int tile = 128;\n")
    readme.write_bytes(b"--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hello there\n")
    result = imp(shop, str(tile), str(readme), trees=(kernels,))
    assert result.code == 1 and "imported tile (" in result.out and ": tree kernels, " in result.out
    assert refusals(result) == [f"stackmgr: refused {readme}: applies to several trees (kernels, vllm); "
                                "pass -t TREE"]  # fmt: skip
    assert header(patches(shop.store)["tile.patch"])["Stackmgr-Tree"] == "kernels"
    assert "readme.patch" not in patches(shop.store)
    chosen = imp(shop, "-t", "vllm", str(readme), trees=(kernels,))
    assert chosen.code == 0 and header(patches(shop.store)["readme.patch"])["Stackmgr-Tree"] == "vllm"


# --- 5. the user's tree is never touched (imp() checks HEAD, index and status around every import above) --------------


def test_import_reads_head_and_leaves_a_dirty_tree_alone(shop: Lab, tmp_path: Path) -> None:
    make_dirty(shop.tree)
    (shop.tree / "src" / "model.py").write_text(MODEL.replace("x6 = 6", "x6 = 'staged'"))
    git(shop.tree, "add", "src/model.py")
    (shop.tree / "src" / "model.py").write_text(MODEL.replace("x6 = 6", "x6 = 'unstaged'"))
    wanted_tree = shop.worktree_id()
    plain = tmp_path / "x6.diff"
    plain.write_bytes(model_diff(MODEL.replace("x6 = 6", "x6 = 0")))
    junk = tmp_path / "junk.txt"
    junk.write_text("no diff here\n")
    result = imp(shop, str(plain), str(junk))
    assert result.code == 1 and "imported x6 (" in result.out
    assert header(patches(shop.store)["x6.patch"])["Stackmgr-Base"] == git_text(shop.tree, "rev-parse", "HEAD")
    assert shop.worktree_id() == wanted_tree


# --- 6. --json --------------------------------------------------------------------------------------------------------


def test_json_lists_what_was_imported_and_what_was_refused(shop: Lab, tmp_path: Path) -> None:
    good = format_patch(clone(shop, tmp_path / "work"), tmp_path, {"README": "hello\nworld\n"}, "greet the world")
    bad = tmp_path / "notes.txt"
    bad.write_text("not a patch\n")
    result = imp(shop, "--json", str(good), str(bad))
    assert result.code == 1
    doc = json.loads(result.out)
    head = git_text(shop.tree, "rev-parse", "HEAD")
    [imported] = doc["imported"]
    assert {k: imported[k] for k in ("name", "tree", "base", "found_at")} == {
        "name": "0001-greet-the-world", "tree": "vllm", "base": head, "found_at": "HEAD"}  # fmt: skip
    [refused] = doc["refused"]
    assert refused["source"] == str(bad) and refused["reason"].startswith("not a patch")
    assert doc["schema"] == 1


# --- mails, mboxes and diffs from the wild ----------------------------------------------------------------------------


README_DIFF = b"--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hi\n"
MAIL_DATE = "Sat, 13 Jun 2026 10:02:11 +0000"  # GIT_DATE as git format-patch writes it
assert GIT_DATE.startswith("1781344931")


def mail(frm: bytes = b"A U Thor <author@example.org>", date: bytes = MAIL_DATE.encode(), extra: bytes = b"",
         body: bytes = b"why\n") -> bytes:  # fmt: skip
    return (b"From 1234567890123456789012345678901234567890 Mon Sep 17 00:00:00 2001\nFrom: " + frm + b"\nDate: "
            + date + b"\nSubject: [PATCH] fix readme\n" + extra + b"\n" + body + b"---\n" + README_DIFF)  # fmt: skip


@pytest.mark.regression("edge case: format-patch with renames, modes, a symlink, CRLF and a Unicode name")
def test_format_patch_with_renames_modes_empty_file_symlink_and_unicode_name(lab: Lab, tmp_path: Path) -> None:
    work = clone(lab, tmp_path / "work")
    (work / "README").chmod(0o755)
    (work / "empty").write_bytes(b"")
    os.symlink("README", work / "link")
    (work / "crlf.txt").write_bytes(b"one\r\ntwo")  # CRLF and no newline at end of file
    git(work, "mv", "src/model.py", "src/renamed model \u00fc.py")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "mixed bag")
    mail_file = tmp_path / "mixed.patch"
    mail_file.write_bytes(git(work, "format-patch", "-M", "--stdout", "-1"))
    assert b"rename from" in mail_file.read_bytes()
    result = imp(lab, str(mail_file))
    assert result.code == 0, result.err
    assert applied_at_base(lab.tree, patches(lab.store)["mixed.patch"], tmp=tmp_path) == tree_of(work)


@pytest.mark.regression("two mbox messages with the same subject collided")
def test_an_mbox_with_two_messages_of_the_same_subject_imports_both(lab: Lab, tmp_path: Path) -> None:
    work = clone(lab, tmp_path / "work")
    start = git_text(work, "rev-parse", "HEAD")
    commit(work, {"a.txt": "1\n"}, "wip")
    commit(work, {"b.txt": "2\n"}, "wip")
    mbox = tmp_path / "wip.mbox"
    mbox.write_bytes(git(work, "format-patch", "--stdout", f"{start}..HEAD"))
    result = imp(lab, str(mbox), "--series", "S")
    assert result.code == 0, result.err
    assert lab.sm("apply", "S").code == 0 and lab.worktree_id() == tree_of(work)


@pytest.mark.regression("the Return-Path and Message-ID headers of a saved mail broke the import")
def test_a_mail_saved_by_a_mail_client_keeps_subject_author_and_date(lab: Lab, tmp_path: Path) -> None:
    eml = tmp_path / "fix.patch"
    data = mail(body=b"because\n")
    first, rest = data.split(b"\n", 1)
    eml.write_bytes(first + b"\nReturn-Path: <author@example.org>\nMessage-ID: <1@example.org>\n" + rest)
    assert imp(lab, str(eml)).code == 0
    head = patchfile.parse_header(patches(lab.store)["fix.patch"], "fix")
    assert (head.subject, head.author, head.date) == ("fix readme", "A U Thor <author@example.org>", MAIL_DATE)
    assert head.body == "because"


@pytest.mark.regression("edge case: a quilt patch with a diffstat header")
def test_a_quilt_patch_with_a_diffstat_header_keeps_its_description(lab: Lab, tmp_path: Path) -> None:
    patch = tmp_path / "greet.patch"
    stat = b"---\n README |    2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n\n"
    patch.write_bytes(b"Fix the readme greeting\n\nLonger text.\n" + stat + b"Index: b/README\n" + b"=" * 67 + b"\n"
                      + README_DIFF)  # fmt: skip
    assert imp(lab, str(patch)).code == 0
    head = patchfile.parse_header(patches(lab.store)["greet.patch"], "greet")
    assert (head.subject, head.body) == ("Fix the readme greeting", "Longer text.")


@pytest.mark.regression("a latin-1 mail lost its accents")
def test_a_latin1_mail_keeps_its_accents(lab: Lab, tmp_path: Path) -> None:
    latin = tmp_path / "latin.patch"
    mime = b"MIME-Version: 1.0\nContent-Type: text/plain; charset=ISO-8859-1\nContent-Transfer-Encoding: 8bit\n"
    latin.write_bytes(b"From: J\xf6rg <j@example.org>\nDate: " + MAIL_DATE.encode() + b"\nSubject: [PATCH] caf\xe9\n"
                      + mime + b"\nna\xefve body\n---\n" + README_DIFF)  # fmt: skip
    assert imp(lab, str(latin)).code == 0
    head = patchfile.parse_header(patches(lab.store)["latin.patch"], "latin")
    assert (head.author, head.subject, head.body) == ("J\u00f6rg <j@example.org>", "caf\u00e9", "na\u00efve body")


@pytest.mark.regression("a format-patch --attach mail lost its body")
def test_a_format_patch_attach_mail_keeps_its_body(lab: Lab, tmp_path: Path) -> None:
    work = clone(lab, tmp_path / "work")
    commit(work, {"README": "hi\n"}, "fix readme\n\nbecause.")
    attached = tmp_path / "attached.patch"
    attached.write_bytes(git(work, "format-patch", "--attach", "--stdout", "-1"))
    assert imp(lab, str(attached)).code == 0
    assert patchfile.parse_header(patches(lab.store)["attached.patch"], "attached").body == "because."


@pytest.mark.regression("a git diff made with diff.noprefix lost its first path component")
def test_a_git_diff_without_prefixes_keeps_its_paths(lab: Lab, tmp_path: Path) -> None:
    work = clone(lab, tmp_path / "work")
    (work / "src" / "extra.py").write_text("x = 1\n")
    git(work, "add", "-N", "src/extra.py")
    noprefix = tmp_path / "extra.diff"
    noprefix.write_bytes(git(work, "-c", "diff.noprefix=true", "diff"))
    assert noprefix.read_bytes().startswith(b"diff --git src/extra.py src/extra.py\n")
    result = imp(lab, str(noprefix))
    written = b"".join(patches(lab.store).values())
    assert b"+++ b/extra.py" not in written, "src/extra.py landed at the top level"
    assert result.code == 3 or b"+++ b/src/extra.py" in written


# --- more refusals, one file at a time --------------------------------------------------------------------------------


@pytest.mark.regression("an unparsable date gave a patch git am refuses")
def test_an_unparsable_date_still_gives_a_git_am_patch(lab: Lab, tmp_path: Path) -> None:
    odd = tmp_path / "odd.patch"
    odd.write_bytes(mail(date=b"last tuesday"))
    result = imp(lab, str(odd))
    if result.code == 3:
        return  # refusing the file is fine too
    written = tmp_path / "written.patch"
    written.write_bytes(patches(lab.store)["odd.patch"])
    work = clone(lab, tmp_path / "work")
    am = subprocess.run(["git", "am", "-q", str(written)], cwd=work, capture_output=True)
    assert am.returncode == 0, am.stderr


@pytest.mark.regression("an encoded newline in the author injected header lines")
def test_an_encoded_newline_in_the_author_is_refused_alone(lab: Lab, tmp_path: Path) -> None:
    evil, good = tmp_path / "evil.patch", tmp_path / "good.diff"
    evil.write_bytes(mail(frm=b"=?utf-8?q?Evil=0A=0AStackmgr-Tree=3A_other?= <e@example.org>"))
    good.write_bytes(b"--- a/src/model.py\n+++ b/src/model.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n"
                     b"+    return 3\n")  # fmt: skip
    result = imp(lab, str(good), str(evil))
    assert "internal error" not in result.err, result.err
    assert result.code in (0, 1) and "good.patch" in patches(lab.store)


@pytest.mark.regression("a badly quoted file name stopped the whole import")
def test_a_badly_quoted_file_name_is_refused_alone(lab: Lab, tmp_path: Path) -> None:
    bad, good = tmp_path / "bad.patch", tmp_path / "good.diff"
    bad.write_bytes(b'diff --git "a/x\\qy" "b/x\\qy"\n--- "a/x\\qy"\n+++ "b/x\\qy"\n@@ -1 +1 @@\n-a\n+b\n')
    good.write_bytes(README_DIFF)
    result = imp(lab, str(good), str(bad))
    assert result.code == 1 and result.err.startswith(f"stackmgr: refused {bad}: "), result.err
    assert "good.patch" in patches(lab.store)


@pytest.mark.regression("edge case: binary junk and quilt series entries outside the directory")
def test_bad_inputs_are_refused_one_by_one(lab: Lab, tmp_path: Path) -> None:
    junk, quilt = tmp_path / "junk.bin", tmp_path / "vendor"
    junk.write_bytes(bytes(range(256)) * 40)
    quilt.mkdir()
    (quilt / "ok.patch").write_bytes(README_DIFF)
    (quilt / "series").write_bytes(b"../outside.patch\n/etc/passwd\nsub/../../x.patch\nmissing.patch\nok.patch -p1\n")
    result = imp(lab, str(junk), str(quilt))
    assert result.code == 3 and "internal error" not in result.err
    assert [ln.split(": ", 2)[-1] for ln in result.err.splitlines()] == [
        "not a patch (a binary file)", "../outside.patch points outside the quilt directory",
        "/etc/passwd points outside the quilt directory", "sub/../../x.patch points outside the quilt directory",
        "missing.patch is listed but missing",
        "not imported: an earlier patch of the stack was refused"]  # fmt: skip  (a stack stops, as quilt push does)
    assert sorted(patches(lab.store)) == [] and not (tmp_path / "outside.patch").exists()
    assert imp(lab, str(quilt / "ok.patch")).code == 0 and sorted(patches(lab.store)) == ["ok.patch"]
    empty_dir = tmp_path / "nothing"
    empty_dir.mkdir()
    alone = imp(lab, str(empty_dir))
    assert alone.code == 3 and "without a quilt `series` file" in alone.err


# --- the base and the trees -------------------------------------------------------------------------------------------


@pytest.mark.regression("edge case: --base in a two-tree store")
def test_base_given_in_a_two_tree_store(lab: Lab, tmp_path: Path) -> None:
    kernels = make_repo(tmp_path / "kernels", {"gemm.cpp": "int tile = 64;\n"})
    assert lab.sm("tree", "add", "kernels", str(kernels)).code == 0
    base = git_text(lab.tree, "rev-parse", "HEAD")
    commit(lab.tree, {"README": "hello upstream\n"}, "up 1")
    commit(lab.tree, {"notes": "n\n"}, "up 2")
    diff = tmp_path / "readme.diff"
    diff.write_bytes(README_DIFF)
    result = imp(lab, str(diff), "--base", "HEAD~2", trees=(kernels,))
    assert result.code == 0, result.err
    assert header(patches(lab.store)["readme.patch"])["Stackmgr-Base"] == base


@pytest.mark.regression("a tree without commits blocked every import")
def test_a_tree_without_commits_does_not_block_other_imports(lab: Lab, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert lab.sm("tree", "add", "empty", str(empty)).code == 0
    diff = tmp_path / "readme.diff"
    diff.write_bytes(README_DIFF)
    result = imp(lab, str(diff))
    assert result.code == 0, result.err
    assert header(patches(lab.store)["readme.patch"])["Stackmgr-Tree"] == "vllm"


@pytest.mark.regression("import refused a submodule bump that git am takes")
def test_a_submodule_bump_is_imported_as_git_am_takes_it(lab: Lab, tmp_path: Path) -> None:
    old, new = "1" * 40, "2" * 40
    git(lab.tree, "update-index", "--add", "--cacheinfo", f"160000,{old},vendor/kernels")
    git(lab.tree, "commit", "-q", "-m", "a submodule")
    (lab.tree / "vendor" / "kernels").mkdir(parents=True)  # as a clone leaves a submodule it did not initialize
    bump = tmp_path / "bump.diff"
    bump.write_text(
        "diff --git a/vendor/kernels b/vendor/kernels\n"
        f"index {old}..{new} 160000\n--- a/vendor/kernels\n+++ b/vendor/kernels\n"
        f"@@ -1 +1 @@\n-Subproject commit {old}\n+Subproject commit {new}\n"
    )
    result = imp(lab, str(bump), "--series", "s")
    assert result.code == 0, result.err
    assert f"-Subproject commit {old}\n+Subproject commit {new}\n".encode() in (
        lab.store / "patches" / "bump.patch").read_bytes()  # fmt: skip
    applied = lab.sm("apply", "s")  # the submodule is not checked out in this tree: its checkout cannot move
    assert applied.code == 3 and "submodule vendor/kernels is not checked out here" in applied.err


@pytest.mark.regression("git's mnemonic prefixes (i/ w/) were read as no prefix")
@pytest.mark.parametrize("config", [("-c", "diff.mnemonicPrefix=true"), ("--src-prefix=old/", "--dst-prefix=new/")])
def test_diffs_with_other_prefixes_import_as_git_applies_them(
    lab: Lab, tmp_path: Path, config: tuple[str, str]
) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 42\n")
    args = ["diff", *config] if config[0].startswith("--") else [*config, "diff"]
    diff = git(lab.tree, *args)
    assert diff.startswith(b"diff --git i/src/model.py w/src/model.py" if "mnemonic" in config[1]
                           else b"diff --git old/src/model.py new/src/model.py")  # fmt: skip
    git(lab.tree, "checkout", "--", ".")
    (tmp_path / "change.diff").write_bytes(diff)
    result = imp(lab, str(tmp_path / "change.diff"))
    assert result.code == 0, result.err
    header = (lab.store / "patches" / "change.patch").read_bytes()
    assert b"diff --git a/src/model.py b/src/model.py\n" in header and b"+    return 42\n" in header


@pytest.mark.regression("a patch refused when read did not stop the stack above it")
def test_a_stack_stops_at_a_patch_refused_when_read(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "README").write_text("hello\none\n")
    (tmp_path / "1-one.diff").write_bytes(git(lab.tree, "diff"))
    git(lab.tree, "checkout", "--", ".")
    (tmp_path / "2-notes.diff").write_text("just some notes, no diff here\n")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    (tmp_path / "3-three.diff").write_bytes(git(lab.tree, "diff"))
    git(lab.tree, "checkout", "--", ".")
    files = [str(tmp_path / n) for n in ("1-one.diff", "2-notes.diff", "3-three.diff")]
    result = imp(lab, "--series", "S", *files)
    assert result.code == 1, result.err
    assert "2-notes.diff: not a patch" in result.err
    assert "3-three.diff: not imported: an earlier patch of the stack was refused" in result.err
    assert (lab.store / "series" / "S").read_text() == "1-one.patch\n"


@pytest.mark.regression("a stack whose first patch applied nowhere hid git's reason and blamed every patch")
def test_a_stack_whose_first_patch_applies_nowhere_says_why(lab: Lab, tmp_path: Path) -> None:
    (tmp_path / "1-stale.diff").write_text(
        "diff --git a/README b/README\n--- a/README\n+++ b/README\n@@ -1 +1 @@\n-no such line\n+new line\n"
    )
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    (tmp_path / "2-good.diff").write_bytes(git(lab.tree, "diff"))
    git(lab.tree, "checkout", "--", ".")
    result = imp(lab, "--series", "S", str(tmp_path / "1-stale.diff"), str(tmp_path / "2-good.diff"))
    assert result.code == 3
    first, second = result.err.strip().splitlines()
    assert "1-stale.diff: does not apply to tree vllm at HEAD or the 1000 commits before it" in first
    assert "(at HEAD: error: patch failed: README:1 (hunk 1 of 1, @@ -1 +1 @@))" in first
    assert second.endswith("2-good.diff: not imported: an earlier patch of the stack was refused")


@pytest.mark.regression("quilt patch names were cut to 52 characters, so the exported series no longer matched")
def test_a_quilt_series_keeps_its_long_patch_names(lab: Lab, tmp_path: Path) -> None:
    name = "0003-Do_not_crash_when_RLIMIT_NOFILE_is_set_to_RLIM_INFINITY"
    quilt = tmp_path / "debian" / "patches"
    quilt.mkdir(parents=True)
    (quilt / f"{name}.patch").write_bytes(README_DIFF)
    (quilt / "series").write_text(f"{name}.patch\n")
    assert imp(lab, str(quilt), "--series", "deb").code == 0
    assert (lab.store / "series" / "deb").read_text() == f"{name}.patch\n"
    out = tmp_path / "out"
    assert lab.sm("export", "deb", "--quilt", str(out)).code == 0
    assert (out / "series").read_text() == f"{name}.patch\n"


def test_an_import_records_its_patches_as_a_fresh_read_of_them_would(shop: Lab, tmp_path: Path) -> None:
    """import hands the patch index what each written patch ends its files with (as save does), so apply and
    check need not apply them again; the records must be exactly what reading the patches afresh gives."""
    from stackmgr.safety.preserved import PatchIndex
    from stackmgr.store.config import open_store

    work = clone(shop, tmp_path / "work")
    mails = [format_patch(work, tmp_path / "m1", {"src/model.py": MODEL.replace("x7 = 7", "x7 = 70")}, "x7"),
             format_patch(work, tmp_path / "m2", {"data/new.bin": BLOB[::-1], "tools/run.sh": None}, "swap")]
    (work / "src" / "model.py").chmod(0o755)  # a mode-only change: its blob, from the result tree
    git(work, "commit", "-q", "-am", "executable")
    mails.append(tmp_path / "m3" / git_text(work, "format-patch", "-1", "-o", str(tmp_path / "m3"), "HEAD")
                 .rsplit("/", 1)[-1])  # fmt: skip
    assert imp(shop, "--series", "S", *map(str, mails)).code == 0
    cache = shop.store / ".stackmgr" / "cache" / "patch-index.marshal"
    recorded = PatchIndex.load(open_store(str(shop.store))).records
    assert sorted(recorded) == ["0001-executable.patch", "0001-swap.patch", "0001-x7.patch"]
    cache.unlink()
    fresh = PatchIndex.load(open_store(str(shop.store)))
    fresh.refresh()
    for name in recorded:
        for key in recorded[name]:
            assert fresh.records[name][key] == recorded[name][key], (name, key)
    assert shop.sm("apply", "S").code == 0
    assert shop.worktree_id() == tree_of(work)


@pytest.mark.regression("a mode-only patch of a file an earlier patch created was falsely 'not preserved'")
def test_a_mode_change_of_a_file_an_earlier_patch_created_is_preserved(lab: Lab, tmp_path: Path) -> None:
    work = clone(lab, tmp_path / "work")
    commit(work, {"tools/run.sh": "#!/bin/sh\necho hi\n"}, "add a script")
    (work / "tools" / "run.sh").chmod(0o755)
    git(work, "commit", "-q", "-am", "make it executable")
    mails = git_text(work, "format-patch", "-2", "-o", str(tmp_path / "mails")).split()
    assert b"index " not in Path(mails[1]).read_bytes()  # git writes no blob ids for a mode-only change
    assert imp(lab, "--series", "S", *mails).code == 0
    assert lab.sm("apply", "S").code == 0
    assert lab.worktree_id() == tree_of(work)
    check = lab.sm("check", "-v")
    assert check.code == 0, check.out + check.err
    assert lab.sm("reset").code == 0
    assert lab.worktree_id() == tree_of(lab.tree)


@pytest.mark.regression("a mode-only patch above an edit of the same tracked file was never counted as preserved")
def test_a_mode_change_above_an_edit_of_a_tracked_file_is_preserved(lab: Lab, tmp_path: Path) -> None:
    """Found on attrs (chmod src/attr/converters.py): the file exists at the base; one mail edits it, the next
    makes it executable. `check` refused right after `import` + `apply`."""
    work = clone(lab, tmp_path / "work")
    commit(work, {"src/model.py": "def f():\n    return 42\n"}, "edit")
    (work / "src" / "model.py").chmod(0o755)
    git(work, "commit", "-q", "-am", "make it executable")
    mails = git_text(work, "format-patch", "-2", "-o", str(tmp_path / "mails")).split()
    assert imp(lab, "--series", "S", *mails).code == 0
    assert lab.sm("apply", "S").code == 0
    assert lab.worktree_id() == tree_of(work)
    check = lab.sm("check", "-v")
    assert check.code == 0, check.out + check.err
    assert lab.sm("reset").code == 0


@pytest.mark.regression("one symlink that a later patch turns into a directory sent a whole stack one by one")
def test_a_stack_with_a_symlink_later_made_a_directory_is_built_together(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git refuses, in one `git apply` of several files, a path below a symlink an earlier file made, even when
    a later one replaced the link: the verification then goes patch by patch, the stack is still built once."""
    from stackmgr.commands import import_tree

    work = clone(lab, tmp_path / "work")
    (work / "assets").mkdir()
    os.symlink("../README", work / "assets" / "link")
    git(work, "add", "assets")
    git(work, "commit", "-q", "-m", "a symlink")
    (work / "assets" / "link").unlink()
    commit(work, {"assets/link/inside.txt": "now a directory\n"}, "the link becomes a directory")
    commit(work, {"README": "hello\nagain\n"}, "readme")
    mails = git_text(work, "format-patch", "-3", "-o", str(tmp_path / "mails")).split()

    def one_by_one(*_args: object) -> None:
        raise AssertionError("the stack was imported patch by patch")

    monkeypatch.setattr(import_tree.Workspace, "add", one_by_one)
    assert imp(lab, "--series", "S", *mails).code == 0
    assert lab.sm("apply", "S").code == 0
    assert lab.worktree_id() == tree_of(work)


@pytest.mark.regression("a format-patch file name cut after a dot (cmd_status..patch) became a patch no series takes")
def test_a_mail_whose_file_name_git_cut_after_a_dot_gets_a_name_a_series_takes(lab: Lab, tmp_path: Path) -> None:
    """Found on click 8.1.5 -> 8.1.7: git format-patch cuts a long subject to 52 characters, here just after the
    dot of a Python file's name (`0001-remove-…-cmd_status..patch`); imported as `…cmd_status.`, its series line
    was invalid."""
    base = commit(lab.tree, {"examples/complex/complex/commands/cmd_status.py": "x = 1\n"}, "add it")
    work = clone(lab, tmp_path / "work")
    git(work, "rm", "-q", "examples/complex/complex/commands/cmd_status.py")
    git(work, "commit", "-q", "-m", "remove examples/complex/complex/commands/cmd_status.py")
    mail = Path(git_text(work, "format-patch", "-1", "-o", str(tmp_path / "mails")).split()[0])
    assert mail.name.endswith("cmd_status..patch")
    result = imp(lab, "--series", "S", "--base", base, str(mail))
    assert result.code == 0, result.err
    listed = (lab.store / "series" / "S").read_text().split()
    assert listed == ["0001-remove-examples-complex-complex-commands-cmd_status.patch"]
    assert lab.sm("lint").code == 0 and lab.sm("apply", "S").code == 0
