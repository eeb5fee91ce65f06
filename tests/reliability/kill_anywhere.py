"""Seeded random SIGKILLs of the whole process group, anywhere in a command (tests/reliability/test_kill_anywhere.py).

The crash tests (test_crash.py) kill stackmgr at its journal steps, between git calls. Here the kill lands at a
random moment drawn from a seeded RNG, on the process group (stackmgr and the git it is running), in one of three
ways:

- `uniform`: at a moment uniformly in [0, the duration of an unkilled run of the command];
- `window`: inside the journal window: after the k-th journal step (STACKMGR_TRACE_STEPS, watched live), at a
  moment uniformly inside the gap to the next step that an unkilled run showed (a git child is usually running);
- `git`: inside the n-th git child, through a `git` wrapper first on PATH: the group is killed just before the
  real git is exec'd, or after it ran for a few milliseconds (`kill -9 0` from the wrapper).

Then the documented next command runs (docs/RELIABILITY.md, promise 3): `stackmgr recover`, or simply the command
again (chosen by the RNG), and the trial checks what a user finds:

(a) the tree (every file's bytes, mode and link target outside .git; HEAD and branch) and the store files are the
    state before the command (rolled back) or the state an unkilled run ends in; `check` answers as it does there;
    and every byte of the state before is still somewhere the user can get it back: in the tree, in a stored patch,
    or in a snapshot stackmgr anchored under refs/ (for `reset --force`: `stackmgr recover ID` gives it back);
(b) every series file names existing patches, every link record and state file parses, `lint` does not crash;
(c) no traceback and no "internal error" on any stderr;
(d) the command, run again, succeeds (or answers exactly as a second unkilled run does);
(e) no `index.lock` (nor other lock or temp file) is left.

Each scenario's starting point is built once per session (per xdist worker) as a template, and copied for each trial
to the same absolute path it was built at (the store names its tree by path), so a trial costs one copy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import run_stackmgr, tree_files

# --- known failures ------------------------------------------------------------------------------------------
# Findings other work is fixing: a trial whose every failure is listed here is an expected failure (xfail, not
# strict), and the summary line still counts it. Keyed by (command, kind); delete an entry once its fix is merged.
# The command "*" stands for every command. Empty: every finding so far is fixed and pinned by a test.
KNOWN: dict[tuple[str, str], str] = {}


def known_reason(command: str, kind: str) -> str | None:
    return KNOWN.get((command, kind)) or KNOWN.get(("*", kind))

# --- the commands ----------------------------------------------------------------------------------------------

TREE = "vllm"
MODES = ("uniform", "window", "git")
RUN_CMD = ["sh", "-c", "echo 'Output token throughput (tok/s): 99.5'"]


@dataclass(frozen=True)
class Scenario:
    name: str  # the test id's first part
    build: Callable[[Path, Path], list[str]]  # (store, tree) -> the command's arguments; builds the starting point
    base: str = "series"  # the template it starts from
    # Run on each copy, for what a copy cannot carry: `undo` tells a store file changed since by its inode, so the
    # operation it undoes must have run on the copy itself.
    prepare: Callable[[Path, Path], None] | None = None


# The base tree: text, a binary, two symlinks, two scripts (mode changes), an ignored file (never touched).
BASE_FILES: dict[str, bytes] = {
    "README": b"hello\nworld\n",
    "src/model.py": b"def f():\n    return 1\n",
    "src/old.py": b"gone soon\n",
    "docs/guide.md": b"# guide\n",
    "tool.sh": b"#!/bin/sh\necho tool\n",
    "build.sh": b"#!/bin/sh\necho build\n",
    "target_a": b"a\n",
    "target_b": b"b\n",
    "data.bin": bytes(range(256)) * 4,
    ".gitignore": b"*.log\n",
}


def _sm(store: Path, *args: str) -> str:
    result = run_stackmgr("--store", str(store), *args)
    assert result.code == 0, (args, result.err)
    return result.out


def _git(tree: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=tree, capture_output=True, text=True)
    assert proc.returncode == 0, (args, proc.stderr)
    return proc.stdout.strip()


def _write(tree: Path, name: str, data: bytes) -> None:
    path = tree / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _relink(tree: Path, name: str, target: str) -> None:
    (tree / name).unlink()
    os.symlink(target, tree / name)


def build_series(store: Path, tree: Path) -> None:
    """The shared start: a tree at its base commit, branch `upstream` one commit ahead (for rebase), an ignored
    log, and series S of two patches covering every kind of change (edit, deletion, new file, binary, mode,
    symlink), saved and reset."""
    tree.mkdir(parents=True)
    _git(tree, "init", "-q")
    for name, data in BASE_FILES.items():
        _write(tree, name, data)
    os.symlink("target_a", tree / "link")
    os.symlink("target_a", tree / "link2")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", "base")
    _git(tree, "checkout", "-q", "-b", "upstream")
    _write(tree, "README", b"hello\nworld\nupstream\n")
    _write(tree, "docs/up.md", b"upstream doc\n")
    _git(tree, "commit", "-q", "-am", "upstream")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", "upstream doc")
    _git(tree, "checkout", "-q", "main")
    _write(tree, "build.log", b"ignored, never saved nor deleted\n")
    assert run_stackmgr("init", str(store)).code == 0
    _sm(store, "tree", "add", TREE, str(tree))
    (store / "results").mkdir()
    (store / "results" / "probe.log").write_text("Output token throughput (tok/s): 107.77\n")
    _write(tree, "README", b"hello, p1\nworld\n")
    (tree / "src" / "old.py").unlink()
    _write(tree, "notes.txt", b"crlf\r\nline\r\n")
    _write(tree, "data.bin", bytes(range(255, -1, -1)) * 4)
    _sm(store, "save", "p1", "--series", "S", "-m", "p1: readme, notes, data")
    (tree / "tool.sh").chmod(0o755)
    _relink(tree, "link", "target_b")
    _write(tree, "new.bin", b"\0\1\2new binary\0\xff")
    _sm(store, "save", "p2", "--series", "S", "-m", "p2: mode, symlink, binary")
    _sm(store, "reset", TREE)


def dirty(tree: Path) -> None:
    """The day's work, on the base: an edit, a deletion, an untracked file, an untracked binary, a mode change and a
    symlink change."""
    _write(tree, "src/model.py", b"def f():\n    return 2\n")
    (tree / "docs" / "guide.md").unlink()
    _write(tree, "scratch.txt", b"untracked notes\n")
    _write(tree, "blob.bin", b"bin\0ary\1\2\3")
    (tree / "build.sh").chmod(0o755)
    _relink(tree, "link2", "target_b")


def extra(tree: Path) -> None:
    """More edits on top (unsaved): an edit, a new file, a new binary, a deletion, a mode change."""
    readme = tree / "README"
    readme.write_bytes(readme.read_bytes() + b"unsaved line\n")
    _write(tree, "extra.txt", b"unsaved, untracked\n")
    _write(tree, "extra.bin", b"\0unsaved\0")
    (tree / "src" / "model.py").unlink()
    (tree / "target_a").chmod(0o755)


def _saved_work(store: Path, tree: Path) -> None:
    dirty(tree)
    _sm(store, "save", "work", "--series", "W", "-m", "work")


def sc_save(store: Path, tree: Path) -> list[str]:
    dirty(tree)
    return ["save", "work", "--series", "W", "-m", "work"]


def sc_save_update(store: Path, tree: Path) -> list[str]:
    _saved_work(store, tree)
    extra(tree)
    return ["save", "work", "--update"]


def sc_reset(store: Path, tree: Path) -> list[str]:
    _saved_work(store, tree)
    return ["reset", TREE]


def sc_reset_force(store: Path, tree: Path) -> list[str]:
    _saved_work(store, tree)
    extra(tree)
    return ["reset", TREE, "--force"]


def sc_apply(store: Path, tree: Path) -> list[str]:
    _saved_work(store, tree)
    return ["apply", "S"]


def sc_apply_link(store: Path, tree: Path) -> list[str]:
    _sm(store, "apply", "S")
    out = _sm(store, "--json", "link", "p2", str(store / "results" / "probe.log"), "--metric",
              "output_throughput=107.77tok/s")  # fmt: skip
    link = json.loads(out)["id"]
    _sm(store, "reset", TREE)
    _saved_work(store, tree)
    return ["apply", "--link", link]


def sc_undo(store: Path, tree: Path) -> list[str]:
    _saved_work(store, tree)
    return ["undo"]


def prepare_undo(store: Path, tree: Path) -> None:
    _sm(store, "apply", "S")


def sc_link(store: Path, tree: Path) -> list[str]:
    _saved_work(store, tree)
    return ["link", "work", str(store / "results" / "probe.log"), "--metric", "output_throughput=107.77tok/s",
            "--gate", "json=fail", "--verdict", "rejected", "--lesson", "no gain"]  # fmt: skip


def sc_run(store: Path, tree: Path) -> list[str]:
    _saved_work(store, tree)
    return ["run", "-t", TREE, "--link", "work", "--", *RUN_CMD]


def sc_rebase(store: Path, tree: Path) -> list[str]:
    _saved_work(store, tree)
    return ["rebase", "S", "--onto", "upstream"]


def sc_push(store: Path, tree: Path) -> list[str]:
    _sm(store, "apply", "S")
    _sm(store, "pop")
    return ["push"]


def sc_pop(store: Path, tree: Path) -> list[str]:
    _sm(store, "apply", "S")
    return ["pop"]


def sc_refresh(store: Path, tree: Path) -> list[str]:
    _sm(store, "apply", "S")
    extra(tree)
    return ["refresh"]


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("save", sc_save), Scenario("save-update", sc_save_update), Scenario("reset", sc_reset),
    Scenario("reset-force", sc_reset_force), Scenario("apply", sc_apply), Scenario("apply-link", sc_apply_link),
    Scenario("undo", sc_undo, prepare=prepare_undo), Scenario("link", sc_link), Scenario("run", sc_run),
    Scenario("rebase", sc_rebase),
    Scenario("push", sc_push), Scenario("pop", sc_pop), Scenario("refresh", sc_refresh),
)}  # fmt: skip
COMMANDS = list(SCENARIOS)


# --- what a user finds ----------------------------------------------------------------------------------------

# `.stackmgr/record-shas.marshal` is the clone's ledger of link records seen (evidence/records.WrittenOnce): it
# only grows, and the entry of a record a rollback removed is harmless (no record gets that time and id again).
STORE_SKIP = (".stackmgr/cache", ".stackmgr/ops", ".stackmgr/lock", ".stackmgr/record-shas.marshal")
# Empty flock files (a rebase's `.stackmgr/rebase/S.lock`, like the store's own lock): no data, kept after a run.
FLOCK_NAME = re.compile(r"^\.stackmgr/.*\.lock$")
# What a killed `run` measured is kept for the user, never recorded: its log, `.stackmgr/run-<pid>.killed.log`
# (a state both before and after allow; `killed_log_problems` checks it was not recorded after all).
KILLED_LOG = re.compile(r"^\.stackmgr/run-\d+\.killed\.log$")
# A killed writer's leftovers: atomic-write temp files (`.NAME.<pid>.<n>.tmp`), `run`'s tee log (`run-<pid>.log`).
# Not store data: the litter check (e) reports them, once, as what they are.
TEMP_NAME = re.compile(r"(^|/)(\..+\.\d+\.\d+\.tmp|\.stackmgr/run-\d+\.log)$")


def store_files(store: Path) -> dict[str, bytes]:
    """The store's data and state files (not caches, not the journal itself, not the lock, not temp files)."""
    out = {}
    for path in sorted(store.rglob("*")):
        rel = path.relative_to(store).as_posix()
        if rel.startswith(STORE_SKIP) or TEMP_NAME.search(rel) or FLOCK_NAME.match(rel) or KILLED_LOG.match(rel):
            continue
        if path.is_file() and not path.is_symlink():
            out[rel] = path.read_bytes()
    return out


