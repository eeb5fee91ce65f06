"""apply, reset and recover: the loop the lab lives by (save → reset only when safe → apply → the exact tree)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stackmgr.safety import tree_move
from tests.conftest import Lab, git, git_text, make_repo
from tests.conftest import tree_files as _files


def _dirty(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (lab.tree / "results.log").write_text("107.77 tok/s\n")
    (lab.tree / "README").unlink()
    (lab.tree / "blob.bin").write_bytes(b"\0\1\2\3")


def test_save_reset_apply_gives_the_exact_tree_back(lab: Lab) -> None:
    base = git_text(lab.tree, "rev-parse", "HEAD")
    _dirty(lab)
    before = lab.worktree_id()
    assert lab.sm("reset").code == 1
    assert lab.sm("save", "work", "--series", "day", "-m", "the day's work").code == 0
    reset = lab.sm("reset")
    assert reset.code == 0 and f"vllm: reset to {base[:12]}" in reset.out
    assert git(lab.tree, "status", "--porcelain", "--untracked-files=all") == b""
    applied = lab.sm("apply", "day")
    assert applied.code == 0, applied.err
    assert lab.worktree_id() == before
    assert git_text(lab.tree, "rev-parse", "HEAD") == base
    assert lab.sm("check").code == 0
    status = json.loads(lab.sm("--json", "status").out)["trees"][0]
    assert status["applied"]["series"] == "day" and status["applied"]["matches"] is True
    assert git_text(lab.tree, "write-tree") == git_text(lab.tree, "rev-parse", f"{base}^{{tree}}"), (
        "the index holds the base: the series shows as working-tree changes, as quilt leaves them"
    )


def test_apply_detaches_head_and_leaves_the_branch_alone(lab: Lab) -> None:
    _dirty(lab)
    lab.sm("save", "work", "--series", "day", "-m", "m")
    branch_tip = git_text(lab.tree, "rev-parse", "main")
    lab.sm("reset")
    assert lab.sm("apply", "day").code == 0
    assert git(lab.tree, "rev-parse", "--abbrev-ref", "HEAD").strip() == b"HEAD"
    assert git_text(lab.tree, "rev-parse", "main") == branch_tip


def test_reset_refuses_and_touches_nothing_while_work_is_unsaved(lab: Lab) -> None:
    _dirty(lab)
    before = _files(lab.tree)
    index = (lab.tree / ".git" / "index").read_bytes()
    result = lab.sm("reset")
    assert result.code == 1
    assert "reset refused, nothing changed" in result.err and "results.log (added)" in result.err
    assert result.err.count("\n") == 1
    assert _files(lab.tree) == before
    assert (lab.tree / ".git" / "index").read_bytes() == index


def test_reset_keeps_ignored_and_unprotected_files(lab: Lab) -> None:
    config = lab.store / "stackmgr.toml"
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


def test_a_file_changed_between_check_and_switch_is_refused_and_kept(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    _dirty(lab)
    lab.sm("save", "work", "-m", "m")

    def editor_autosave(_snap: object) -> None:
        (lab.tree / "src" / "model.py").write_text("def f():\n    return 3  # typed after the check\n")

    monkeypatch.setattr(tree_move, "before_switch", editor_autosave)
    result = lab.sm("reset")
    assert result.code == 3
    assert "refused, nothing changed" in result.err and "src/model.py" in result.err
    assert (lab.tree / "src" / "model.py").read_text() == "def f():\n    return 3  # typed after the check\n"
    assert (lab.tree / "results.log").read_text() == "107.77 tok/s\n"
    monkeypatch.setattr(tree_move, "before_switch", None)
    assert lab.sm("check").code == 1, "the late edit is unsaved, and check says so"


def test_an_untracked_file_appearing_in_the_way_of_apply_is_refused(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    (lab.tree / "new.txt").write_text("from the series\n")
    lab.sm("save", "add-new", "--series", "s", "-m", "m")
    lab.sm("reset")

    def build_output_lands(_snap: object) -> None:
        (lab.tree / "new.txt").write_text("written by a running build\n")

    monkeypatch.setattr(tree_move, "before_switch", build_output_lands)
    result = lab.sm("apply", "s")
    assert result.code == 3 and "files in the way: new.txt" in result.err
    assert (lab.tree / "new.txt").read_text() == "written by a running build\n"


def test_reset_force_then_recover_gives_the_exact_tree_back(lab: Lab) -> None:
    _dirty(lab)
    os.symlink("src/model.py", lab.tree / "alias")
    git(lab.tree, "add", "results.log")
    before = lab.worktree_id()
    index_tree = git_text(lab.tree, "write-tree")
    forced = lab.sm("reset", "--force")
    assert forced.code == 0
    rid = forced.err.split("recovery snapshot ")[1].split(";")[0]
    assert f"stackmgr recover {rid}" in forced.err
    assert git(lab.tree, "status", "--porcelain", "--untracked-files=all") == b""
    listing = json.loads(lab.sm("recover", "--json").out)["recoveries"]
    assert [r["id"] for r in listing] == [rid] and listing[0]["tree"] == "vllm" and listing[0]["files"] == 5
    assert git_text(lab.tree, "rev-parse", f"refs/stackmgr/recovery/{rid}")[:12] == rid
    restored = lab.sm("recover", rid)
    assert restored.code == 0, restored.err
    assert lab.worktree_id() == before
    assert git_text(lab.tree, "write-tree") == index_tree, "the staged state comes back too"
    assert git(lab.tree, "rev-parse", "--abbrev-ref", "HEAD").strip() == b"main"


def test_recover_refuses_into_a_tree_with_unsaved_work_and_bad_ids(lab: Lab) -> None:
    (lab.tree / "README").write_text("first\n")
    rid = lab.sm("reset", "--force").err.split("recovery snapshot ")[1].split(";")[0]
    (lab.tree / "README").write_text("second, unsaved\n")
    refused = lab.sm("recover", rid)
    assert refused.code == 1 and "README (modified)" in refused.err
    assert (lab.tree / "README").read_text() == "second, unsaved\n"
    assert lab.sm("recover", "zzzz").code == 2
    assert lab.sm("recover", "0000000000ab").code == 2


def test_a_conflicting_second_patch_changes_nothing_and_names_patch_and_hunk(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    lab.sm("save", "one", "--series", "s", "-m", "one")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    lab.sm("save", "two", "--series", "s", "-m", "two")
    lab.sm("reset")
    patch = lab.store / "patches" / "two.patch"
    patch.write_bytes(patch.read_bytes().replace(b"-    return 2", b"-    return 9"))
    before = _files(lab.tree)
    head = git_text(lab.tree, "rev-parse", "HEAD")
    result = lab.sm("apply", "s")
    assert result.code == 3
    assert "patch two (2 of 2 for tree vllm) does not apply: src/model.py, hunk @@ -1,2 +1,2 @@" in result.err
    assert "nothing was changed" in result.err and result.err.count("\n") == 1
    assert _files(lab.tree) == before and git_text(lab.tree, "rev-parse", "HEAD") == head


def test_apply_says_when_a_patch_is_already_applied(lab: Lab) -> None:
    (lab.tree / "README").write_text("changed\n")
    lab.sm("save", "p", "--series", "s", "-m", "p")
    lab.sm("reset")
    # a second series holding the same patch twice cannot apply: the second copy is already there
    (lab.store / "patches" / "p-again.patch").write_bytes((lab.store / "patches" / "p.patch").read_bytes())
    (lab.store / "series" / "twice").write_text("p.patch\np-again.patch\n")
    result = lab.sm("apply", "twice")
    assert result.code == 3 and "already applied" in result.err


def test_apply_refuses_while_the_tree_holds_unsaved_work(lab: Lab) -> None:
    (lab.tree / "README").write_text("saved\n")
    lab.sm("save", "p", "--series", "s", "-m", "p")
    lab.sm("reset")
    (lab.tree / "scratch.txt").write_text("unsaved\n")
    result = lab.sm("apply", "s")
    assert result.code == 1 and "scratch.txt (added)" in result.err
    assert (lab.tree / "README").read_text() == "hello\n"


def test_dry_run_and_guards(lab: Lab) -> None:
    (lab.tree / "README").write_text("common\n")
    lab.sm("save", "common", "-m", "common")
    lab.sm("reset")
    (lab.tree / "xpu.txt").write_text("xpu only\n")
    lab.sm("save", "xpu-only", "-m", "xpu")
    lab.sm("reset")
    (lab.store / "series" / "g").write_text("# guarded\ncommon.patch\nxpu-only.patch #+xpu\n")
    dry = json.loads(lab.sm("--json", "apply", "g", "--dry-run").out)
    assert dry["dry_run"] is True and dry["trees"][0]["patches"] == ["common"]
    assert (lab.tree / "README").read_text() == "hello\n", "a dry run changes nothing"
    assert lab.sm("apply", "g", "--guard", "xpu").code == 0
    assert (lab.tree / "xpu.txt").read_text() == "xpu only\n"


def test_a_series_spanning_two_trees_rolls_the_first_back_when_the_second_refuses(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernels = make_repo(tmp_path / "kernels", {"k.cpp": "int k;\n"})
    lab.sm("tree", "add", "kernels", str(kernels))
    (lab.tree / "README").write_text("vllm side\n")
    lab.sm("save", "v", "-t", "vllm", "-m", "v")
    (kernels / "k.cpp").write_text("int k = 1;\n")
    lab.sm("save", "k", "-t", "kernels", "-m", "k")
    assert lab.sm("reset").code == 0
    (lab.store / "series" / "both").write_text("v.patch\nk.patch\n")
    vllm_before, vllm_index = _files(lab.tree), (lab.tree / ".git" / "index").read_bytes()
    vllm_head = git_text(lab.tree, "symbolic-ref", "HEAD")

    def kernels_build_writes(snap: object) -> None:
        if getattr(snap, "tree", "") == "kernels":
            (kernels / "k.cpp").write_text("int k = 2; // build\n")

    monkeypatch.setattr(tree_move, "before_switch", kernels_build_writes)
    result = lab.sm("apply", "both")
    assert result.code == 3 and "k.cpp" in result.err
    assert _files(lab.tree) == vllm_before, "the first tree is put back as it was"
    assert (lab.tree / ".git" / "index").read_bytes() == vllm_index
    assert git_text(lab.tree, "symbolic-ref", "HEAD") == vllm_head
    monkeypatch.setattr(tree_move, "before_switch", None)
    (kernels / "k.cpp").write_text("int k;\n")
    assert lab.sm("apply", "both").code == 0
    assert (lab.tree / "README").read_text() == "vllm side\n" and (kernels / "k.cpp").read_text() == "int k = 1;\n"


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


def test_the_demo_ends_with_two_equal_tree_ids(capsys: pytest.CaptureFixture[str]) -> None:
    from stackmgr.commands.demo import run_demo

    run_demo()
    lines = capsys.readouterr().out.strip().splitlines()
    before, after, verdict = lines[-3:]
    assert before.startswith("working tree id before the reset:") and after.startswith("working tree id after")
    ids = [line.split()[-1] for line in (before, after)]
    assert len(ids[0]) == 40 and ids[0] == ids[1] and verdict == "identical"


def test_three_way_merges_independent_patches_that_strict_apply_refuses(lab: Lab) -> None:
    lines = "".join(f"line {i}\n" for i in range(6))
    (lab.tree / "f.txt").write_text(lines)
    git(lab.tree, "add", "f.txt")
    git(lab.tree, "commit", "-qm", "f")
    (lab.tree / "f.txt").write_text(lines.replace("line 1\n", "line one\n"))
    lab.sm("save", "p1", "-m", "p1")
    lab.sm("reset")
    (lab.tree / "f.txt").write_text(lines.replace("line 3\n", "line three\n"))
    lab.sm("save", "p2", "-m", "p2")  # made against the same base, not on top of p1
    lab.sm("reset")
    (lab.store / "series" / "both").write_text("p1.patch\np2.patch\n")
    strict = lab.sm("apply", "both")
    assert strict.code == 3 and "patch p2 (2 of 2" in strict.err and "would apply with --3way" in strict.err
    merged = lab.sm("apply", "both", "--3way")
    assert merged.code == 0, merged.err
    assert (lab.tree / "f.txt").read_text() == lines.replace("line 1\n", "line one\n").replace(
        "line 3\n", "line three\n"
    )


def test_an_index_lock_held_by_another_git_refuses_before_any_file_changes(lab: Lab) -> None:
    _dirty(lab)
    lab.sm("save", "work", "-m", "m")
    before = _files(lab.tree)
    (lab.tree / ".git" / "index.lock").write_bytes(b"")
    result = lab.sm("reset")
    assert result.code == 3 and "index.lock exists" in result.err
    assert _files(lab.tree) == before
    (lab.tree / ".git" / "index.lock").unlink()
    assert lab.sm("reset").code == 0
