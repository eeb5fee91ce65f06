"""`check` and `status`: what is preserved, what is not, what is left alone — and the real index never moves."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Lab, git, git_text


def test_a_users_day_check_fails_save_passes_one_more_byte_fails(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 42\n")
    (lab.tree / "results.md").write_text("107.77 tok/s\n")
    assert lab.sm("check").code == 1
    assert lab.sm("check").out == "", "check is quiet unless asked"

    assert lab.sm("save", "decode-boundary", "-m", "decode replay boundary").code == 0
    assert lab.sm("check").code == 0

    (lab.tree / "src" / "model.py").write_text("def f():\n    return 42\n#")
    check = lab.sm("check", "-v")
    assert check.code == 1
    assert check.out.strip() == "vllm: src/model.py (modified)"
    status = lab.sm("status")
    assert status.code == 0
    assert "src/model.py" in status.out and "NOT PRESERVED" in status.out
    assert "results.md" in status.out and "saved in decode-boundary" in status.out


def test_status_json_has_stable_keys(lab: Lab) -> None:
    (lab.tree / "README").write_text("changed\n")
    (lab.tree / "new.bin").write_bytes(b"\0\1\2")
    lab.sm("save", "readme", "README", "-m", "readme")
    for args in (("--json", "status"), ("status", "--json")):
        result = lab.sm(*args)
        assert result.code == 0
        data = json.loads(result.out)
        assert data["schema"] == 1
        (tree,) = data["trees"]
        assert tree["name"] == "vllm" and tree["state"] == "ok"
        assert tree["head"] == git_text(lab.tree, "rev-parse", "HEAD")
        by_path = {c["path"]: c for c in tree["changes"]}
        assert by_path["README"]["preserved_by"] == ["readme"]
        assert by_path["README"]["added"] == 1 and by_path["README"]["deleted"] == 1
        assert by_path["new.bin"]["binary"] is True and by_path["new.bin"]["preserved_by"] == []
        assert tree["unpreserved"] == [{"path": "new.bin", "why": "added"}]
        assert tree["patches"] == [{"name": "readme", "present": 1, "total": 1, "applied": False}]


def test_read_only_commands_never_write_the_real_index(lab: Lab) -> None:
    (lab.tree / "README").write_text("staged\n")
    git(lab.tree, "add", "README")
    (lab.tree / "untracked.txt").write_text("u\n")
    os.utime(lab.tree / "src" / "model.py")  # stat-dirty: git status would like to refresh the index
    before = (lab.tree / ".git" / "index").read_bytes()
    for args in (("check",), ("status",), ("--json", "status"), ("trees",), ("save", "p", "-m", "x")):
        lab.sm(*args)
        assert (lab.tree / ".git" / "index").read_bytes() == before, args


def test_ignored_files_are_never_saved(lab: Lab) -> None:
    (lab.tree / ".gitignore").write_text("*.o\nbuild/\n")
    git(lab.tree, "add", ".gitignore")
    git(lab.tree, "commit", "-qm", "ignore")
    (lab.tree / "kernel.o").write_bytes(b"\x7fELF")
    (lab.tree / "build").mkdir()
    (lab.tree / "build" / "out.so").write_bytes(b"\x7fELF")
    assert lab.sm("check").code == 0
    (lab.tree / "notes.txt").write_text("n\n")
    lab.sm("save", "notes", "-m", "notes")
    data = (lab.store / "patches" / "notes.patch").read_bytes()
    assert b"kernel.o" not in data and b"out.so" not in data


def test_a_file_that_becomes_ignored_leaves_the_snapshot(lab: Lab) -> None:
    (lab.tree / "scratch.log").write_text("log\n")
    assert lab.sm("check").code == 1
    (lab.tree / ".git" / "info" / "exclude").write_text("*.log\n")
    assert lab.sm("check").code == 0


def test_large_untracked_and_special_files_are_unprotected(lab: Lab) -> None:
    config = lab.store / "stackmgr.local.toml"  # this machine's: a shared one never lowers it
    config.write_text("max_untracked_bytes = 1000\n" + config.read_text())
    (lab.tree / "weights.bin").write_bytes(b"x" * 1001)
    (lab.tree / "small.txt").write_text("s\n")
    os.mkfifo(lab.tree / "pipe")
    status = json.loads(lab.sm("--json", "status").out)["trees"][0]
    reasons = {u["path"]: u["reason"] for u in status["unprotected"]}
    assert reasons == {"weights.bin": "large", "pipe": "special"}
    assert [c["path"] for c in status["changes"]] == ["small.txt"]
    lab.sm("save", "small", "-m", "small")
    assert lab.sm("check").code == 0, "unprotected files do not make check fail"
    assert b"weights.bin" not in (lab.store / "patches" / "small.patch").read_bytes()


def test_a_large_file_that_is_staged_is_tracked_and_handled(lab: Lab) -> None:
    config = lab.store / "stackmgr.local.toml"  # this machine's: a shared one never lowers it
    config.write_text("max_untracked_bytes = 10\n" + config.read_text())
    (lab.tree / "big.txt").write_text("more than ten bytes\n")
    git(lab.tree, "add", "big.txt")
    status = json.loads(lab.sm("--json", "status").out)["trees"][0]
    assert status["unprotected"] == []
    assert [c["path"] for c in status["changes"]] == ["big.txt"]


def test_staged_and_unstaged_versions_of_one_file_are_not_flattened(lab: Lab) -> None:
    (lab.tree / "README").write_text("staged version\n")
    git(lab.tree, "add", "README")
    (lab.tree / "README").write_text("working version\n")
    lab.sm("save", "readme", "-m", "readme")
    check = lab.sm("check", "-v")
    assert check.code == 1
    assert "README (staged and unstaged versions differ)" in check.out
    git(lab.tree, "add", "README")
    assert lab.sm("check").code == 0


@pytest.mark.regression("status counted a file with staged and unstaged versions twice in 'N not preserved'")
def test_status_counts_a_file_with_two_findings_once(lab: Lab) -> None:
    (lab.tree / "README").write_text("staged version\n")
    git(lab.tree, "add", "README")
    (lab.tree / "README").write_text("working version\n")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    status = lab.sm("status")
    assert "2 changed, 2 not preserved" in status.out, status.out
    assert "README  staged and unstaged versions differ" in status.out


def test_intent_to_add_is_an_ordinary_new_file(lab: Lab) -> None:
    (lab.tree / "ita.txt").write_text("content\n")
    git(lab.tree, "add", "-N", "ita.txt")
    assert lab.sm("save", "ita", "-m", "ita").code == 0
    assert b"+content" in (lab.store / "patches" / "ita.patch").read_bytes()
    assert lab.sm("check").code == 0


def test_deleting_and_restoring_a_file_is_tracked_across_checks(lab: Lab) -> None:
    (lab.tree / "README").unlink()
    assert lab.sm("check").code == 1
    lab.sm("save", "rm-readme", "-m", "remove readme")
    assert lab.sm("check").code == 0
    (lab.tree / "README").write_text("hello\n")
    assert lab.sm("check").code == 0, "back to HEAD: nothing to preserve"
    (lab.tree / "README").write_text("different\n")
    assert lab.sm("check").code == 1


def test_editing_a_patch_by_hand_is_noticed(lab: Lab) -> None:
    (lab.tree / "README").write_text("saved\n")
    lab.sm("save", "readme", "-m", "readme")
    assert lab.sm("check").code == 0
    patch = lab.store / "patches" / "readme.patch"
    patch.write_bytes(patch.read_bytes().replace(b"+saved", b"+other"))
    index_line = next(ln for ln in patch.read_bytes().split(b"\n") if ln.startswith(b"index "))
    patch.write_bytes(patch.read_bytes().replace(index_line, index_line[:-50] + b"0" * 40 + b" 100644"))
    assert lab.sm("check").code == 1


def test_deleting_a_patch_makes_its_changes_unpreserved(lab: Lab) -> None:
    (lab.tree / "README").write_text("saved\n")
    lab.sm("save", "readme", "-m", "readme")
    assert lab.sm("check").code == 0
    (lab.store / "patches" / "readme.patch").unlink()
    assert lab.sm("check").code == 1


def test_mode_change_and_symlink_are_matched_exactly(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").chmod(0o755)
    os.symlink("README", lab.tree / "alias")
    lab.sm("save", "modes", "-m", "modes")
    assert lab.sm("check").code == 0
    os.unlink(lab.tree / "alias")
    os.symlink("src", lab.tree / "alias")
    assert lab.sm("check").code == 1


def test_check_json_and_trees_listing(lab: Lab) -> None:
    (lab.tree / "README").write_text("x\n")
    data = json.loads(lab.sm("check", "--json").out)
    assert data["preserved"] is False
    assert data["trees"][0]["unpreserved"] == [{"path": "README", "why": "modified"}]
    trees = json.loads(lab.sm("trees", "--json").out)["trees"]
    assert trees[0]["name"] == "vllm" and trees[0]["unpreserved"] == 1 and trees[0]["changes"] == 1


def test_missing_tree_is_reported_not_a_crash(lab: Lab, tmp_path: Path) -> None:
    local = lab.store / "stackmgr.local.toml"
    local.write_text(local.read_text() + f'\n[trees.gone]\npath = "{tmp_path}/nowhere"\n')
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + "\n[trees.gone]\n")
    trees = lab.sm("trees")
    assert trees.code == 0 and "missing" in trees.out
    status = lab.sm("status")
    assert status.code == 0 and "does not exist" in status.out
    assert lab.sm("check").code == 0
    named = lab.sm("check", "gone")
    assert named.code == 3 and "does not exist" in named.err


def test_two_trees_save_needs_t_when_both_are_dirty(lab: Lab, tmp_path: Path) -> None:
    from tests.conftest import make_repo

    kernels = make_repo(tmp_path / "vllm-xpu-kernels", {"k.cpp": "int k;\n"})
    assert lab.sm("tree", "add", "vllm-xpu-kernels", str(kernels)).code == 0
    (lab.tree / "README").write_text("a\n")
    (kernels / "k.cpp").write_text("int k = 1;\n")
    refused = lab.sm("save", "x", "-m", "x")
    assert refused.code == 2 and "vllm, vllm-xpu-kernels" in refused.err and "-t" in refused.err
    assert lab.sm("save", "kfix", "-t", "vllm-xpu-kernels", "-m", "kernel fix").code == 0
    assert b"Stackmgr-Tree: vllm-xpu-kernels" in (lab.store / "patches" / "kfix.patch").read_bytes()
    assert lab.sm("check", "vllm-xpu-kernels").code == 0
    assert lab.sm("check").code == 1
    inferred = lab.sm("save", "readme", "-m", "both dirty, only vllm unsaved")
    assert inferred.code == 0 and "tree vllm," in inferred.out


def test_the_cache_written_by_save_equals_one_rebuilt_from_the_patch_files(lab: Lab) -> None:
    from stackmgr.safety.preserved import PatchIndex
    from stackmgr.store.config import load_store

    (lab.tree / "README").chmod(0o755)  # mode only: no index line in the patch
    (lab.tree / "src" / "model.py").unlink()
    (lab.tree / "new.txt").write_text("n\n")
    os.symlink("new.txt", lab.tree / "alias")
    assert lab.sm("save", "mixed", "-m", "mixed").code == 0
    store = load_store(str(lab.store))
    from_save = PatchIndex.load(store).records["mixed.patch"]
    cache_dir = lab.store / ".stackmgr" / "cache"
    for f in cache_dir.iterdir():
        f.unlink()
    rebuilt = PatchIndex.load(store)
    rebuilt.refresh()
    assert rebuilt.records["mixed.patch"] == from_save
    assert lab.sm("check").code == 0


# --- check never passes a tree it could not read ----------------------------------------------------------------------


@pytest.mark.regression("check passed (exit 0) with the private index locked")
def test_check_does_not_pass_when_the_private_index_is_locked(lab: Lab) -> None:
    """commands.check: a tree in state 'error' has no blockers, so check exits 0."""
    assert lab.sm("check").code == 0  # creates .git/stackmgr/index
    (lab.tree / ".git" / "stackmgr" / "index.lock").write_bytes(b"")  # a git killed mid-write (kill -9, OOM)
    (lab.tree / "README").write_text("unsaved work\n")
    assert lab.sm("check").code != 0
    assert json.loads(lab.sm("check", "--json").out)["preserved"] is False
    assert lab.sm("save", "work", "-m", "work").code == 0, "the stale lock of the private index is cleared"
    assert lab.sm("check").code == 0


@pytest.mark.regression("check passed with a corrupt private index")
def test_check_does_not_pass_when_the_private_index_is_corrupt(lab: Lab) -> None:
    """commands.check: a corrupt private index makes the tree 'error' → exit 0."""
    assert lab.sm("check").code == 0
    (lab.tree / ".git" / "stackmgr" / "index").write_bytes(b"DIRC garbage")
    (lab.tree / "README").write_text("unsaved work\n")
    assert lab.sm("check").code != 0, "the private index is a cache: rebuild it, or at least fail"
    assert lab.sm("save", "work", "-m", "work").code == 0
    assert lab.sm("check").code == 0


@pytest.mark.regression("check passed for an unborn tree holding work")
def test_check_does_not_pass_for_an_unborn_tree_holding_work(lab: Lab, tmp_path: Path) -> None:
    """commands.check: an unborn tree with untracked work is 'error' → exit 0."""
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    git(unborn, "init", "-q")
    (unborn / "work.txt").write_text("weeks of work\n")
    git(unborn, "add", "work.txt")
    assert lab.sm("tree", "add", "unborn", str(unborn)).code == 0
    assert lab.sm("check", "unborn").code == 3  # named: refused (docs/FORMATS.md#exit-codes)
    assert lab.sm("check").code != 0  # unnamed (the shell guard's form): must not say "all preserved"


@pytest.mark.regression("check passed when a required clean filter failed")
def test_check_does_not_pass_when_a_required_clean_filter_fails(lab: Lab) -> None:
    """update-index fails in the clean filter → tree 'error' → check exits 0."""
    git(lab.tree, "config", "filter.lfsx.required", "true")
    git(lab.tree, "config", "filter.lfsx.clean", "false")
    (lab.tree / ".gitattributes").write_text("*.bin filter=lfsx\n")
    (lab.tree / "x.bin").write_text("data\n")
    assert lab.sm("check").code != 0


@pytest.mark.slow
@pytest.mark.regression("edge case: eight checks at once")
def test_eight_checks_at_once_agree(lab: Lab) -> None:
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


@pytest.mark.regression("status said the tree matches after patches were appended to the applied series")
def test_status_notices_patches_appended_to_the_applied_series(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "README").write_text("hello\nprobe\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    assert "tree matches" in lab.sm("status").out
    (tmp_path / "p2.diff").write_text(
        "diff --git a/src/model.py b/src/model.py\n--- a/src/model.py\n+++ b/src/model.py\n"
        "@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n"
    )
    assert lab.sm("import", "--series", "S", str(tmp_path / "p2.diff")).code == 0
    out = lab.sm("status").out
    assert "tree matches" not in out and "p2 appended" in out


@pytest.mark.regression("`check -v | head`: a reader that stopped early turned the answer into 0")
def test_check_whose_reader_stops_early_still_says_not_preserved(lab: Lab) -> None:
    """entry.main caught BrokenPipeError as success: `stackmgr check -v | head -1` under `set -o pipefail`, or
    any caller reading only the start, got 0 for a tree full of unsaved work."""
    for k in range(400):
        (lab.tree / f"unsaved-work-with-a-long-enough-name-{k:04d}.txt").write_text(f"{k}\n")
    argv = [sys.executable, "-m", "stackmgr", "--store", str(lab.store), "check", "-v"]
    for _ in range(3):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before a line is written
        err = proc.stderr.read()
        assert proc.wait() == 1 and b"Traceback" not in err


@pytest.mark.regression("`check >&-`: a traceback from the flush before os._exit, and exit 1 on a clean tree")
def test_check_with_its_output_closed_still_answers(lab: Lab) -> None:
    """entry.main flushed sys.stdout before ending the process; started with stdout closed it is None."""
    argv = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "stackmgr", "--store", str(lab.store), "check"])
    clean = subprocess.run(["sh", "-c", argv + " >&-"], capture_output=True)
    assert (clean.returncode, clean.stderr) == (0, b"")
    (lab.tree / "README").write_text("unsaved\n")
    dirty = subprocess.run(["sh", "-c", argv + " -v >&-"], capture_output=True)
    assert dirty.returncode == 1 and b"Traceback" not in dirty.stderr