def masked_names(files: dict[str, bytes]) -> list[str]:
    """The store's file names with what differs between two runs masked (link record names: time and id)."""
    names = []
    for rel in files:
        if rel.startswith("links/") and rel.count("/") == 2:
            rel = rel.rsplit("/", 1)[0] + "/<record>"
        names.append(rel)
    return sorted(names)


@dataclass
class State:
    tree: dict[str, tuple[int, bytes]]
    head: str
    branch: str
    store: dict[str, bytes]

    def same_tree(self, other: State) -> bool:
        return (self.tree, self.head, self.branch) == (other.tree, other.head, other.branch)

    def diff(self, other: State) -> str:
        """What differs from `other`, in a line (for failure messages)."""
        paths = sorted(p for p in set(self.tree) | set(other.tree) if self.tree.get(p) != other.tree.get(p))
        parts = []
        if paths:
            parts.append("tree paths " + ", ".join(paths[:8]))
        if self.head != other.head or self.branch != other.branch:
            parts.append(f"HEAD {self.head[:12]} {self.branch} vs {other.head[:12]} {other.branch}")
        files = sorted(p for p in set(self.store) | set(other.store) if self.store.get(p) != other.store.get(p))
        if files:
            parts.append("store files " + ", ".join(files[:8]))
        return "; ".join(parts) or "nothing"


