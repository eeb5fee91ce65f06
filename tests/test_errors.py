"""Every bad input: one line on stderr, the exit code (docs/FORMATS.md#exit-codes), nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Lab, git, make_repo, run_stackmgr


def _store_files(store: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(store)): p.read_bytes()
        for p in sorted(store.rglob("*"))
        if p.is_file() and ".stackmgr" not in p.parts
    }


def _one_line_error(err: str) -> None:
    assert err.startswith("stackmgr: "), err
    assert err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("save", "../x", "-m", "m"), 2, "invalid patch name '../x'"),
        (("save", "x/y", "-m", "m"), 2, "invalid patch name"),
        (("save", "x.lock", "-m", "m"), 2, "invalid patch name"),
        (("save", ".hidden", "-m", "m"), 2, "invalid patch name"),
        (("save", "ok", "-t", "nope", "-m", "m"), 2, "unknown tree 'nope'"),
        (("status", "nope"), 2, "unknown tree 'nope'"),
        (("check", "nope"), 2, "unknown tree 'nope'"),
        (("save", "ok", "-m", "m", "no/such/path"), 2, "no changes under 'no/such/path'"),
        (("save", "ok", "-m", "m", "../../etc/passwd"), 2, "is outside tree vllm"),
        (("save", "ok", "-m", "subject\n\n--- a line git am eats"), 3, "which git am misreads"),
        (("save", "ok", "--base", "no-such-rev", "-m", "m"), 3, "'no-such-rev' is not a commit"),
        (("series", "../evil"), 2, "invalid series name"),
        (("tree", "add", "bad/name", "."), 2, "invalid tree name"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(lab: Lab, args: tuple[str, ...], code: int, says: str) -> None:
    (lab.tree / "README").write_text("dirty\n")
    before = _store_files(lab.store)
    result = lab.sm(*args)
    assert result.code == code, result
    assert says in result.err
    _one_line_error(result.err)
    assert _store_files(lab.store) == before


def test_no_store_anywhere(tmp_path: Path) -> None:
    result = run_stackmgr("status")
    assert result.code == 2 and "no stackmgr store" in result.err and "stackmgr init" in result.err
    _one_line_error(result.err)
    bogus = run_stackmgr("--store", str(tmp_path), "status")
    assert bogus.code == 2 and "is not a stackmgr store" in bogus.err


def test_tree_add_refuses_a_directory_that_is_not_a_repository(lab: Lab, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    result = lab.sm("tree", "add", "plain", str(plain))
    assert result.code == 3 and "not inside a git repository" in result.err
    _one_line_error(result.err)
    assert lab.sm("tree", "add", "x", str(tmp_path / "nowhere")).code == 2
    dup = lab.sm("tree", "add", "vllm", str(lab.tree))
    assert dup.code == 2 and "already registered" in dup.err


def test_a_repository_with_no_commits_is_refused(lab: Lab, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q")
    (fresh / "a.txt").write_text("a\n")
    assert lab.sm("tree", "add", "fresh", str(fresh)).code == 0
    for args in (("save", "p", "-t", "fresh", "-m", "m"), ("check", "fresh"), ("status", "fresh")):
        result = lab.sm(*args)
        assert result.code == 3, args
        assert "has no commits yet; make a first commit there" in result.err
        _one_line_error(result.err)
    git(fresh, "add", "a.txt")  # with an index but still no commit
    assert "make a first commit" in lab.sm("check", "fresh").err
    assert lab.sm("status").code == 0, "status of all trees still reports"


def test_conflict_markers_are_refused_unless_allowed(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("<<<<<<< HEAD\na\n=======\nb\n>>>>>>> other\n")
    result = lab.sm("save", "conflicted", "-m", "m")
    assert result.code == 3 and "conflict markers in a/src/model.py" in result.err
    _one_line_error(result.err)
    assert not (lab.store / "patches" / "conflicted.patch").exists()
    assert lab.sm("save", "conflicted", "-m", "m", "--allow-conflict-markers").code == 0
    (lab.tree / "doc.rst").write_text("Title\n=======\n")
    assert lab.sm("save", "rst", "doc.rst", "-m", "an rst underline is not a conflict").code == 0


def test_trees_mid_merge_or_unmerged_are_refused(lab: Lab) -> None:
    tree = lab.tree
    git(tree, "checkout", "-qb", "other")
    (tree / "README").write_text("other\n")
    git(tree, "commit", "-qam", "other")
    git(tree, "checkout", "-q", "main")
    (tree / "README").write_text("main\n")
    git(tree, "commit", "-qam", "main")
    subprocess.run(["git", "merge", "-q", "other"], cwd=tree, capture_output=True)
    result = lab.sm("save", "mid-merge", "-m", "m")
    assert result.code == 3 and "in the middle of a merge" in result.err
    _one_line_error(result.err)
    check = lab.sm("check", "-v")
    assert check.code == 1 and "README (unmerged)" in check.out
    assert not (lab.store / "patches" / "mid-merge.patch").exists()


def test_existing_patch_without_update(lab: Lab) -> None:
    (lab.tree / "README").write_text("one\n")
    lab.sm("save", "p", "-m", "m")
    (lab.tree / "README").write_text("two\n")
    result = lab.sm("save", "p", "-m", "m")
    assert result.code == 3 and "already exists; pass --update" in result.err
    _one_line_error(result.err)


def test_nothing_to_save(lab: Lab) -> None:
    result = lab.sm("save", "p", "-m", "m")
    assert result.code == 3 and "no tree has changes" in result.err
    assert lab.sm("save", "p", "-t", "vllm", "-m", "m").code == 3


def test_broken_config_is_one_line(lab: Lab) -> None:
    (lab.store / "stackmgr.toml").write_text("[trees.vllm\npath = 1\n")
    result = lab.sm("status")
    assert result.code == 3 and "not valid TOML" in result.err
    _one_line_error(result.err)
    (lab.store / "stackmgr.toml").write_text("[trees.vllm]\npath = 1\n")
    assert "needs a path" in lab.sm("status").err


def test_read_only_store_fails_cleanly(lab: Lab) -> None:
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    (lab.tree / "README").write_text("x\n")
    (lab.store / "patches").chmod(0o555)
    try:
        result = lab.sm("save", "p", "-m", "m")
    finally:
        (lab.store / "patches").chmod(0o755)
    assert result.code == 3 and "cannot write" in result.err


def test_console_script_exit_codes_and_no_traceback(lab: Lab) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), *args], capture_output=True)

    assert run("check").returncode == 0
    (lab.tree / "README").write_text("x\n")
    assert run("check").returncode == 1
    bad = run("save", "../x")
    assert bad.returncode == 2 and b"Traceback" not in bad.stderr
    usage = run("no-such-command")
    assert usage.returncode == 2 and b"No such command" in usage.stderr
    assert run("--version").stdout.startswith(b"stackmgr, version ")


def test_check_start_up_imports_nothing_heavy(lab: Lab) -> None:
    probe = (
        "import sys; from stackmgr.cli.entry import main; code = main(['--store', sys.argv[1], 'check']); "
        "heavy = [m for m in ('click', 'rich', 'unidiff', 'git') if m in sys.modules]; print(code, heavy)"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(lab.store)], capture_output=True, check=True)
    assert out.stdout.decode().strip() == "0 []"


def test_make_repo_helper_commits(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a": "b\n"})
    assert git(repo, "status", "--porcelain") == b""
