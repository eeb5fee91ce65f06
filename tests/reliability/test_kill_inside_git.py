"""Kills inside git (docs/RELIABILITY.md, promise 3): the whole process group (stackmgr and its git children)
SIGKILLed while a git child runs, or while stackmgr holds the user's `index.lock`.

A `git` script first on PATH runs the real git, and, as the environment asks:

- `KILL_GIT_STRACE=<strace -e options>`: the working-tree switch (`read-tree … -m -u`; with `KILL_GIT_NTH=n`
  only the n-th, counted in the file `KILL_GIT_SWITCHES`) runs under strace, which SIGKILLs git at the syscall
  those options pick (e.g. its first write to README.md: git has deleted what the target does not hold and left
  a 0-byte file); then the script kills the whole process group;
- `KILL_GIT_LOCKED=<n>`: the n-th git started while `.git/index.lock` exists kills the group before it runs.

`strace` on stackmgr itself (`-P .git/index.lock`) kills it at the n-th rename of an index.lock (taken, filled,
not yet in place). After each kill: `check` reports the interrupted operation (exit 1), `stackmgr recover` puts
back every byte of the state before (tracked edits, deletions, untracked, binary, mode, symlink), the tree id,
HEAD, branch and index; no index.lock is left and `check` answers as it did before.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Lab, make_repo, run_stackmgr, tree_files
from tests.reliability.test_crash import tree_state

REAL_GIT = shutil.which("git")
STRACE = shutil.which("strace")


def _strace_works() -> bool:
    if STRACE is None:
        return False
    return subprocess.run([STRACE, "-qq", "-o", "/dev/null", "true"], capture_output=True).returncode == 0


needs_strace = pytest.mark.skipif(not _strace_works(), reason="needs a working strace (ptrace allowed)")

WRAPPER = """#!/bin/sh
real='{git}'
case " $* " in
  *" read-tree --no-recurse-submodules -m -u "*)
    switches=$(cat "${{KILL_GIT_SWITCHES:-/dev/null}}" 2>/dev/null || echo 0)
    switches=$((switches + 1))
    [ -n "$KILL_GIT_SWITCHES" ] && echo "$switches" > "$KILL_GIT_SWITCHES"
    if [ -n "$KILL_GIT_STRACE" ] && [ "${{KILL_GIT_NTH:-$switches}}" = "$switches" ]; then
      # shellcheck disable=SC2086
      '{strace}' -f -qq -o /dev/null $KILL_GIT_STRACE "$real" "$@"
      rc=$?
      [ -n "$KILL_GIT_STATUS" ] && echo "$rc" > "$KILL_GIT_STATUS"
      kill -9 0
    fi ;;
esac
if [ -n "$KILL_GIT_LOCKED" ] && [ -e "$KILL_GIT_LOCK_FILE" ]; then
  n=$(cat "$KILL_GIT_COUNTER" 2>/dev/null || echo 0)
  n=$((n + 1))
  echo "$n" > "$KILL_GIT_COUNTER"
  if [ "$n" = "$KILL_GIT_LOCKED" ]; then
    kill -9 0
  fi