def state_of(store: Path, tree: Path) -> State:
    branch = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=tree, capture_output=True, text=True)
    return State(tree_files(tree), _git(tree, "rev-parse", "HEAD"), branch.stdout.strip(), store_files(store))


def classify(now: State, cal: Calibration) -> set[str]:
    """Which of "before" (exactly: tree and store), "after" (the tree an unkilled run leaves, its store files by
    name), "twice" (the same for the command run twice) the state is; empty: none of them."""
    found = set()
    if now.same_tree(cal.before) and now.store == cal.before.store:
        found.add("before")
    for name, ref in (("after", cal.after), ("twice", cal.twice)):
        if now.same_tree(ref) and masked_names(now.store) == masked_names(ref.store):
            found.add(name)
    return found


def worktree_id(tree: Path) -> str:
    """The tree id of the working tree, untracked files included (what a recovery snapshot stores)."""
    index = tree / ".git" / "kill-anywhere-index"
    env = dict(os.environ, GIT_INDEX_FILE=str(index))
    try:
        subprocess.run(["git", "read-tree", "HEAD"], cwd=tree, env=env, check=True)
        subprocess.run(["git", "add", "-A"], cwd=tree, env=env, check=True)
        out = subprocess.run(["git", "write-tree"], cwd=tree, env=env, check=True, capture_output=True, text=True)
    finally:
        index.unlink(missing_ok=True)
    return out.stdout.strip()


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


_INDEX_LINE = re.compile(rb"^index [0-9a-f]{7,40}\.\.([0-9a-f]{40})", re.M)


