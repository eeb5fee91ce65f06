"""Hermetic git for every test: no user or system config, fixed identity and dates, a scratch cwd.

Tests never touch the product's own patches/, series/ or links/: every store and tree lives in tmp_path.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stackmgr.cli.entry import main

# The reliability suite's summary lines (catalogue rows covered, crash points injected; kill-anywhere trials) and the
# attacker suite's (cases by kind), under xdist too.
pytest_plugins = ["tests.reliability.catalogue", "tests.reliability.kill_summary", "tests.security.summary"]
pytest_plugins.append("tests.scenario.summary")  # the lab-month suite: steps played, by week

GIT_DATE = "1781344931 +0000"  # 2026-06-13
RAM_TEMP = "/dev/shm"


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """pyproject's addopts run the tests in parallel (`--numprocesses=auto --dist=worksteal`, pytest-xdist). With xdist
    disabled (`-p no:xdist`) or not installed, take those two options and ignore them: one process runs the tests."""
    if not pluginmanager.hasplugin("xdist"):
        group = parser.getgroup("xdist", "without pytest-xdist: accepted, ignored")
        group.addoption("--numprocesses", dest="numprocesses", default=None, help="ignored: no pytest-xdist")
        group.addoption("--dist", dest="dist", default="no", help="ignored: no pytest-xdist")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Two workers per core (at most 16): a test spends much of its time waiting for the git and stackmgr processes
    it starts, and a second worker per core keeps the core busy meanwhile (two cores: 4 workers, about 15% faster)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(16, 2 * cores)


SLOW_LEFT_OUT = "slow"  # `python -m pytest` with no paths and no -m: the whole suite but the stress families


def pytest_configure(config: pytest.Config) -> None:
    """A whole-suite run (`python -m pytest`: no paths, no -m) leaves out the tests marked slow, the stress families
    (a kill at every write, random kills, process races, the round-trip property's later seeds): they run with
    `python -m pytest -m slow` (CI runs both), and a path given runs its slow tests too. The xdist workers get the
    marker expression from here.

    Temporary directories in RAM when the machine has room there: every test builds repositories and stores
    under tmp_path, and stackmgr syncs what it writes, so on a busy disk the suite waits on I/O more than it runs.
    Only when nobody chose (no --basetemp, no TMPDIR) and /dev/shm has 4 GiB free; the xdist workers and every git
    or stackmgr the tests start inherit TMPDIR."""
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        if worker.get("stackmgr_left_out"):
            config.option.markexpr = f"not {SLOW_LEFT_OUT}"
        return
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.markexpr:
        config.option.markexpr = f"not {SLOW_LEFT_OUT}"
        config.stash[_LEFT_OUT] = True
    if config.option.basetemp or os.environ.get("TMPDIR"):
        return
    try:
        ram = os.statvfs(RAM_TEMP)
    except OSError:
        return
    if ram.f_bavail * ram.f_frsize >= 4 << 30 and os.access(RAM_TEMP, os.W_OK | os.X_OK):
        os.environ["TMPDIR"] = RAM_TEMP
        tempfile.tempdir = RAM_TEMP


_LEFT_OUT = pytest.StashKey[bool]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """An xdist worker collects on its own: it leaves out what the controller leaves out."""
    node.workerinput["stackmgr_left_out"] = node.config.stash.get(_LEFT_OUT, False)


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.stash.get(_LEFT_OUT, False):
        return "tests marked slow are left out of a whole-suite run: `python -m pytest -m slow` runs them (CI does)"
    return None


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Said again just above pytest's summary line, where a reader of the run's end looks."""
    if config.stash.get(_LEFT_OUT, False):
        terminalreporter.write_line("slow: the tests marked slow were left out (`python -m pytest -m slow` runs them)")


# What a test may not inherit from the machine it runs on: a user's git config, identity, editor or pager; a
# locale that translates git's messages; a time zone that moves dates; the colour and column choices of a terminal.
INHERITED = ("GIT_", "STACKMGR_", "LC_", "XDG_")
INHERITED_NAMES = ("NO_COLOR", "FORCE_COLOR", "EMAIL", "LANG", "LANGUAGE", "TZ", "PAGER", "EDITOR", "VISUAL",
                   "COLUMNS", "LINES", "PYTHONUNBUFFERED", "_STACKMGR_COMPLETE")  # fmt: skip


@pytest.fixture(autouse=True)
def hermetic_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test runs as a fresh user on a fresh machine would: an empty HOME (no ~/.gitconfig but the one written
    here), no system git config, a fixed identity and dates, the C.UTF-8 locale, UTC, umask 022, a TMPDIR of its
    own and a scratch cwd. The CI runs the suite once more in an environment stripped the same way, so a test that
    leans on the machine fails there too."""
    home = tmp_path / "home"
    home.mkdir()
    for var in list(os.environ):
        if var.startswith(INHERITED) or var in INHERITED_NAMES:
            monkeypatch.delenv(var)
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    temp = Path(tempfile.mkdtemp(prefix="sm-"))  # short: a browser's socket path under it must fit 108 bytes
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
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
    mask = os.umask(0o022)
    yield
    os.umask(mask)
    shutil.rmtree(temp, ignore_errors=True)


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


def stackmgr_process(store: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own: it can be killed (STACKMGR_CRASH_AT), and what a subprocess it starts
    (--exec) writes lands where it would."""
    return subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(store), *args], capture_output=True,
                          text=True, env={**os.environ, **env})  # fmt: skip


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