fi
exec "$real" "$@"
"""


def _lab(root: Path) -> Lab:
    """A tree whose working state holds every kind of change: an edited file, a deleted one, a mode change, an
    edited binary, untracked text, binary and symlink."""
    tree = make_repo(root / "vllm", {"README.md": "hello\n", "src/model.py": "def f():\n    return 1\n",
                                     "src/old.py": "gone soon\n", "run.sh": "#!/bin/sh\necho hi\n",
                                     "data.bin": bytes(range(200))})  # fmt: skip
    store = root / "store"
    assert run_stackmgr("init", str(store)).code == 0
    assert run_stackmgr("--store", str(store), "tree", "add", "vllm", str(tree)).code == 0
    lab = Lab(store, tree)
    (tree / "README.md").write_text("hello, edited\n" * 50)
    (tree / "src" / "old.py").unlink()
    (tree / "run.sh").chmod(0o755)
    (tree / "data.bin").write_bytes(bytes(reversed(range(256))) * 3)
    (tree / "notes.txt").write_text("untracked notes\n")
    (tree / "blob.bin").write_bytes(b"\0\1\2\3\xff" * 40)
    (tree / "latest").symlink_to("src/model.py")
    return lab


def scenario(name: str, root: Path) -> tuple[Lab, list[str]]:
    lab = _lab(root)
    if name == "reset-force":
        return lab, ["reset", "--force"]
    if name == "apply":
        assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
        assert lab.sm("reset").code == 0
        return lab, ["apply", "S"]
    assert lab.sm("save", "p", "-m", "p").code == 0
    if name == "reset":
        return lab, ["reset"]
    assert lab.sm("reset").code == 0  # undo: the tree goes back from clean to the saved dirty state
    return lab, ["undo"]


def wrapper_env(tmp: Path, **env: str) -> dict[str, str]:
    bin_dir = tmp / "bin"
    if not bin_dir.is_dir():
        bin_dir.mkdir(parents=True)
        script = bin_dir / "git"
        script.write_text(WRAPPER.format(git=REAL_GIT, strace=STRACE or "strace"))
        script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **env}


def run_group(lab: Lab, args: list[str], env: dict[str, str], prefix: tuple[str, ...] = ()) -> int:
    """stackmgr in a process group of its own (its git children in it), as a terminal runs it."""
    proc = subprocess.run([*prefix, sys.executable, "-m", "stackmgr", "--store", str(lab.store), *args],
                          capture_output=True, text=True, env=env, start_new_session=True)  # fmt: skip
    return proc.returncode


def sm(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), *args],
                          capture_output=True, text=True)  # fmt: skip


def before_state(lab: Lab) -> tuple[dict[str, tuple[int, bytes]], tuple[str, ...], int]:
    return tree_files(lab.tree), tree_state(lab), sm(lab, "check").returncode


def assert_rolled_back(lab: Lab, before: tuple[dict[str, tuple[int, bytes]], tuple[str, ...], int],
                       where: str) -> None:  # fmt: skip
    """After the kill: `check` says interrupted; `recover` puts every byte back and reports success."""
    files, state, check_code = before
    check = sm(lab, "check")
    assert check.returncode == 1 and "interrupted" in check.stderr, (where, check.returncode, check.stderr)
    recovered = sm(lab, "recover")
    assert recovered.returncode == 0 and "rolled back" in recovered.stderr, (where, recovered.stderr)
    assert "Traceback" not in recovered.stderr, recovered.stderr
    assert not (lab.tree / ".git" / "index.lock").exists(), (where, "index.lock left behind", recovered.stderr)
    now = tree_files(lab.tree)
    wrong = sorted(p for p in set(files) | set(now) if files.get(p) != now.get(p))
    assert wrong == [], (where, wrong, recovered.stderr)
    assert tree_state(lab) == state, (where, recovered.stderr)
    after = sm(lab, "check")
    assert after.returncode == check_code and "interrupted" not in after.stderr, (where, after.stderr)


@needs_strace
@pytest.mark.catalogue(59)
@pytest.mark.regression("a kill inside git read-tree -m -u left a half-switched tree that recover called rolled back")
@pytest.mark.parametrize("name", ["reset", "reset-force", "undo", "apply"])
def test_kill_while_git_writes_the_switch(name: str, tmp_path: Path) -> None:
    """Row 59: the process group is killed while `read-tree -m -u` writes README.md (0 bytes written): the files
    the target does not hold are already deleted, untracked ones included. `recover` used to exit 0 "rolled back"
    with a note that README.md "changed after the operation", leaving the tree half-switched; now it rebuilds every
    path the move touched from the before-state (keeping what stood there in a recovery snapshot first)."""
    lab, args = scenario(name, tmp_path / "t")
    before = before_state(lab)
    opts = f"-P {lab.tree / 'README.md'} -e trace=write -e inject=write:signal=KILL:when=1"
    code = run_group(lab, args, wrapper_env(tmp_path, KILL_GIT_STRACE=opts))
    assert code == -9
    assert (lab.tree / "README.md").read_bytes() == b"" and not (lab.tree / "notes.txt").exists()  # half-switched
    assert_rolled_back(lab, before, name)
    listed = sm(lab, "recover").stdout
    assert listed.count("vllm") == (2 if name == "reset-force" else 1), listed  # the half-written tree is kept too


@needs_strace
@pytest.mark.catalogue(59)
@pytest.mark.parametrize("name", ["reset-force", "undo"])
def test_kill_inside_the_rollbacks_own_switch(name: str, tmp_path: Path) -> None:
    """Row 59: killed inside git's switch, then `recover` killed inside its own switch back (README.md half
    written again, its own index.lock held): the next `recover` still puts every byte back."""
    lab, args = scenario(name, tmp_path / "t")
    before = before_state(lab)
    opts = f"-P {lab.tree / 'README.md'} -e trace=write -e inject=write:signal=KILL:when=1"
    assert run_group(lab, args, wrapper_env(tmp_path, KILL_GIT_STRACE=opts)) == -9
    assert run_group(lab, ["recover"], wrapper_env(tmp_path, KILL_GIT_STRACE=opts)) == -9
    assert (lab.tree / "README.md").read_bytes() == b"" and (lab.tree / ".git" / "index.lock").exists()
    assert_rolled_back(lab, before, name)


@needs_strace
@pytest.mark.slow
@pytest.mark.catalogue(59)
@pytest.mark.parametrize("name", ["reset-force", "undo"])
def test_kill_at_every_write_of_the_switch(name: str, tmp_path: Path, crash_points: list[str]) -> None:
    """Row 59: the process group is killed at each file-changing syscall of `read-tree -m -u` in turn (each
    unlink, each write: a file deleted, a file created and not yet written, the index); each time `recover` puts
    the state before back byte for byte."""
    for call in ("unlink", "write"):
        for n in range(1, 40):
            lab, args = scenario(name, tmp_path / f"{call}{n}")
            before = before_state(lab)
            status = tmp_path / f"status-{call}{n}"
            env = wrapper_env(tmp_path, KILL_GIT_STRACE=f"-e trace={call} -e inject={call}:signal=KILL:when={n}",
                              KILL_GIT_STATUS=str(status))  # fmt: skip
            assert run_group(lab, args, env) == -9
            assert_rolled_back(lab, before, f"{name}: {call} {n}")
            crash_points.append(f"{name}:read-tree {call} {n}")
            if status.read_text().strip() == "0":  # git made fewer such calls: each was tried, then one after all
                break
        else:
            pytest.fail("git made more file changes than expected")


@pytest.mark.catalogue(59)
@pytest.mark.regression("a kill right after stackmgr took index.lock left it unrecorded; check said all was well")
@pytest.mark.parametrize("name", ["reset", "reset-force", "undo", "apply"])
def test_kill_at_each_git_call_while_index_lock_is_held(name: str, tmp_path: Path, crash_points: list[str]) -> None:
    """Row 59: the process group is killed as each git child starts while stackmgr holds `.git/index.lock` (the
    first: `git symbolic-ref`, run between taking the lock and recording the move). The lock used to be left with
    no record: `check` exited 0 while git and `apply` refused "index.lock exists"."""
    for n in range(1, 20):
        lab, args = scenario(name, tmp_path / f"n{n}")
        before = before_state(lab)
        counter = tmp_path / f"counter{n}"
        env = wrapper_env(tmp_path, KILL_GIT_LOCKED=str(n), KILL_GIT_COUNTER=str(counter),
                          KILL_GIT_LOCK_FILE=str(lab.tree / ".git" / "index.lock"))  # fmt: skip
        code = run_group(lab, args, env)
        if code == 0:
            assert n > 1, "no git ran while the index.lock was held"
            break
        assert code == -9, (n, code)
        assert_rolled_back(lab, before, f"{name}: git call {n} under the lock")
        crash_points.append(f"{name}:git call {n} under index.lock")


@needs_strace
@pytest.mark.catalogue(59)
@pytest.mark.regression("a killed undo left the index.lock of its index restore unrecorded; recover was stuck")
@pytest.mark.parametrize("name", ["undo", "reset", "apply"])
def test_kill_while_each_index_lock_is_held(name: str, tmp_path: Path, crash_points: list[str]) -> None:
    """Row 59: stackmgr is killed as it renames each index.lock it took into place (taken and filled, not yet the
    index), the undo's restore of the index bytes included. `recover` used to say "cannot be rolled back:
    .git/index.lock exists" (the restore's lock was recorded as `-`) and `check` kept exiting 1."""
    for n in range(1, 6):
        lab, args = scenario(name, tmp_path / f"n{n}")
        before = before_state(lab)
        lock = lab.tree / ".git" / "index.lock"
        strace = (STRACE or "strace", "-f", "-qq", "-o", "/dev/null", "-P", str(lock),
                  "-e", "trace=rename,renameat,renameat2", "-e",
                  f"inject=rename,renameat,renameat2:signal=KILL:when={n}")  # fmt: skip
        code = run_group(lab, args, dict(os.environ), prefix=strace)
        if code == 0:
            assert n > 1
            break
        assert code in (-9, 137), (n, code)
        assert lock.exists(), n
        assert_rolled_back(lab, before, f"{name}: index.lock rename {n}")
        crash_points.append(f"{name}:index.lock rename {n}")