def lost_bytes(before: State, store: Path, tree: Path) -> list[str]:
    """Paths of the state before whose content is nowhere now: not in the tree, not in any stored patch (their
    full blob ids), not in anything reachable from the tree's refs (recovery snapshots, journal anchors, HEAD)."""
    found = {blob_id(data) for _mode, data in tree_files(tree).values()}
    for patch in store.rglob("*.patch"):
        found.update(m.decode() for m in _INDEX_LINE.findall(patch.read_bytes()))
    for path in (store / "artifacts").rglob("*") if (store / "artifacts").is_dir() else ():
        if path.is_file():
            found.update(m.decode() for m in _INDEX_LINE.findall(path.read_bytes()))
    objects = subprocess.run(["git", "rev-list", "--objects", "--all", "HEAD"], cwd=tree, capture_output=True)
    found.update(line.split(b" ", 1)[0].decode() for line in objects.stdout.splitlines())
    return sorted(path for path, (_mode, data) in before.tree.items() if blob_id(data) not in found)


def store_problems(store: Path) -> list[str]:
    """(b): series entries name existing patches; link records and JSON state files parse."""
    problems = []
    for series in sorted((store / "series").iterdir()) if (store / "series").is_dir() else ():
        if not series.is_file():
            continue
        try:
            text = series.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"series/{series.name}: {exc}")
            continue
        for line in text.splitlines():
            entry = line.split("#", 1)[0].split()
            if entry and not (store / "patches" / entry[0]).is_file():
                problems.append(f"series/{series.name} names missing {entry[0]}")
    for record in (store / "links").rglob("*.toml") if (store / "links").is_dir() else ():
        try:
            if not tomllib.loads(record.read_text()):
                problems.append(f"{record}: empty")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            problems.append(f"{record.relative_to(store)}: {exc}")
    for state in (store / ".stackmgr").glob("*.json"):
        try:
            json.loads(state.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{state.relative_to(store)}: {exc}")
    return problems


def _records(files: dict[str, bytes]) -> int:
    return sum(1 for rel in files if rel.startswith("links/") and rel.count("/") == 2)


def killed_log_problems(store: Path, cal: Calibration) -> list[str]:
    """A killed run's log is kept as `run-<pid>.killed.log` only when it was not recorded (the warning that kept it
    says so): with as many records as two unkilled runs leave, the killed run's record stands, and a kept log of
    it would be a false warning and a second copy."""
    logs = sorted(p.name for p in (store / ".stackmgr").glob("run-*.killed.log"))
    if logs and _records(store_files(store)) >= _records(cal.twice.store) > _records(cal.before.store):
        return [f"{', '.join(logs)} kept as not recorded, but the killed run's record stands"]
    return []


def litter(store: Path, tree: Path) -> list[str]:
    """(e): locks and temp files a killed command left: git's `*.lock` in the tree's .git, stackmgr's private
    indexes of dead processes, `.NAME.<pid>.<n>.tmp` files in the store, scratch worktrees."""
    found = []
    git_dir = tree / ".git"
    for path in git_dir.rglob("*.lock"):
        if "objects" not in path.relative_to(git_dir).parts:
            found.append(str(path.relative_to(tree)))
    own = git_dir / "stackmgr"
    for path in own.iterdir() if own.is_dir() else ():
        parts = path.name.split(".")
        if len(parts) >= 3 and parts[-1] == "index" and parts[-2].isdigit():
            found.append(str(path.relative_to(tree)))
    for path in store.rglob("*"):
        if TEMP_NAME.search(path.relative_to(store).as_posix()):
            found.append(str(path.relative_to(store.parent)))
    worktrees = git_dir / "worktrees"
    if worktrees.is_dir() and any(worktrees.iterdir()):
        found.append(".git/worktrees/" + ",".join(sorted(p.name for p in worktrees.iterdir())))
    return sorted(found)


def trouble(stderr: str) -> bool:
    return "Traceback" in stderr or "internal error" in stderr


# --- running a command ------------------------------------------------------------------------------------------

GIT_WRAPPER = r"""#!/bin/sh
# The kill-anywhere git: counts its calls (SMK_GIT_COUNT) and, at call SMK_GIT_KILL_N, SIGKILLs its whole process
# group (stackmgr's: `kill -9 0`) before the real git runs, or after it ran for SMK_GIT_KILL_S seconds.
if [ -n "$SMK_GIT_COUNT" ]; then
  exec 9>>"$SMK_GIT_COUNT.lock"
  flock 9
  n=0
  if [ -s "$SMK_GIT_COUNT" ]; then read -r n < "$SMK_GIT_COUNT"; fi
  n=$((n + 1))
  echo "$n" > "$SMK_GIT_COUNT"
  printf '%s %s\n' "$n" "$*" >> "$SMK_GIT_COUNT.log"
  exec 9>&-
  if [ "$n" = "${SMK_GIT_KILL_N:-}" ]; then
    if [ "$SMK_GIT_KILL_MODE" = before ]; then kill -9 0; fi
    exec 3<&0
    "$SMK_REAL_GIT" "$@" <&3 3<&- &
    sleep "$SMK_GIT_KILL_S"
    kill -9 0
  fi
fi
exec "$SMK_REAL_GIT" "$@"
"""


def install_git_wrapper(directory: Path) -> Path:
    real = shutil.which("git")
    assert real, "no git on PATH"
    directory.mkdir(parents=True, exist_ok=True)
    wrapper = directory / "git"
    wrapper.write_text(GIT_WRAPPER)
    wrapper.chmod(0o755)
    (directory / "real-git").write_text(os.path.realpath(real))
    return directory


@dataclass
class Launched:
    proc: subprocess.Popen[bytes]
    started: float
    trace: Path
    out: Path
    err: Path
    count: Path


def launch(kit: Kit, args: list[str], work: Path, **env: str) -> Launched:
    """`python -m stackmgr --store …` in a session of its own (its own process group), through the git wrapper."""
    trace, out, err, count = (work / n for n in ("steps.txt", "stdout.txt", "stderr.txt", "git-count"))
    for path in (trace, count, Path(f"{count}.log")):
        path.unlink(missing_ok=True)
    full = {**os.environ, "PATH": f"{kit.wrapper}{os.pathsep}{os.environ['PATH']}", "SMK_REAL_GIT": kit.real_git,
            "STACKMGR_TRACE_STEPS": str(trace), "SMK_GIT_COUNT": str(count), **env}  # fmt: skip
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "stackmgr", "--store", str(kit.store), *args], stdout=o,
                                stderr=e, stdin=subprocess.DEVNULL, env=full, start_new_session=True)  # fmt: skip
    return Launched(proc, time.monotonic(), trace, out, err, count)


