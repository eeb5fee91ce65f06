"""A series whose every patch a rebase found upstream keeps its base (`# stackmgr-base TREE COMMIT`, the series
grammar's comment): `apply` of the empty series gives that base's tree, `series S` says why it is empty, a later
save appends below the line, and the line never disagrees silently with the patches (docs/FORMATS.md#series-file).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Lab, commit, git, git_text, one_line_error, porcelain
from tests.test_rebase import one_patch_series


def _all_upstream(lab: Lab) -> str:
    """Series S of two patches; upstream then takes both (the same commits) and adds NEWS: git's rebase drops
    both and the branch becomes upstream."""
    one_patch_series(lab, {"src/model.py": "def f():\n    return 2\n"}, "p1")
    one_patch_series(lab, {"README": "hello\nworld\n"}, "p2")
    commit(lab.tree, {"src/model.py": "def f():\n    return 2\n"}, "p1, upstream")
    commit(lab.tree, {"README": "hello\nworld\n"}, "p2, upstream")
    onto = commit(lab.tree, {"NEWS": "news\n"}, "upstream news")
    git(lab.tree, "checkout", "-q", "HEAD~3")  # the user's tree back at the old base
    return onto


def test_a_series_found_all_upstream_records_its_base_and_applies_to_it(lab: Lab) -> None:
    onto = _all_upstream(lab)
    result = lab.sm("rebase", "S", "--onto", onto)
    assert result.code == 0, result.err
    assert (lab.store / "series" / "S").read_text() == (
        f"# p1.patch  (already upstream in {onto[:12]})\n"
        f"# p2.patch  (already upstream in {onto[:12]})\n"
        f"# stackmgr-base vllm {onto}\n"
    )
    shown = lab.sm("series", "S")
    assert shown.code == 0, shown.err
    assert (f"empty: every patch was found upstream by `rebase --onto {onto[:12]}` (2 patches); "
            f"apply gives its base {onto[:12]}") in shown.out  # fmt: skip
    listed = json.loads(lab.sm("series", "S", "--json").out)
    assert listed["base"] == {"vllm": onto} and listed["patches"] == []
    applied = lab.sm("apply", "S")
    assert applied.code == 0, applied.err
    assert git_text(lab.tree, "rev-parse", "HEAD") == onto
    assert porcelain(lab.tree) == b""
    assert lab.worktree_id() == git_text(lab.tree, "rev-parse", f"{onto}^{{tree}}")
    assert lab.sm("check").code == 0
    assert lab.sm("lint").code == 0, lab.sm("lint").out


def test_apply_of_an_empty_series_detaches_head_at_its_base(lab: Lab) -> None:
    onto = _all_upstream(lab)
    git(lab.tree, "checkout", "-q", "-b", "work")
    assert lab.sm("rebase", "S", "--onto", onto).code == 0
    result = lab.sm("apply", "S", "--json")
    assert result.code == 0, result.err
    (tree,) = json.loads(result.out)["trees"]
    assert tree["base"] == onto and tree["patches"] == []
    head = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=lab.tree, capture_output=True)
    assert head.returncode == 1, "HEAD is detached, as apply detaches it"
    assert git_text(lab.tree, "rev-parse", "HEAD") == onto


def test_the_preserved_work_guard_comes_first_for_an_empty_series(lab: Lab) -> None:
    onto = _all_upstream(lab)
    assert lab.sm("rebase", "S", "--onto", onto).code == 0
    head = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "README").write_text("unsaved work\n")
    result = lab.sm("apply", "S")
    one_line_error(result, 1)
    assert (lab.tree / "README").read_text() == "unsaved work\n"
    assert git_text(lab.tree, "rev-parse", "HEAD") == head


def test_a_later_save_into_the_empty_series_appends_below_its_base(lab: Lab) -> None:
    onto = _all_upstream(lab)
    assert lab.sm("rebase", "S", "--onto", onto).code == 0
    before = (lab.store / "series" / "S").read_text()
    assert lab.sm("apply", "S").code == 0
    (lab.tree / "NEWS").write_text("news\nmore\n")
    saved = lab.sm("save", "p3", "--series", "S", "-m", "p3")
    assert saved.code == 0, saved.err
    assert (lab.store / "series" / "S").read_text() == before + "p3.patch\n"
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "S").code == 0
    assert (lab.tree / "NEWS").read_text() == "news\nmore\n"
    assert git_text(lab.tree, "rev-parse", "HEAD") == onto
    shown = lab.sm("series", "S")
    assert "empty:" not in shown.out


def test_a_rebase_of_the_series_with_patches_moves_its_base_line(lab: Lab) -> None:
    onto = _all_upstream(lab)
    assert lab.sm("rebase", "S", "--onto", onto).code == 0
    assert lab.sm("apply", "S").code == 0
    (lab.tree / "NEWS").write_text("news\nmore\n")
    assert lab.sm("save", "p3", "--series", "S", "-m", "p3").code == 0
    assert lab.sm("reset").code == 0
    git(lab.tree, "checkout", "-q", "-b", "upstream", onto)
    later = commit(lab.tree, {"CHANGES": "later\n"}, "upstream later")
    result = lab.sm("rebase", "S", "--onto", later)
    assert result.code == 0, result.err
    text = (lab.store / "series" / "S").read_text()
    assert f"# stackmgr-base vllm {later}\n" in text and onto not in text.split("stackmgr-base")[1]
    assert lab.sm("apply", "S").code == 0
    assert git_text(lab.tree, "rev-parse", "HEAD") == later


def test_a_rebase_of_an_empty_series_moves_its_base(lab: Lab) -> None:
    onto = _all_upstream(lab)
    assert lab.sm("rebase", "S", "--onto", onto).code == 0
    git(lab.tree, "checkout", "-q", "-b", "upstream", onto)
    later = commit(lab.tree, {"CHANGES": "later\n"}, "upstream later")
    result = lab.sm("rebase", "S", "--onto", later)
    assert result.code == 0, result.err
    assert (lab.store / "series" / "S").read_text().endswith(f"# stackmgr-base vllm {later}\n")
    assert lab.sm("apply", "S").code == 0
    assert git_text(lab.tree, "rev-parse", "HEAD") == later


def test_a_fresh_empty_series_without_a_base_is_refused_by_apply(lab: Lab) -> None:
    assert lab.sm("series", "new", "S").code == 0
    result = lab.sm("apply", "S")
    one_line_error(result, 3)
    assert "series S has no patches to apply" in result.err


def test_a_base_line_that_disagrees_with_the_patches_is_an_error_with_its_line(lab: Lab) -> None:
    one_patch_series(lab, {"src/model.py": "def f():\n    return 2\n"}, "p1")
    other = commit(lab.tree, {"NEWS": "news\n"}, "elsewhere")
    git(lab.tree, "checkout", "-q", "HEAD~1")
    series = lab.store / "series" / "S"
    series.write_text(f"# stackmgr-base vllm {other}\n" + series.read_text())
    result = lab.sm("apply", "S")
    one_line_error(result, 3)
    assert result.err.startswith(f"stackmgr: series/S:1: the series' base line says tree vllm at {other[:12]}, "
                                 "but its first patch p1 records ")  # fmt: skip
    assert porcelain(lab.tree) == b""


@pytest.mark.parametrize("line", [
    "# stackmgr-base vllm 1234",  # too short
    "# stackmgr-base vllm " + "A" * 40,  # upper case
    "# stackmgr-base ../etc " + "a" * 40,  # not a tree name
    "# stackmgr-base vllm " + "a" * 40 + " extra",  # a word more
    "# stackmgr-base vllm",  # no commit
    "# stackmgr-base\tvllm " + "a" * 40,  # a tab: the line is exactly as stackmgr writes it
])  # fmt: skip
def test_bad_base_lines_are_refused_with_file_and_line(lab: Lab, line: str) -> None:
    (lab.store / "series" / "S").write_text("# my series\n" + line + "\n")
    for args in (("apply", "S"), ("series", "S")):
        result = lab.sm(*args)
        one_line_error(result, 3)
        assert result.err.startswith("stackmgr: series/S:2: bad base line"), result.err


def test_two_base_lines_for_one_tree_are_refused(lab: Lab) -> None:
    head = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.store / "series" / "S").write_text(f"# stackmgr-base vllm {head}\n# stackmgr-base vllm {head}\n")
    result = lab.sm("apply", "S")
    one_line_error(result, 3)
    assert result.err.startswith("stackmgr: series/S:2: a second base line for tree vllm (first on line 1)")


def test_a_base_line_of_a_tree_the_store_does_not_know_is_refused(lab: Lab, tmp_path: Path) -> None:
    head = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.store / "series" / "S").write_text(f"# stackmgr-base kernels {head}\n")
    result = lab.sm("apply", "S")
    one_line_error(result, 3)
    assert "tree kernels" in result.err and "tree add" in result.err


def test_a_series_upstream_took_in_one_release_is_found_upstream_without_a_git_call_per_patch(
    lab: Lab, tmp_path: Path
) -> None:
    """Ten patches, one file each; upstream's one release commit has them all (no patch-id matches one): each
    patch's files are in `onto` exactly as the patch leaves them, so none is applied or checked on its own."""
    from tests.conftest import stackmgr_process

    files = {f"f{i}.txt": f"file {i}\n" for i in range(10)}
    base = commit(lab.tree, files, "ten files")
    for i in range(10):
        one_patch_series(lab, {f"f{i}.txt": f"file {i}\npatched\n"}, f"p{i}")
    git(lab.tree, "checkout", "-q", "-b", "release", base)
    onto = commit(lab.tree, {**{f"f{i}.txt": f"file {i}\npatched\n" for i in range(10)}, "NEWS": "n\n"}, "release")
    trace = tmp_path / "git-trace"
    done = stackmgr_process(lab.store, "rebase", "S", "--onto", onto, "--json", GIT_TRACE=str(trace))
    assert done.returncode == 0, done.stderr
    assert [p["outcome"] for p in json.loads(done.stdout)["patches"]] == ["already upstream"] * 10
    started = trace.read_text().count("trace: built-in: git")
    assert started <= 12, started  # was 2 per patch and more (a forward and a reverse check each)
    assert (lab.store / "series" / "S").read_text().endswith(f"# stackmgr-base vllm {onto}\n")
    assert lab.sm("apply", "S").code == 0
    assert lab.worktree_id() == git_text(lab.tree, "rev-parse", f"{onto}^{{tree}}")


