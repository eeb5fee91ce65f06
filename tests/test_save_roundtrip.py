"""A real-size tree with every kind of change: the saved patch is accepted by git apply, patch -p1 and git am,
and rebuilds exactly the snapshot's tree id."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Lab, git, git_text, make_repo, run_stackmgr

TRICKY_BASE: dict[str, bytes | str] = {
    "edit.py": "".join(f"line {i}\n" for i in range(50)),
    "gone.txt": "to be deleted\n",
    "run.sh": "#!/bin/sh\necho hi\n",
    "crlf.txt": b"one\r\ntwo\r\nthree\r\n",
    "nonl.txt": b"no final newline",
    "blob.bin": bytes(range(256)) * 4,
    "dir with space/file name.txt": "spaced\n",
    "link": "",  # replaced by a symlink below
}


def _big_tree(root: Path, n: int = 5000) -> Path:
    files: dict[str, bytes | str] = dict(TRICKY_BASE)
    for i in range(n):
        files[f"pkg{i % 50}/mod{i}.py"] = f"def f{i}(x):\n    return x + {i}\n"
    repo = make_repo(root, files)
    (repo / "link").unlink()
    os.symlink("edit.py", repo / "link")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "symlink")
    return repo


def _make_every_kind_of_change(tree: Path) -> None:
    (tree / "edit.py").write_text("".join(f"line {i}\n" for i in range(50)).replace("line 7\n", "line seven\n"))
    (tree / "gone.txt").unlink()
    (tree / "run.sh").chmod(0o755)
    (tree / "crlf.txt").write_bytes(b"one\r\nTWO\r\nthree\r\n")
    (tree / "nonl.txt").write_bytes(b"still no final newline")
    (tree / "blob.bin").write_bytes(bytes(reversed(range(256))) * 4 + b"\0tail")
    (tree / "dir with space" / "file name.txt").write_text("spaced and edited\n")
    (tree / "link").unlink()
    os.symlink("run.sh", tree / "link")
    (tree / "new dir").mkdir()
    (tree / "new dir" / "caf\u00e9 \u65e5\u672c.txt").write_text("unicode name\n")
    (tree / os.fsdecode(b"bad\xe9name.txt")).write_bytes(b"latin-1 name\n")
    (tree / "pkg3" / "mod3.py").write_text("def f3(x):\n    return x * 3\n")
    (tree / "empty.txt").write_bytes(b"")


@pytest.fixture
def big_lab(tmp_path: Path) -> Lab:
    tree = _big_tree(tmp_path / "vllm")
    store = tmp_path / "store"
    assert run_stackmgr("init", str(store)).code == 0
    assert run_stackmgr("--store", str(store), "tree", "add", "vllm", str(tree)).code == 0
    return Lab(store, tree)


def _clean_checkout(src: Path, dest: Path, base: str) -> Path:
    git(src.parent, "clone", "-q", "--no-checkout", str(src), str(dest))
    git(dest, "checkout", "-q", "--detach", base)
    return dest


def test_save_round_trips_through_git_apply_patch_and_git_am(big_lab: Lab, tmp_path: Path) -> None:
    tree = big_lab.tree
    base = git_text(tree, "rev-parse", "HEAD")
    _make_every_kind_of_change(tree)
    expected = big_lab.worktree_id()
    real_index = (tree / ".git" / "index").read_bytes()

    assert big_lab.sm("check").code == 1
    saved = big_lab.sm("save", "vllm-every-kind", "-m", "every kind of change\n\nbinary, modes, symlinks, names")
    assert saved.code == 0, saved.err
    assert big_lab.sm("check").code == 0
    assert (tree / ".git" / "index").read_bytes() == real_index, "save must not touch the real index"

    patch = big_lab.store / "patches" / "vllm-every-kind.patch"
    data = patch.read_bytes()
    assert data.startswith(b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n")
    assert b"\nStackmgr-Tree: vllm\nStackmgr-Base: " + base.encode() + b"\n---\n" in data
    assert b"GIT binary patch" in data and b"\r\n" in data

    applied = _clean_checkout(tree, tmp_path / "apply", base)
    git(applied, "apply", "--check", str(patch))
    git(applied, "apply", "--index", str(patch))
    assert git_text(applied, "write-tree") == expected

    am = _clean_checkout(tree, tmp_path / "am", base)
    git(am, "am", "-q", "--keep-cr", str(patch))
    assert git_text(am, "rev-parse", "HEAD^{tree}") == expected
    assert git_text(am, "log", "-1", "--format=%s") == "every kind of change"

    if shutil.which("patch") is None:
        pytest.skip("GNU patch is not installed (CI installs it)")
    plain = _clean_checkout(tree, tmp_path / "plain", base)
    dry = subprocess.run(["patch", "-p1", "--dry-run", "-i", str(patch)], cwd=plain, capture_output=True)
    # GNU patch cannot apply git binary patches; every text file must still check out cleanly.
    assert b"FAILED" not in dry.stdout, dry.stdout.decode(errors="replace")


def test_resave_of_an_unchanged_state_is_byte_identical(lab: Lab) -> None:
    (lab.tree / "README").write_text("hello world\n")
    assert lab.sm("save", "readme", "-m", "say hello").code == 0
    first = (lab.store / "patches" / "readme.patch").read_bytes()
    os.environ["GIT_AUTHOR_DATE"] = "1790000000 +0200"  # a later save must not stamp a new date
    again = lab.sm("save", "readme", "--update", "-m", "say hello")
    assert again.code == 0 and "unchanged" in again.out
    assert (lab.store / "patches" / "readme.patch").read_bytes() == first
    same = lab.sm("save", "readme", "-m", "say hello")
    assert same.code == 0 and "unchanged" in same.out


def test_update_replaces_and_keeps_the_previous_version(lab: Lab) -> None:
    (lab.tree / "README").write_text("v1\n")
    lab.sm("save", "readme", "-m", "readme")
    v1 = (lab.store / "patches" / "readme.patch").read_bytes()
    (lab.tree / "README").write_text("v2\n")
    refused = lab.sm("save", "readme", "-m", "readme")
    assert refused.code == 3 and "--update" in refused.err
    assert (lab.store / "patches" / "readme.patch").read_bytes() == v1
    assert lab.sm("save", "readme", "--update", "-m", "readme").code == 0
    assert b"+v2" in (lab.store / "patches" / "readme.patch").read_bytes()
    kept = list((lab.store / "patches" / ".versions" / "readme").iterdir())
    assert [p.read_bytes() for p in kept] == [v1]


def test_save_of_some_paths_leaves_the_others_unpreserved(lab: Lab) -> None:
    (lab.tree / "README").write_text("edited\n")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (lab.tree / "notes.txt").write_text("new\n")
    assert lab.sm("save", "only-model", "src/model.py", "-m", "model only").code == 0
    data = (lab.store / "patches" / "only-model.patch").read_bytes()
    assert b"src/model.py" in data and b"README" not in data and b"notes.txt" not in data
    check = lab.sm("check", "-v")
    assert check.code == 1
    assert "README" in check.out and "notes.txt" in check.out and "model.py" not in check.out


def test_paths_are_relative_to_the_current_directory_inside_the_tree(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    (lab.tree / "README").write_text("edited\n")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    monkeypatch.chdir(lab.tree / "src")
    assert lab.sm("save", "model", "model.py", "-m", "model").code == 0
    assert b"b/src/model.py" in (lab.store / "patches" / "model.patch").read_bytes()


def test_save_with_series_stacks_on_the_applied_series_and_refuses_otherwise(lab: Lab) -> None:
    base = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "README").write_text("one\n")
    assert lab.sm("save", "one", "--series", "replay", "-m", "one").code == 0
    assert (lab.store / "series" / "replay").read_bytes() == b"one.patch\n"
    (lab.tree / "README").write_text("one\ntwo\n")
    (lab.tree / "new.txt").write_text("n\n")
    stacked = lab.sm("save", "two", "--series", "replay", "-m", "two")
    assert stacked.code == 0, stacked.err
    two = (lab.store / "patches" / "two.patch").read_bytes()
    assert b"Stackmgr-Base: " + base.encode() in two
    assert b" one\n+two\n" in two and b"-hello" not in two, "only what is new on top of the series"
    assert (lab.store / "series" / "replay").read_bytes() == b"one.patch\ntwo.patch\n"
    assert lab.sm("check").code == 0
    expected = lab.worktree_id()
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "replay").code == 0
    assert lab.worktree_id() == expected
    assert lab.sm("reset").code == 0  # the series is no longer applied
    (lab.tree / "README").write_text("three\n")
    refused = lab.sm("save", "three", "--series", "replay", "-m", "three")
    assert refused.code == 2 and "apply replay" in refused.err
    assert not (lab.store / "patches" / "three.patch").exists()
    assert (lab.store / "series" / "replay").read_bytes() == b"one.patch\ntwo.patch\n"


def test_round_trip_failure_leaves_nothing(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    from stackmgr.git import tempindex

    (lab.tree / "README").write_text("edited\n")
    monkeypatch.setattr(tempindex, "apply_to_index", lambda *a: (False, "error: simulated corruption"))
    result = lab.sm("save", "broken", "-m", "x")
    assert result.code == 3 and "does not apply" in result.err
    assert sorted(p.name for p in (lab.store / "patches").iterdir()) == []


def test_base_keeps_local_commits(lab: Lab) -> None:
    base = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "README").write_text("committed locally\n")
    git(lab.tree, "commit", "-qam", "local")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    assert lab.sm("save", "with-commits", "--base", base, "-m", "local work").code == 0
    data = (lab.store / "patches" / "with-commits.patch").read_bytes()
    assert b"Stackmgr-Base: " + base.encode() in data
    assert b"+committed locally" in data and b"+    return 3" in data


def test_git_config_of_the_user_does_not_change_the_patch(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "README").write_text("hello\tworld \n")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 5\n")
    assert lab.sm("save", "plain", "-m", "x").code == 0
    clean = (lab.store / "patches" / "plain.patch").read_bytes()
    (lab.store / "patches" / "plain.patch").unlink()
    shutil.rmtree(lab.store / ".stackmgr" / "cache", ignore_errors=True)
    hostile = Path(os.environ["GIT_CONFIG_GLOBAL"])
    hostile.write_text(
        "[diff]\n\tnoprefix = true\n\tmnemonicPrefix = true\n\texternal = /bin/false\n\tcontext = 9\n"
        "[color]\n\tui = always\n[apply]\n\twhitespace = fix\n[core]\n\tquotePath = false\n"
    )
    assert lab.sm("save", "plain", "-m", "x").code == 0
    assert (lab.store / "patches" / "plain.patch").read_bytes() == clean


def test_save_leaves_no_frozen_index_behind(lab: Lab) -> None:
    (lab.tree / "README").write_text("x\n")
    assert lab.sm("save", "p", "-m", "m").code == 0
    assert lab.sm("save", "p", "-m", "m", "-t", "nope").code == 2
    assert lab.sm("save", "q", "-m", "m", "no/such/path").code == 2
    leftovers = [p.name for p in (lab.tree / ".git" / "stackmgr").iterdir() if "frozen" in p.name]
    assert leftovers == []