def lines_of(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def wait_group_gone(pgid: int, timeout: float = 5.0) -> None:
    """Until no live process is left in the group (a killed git's orphans are reaped by init)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        alive = False
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != b"Z":
                alive = True
                break
        if not alive:
            return
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.005)


@dataclass
class Calibration:
    """What an unkilled run shows: its duration, its journal steps and when each came (seconds from the start),
    how many git children it ran, the states before, after it and after a second run, and `check`'s answers."""

    args: list[str]
    duration: float
    steps: list[tuple[float, str]]
    git_calls: int
    before: State
    after: State
    twice: State
    twice_code: int
    checks: dict[str, int]
    before_id: str  # the working tree's id before (untracked files included)


def calibrate(kit: Kit, scenario: Scenario, work: Path) -> Calibration:
    warm = stackmgr(kit.store, *kit.use(scenario.name))  # a cold first run's timings would mislead the kill's moment
    assert warm.returncode == 0, (scenario.name, warm.stderr)
    args = kit.use(scenario.name)
    before = state_of(kit.store, kit.tree)
    before_id = worktree_id(kit.tree)
    checks = {"before": stackmgr(kit.store, "check").returncode}
    run = launch(kit, args, work)
    steps: list[tuple[float, str]] = []
    while True:
        done = run.proc.poll() is not None
        seen = lines_of(run.trace)
        now = time.monotonic() - run.started
        steps += [(now, label) for label in seen[len(steps):]]
        if done:
            break
        time.sleep(0.0005)
    duration = time.monotonic() - run.started
    err = run.err.read_text()
    assert run.proc.returncode == 0, (scenario.name, args, err)
    calls = int(run.count.read_text()) if run.count.exists() else 0
    after = state_of(kit.store, kit.tree)
    checks["after"] = stackmgr(kit.store, "check").returncode
    second = stackmgr(kit.store, *args)
    assert not trouble(second.stderr), second.stderr
    twice = state_of(kit.store, kit.tree)
    checks["twice"] = stackmgr(kit.store, "check").returncode
    return Calibration(args, duration, steps, calls, before, after, twice, second.returncode, checks, before_id)


def stackmgr(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STACKMGR_", "SMK_"))}
    return subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(store), *args], capture_output=True,
                          text=True, env=env, stdin=subprocess.DEVNULL)  # fmt: skip


# --- templates ----------------------------------------------------------------------------------------------------


@dataclass
class Kit:
    """A session's (an xdist worker's) templates and calibrations. The live directory is where every template
    was built and where each trial's copy goes, so the absolute paths the store and git record stay right."""

    root: Path
    wrapper: Path
    real_git: str
    templates: dict[str, tuple[Path, list[str]]] = field(default_factory=dict)
    calibrations: dict[str, Calibration] = field(default_factory=dict)

    @property
    def live(self) -> Path:
        return self.root / "live"

    @property
    def store(self) -> Path:
        return self.live / "store"

    @property
    def tree(self) -> Path:
        return self.live / TREE

    def _clear_live(self) -> None:
        if self.live.exists():
            shutil.rmtree(self.live)

    def _template(self, name: str) -> tuple[Path, list[str]]:
        if name not in self.templates:
            self._clear_live()
            if name == "series":
                build_series(self.store, self.tree)
                args: list[str] = []
            else:
                base, _ = self._template(SCENARIOS[name].base)
                self._clear_live()
                shutil.copytree(base, self.live, symlinks=True)
                args = SCENARIOS[name].build(self.store, self.tree)
            saved = self.root / "templates" / name
            saved.parent.mkdir(exist_ok=True)
            os.rename(self.live, saved)
            self.templates[name] = (saved, args)
        return self.templates[name]

    def use(self, name: str) -> list[str]:
        """The live directory: a fresh copy of the scenario's starting point; the command's arguments."""
        saved, args = self._template(name)
        self._clear_live()
        shutil.copytree(saved, self.live, symlinks=True)
        prepare = SCENARIOS[name].prepare
        if prepare is not None:
            prepare(self.store, self.tree)
        return args

    def calibration(self, name: str) -> Calibration:
        if name not in self.calibrations:
            work = self.root / "calibrate" / name
            work.mkdir(parents=True, exist_ok=True)
            self.calibrations[name] = calibrate(self, SCENARIOS[name], work)
        return self.calibrations[name]