def test_a_save_into_an_empty_series_from_another_commit_than_its_base_is_refused(lab: Lab) -> None:
    """The empty series keeps its base; a patch made on another commit would contradict its base line (and every
    later apply would refuse the series): refused with the line, nothing written."""
    onto = _all_upstream(lab)
    assert lab.sm("rebase", "S", "--onto", onto).code == 0
    before = (lab.store / "series" / "S").read_bytes()
    (lab.tree / "notes.txt").write_text("made on the old base\n")
    refused = lab.sm("save", "mine", "--series", "S", "-m", "mine")
    assert refused.code == 3 and "series S is empty at its base" in refused.err, refused
    assert "git switch --detach" in refused.err
    assert (lab.store / "series" / "S").read_bytes() == before
    assert not (lab.store / "patches" / "mine.patch").exists()


@pytest.mark.parametrize("base", ["1" * 40, "tree", "disagrees"])
def test_lint_names_a_base_line_that_names_no_commit_or_disagrees_with_the_patches(lab: Lab, base: str) -> None:
    one_patch_series(lab, {"src/model.py": "def f():\n    return 2\n"}, "p1")
    head = git_text(lab.tree, "rev-parse", "HEAD")
    if base == "disagrees":
        commit(lab.tree, {"NEWS": "news\n"}, "later")
        line = f"# stackmgr-base vllm {git_text(lab.tree, 'rev-parse', 'HEAD')}\n"
        text = "p1.patch\n" + line
    else:
        oid = git_text(lab.tree, "rev-parse", "HEAD^{tree}") if base == "tree" else base
        text = f"# stackmgr-base vllm {oid}\n"
    (lab.store / "series" / "E").write_text(text)
    linted = lab.sm("lint")
    assert linted.code == 1, linted
    line_no = 2 if base == "disagrees" else 1
    assert f"series/E:{line_no}" in linted.out and "base" in linted.out, linted.out
    assert head


def test_an_mbox_export_of_an_empty_series_is_refused_with_the_branch_way(lab: Lab, tmp_path: Path) -> None:
    onto = _all_upstream(lab)
    assert lab.sm("rebase", "S", "--onto", onto).code == 0
    refused = lab.sm("export", "S", "--mbox", str(tmp_path / "S.mbox"))
    assert refused.code == 3 and "series S has no patches: it is empty at its base" in refused.err, refused
    assert "--git BRANCH" in refused.err and not (tmp_path / "S.mbox").exists()
