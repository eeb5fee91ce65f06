"""Hermetic git for every test: no user or system config, fixed identity and dates, a scratch cwd.

Tests never touch the product's own patches/, series/ or links/: every store and tree lives in tmp_path.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from stackmgr.cli.entry import main

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


def tree_files(tree: Path) -> dict[str, tuple[int, bytes]]:
    """Every file and symlink of the working tree (outside .git): mode bits and bytes (link target for links)."""
    out = {}
    for root, dirs, names in os.walk(tree):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names + [d for d in dirs if (Path(root) / d).is_symlink()]:
            path = Path(root) / name
            st = path.lstat()
            data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
            out[str(path.relative_to(tree))] = (st.st_mode, data)
    return out


# --- evidence fixtures (tests/test_links.py, tests/test_review_evidence.py) ------------------------------------

VLLM_JSON = {
    "date": "20260623-024028", "backend": "vllm", "model_id": "Qwen/Qwen3.6", "num_prompts": 50,
    "request_throughput": 0.41, "output_throughput": 107.77, "total_token_throughput": 320.5,
    "mean_ttft_ms": 41.2, "median_ttft_ms": 40.0, "p99_ttft_ms": 80.5, "mean_tpot_ms": 9.1, "p99_tpot_ms": 12.5,
    "spec_decode_acceptance_rate": 71.3, "spec_decode_acceptance_length": 2.71, "ttfts": [0.1, 0.2],
}  # fmt: skip


@pytest.fixture
def evidence_lab(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    """Two trees; series `replay` (vllm) with two patches, a kernel patch in series `kernels`; results files.
    The user works from the store, as the lab does."""
    kernels = make_repo(tmp_path / "kernels", {"gemm.cpp": "int tile = 64;\n"})
    assert lab.sm("tree", "add", "vllm-xpu-kernels", str(kernels)).code == 0
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "replay-fix", "-t", "vllm", "--series", "replay", "-m", "replay fix").code == 0
    (lab.tree / "README").write_text("probe\n")
    assert lab.sm("save", "replay-probe", "-t", "vllm", "--series", "replay", "-m", "probe").code == 0
    (kernels / "gemm.cpp").write_text("int tile = 128;\n")
    assert lab.sm("save", "gemm-tile", "-t", "vllm-xpu-kernels", "--series", "kernels", "-m", "tile").code == 0
    results = lab.store / "results"
    results.mkdir()
    (results / "bench.json").write_text(json.dumps(VLLM_JSON))
    (results / "probe.log").write_text("step 1\nOutput token throughput (tok/s): 107.77\nJSON gate: 3/8\n")
    monkeypatch.chdir(lab.store)
    return lab


def link_id(lab: Lab, *args: str) -> str:
    result = lab.sm("--json", "link", *args)
    assert result.code == 0, result.err
    return str(json.loads(result.out)["id"])


def show_json(lab: Lab, patch: str) -> dict[str, object]:
    result = lab.sm("show", patch, "--json")
    assert result.code == 0, result.err
    return dict(json.loads(result.out))