@pytest.mark.catalogue(59)
@pytest.mark.regression("recover reported an interrupted reset rolled back while it had left the tree as it was")
def test_recover_does_not_report_success_when_it_left_a_tree(tmp_path: Path) -> None:
    """Row 59: `reset` is killed after git's switch completed (recorded); the user then edits README.md, a path
    the reset wrote. The rollback leaves that tree as it is (the edit is never overwritten) and `recover` says so:
    exit 1, naming the tree and where its state before is kept, not "rolled back". `save` still works."""
    lab, args = scenario("reset", tmp_path / "t")
    killed = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), *args],
                            capture_output=True, text=True, env={**os.environ, "STACKMGR_CRASH_AT": "reset:2"})
    assert killed.returncode == -9
    (lab.tree / "README.md").write_text("my edit after the crash\n")
    recovered = sm(lab, "recover")
    assert recovered.returncode == 1, recovered.stderr
    last = recovered.stderr.strip().splitlines()[-1]
    assert "rolled back only in part" in last and "tree vllm" in last, recovered.stderr
    assert "refs/stackmgr/ops/" in recovered.stderr and "README.md changed after" in recovered.stderr
    assert (lab.tree / "README.md").read_text() == "my edit after the crash\n"
    assert "interrupted" not in sm(lab, "check").stderr
    assert sm(lab, "save", "mine", "-m", "mine").returncode == 0


