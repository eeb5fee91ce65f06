"""Crash safety (docs/RELIABILITY.md, promise 3): `kill -9` at every journal step of save, apply, reset,
reset --force, link and undo.

Each scenario first runs the command with STACKMGR_TRACE_STEPS to learn its steps, then, for every step, builds
the same starting point afresh, runs the command with STACKMGR_CRASH_AT=<command>:<step> (the process SIGKILLs
itself there) and checks what a user would find:

- right after the crash: every series file and link record parses and names existing patches, and `check`
  says something is unfinished (exit 1) instead of calling the half-moved tree safe;
- `stackmgr recover` rolls the operation back: store files byte-identical to before, the working tree (its id,
  untracked files included), HEAD, branch and `git status` exactly as before;
- or the next command (here: the same command again) rolls it back itself and then succeeds, ending in exactly
  the state an uninterrupted run gives.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Lab, git, git_text, make_repo, run_stackmgr


def stackmgr(store: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(store), *args],
                          capture_output=True, text=True, env={**os.environ, **env})  # fmt: skip


def tree_state(lab: Lab) -> tuple[str, str, str, str, str]:
    """Working tree id (untracked files included), HEAD, branch, `git status`, the index's entries."""
    branch = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=lab.tree, capture_output=True, text=True)
    return (lab.worktree_id(), git_text(lab.tree, "rev-parse", "HEAD"), branch.stdout.strip(),
            git(lab.tree, "status", "--porcelain=v1", "-z", "--untracked-files=all").decode(),
            git(lab.tree, "ls-files", "-s", "-z").decode())  # fmt: skip


def store_files(store: Path) -> dict[str, bytes]:
    """The store's data and state files (not caches, not the journal itself)."""
    out = {}
    for path in sorted(store.rglob("*")):
        rel = path.relative_to(store).as_posix()
        if path.is_file() and not rel.startswith((".stackmgr/cache", ".stackmgr/ops", ".stackmgr/lock")):
            out[rel] = path.read_bytes()
    return out


def assert_store_consistent(store: Path) -> None:
    """Every series entry names an existing patch; every link record parses and names an existing patch."""
    for series in (store / "series").iterdir():
        for line in series.read_text().splitlines():
            entry = line.split("#", 1)[0].split()
            if entry:
                assert (store / "patches" / entry[0]).is_file(), f"{series.name} names missing {entry[0]}"
    links = store / "links"
    for record in links.rglob("*.toml") if links.is_dir() else ():
        data = tomllib.loads(record.read_text())
        assert (store / "patches" / f"{record.parent.name}.patch").is_file(), record
        assert data, record


# --- scenarios: each builds its starting point in `root` and returns (lab, the command's arguments) -------------


def _lab(root: Path) -> Lab:
    tree = make_repo(root / "vllm", {"README": "hello\n", "src/model.py": "def f():\n    return 1\n",
                                     "src/old.py": "gone soon\n"})  # fmt: skip
    store = root / "store"
    assert run_stackmgr("init", str(store)).code == 0
    assert run_stackmgr("--store", str(store), "tree", "add", "vllm", str(tree)).code == 0
    return Lab(store, tree)