# --- evidence fixtures (tests/test_links.py, tests/test_metrics.py) -------------------------------------------

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


def link_records(lab: Lab, patch: str) -> list[dict[str, Any]]:
    """The link records of `patch`, as TOML tables, oldest first."""
    directory = lab.store / "links" / patch
    return [tomllib.loads(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.toml"))]


def one_line_error(result: Result, code: int) -> None:
    """A refusal with exit `code`: one line on stderr, no traceback, no internal error. Under it, only the files a
    refusal names, one per line, indented (errors.listed)."""
    assert result.code == code, result
    first, *files = result.err.splitlines() or [""]
    assert result.err.endswith("\n") and first and all(f.startswith("  ") for f in files), result.err
    assert "Traceback" not in result.err, result.err
    assert "internal error" not in result.err, result.err


@pytest.fixture
def ev(evidence_lab: Lab) -> Lab:
    """Series `replay` (vllm): replay-fix, replay-probe; series `kernels` (second tree): gemm-tile; results/."""
    return evidence_lab


# --- the day's work, saved, reset, applied and recovered (test_apply, test_reset, test_recover, test_move) ------


def unsaved_work(lab: Lab) -> None:
    """A tree as a day leaves it: an edit, an untracked log, a deletion, an untracked binary."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (lab.tree / "results.log").write_text("107.77 tok/s\n")
    (lab.tree / "README").unlink()
    (lab.tree / "blob.bin").write_bytes(b"\0\1\2\3")


def save_day(lab: Lab) -> str:
    """A dirty tree saved as series `day`, then reset; returns the working-tree id the series rebuilds."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (lab.tree / "results.log").write_text("107.77 tok/s\n")
    (lab.tree / "README").unlink()
    wanted = lab.worktree_id()
    assert lab.sm("save", "work", "--series", "day", "-m", "work").code == 0
    assert lab.sm("reset").code == 0
    return wanted


def recovery_id(err: str) -> str:
    """The recovery id `reset --force` printed."""
    return err.split("recovery snapshot ")[1].split(";")[0]


def porcelain(tree: Path) -> bytes:
    """`git status --porcelain --untracked-files=all`."""
    return git(tree, "status", "--porcelain", "--untracked-files=all")


def head_name(tree: Path) -> str:
    """The branch HEAD is on, or "HEAD" when detached."""
    return git_text(tree, "rev-parse", "--abbrev-ref", "HEAD")


def applied_state(lab: Lab) -> dict[str, object] | None:
    """What `status --json` says is applied on the lab's tree (None: nothing)."""
    applied: dict[str, object] | None = json.loads(lab.sm("--json", "status").out)["trees"][0]["applied"]
    return applied


# --- patches rebuilt without stackmgr (test_snapshot, test_preserved, test_save) -------------------------------


def rebuilt_tree(lab: Lab, patch: str) -> str:
    """Apply patches/<patch>.patch to its Stackmgr-Base in a scratch index; return the tree id."""
    data = (lab.store / "patches" / f"{patch}.patch").read_bytes()
    base = re.search(rb"^Stackmgr-Base: ([0-9a-f]{40})$", data, re.M).group(1).decode()  # type: ignore[union-attr]
    index = lab.tree / ".git" / "review-rebuild-index"
    env = dict(os.environ, GIT_INDEX_FILE=str(index))
    try:
        subprocess.run(["git", "read-tree", base], cwd=lab.tree, env=env, check=True)
        subprocess.run(["git", "apply", "--cached", str(lab.store / "patches" / f"{patch}.patch")], cwd=lab.tree,
                       env=env, check=True, capture_output=True)  # fmt: skip
        out = subprocess.run(["git", "write-tree"], cwd=lab.tree, env=env, check=True, capture_output=True)
        return out.stdout.decode().strip()
    finally:
        index.unlink(missing_ok=True)


def check_codes(lab: Lab, n: int = 3) -> list[int]:
    """The exit codes of `n` checks in a row (a snapshot must not flip between them)."""
    return [lab.sm("check").code for _ in range(n)]


# --- a three-patch series for the real programs (test_interop, test_export, test_import) -----------------------


def save_three_patch_series(lab: Lab) -> list[Path]:
    """Series S: fix (an edit), notes (CRLF file, README), swap (model deleted, an executable script)."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix: return 2").code == 0
    (lab.tree / "notes.txt").write_bytes(b"windows\r\nline endings\r\n")
    (lab.tree / "README").write_text("hello\nand more\n")
    assert lab.sm("save", "notes", "--series", "S", "-m", "notes").code == 0
    (lab.tree / "src" / "model.py").unlink()
    (lab.tree / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (lab.tree / "run.sh").chmod(0o755)
    assert lab.sm("save", "swap", "--series", "S", "-m", "swap model for a script").code == 0
    return [lab.store / "patches" / f"{n}.patch" for n in ("fix", "notes", "swap")]


def clone_at_base(lab: Lab, where: Path) -> Path:
    """A clone of the lab's tree (at its branch, the series' base)."""
    git(where.parent, "clone", "-q", str(lab.tree), str(where))
    return where
