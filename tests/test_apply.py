"""`apply`: a series rebuilds, on its base, exactly the tree it was saved from, or changes nothing and says
why (docs/FORMATS.md#exit-codes). The switch itself, and what may stand in its way, is tests/test_move.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import (
    Lab,
    applied_state,
    git,
    git_text,
    head_name,
    make_repo,
    porcelain,
    recovery_id,
    run_stackmgr,
    save_day,
    unsaved_work,
)
from tests.conftest import tree_files as _files


def _worktree_id(tree: Path) -> str:
    """Like Lab.worktree_id, for a linked worktree too (its .git is a file)."""
    index = git_text(tree, "rev-parse", "--path-format=absolute", "--git-path", "review-snapshot-index")
    env = dict(os.environ, GIT_INDEX_FILE=index)
    try:
        for args in (["read-tree", "HEAD"], ["add", "-A"]):
            subprocess.run(["git", *args], cwd=tree, env=env, check=True)
        return (
            subprocess.run(["git", "write-tree"], cwd=tree, env=env, check=True, capture_output=True)
            .stdout.decode()
            .strip()
        )
    finally:
        Path(index).unlink(missing_ok=True)


# --- the loop: save, reset, apply -------------------------------------------------------------------------------------


def test_save_reset_apply_gives_the_exact_tree_back(lab: Lab) -> None:
    base = git_text(lab.tree, "rev-parse", "HEAD")
    unsaved_work(lab)
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
    unsaved_work(lab)
    lab.sm("save", "work", "--series", "day", "-m", "m")
    branch_tip = git_text(lab.tree, "rev-parse", "main")
    lab.sm("reset")
    assert lab.sm("apply", "day").code == 0
    assert git(lab.tree, "rev-parse", "--abbrev-ref", "HEAD").strip() == b"HEAD"
    assert git_text(lab.tree, "rev-parse", "main") == branch_tip


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


def test_apply_dry_run_and_guards(lab: Lab) -> None:
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


@pytest.mark.slow  # seconds: run by `pytest -m slow` (CI runs it)
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


# --- what stands where the series puts files --------------------------------------------------------------------------


@pytest.mark.regression("apply overwrote an ignored file at a path the series creates")
def test_apply_refuses_to_overwrite_an_ignored_file_at_a_path_the_series_creates(lab: Lab) -> None:
    """tempindex.TempIndex.switch: git >= 2.35 `read-tree -m -u` treats ignored files as expendable and overwrites one
    at a path the target adds; nothing checks for it."""
    (lab.tree / "tuned.json").write_text('{"from": "the series"}\n')
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    # on this machine *.json is ignored (info/exclude or a global excludesFile) and a local, ignored copy exists
    (lab.tree / ".git" / "info" / "exclude").write_text("*.json\n")
    (lab.tree / "tuned.json").write_text('{"mine": "hand-tuned, never committed"}\n')
    result = lab.sm("apply", "s")
    assert (lab.tree / "tuned.json").read_text() == '{"mine": "hand-tuned, never committed"}\n'
    assert result.code == 3 and "tuned.json" in result.err


@pytest.mark.regression("apply deleted an ignored directory where the series puts a file")
def test_apply_keeps_an_ignored_directory_where_the_series_puts_a_file(lab: Lab) -> None:
    """tempindex.TempIndex.switch: read-tree -m -u deletes an ignored directory (benchmark results) to put a file of the
    target tree there."""
    (lab.tree / ".git" / "info" / "exclude").write_text("results/\n")
    (lab.tree / "results").write_text("a file named results\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "results").mkdir()
    (lab.tree / "results" / "probe.log").write_text("107.77 tok/s, JSON gate failed\n")
    lab.sm("apply", "s")
    assert (lab.tree / "results" / "probe.log").read_text() == "107.77 tok/s, JSON gate failed\n"


@pytest.mark.regression("edge case: an unprotected file in the way of apply")
def test_an_unprotected_file_at_a_path_the_series_creates_is_refused_and_kept(lab: Lab) -> None:
    config = lab.store / "stackmgr.local.toml"  # this machine's: a shared one never lowers it
    config.write_text("max_untracked_bytes = 100\n" + config.read_text())
    (lab.tree / "w.bin").write_bytes(b"small")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "w.bin").write_bytes(b"W" * 500)
    result = lab.sm("apply", "s")
    assert result.code == 3 and "files in the way (1 path)" in result.err and "\n  w.bin\n" in result.err
    assert (lab.tree / "w.bin").read_bytes() == b"W" * 500


@pytest.mark.regression("edge case: an unprotected file under a directory the series makes a symlink")
def test_an_unprotected_file_in_a_directory_the_series_turns_into_a_symlink_is_refused(lab: Lab) -> None:
    config = lab.store / "stackmgr.local.toml"  # this machine's: a shared one never lowers it
    config.write_text("max_untracked_bytes = 100\n" + config.read_text())
    shutil.rmtree(lab.tree / "src")
    os.symlink("README", lab.tree / "src")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "src" / "weights.bin").write_bytes(b"W" * 500)
    result = lab.sm("apply", "s")
    assert result.code == 3 and "src" in result.err
    assert (lab.tree / "src" / "weights.bin").read_bytes() == b"W" * 500


# --- type changes, two series, worktrees, odd paths -------------------------------------------------------------------


@pytest.mark.regression("edge case: the real index after apply holds the base, stat data kept")
def test_the_real_index_after_apply_holds_the_base_with_stat_data_kept(lab: Lab) -> None:
    for i in range(200):
        (lab.tree / "src" / f"m{i}.py").write_text(f"x = {i}\n")
    git(lab.tree, "add", "-A")
    git(lab.tree, "commit", "-qm", "many files")
    base = git_text(lab.tree, "rev-parse", "HEAD")
    wanted = save_day(lab)
    assert lab.sm("apply", "day").code == 0
    assert lab.worktree_id() == wanted
    assert porcelain(lab.tree) == b" D README\n M src/model.py\n?? results.log\n"
    assert git_text(lab.tree, "write-tree") == git_text(lab.tree, "rev-parse", f"{base}^{{tree}}")
    # no refresh: only entries whose stat data does not match are listed, so the 200 others kept theirs
    assert git(lab.tree, "diff-files", "--name-only") == b"README\nsrc/model.py\n"


@pytest.mark.regression("edge case: symlink and directory type changes through save, reset and apply")
def test_symlink_and_directory_type_changes_round_trip(lab: Lab) -> None:
    shutil.rmtree(lab.tree / "src")
    os.symlink("elsewhere", lab.tree / "src")
    (lab.tree / "elsewhere").mkdir()
    (lab.tree / "elsewhere" / "x.py").write_text("x\n")
    (lab.tree / "README").unlink()
    (lab.tree / "README").mkdir()
    (lab.tree / "README" / "index.md").write_text("docs\n")
    wanted, files = lab.worktree_id(), _files(lab.tree)
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    assert set(_files(lab.tree)) == {"README", "src/model.py"} and porcelain(lab.tree) == b""
    assert lab.sm("apply", "s").code == 0
    assert lab.worktree_id() == wanted and _files(lab.tree) == files
    assert lab.sm("check").code == 0
    assert lab.sm("reset").code == 0 and set(_files(lab.tree)) == {"README", "src/model.py"}


@pytest.mark.regression("apply's result check refused a type change that a later patch reverts")
def test_a_type_change_reverted_by_a_later_patch_applies(lab: Lab) -> None:
    """p1 turns README into a symlink, p2 (saved on top, same series) turns it back into the original file. Both
    were saved and round-trip verified; `apply S` refuses: "patch p2 does not build README as it records
    (100644 … expected, no file built)", exit 3. Cause: patchfile.post_images keeps only the creation section of
    a type change, so claims.claims records README as absent before the series (first = None) instead of the
    base's regular file; when the series ends where it started, check_result compares against that."""
    (lab.tree / "README").unlink()
    (lab.tree / "README").symlink_to("src/model.py")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    (lab.tree / "README").unlink()
    (lab.tree / "README").write_text("hello\n")
    assert lab.sm("save", "p2", "--series", "S", "-m", "p2").code == 0
    assert lab.sm("reset").code == 0
    result = lab.sm("apply", "S")
    assert result.code == 0, result.err