def _two_patch_series(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (lab.tree / "notes.txt").write_bytes(b"crlf\r\nline\r\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    (lab.tree / "src" / "old.py").unlink()
    (lab.tree / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (lab.tree / "run.sh").chmod(0o755)
    assert lab.sm("save", "probe", "--series", "S", "-m", "probe").code == 0


def scenario_save(root: Path) -> tuple[Lab, list[str]]:
    lab = _lab(root)
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    (lab.tree / "README").write_text("hello, probe\n")
    (lab.tree / "new.bin").write_bytes(bytes(range(256)))
    return lab, ["save", "probe", "--series", "S", "-m", "probe"]


def scenario_apply(root: Path) -> tuple[Lab, list[str]]:
    lab = _lab(root)
    _two_patch_series(lab)
    assert lab.sm("reset", "vllm").code == 0
    (lab.tree / "README").write_text("hello, kept in a patch\n")
    assert lab.sm("save", "readme").code == 0
    return lab, ["apply", "S"]


def scenario_reset(root: Path) -> tuple[Lab, list[str]]:
    lab = _lab(root)
    _two_patch_series(lab)
    return lab, ["reset", "vllm"]


def scenario_reset_force(root: Path) -> tuple[Lab, list[str]]:
    lab = _lab(root)
    _two_patch_series(lab)
    (lab.tree / "README").write_text("never saved anywhere\n")
    (lab.tree / "scratch.txt").write_text("untracked, unsaved\n")
    return lab, ["reset", "vllm", "--force"]


def scenario_link(root: Path) -> tuple[Lab, list[str]]:
    lab = _lab(root)
    _two_patch_series(lab)
    results = lab.store / "results"
    results.mkdir()
    (results / "probe.log").write_text("Output token throughput (tok/s): 107.77\n")
    return lab, ["link", "probe", str(results / "probe.log"), "--metric", "output_throughput=107.77tok/s",
                 "--gate", "json=fail", "--verdict", "rejected", "--lesson", "no gain"]  # fmt: skip


def scenario_undo(root: Path) -> tuple[Lab, list[str]]:
    lab, args = scenario_apply(root)
    assert lab.sm(*args).code == 0
    return lab, ["undo"]


SCENARIOS: dict[str, Callable[[Path], tuple[Lab, list[str]]]] = {
    "save": scenario_save, "apply": scenario_apply, "reset": scenario_reset, "reset-force": scenario_reset_force,
    "link": scenario_link, "undo": scenario_undo,
}  # fmt: skip


def _steps(tmp_path: Path, name: str) -> tuple[list[str], dict[str, bytes], tuple[str, ...]]:
    """The steps of an uninterrupted run, and the store files and tree state it ends with."""
    lab, args = SCENARIOS[name](tmp_path / "trace")
    trace = tmp_path / "steps.txt"
    done = stackmgr(lab.store, *args, STACKMGR_TRACE_STEPS=str(trace))
    assert done.returncode == 0, done.stderr
    steps = trace.read_text().splitlines()
    assert steps, "the command recorded no journal step"
    return steps, store_files(lab.store), tree_state(lab)[:3]


@pytest.mark.slow
@pytest.mark.catalogue(59)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_kill_at_every_step_then_recover(name: str, tmp_path: Path, crash_points: list[str]) -> None:
    """Row 59: SIGKILL at each journal step; `recover` brings back exactly the state before the command."""
    steps, _after_files, _after_tree = _steps(tmp_path, name)
    for n, step in enumerate(steps, 1):
        lab, args = SCENARIOS[name](tmp_path / f"crash{n}")
        before_files, before_tree = store_files(lab.store), tree_state(lab)
        before_check = stackmgr(lab.store, "check").returncode
        kind = step.split(":", 1)[0]
        killed = stackmgr(lab.store, *args, STACKMGR_CRASH_AT=f"{kind}:{n}")
        assert killed.returncode == -9, f"{step}: not killed ({killed.returncode}): {killed.stderr}"
        assert_store_consistent(lab.store)
        check = stackmgr(lab.store, "check")
        assert check.returncode == 1 and "interrupted" in check.stderr, (step, check.stderr)

        recovered = stackmgr(lab.store, "recover")
        assert recovered.returncode == 0, (step, recovered.stderr)
        assert "rolled back" in recovered.stderr or "completed" in recovered.stderr, (step, recovered.stderr)
        if "completed" in recovered.stderr:  # killed after its record said done: the new state stands
            assert step.endswith(":finish"), step
            continue
        assert store_files(lab.store) == before_files, step
        assert tree_state(lab) == before_tree, step
        assert stackmgr(lab.store, "check").returncode == before_check, step
        if "move" in "".join(steps[:n]):  # the tree was rolled back: the killed command's scratch indexes are gone
            litter = [p.name for p in (lab.tree / ".git" / "stackmgr").iterdir() if any(c.isdigit() for c in p.name)]
            assert litter == [], (step, litter)
        crash_points.append(f"{name}:{step}")


@pytest.mark.slow
@pytest.mark.catalogue(59)
@pytest.mark.parametrize("name", ["apply", "reset", "save", "link"])
def test_kill_then_run_again_finishes_like_an_uninterrupted_run(name: str, tmp_path: Path,
                                                                 crash_points: list[str]) -> None:  # fmt: skip
    """Row 59: after a crash the next command rolls the interrupted one back by itself, then does its work; the
    end state is the one an uninterrupted run reaches (store bytes, tree id, HEAD)."""
    steps, after_files, after_tree = _steps(tmp_path, name)
    for n, step in enumerate(steps, 1):
        lab, args = SCENARIOS[name](tmp_path / f"again{n}")
        kind = step.split(":", 1)[0]
        assert stackmgr(lab.store, *args, STACKMGR_CRASH_AT=f"{kind}:{n}").returncode == -9
        again = stackmgr(lab.store, *args)
        if step.endswith(":finish"):
            continue  # it had finished: running it again is a second operation, not the same one
        assert again.returncode == 0, (step, again.stderr)
        assert "interrupted; rolled back" in again.stderr, (step, again.stderr)
        assert _comparable(store_files(lab.store)) == _comparable(after_files), step
        assert tree_state(lab)[:3] == after_tree, step
        crash_points.append(f"{name}-again:{step}")


def _comparable(files: dict[str, bytes]) -> dict[str, bytes]:
    """Store files with what legitimately differs between two runs masked: link record names and times."""
    out = {}
    for rel, data in files.items():
        if rel in ("stackmgr.toml", "stackmgr.local.toml", ".stackmgr/record-shas.marshal"):
            continue  # names the tree's directory, or link records by their names: both differ between the runs
        if rel.startswith("links/"):
            rel = rel.rsplit("/", 1)[0] + "/<record>"
            data = b"\n".join(ln for ln in data.splitlines() if not ln.startswith((b"id", b"created")))
        if rel == ".stackmgr/applied.json":
            data = b"\n".join(ln for ln in data.splitlines() if b'"at"' not in ln)
        out[rel] = data
    return out


@pytest.mark.slow
@pytest.mark.catalogue(60)
@pytest.mark.parametrize("name", ["apply", "reset", "save"])
def test_ctrl_c_while_changing_is_deferred_until_the_operation_is_complete(name: str, tmp_path: Path) -> None:
    """Row 60: Ctrl-C (SIGINT to the whole process group, git children included) at each step where things are
    changing: the operation completes, then stackmgr exits 130 saying so; the end state is the uninterrupted one."""
    steps, after_files, after_tree = _steps(tmp_path, name)
    for n, step in enumerate(steps, 1):
        lab, args = SCENARIOS[name](tmp_path / f"int{n}")
        kind = step.split(":", 1)[0]
        proc = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), *args],
                              capture_output=True, text=True, start_new_session=True,
                              env={**os.environ, "STACKMGR_CRASH_AT": f"{kind}:{n}:INT"})  # fmt: skip
        assert proc.returncode == 130, (step, proc.returncode, proc.stderr)
        assert "interrupted" in proc.stderr and "stackmgr undo" in proc.stderr and "Traceback" not in proc.stderr
        assert _comparable(store_files(lab.store)) == _comparable(after_files), step
        assert tree_state(lab)[:3] == after_tree, step
        assert stackmgr(lab.store, "log", "-n", "1").stdout.count("[") == 0, "logged as done"


@pytest.mark.catalogue(60)
def test_ctrl_c_before_anything_changed_stops_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Row 60: Ctrl-C while apply is still checking and computing (nothing changed yet): exit 130, nothing written,
    nothing recorded."""
    from stackmgr.commands import apply as apply_module

    lab, args = scenario_apply(tmp_path)
    before_files, before_tree = store_files(lab.store), tree_state(lab)

    def ctrl_c(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(apply_module, "compute_result", ctrl_c)
    result = lab.sm(*args)
    assert result.code == 130 and result.err == "stackmgr: interrupted\n"
    assert store_files(lab.store) == before_files and tree_state(lab) == before_tree
    assert "apply" not in lab.sm("log").out