def make_kit(root: Path) -> Kit:
    wrapper = install_git_wrapper(root / "bin")
    return Kit(root, wrapper, (wrapper / "real-git").read_text())


# --- one trial -----------------------------------------------------------------------------------------------------


@dataclass
class Failure:
    kind: str  # the key of KNOWN, with the command
    cls: str  # "invariant", "internal", "bytes-lost"
    detail: str


@dataclass
class Trial:
    command: str
    seed: int
    n: int
    mode: str = ""
    next_step: str = ""
    how: str = ""  # where the kill landed, in words
    failures: list[Failure] = field(default_factory=list)
    log: list[str] = field(default_factory=list)  # what ran, with exit codes and stderr

    def fail(self, kind: str, detail: str, cls: str = "invariant") -> None:
        self.failures.append(Failure(kind, cls, detail))

    def ran(self, what: str, code: int | None, stderr: str) -> None:
        self.log.append(f"$ {what}  -> exit {code}\n{stderr.rstrip()}")
        if trouble(stderr):
            self.fail("internal-error", f"{what}: {stderr.strip()[-600:]}", "internal")

    def known(self) -> bool:
        return bool(self.failures) and all(known_reason(self.command, f.kind) for f in self.failures)

    def report(self) -> str:
        head = f"{self.command} seed {self.seed} trial {self.n}: {self.mode} kill ({self.how}), then {self.next_step}"
        fails = "\n".join(f"  [{f.cls}] {f.kind}: {f.detail}" for f in self.failures)
        return f"{head}\n{fails}\n--- commands:\n" + "\n".join(self.log)