def test_index_lock_without_hard_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a filesystem without hard links the index.lock is taken by git's own O_EXCL create (no marker): the move
    still works and leaves neither a lock nor a marker behind."""
    lab, args = scenario("reset", tmp_path / "t")

    def no_links(*_args: object, **_kw: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    assert lab.sm(*args).code == 0
    assert not (lab.tree / ".git" / "index.lock").exists()
    assert [p.name for p in (lab.tree / ".git" / "stackmgr").iterdir() if p.name.endswith(".index-lock")] == []
    assert lab.sm("check").code == 0


@needs_strace
@pytest.mark.catalogue(59)
@pytest.mark.regression("a kill while apply put an earlier tree back left it half-switched, recorded as moved")
def test_kill_while_apply_puts_the_first_tree_back(tmp_path: Path) -> None:
    """Row 59: a series on two trees; another git holds the second tree's index.lock, so apply puts the first
    back, and the group is killed inside that switch back (README.md half written). The move was recorded as
    `moved`, so the rollback took the 0-byte file for a later edit and left the tree half-switched."""
    lab = _lab(tmp_path / "t")
    kernels = make_repo(tmp_path / "t" / "kernels", {"k.cpp": "int k;\n"})
    assert lab.sm("tree", "add", "kernels", str(kernels)).code == 0
    assert lab.sm("save", "v", "-t", "vllm", "-m", "v").code == 0
    (kernels / "k.cpp").write_text("int k = 1;\n")
    assert lab.sm("save", "k", "-t", "kernels", "-m", "k").code == 0
    assert lab.sm("reset").code == 0
    (lab.store / "series" / "both").write_text("v.patch\nk.patch\n")
    before = before_state(lab)
    foreign = kernels / ".git" / "index.lock"
    fd = os.open(foreign, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # another git at work in the second tree
    try:
        opts = f"-P {lab.tree / 'README.md'} -e trace=write -e inject=write:signal=KILL:when=1"
        env = wrapper_env(tmp_path, KILL_GIT_STRACE=opts, KILL_GIT_NTH="2",
                          KILL_GIT_SWITCHES=str(tmp_path / "switches"))  # fmt: skip
        assert run_group(lab, ["apply", "both"], env) == -9
        assert (lab.tree / "README.md").read_bytes() == b""
    finally:
        os.close(fd)
    assert foreign.exists(), "another git's index.lock was removed"
    foreign.unlink()
    assert_rolled_back(lab, before, "apply both")