@pytest.mark.regression("edge case: apply over another applied series, again, then reset twice")
def test_apply_b_while_a_is_applied_then_again_then_reset_twice(lab: Lab) -> None:
    base = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "README").write_text("A\n")
    assert lab.sm("save", "a", "--series", "A", "-m", "a").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "new.txt").write_text("B\n")
    assert lab.sm("save", "b", "--series", "B", "-m", "b").code == 0
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "A").code == 0
    assert lab.sm("apply", "B").code == 0
    assert (lab.tree / "README").read_text() == "hello\n" and (lab.tree / "new.txt").read_text() == "B\n"
    again = lab.sm("apply", "B")
    assert again.code == 0 and "working tree already there" in again.out
    applied = applied_state(lab)
    assert applied is not None and applied["series"] == "B" and applied["matches"] is True
    assert lab.sm("reset").out == f"vllm: reset to {base[:12]}\n"
    assert lab.sm("reset").out == f"vllm: already at {base[:12]}\n"
    current = applied_state(lab)  # reset to the series' base: B stays current, none of it applied (push goes on)
    assert porcelain(lab.tree) == b"" and current is not None and (current["series"], current["patches"]) == ("B", [])


@pytest.mark.regression("edge case: a linked worktree as the only tree")
def test_a_linked_worktree_alone_applies_and_resets(lab: Lab, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(lab.tree, "worktree", "add", "-q", "-b", "side", str(wt))
    store = tmp_path / "store-wt"
    assert run_stackmgr("init", str(store)).code == 0
    wlab = Lab(store, wt)
    assert wlab.sm("tree", "add", "vllm", str(wt)).code == 0
    (wt / "README").write_text("in the worktree\n")
    (wt / "n.txt").write_text("new\n")
    wanted = _worktree_id(wt)
    assert wlab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert wlab.sm("reset").code == 0 and porcelain(wt) == b""
    assert wlab.sm("apply", "s").code == 0 and _worktree_id(wt) == wanted
    assert head_name(wt) == "HEAD" and head_name(lab.tree) == "main", "only the worktree's HEAD moves"
    (wt / "README").write_text("unsaved\n")
    rid = recovery_id(wlab.sm("reset", "--force").err)
    assert wlab.sm("recover", rid).code == 0 and (wt / "README").read_text() == "unsaved\n"
    assert porcelain(lab.tree) == b""


@pytest.mark.regression("edge case: spaces in store, tree and file paths")
def test_a_store_and_tree_with_spaces_in_their_paths_apply_reset_and_recover(tmp_path: Path) -> None:
    tree = make_repo(tmp_path / "my trees" / "vllm tree", {"a b.txt": "x\n", "d ir/f": "y\n"})
    store = tmp_path / "my store"
    assert run_stackmgr("init", str(store)).code == 0
    lab = Lab(store, tree)
    assert lab.sm("tree", "add", "vllm", str(tree)).code == 0
    (tree / "a b.txt").write_text("changed\n")
    (tree / "d ir" / "new file").write_text("n\n")
    wanted = lab.worktree_id()
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0 and porcelain(tree) == b""
    assert lab.sm("apply", "s").code == 0 and lab.worktree_id() == wanted
    (tree / "a b.txt").write_text("unsaved\n")
    forced = lab.sm("reset", "--force")
    assert forced.code == 0
    assert lab.sm("recover", recovery_id(forced.err)).code == 0 and (tree / "a b.txt").read_text() == "unsaved\n"


def test_a_series_result_is_composed_from_verified_post_images_and_equals_git_applying_it(lab: Lab) -> None:
    """`apply` of saved patches looks their results up in the patch index (each was verified once, from the
    pre-images its full index lines name) instead of applying them again; the tree is the one git's own apply of
    the series builds. A patch whose pre-image is not what the patches below it made (a hand-made one on another
    base here) is applied by git as always, and a mode-only change (no content recorded) too."""
    from stackmgr.commands import apply_compose
    from stackmgr.commands.apply import TreePlan, plan_series
    from stackmgr.git.repo import open_repo
    from stackmgr.store.config import open_store

    (lab.tree / "README").write_text("hello\nfirst\n")
    (lab.tree / "new.txt").write_text("a new file\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    (lab.tree / "README").write_text("hello\nfirst\nsecond\n")
    (lab.tree / "src" / "model.py").unlink()
    os.symlink("README", lab.tree / "link")
    assert lab.sm("save", "p2", "--series", "S", "-m", "p2").code == 0
    built = lab.worktree_id()
    assert lab.sm("reset").code == 0
    store = open_store(str(lab.store))
    (plan,) = plan_series(store, "S", None, ())
    repo = open_repo(str(lab.tree))
    from stackmgr.safety import claims

    def compose(plan: TreePlan) -> str | None:
        each: list[list[object]] = []
        claims.claims(plan.patches, repo, str(lab.store), each)  # type: ignore[arg-type]
        composing = apply_compose.Composition(plan, repo)
        try:
            return composing.result(store, each)  # type: ignore[arg-type]
        finally:
            composing.close()

    composed = compose(plan)
    assert composed is not None
    git_built = git(lab.tree, "rev-parse", f"{plan.base}^{{tree}}").decode().strip()
    scratch_index = lab.tree / ".git" / "compose-test-index"
    env = {"GIT_INDEX_FILE": str(scratch_index)}
    subprocess.run(["git", "read-tree", git_built], cwd=lab.tree, env={**os.environ, **env}, check=True)
    subprocess.run(["git", "apply", "--cached", *(p.path for p in plan.patches)], cwd=lab.tree,
                   env={**os.environ, **env}, check=True)  # fmt: skip
    by_git = subprocess.run(["git", "write-tree"], cwd=lab.tree, env={**os.environ, **env}, check=True,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    assert composed == by_git
    assert lab.sm("apply", "S").code == 0 and lab.worktree_id() == built

    plan.patches.reverse()  # p2 first: its README pre-image is not the base's
    assert compose(plan) is None
    (lab.tree / "README").chmod(0o755)
    assert lab.sm("save", "mode", "--series", "S", "-m", "mode only").code == 0
    assert b"\nold mode 100644\nnew mode 100755\n" in (lab.store / "patches" / "mode.patch").read_bytes()
    (with_mode,) = plan_series(store, "S", None, ())
    assert [p.name for p in with_mode.patches] == ["p1", "p2", "mode"]
    assert compose(with_mode) is None  # no content recorded: git applies it
    assert lab.sm("reset").code == 0 and lab.sm("apply", "S").code == 0
    assert os.stat(lab.tree / "README").st_mode & 0o100


@pytest.mark.regression("apply composed a series without a hand-added ---/+++ section that git apply would apply, "
                        "and reported success on a tree git would not build")  # fmt: skip
def test_a_hand_added_traditional_section_is_not_composed_away(lab: Lab) -> None:
    (lab.tree / "README").write_text("hello\nfirst\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    assert lab.sm("reset").code == 0
    patch = lab.store / "patches" / "p1.patch"
    patch.write_bytes(patch.read_bytes() + b"--- /dev/null\n+++ b/EXTRA.txt\n@@ -0,0 +1 @@\n+smuggled\n")
    result = lab.sm("apply", "S")
    assert result.code == 3 and "EXTRA.txt" in result.err, result
    assert not (lab.tree / "EXTRA.txt").exists() and (lab.tree / "README").read_text() == "hello\n"


@pytest.mark.regression("a series deleting a file failed in a SHA-256 repository (a 40-zero null id to remove it)")
def test_a_series_that_deletes_a_file_applies_in_a_sha256_repository(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    tree.mkdir()
    git(tree, "init", "-q", "--object-format=sha256")
    (tree / "README").write_text("hello\n")
    (tree / "gone.py").write_text("x = 1\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "base")
    store = tmp_path / "store"
    assert run_stackmgr("init", str(store)).code == 0
    lab = Lab(store, tree)
    assert lab.sm("tree", "add", "t", str(tree)).code == 0
    (tree / "gone.py").unlink()
    (tree / "README").write_text("hello\nagain\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    dirty = lab.worktree_id()
    assert lab.sm("reset").code == 0 and (tree / "gone.py").exists()
    applied = lab.sm("apply", "S")
    assert applied.code == 0, applied.err
    assert not (tree / "gone.py").exists() and lab.worktree_id() == dirty


@pytest.mark.regression("apply composed a series whose order git refuses (a file under a path still a file), so its "
                        "answer depended on the patch index being warm")  # fmt: skip
def test_an_order_git_refuses_is_refused_with_a_warm_patch_index_too(lab: Lab) -> None:
    (lab.tree / "f").write_text("a file\n")
    git(lab.tree, "add", "f")
    git(lab.tree, "commit", "-q", "-m", "f")
    (lab.tree / "f").unlink()
    (lab.tree / "f").mkdir()
    (lab.tree / "f" / "inner").write_text("in\n")
    assert lab.sm("save", "q1", "--series", "Q", "-m", "f becomes a directory").code == 0
    (lab.tree / "f" / "inner2").write_text("in2\n")
    assert lab.sm("save", "q2", "--series", "Q", "-m", "a file in it").code == 0
    assert lab.sm("reset").code == 0
    (lab.store / "series" / "R").write_text("q2.patch\nq1.patch\n")
    before = lab.worktree_id()
    for cache in ("cold", "warm"):
        if cache == "cold":
            shutil.rmtree(lab.store / ".stackmgr" / "cache")
        result = lab.sm("apply", "R")
        assert result.code == 3 and "nothing was changed" in result.err, (cache, result)
        assert lab.worktree_id() == before and (lab.tree / "f").read_text() == "a file\n"
    assert lab.sm("apply", "Q").code == 0 and (lab.tree / "f" / "inner2").read_text() == "in2\n"


def test_ctrl_c_while_the_result_is_built_waits_for_the_build_then_stops() -> None:
    """A Ctrl-C on the main thread while apply's build thread runs git: the build is waited for (its git children
    reaped, its scratch index removed by itself), then the interrupt goes on."""
    from stackmgr.commands.apply import _wait_out

    class Done:
        waits = 0

        def wait(self) -> bool:
            self.waits += 1
            if self.waits == 1:
                raise KeyboardInterrupt
            return True

    done = Done()
    with pytest.raises(KeyboardInterrupt):
        _wait_out(done)  # type: ignore[arg-type]
    assert done.waits == 2