def kill_run(kit: Kit, cal: Calibration, trial: Trial, rng: random.Random, work: Path) -> Launched:
    """Start the command and kill its process group at the moment the trial's mode draws."""
    env: dict[str, str] = {}
    mode = trial.mode
    if mode == "window" and not cal.steps:
        mode = "uniform"
    if mode == "git" and cal.git_calls == 0:
        mode = "uniform"
    if mode == "git":
        n = rng.randint(1, cal.git_calls)
        when = rng.choice(("before", "during"))
        delay = rng.uniform(0.0005, 0.008)
        env = {"SMK_GIT_KILL_N": str(n), "SMK_GIT_KILL_MODE": when, "SMK_GIT_KILL_S": f"{delay:.4f}"}
        moment = "before exec" if when == "before" else f"{delay * 1000:.1f} ms in"
        trial.how = f"git call {n} of {cal.git_calls}, {moment}"
    run = launch(kit, cal.args, work, **env)
    if mode == "uniform":
        delay = rng.uniform(0, cal.duration)
        trial.how = f"at {delay * 1000:.1f} ms of {cal.duration * 1000:.0f}"
        _sleep_until(run, delay)
    elif mode == "window":
        k = rng.randint(1, len(cal.steps))
        end = cal.steps[k][0] if k < len(cal.steps) else cal.duration
        delay = rng.uniform(0, max(end - cal.steps[k - 1][0], 0.0005))
        trial.how = f"{delay * 1000:.1f} ms after step {k} ({cal.steps[k - 1][1]})"
        while run.proc.poll() is None and len(lines_of(run.trace)) < k:
            time.sleep(0.0002)
        _sleep_until(run, time.monotonic() - run.started + delay)
    if run.proc.poll() is None and mode != "git":
        try:
            os.killpg(run.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        run.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(run.proc.pid, signal.SIGKILL)
        run.proc.wait()
    wait_group_gone(run.proc.pid)
    return run


def _sleep_until(run: Launched, at: float) -> None:
    while run.proc.poll() is None:
        left = at - (time.monotonic() - run.started)
        if left <= 0:
            return
        time.sleep(min(left, 0.002))


def run_trial(kit: Kit, command: str, seed: int, n: int, work: Path) -> Trial:
    rng = random.Random(f"kill-anywhere/{seed}/{command}/{n}")
    trial = Trial(command, seed, n, mode=MODES[n % len(MODES)])
    trial.next_step = rng.choice(("recover", "again"))
    cal = kit.calibration(command)
    args = kit.use(command)
    store, tree = kit.store, kit.tree
    before = state_of(store, tree)
    if not (before.same_tree(cal.before) and masked_names(before.store) == masked_names(cal.before.store)):
        trial.fail("fixture", f"the copy differs from the template: {before.diff(cal.before)}")
        return trial
    cal = dataclasses.replace(cal, before=before)  # the same, but for what `prepare` wrote afresh (times)

    run = kill_run(kit, cal, trial, rng, work)
    code = run.proc.returncode
    steps = lines_of(run.trace)
    trial.how += f"; reached {steps[-1] if steps else 'no journal step'}"
    if code == -9 and trial.mode == "git":
        calls = lines_of(Path(f"{run.count}.log"))
        trial.how += f"; last git: {_git_call(calls[-1]) if calls else '-'}"
    trial.ran(f"stackmgr {' '.join(args)}  [killed]", code, run.err.read_text())
    if code != -signal.SIGKILL:
        trial.how += f"; not killed (exit {code})"
        if code != 0:
            trial.fail("exit", f"the command, not killed, exited {code}")
    for problem in store_problems(store):
        trial.fail("store-broken", f"right after the kill: {problem}")

    if trial.next_step == "recover":
        _recover_then_rerun(trial, cal, args, store, tree)
    else:
        _rerun_then_recover(trial, cal, args, store, tree)

    # (b) the store whole, lint not crashing
    for problem in store_problems(store):
        trial.fail("store-broken", problem)
    lint = stackmgr(store, "lint")
    trial.ran("stackmgr lint", lint.returncode, lint.stderr)
    if lint.returncode not in (0, 1):
        trial.fail("lint", f"`lint` exited {lint.returncode}: {lint.stderr.strip()}")

    # (a) every byte of the state before is somewhere; a forced reset's snapshot gives it back
    lost = lost_bytes(cal.before, store, tree)
    if lost:
        trial.fail("bytes-lost", "content before the command is nowhere now: " + ", ".join(lost), "bytes-lost")
    if command == "reset-force":
        _check_recovery(trial, cal, store, tree)

    for problem in killed_log_problems(store, cal):
        trial.fail("killed-log", problem)

    # (e) nothing left behind
    left = litter(store, tree)
    for kind in sorted({_litter_kind(p) for p in left}):
        trial.fail(kind, "left behind: " + ", ".join(p for p in left if _litter_kind(p) == kind))
    return trial


def _litter_kind(path: str) -> str:
    if path == ".git/index.lock":
        return "index.lock"  # the user's own index: git refuses to work until it is removed
    if path.startswith(".git/stackmgr/") and path.endswith(".lock"):
        return "private-index.lock"  # stackmgr's snapshot index: it can no longer be refreshed
    return "lock" if path.endswith(".lock") else "temp-file"


def _rerun_kind(stderr: str, tree: Path) -> str:
    """A re-run refused because of a lock a killed git left counts as that lock's failure."""
    if "index.lock exists" in stderr:
        return "index.lock"
    if "changed after the check" in stderr and any((tree / ".git" / "stackmgr").glob("*.lock")):
        return "private-index.lock"
    return "rerun"


def _git_call(logged: str) -> str:
    """A logged git call without its pinned `-c` settings."""
    words = logged.split()
    out = [w for i, w in enumerate(words) if w != "-c" and (i == 0 or words[i - 1] != "-c")]
    return " ".join(out)[:200]


def _recover_then_rerun(trial: Trial, cal: Calibration, args: list[str], store: Path, tree: Path) -> None:
    """`check` says an operation was interrupted, `recover` rolls it back (or finds it done): the state is the one
    before or the one after. Then the command again: from before it does its work; from after it answers as a
    second unkilled run does."""
    record = _current_record(store)
    if record is not None and "\nstate\tdone\n" not in record:
        check = stackmgr(store, "check")
        trial.ran("stackmgr check", check.returncode, check.stderr)
        if check.returncode != 1 or "interrupted" not in check.stderr:
            trial.fail("check", f"`check` with an interrupted operation pending: exit {check.returncode}, "
                                f"{check.stderr.strip()!r}")  # fmt: skip
    recovered = stackmgr(store, "recover")
    trial.ran("stackmgr recover", recovered.returncode, recovered.stderr)
    if recovered.returncode != 0:
        trial.fail("recover", f"`recover` exited {recovered.returncode}: {recovered.stderr.strip()}")
    found = _settled(trial, cal, store, tree, ("before", "after"), "after recover")
    again = stackmgr(store, *args)
    trial.ran(f"stackmgr {' '.join(args)}  [re-run]", again.returncode, again.stderr)
    final = classify(state_of(store, tree), cal)
    if "before" in found and again.returncode == 0 and "after" in final:
        return
    if "after" in found and again.returncode == cal.twice_code and "twice" in final:
        return
    if found & {"before", "after"}:
        trial.fail(_rerun_kind(again.stderr, tree),
                   f"re-run from the state {'/'.join(sorted(found))}: exit {again.returncode} (an unkilled run: 0, "
                   f"a second one: {cal.twice_code}; {again.stderr.strip()}), then {_named(final)}")  # fmt: skip
    elif again.returncode not in (0, 1, 2, 3) or (again.returncode and not _clean_refusal(again.stderr)):
        trial.fail("rerun", f"re-run: exit {again.returncode} without a clear line: {again.stderr.strip()!r}")


def _rerun_then_recover(trial: Trial, cal: Calibration, args: list[str], store: Path, tree: Path) -> None:
    """The command again at once (it rolls the interrupted one back itself): it ends where an unkilled run does, or,
    when the killed one had finished, where a second run does; `recover` then has nothing to do."""
    again = stackmgr(store, *args)
    trial.ran(f"stackmgr {' '.join(args)}  [again]", again.returncode, again.stderr)
    found = _settled(trial, cal, store, tree, ("after", "twice"), "after the command again")
    if not (("after" in found and again.returncode == 0) or ("twice" in found and again.returncode == cal.twice_code)):
        if found & {"after", "twice"}:
            trial.fail(_rerun_kind(again.stderr, tree),
                       f"the command again: exit {again.returncode} (an unkilled run: 0, a second one: "
                       f"{cal.twice_code}; {again.stderr.strip()}), in {_named(found)}")  # fmt: skip
        elif again.returncode not in (0, 1, 2, 3) or (again.returncode and not _clean_refusal(again.stderr)):
            trial.fail("rerun", f"the command again: exit {again.returncode} without a clear line: "
                                f"{again.stderr.strip()!r}")  # fmt: skip
    recovered = stackmgr(store, "recover")
    trial.ran("stackmgr recover", recovered.returncode, recovered.stderr)
    if recovered.returncode != 0:
        trial.fail("recover", f"`recover` exited {recovered.returncode}: {recovered.stderr.strip()}")


def _settled(trial: Trial, cal: Calibration, store: Path, tree: Path, allowed: tuple[str, str],
             when: str) -> set[str]:  # fmt: skip
    """(a) and `check`: the state is one of `allowed`, and `check` answers there as in an unkilled run; no
    index.lock is left. Returns which states it matches."""
    now = state_of(store, tree)
    found = classify(now, cal)
    where = next((name for name in allowed if name in found), None)
    if where is None:
        nearest = cal.before if allowed[0] == "before" else cal.after
        trees = {"before": cal.before, "after": cal.after, "twice": cal.twice}
        switched = not any(now.same_tree(trees[name]) for name in allowed)  # the tree itself, or only the store
        trial.fail("half-switched" if switched else "half-state",
                   f"{when}: neither {' nor '.join(allowed)} ({_named(found)}); differs from {allowed[0]} in "
                   f"{now.diff(nearest)}")  # fmt: skip
    check = stackmgr(store, "check")
    trial.ran("stackmgr check", check.returncode, check.stderr)
    if where is not None and check.returncode != cal.checks[where]:
        trial.fail("check", f"`check` {when} ({where}) exited {check.returncode}, in an unkilled run "
                            f"{cal.checks[where]}: {check.stderr.strip()}")  # fmt: skip
    if (tree / ".git" / "index.lock").exists():
        trial.fail("index.lock", f"{when}: .git/index.lock left in the tree")
    return found


def _named(found: set[str]) -> str:
    return "state " + "/".join(sorted(found)) if found else "a state that is neither before nor after"


def _check_recovery(trial: Trial, cal: Calibration, store: Path, tree: Path) -> None:
    """Unless the tree still holds the state before the forced reset, a recovery snapshot of exactly that state is
    listed, and `stackmgr recover ID` gives it back, byte for byte (HEAD too)."""
    now = state_of(store, tree)
    if now.same_tree(cal.before):
        return
    listed = stackmgr(store, "--json", "recover")
    trial.ran("stackmgr --json recover", listed.returncode, listed.stderr)
    found = json.loads(listed.stdout)["recoveries"] if listed.returncode == 0 else []
    ids = [r["id"] for r in found if _tree_of(tree, r["commit"]) == cal.before_id]
    if not ids:
        trial.fail("recovery-missing", f"the tree was reset, and no recovery snapshot holds its state before "
                                       f"({[r['id'] for r in found]} do not)", "bytes-lost")  # fmt: skip
        return
    restored = stackmgr(store, "recover", ids[0])
    trial.ran(f"stackmgr recover {ids[0]}", restored.returncode, restored.stderr)
    now = state_of(store, tree)
    if restored.returncode != 0 or now.tree != cal.before.tree or now.head != cal.before.head:
        trial.fail("recovery", f"`recover {ids[0]}` exited {restored.returncode} and left the tree differing from "
                               f"before in {now.diff(cal.before)}", "bytes-lost")  # fmt: skip


def _tree_of(tree: Path, commit: str) -> str:
    out = subprocess.run(["git", "rev-parse", f"{commit}^{{tree}}"], cwd=tree, capture_output=True, text=True)
    return out.stdout.strip()


def _current_record(store: Path) -> str | None:
    try:
        name = (store / ".stackmgr" / "ops" / "CURRENT").read_text().strip()
        return (store / ".stackmgr" / "ops" / name / "op").read_text()
    except OSError:
        return None


def _clean_refusal(stderr: str) -> bool:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    return bool(lines) and any(ln.startswith("stackmgr: ") for ln in lines) and not trouble(stderr)
