"""Hermetic git for every test: no user or system config, fixed identity and dates, a scratch cwd.

Tests never touch the product's own patches/, series/ or links/: every store and tree lives in tmp_path.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from stackmgr.entry import main

GIT_DATE = "1781344931 +0000"  # 2026-06-13


@pytest.fixture(autouse=True)
def hermetic_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for var in list(os.environ):
        if var.startswith(("GIT_", "STACKMGR_")) or var in ("NO_COLOR", "EMAIL"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Jane Doe")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "jane@example.com")
        monkeypatch.setenv(f"GIT_{who}_DATE", GIT_DATE)
    monkeypatch.setenv("GIT_EDITOR", "false")
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


def git(cwd: Path | str, *args: str, input: bytes | None = None) -> bytes:
    """Run git in `cwd` and return stdout bytes; fail the test on a non-zero exit."""
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True)
    assert proc.returncode == 0, f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}"
    return proc.stdout


def git_text(cwd: Path | str, *args: str) -> str:
    return git(cwd, *args).decode().strip()


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_stackmgr(*args: str) -> Result:
    """Run the CLI in-process, exactly as the console script does, capturing stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return Result(code, out.getvalue(), err.getvalue())


@pytest.fixture
def sm() -> Callable[..., Result]:
    return run_stackmgr


def make_repo(path: Path, files: dict[str, bytes | str] | None = None) -> Path:
    """A git repository at `path` with one commit holding `files`."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    for name, content in (files or {"README": "hello\n"}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    return path


@dataclass
class Lab:
    """A store with one registered tree, as a user has after `init` and `tree add`."""

    store: Path
    tree: Path

    def sm(self, *args: str) -> Result:
        return run_stackmgr("--store", str(self.store), *args)

    def worktree_id(self) -> str:
        """The tree id of the working tree (untracked files included), computed without stackmgr."""
        index = self.tree / ".git" / "test-snapshot-index"
        env = dict(os.environ, GIT_INDEX_FILE=str(index))
        subprocess.run(["git", "read-tree", "HEAD"], cwd=self.tree, env=env, check=True)
        subprocess.run(["git", "add", "-A"], cwd=self.tree, env=env, check=True)
        tree = subprocess.run(["git", "write-tree"], cwd=self.tree, env=env, check=True, capture_output=True)
        index.unlink()
        return tree.stdout.decode().strip()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    tree = make_repo(tmp_path / "vllm", {"README": "hello\n", "src/model.py": "def f():\n    return 1\n"})
    store = tmp_path / "store"
    assert run_stackmgr("init", str(store)).code == 0
    assert run_stackmgr("--store", str(store), "tree", "add", "vllm", str(tree)).code == 0
    yield Lab(store, tree)
