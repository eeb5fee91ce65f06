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

from tests.conftest import Lab, Result, git, git_text, make_repo, run_stackmgr
from tests.test_interop import _series

MODEL = "".join(f"x{n} = {n}\n" for n in range(30))
BLOB = bytes(range(256)) * 8
HEX40 = re.compile(rb"[0-9a-f]{40}")


# --- helpers ----------------------------------------------------------------------------------------------------------


def commit(repo: Path, files: Mapping[str, str | bytes | None], message: str = "change") -> str:
    """Write (or delete, for None) files, commit everything; the new commit id."""
    for name, content in files.items():
        path = repo / name
        if content is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git_text(repo, "rev-parse", "HEAD")


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
    assert (shop.store / "series" / "kernel-work").read_text().split() == ["one.patch", "two.patch"]
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
    _series(lab)
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
    _series(lab)
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
    "empty.patch": (_fixed(b""), "not a patch"),
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
