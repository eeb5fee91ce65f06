"""Workloads and measuring parts of bench_scaling.py: Chromium-shaped trees, dirty states, git's big-tree
settings, one state's medians against git, the check of stackmgr's answer against git's, log-log slopes and the
growth table.

A tree of N files is N - 1 small text files (.cc, .h, .py; 20–200 lines each) in directories of 20–40 files
nested 3–5 deep under Chromium's top-level names, plus one tracked binary (bench_check_save's BINARY_NAME, so its
`make_dirty` fits). It is deterministic from (seed, N), and its text comes from a pool of rendered lines sliced
per file (each file starts with its own path: no two blobs alike), so 100,000 files take seconds to write.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_check_save import BINARY_NAME, Bench, BenchError, commit_tree, paired_medians, run, timed, tracked_sources

TOPS = (
    "base", "cc", "chrome", "components", "content", "crypto", "device", "extensions", "gpu", "ipc", "media",
    "mojo", "net", "printing", "remoting", "sandbox", "services", "skia", "sql", "storage", "third_party",
    "tools", "ui", "url", "v8",
)  # fmt: skip
PARTS = (
    "browser", "renderer", "common", "public", "internal", "test", "cpp", "mojom", "android", "win", "mac",
    "linux", "chromeos", "views", "cocoa", "gtk", "ash", "webui", "resources", "metrics", "policy", "sync",
    "autofill", "download", "history", "omnibox", "permissions", "prefs", "profiles", "extensions", "devtools",
    "accessibility", "compositor", "layers", "paint", "animation", "input", "loader", "fetch", "quic", "http",
    "dns", "cert", "socket", "proxy", "cookies", "disk_cache", "storage", "indexeddb", "service_worker", "gpu",
    "vulkan", "webgpu", "codec", "audio", "video", "capture", "bluetooth", "usb", "hid", "serial", "memory",
)  # fmt: skip
EXTS = (".cc", ".cc", ".cc", ".h", ".h", ".h", ".py")
CC_LINES = (
    "#include \"{p}/{w}.h\"", "namespace {w} {{", "}}  // namespace {w}", "", "void {W}::Reset() {{",
    "  DCHECK_CALLED_ON_VALID_SEQUENCE(sequence_checker_);", "  for (size_t i = 0; i < {n}u; ++i) {{",
    "    {w}_[i] = base::TimeDelta::FromMilliseconds({n});", "  }}", "  return std::make_unique<{W}>({n});",
    "// {W} owns the {w} state of one frame; see {p}/README.md.", "  if (!{w}_enabled_) return false;",
    "class {W} : public {W}Base {{", " public:", "  explicit {W}(int {w});", "  ~{W}() override;",
    " private:", "  raw_ptr<{W}Delegate> delegate_ = nullptr;", "  base::WeakPtrFactory<{W}> weak_factory_{{this}};",
)  # fmt: skip
PY_LINES = (
    "def {w}_{n}(api, input_api):", "    return [f for f in api.AffectedFiles() if '{w}' in f]", "",
    "class {W}Test(unittest.TestCase):", "    def test_{w}(self):", "        self.assertEqual({n}, {w}({n}))",
    "import os", "from {p} import {w}", "    # {w}: keep the {n} entries sorted",
)  # fmt: skip
POOL_LINES = 20_000
SLOW_MS = 2000  # a command whose first run takes longer gets the slow rounds


@dataclass(frozen=True)
class Built:
    files: int
    dirs: int
    mib: float


def chromium_layout(rng: random.Random, files: int) -> list[str]:
    """Relative paths of `files` source files: directories of 20–40 files, 3–5 levels deep."""
    paths: list[str] = []
    d = 0
    while len(paths) < files:
        depth = rng.randint(3, 5)
        directory = "/".join([rng.choice(TOPS), *rng.sample(PARTS, depth - 2), f"{rng.choice(PARTS)}_{d}"])
        for j in range(min(rng.randint(20, 40), files - len(paths))):
            paths.append(f"{directory}/{rng.choice(PARTS)}_{j}{rng.choice(EXTS)}")
        d += 1
    return paths


def line_pool(rng: random.Random, templates: Sequence[str]) -> list[bytes]:
    pool = []
    for _ in range(POOL_LINES):
        w = rng.choice(PARTS)
        camel = w.title().replace("_", "")
        line = rng.choice(templates).format(w=w, W=camel, p=rng.choice(TOPS), n=rng.randrange(4096))
        pool.append(line.encode() + b"\n")
    return pool


def build_chromium_tree(tree: Path, files: int, seed: int, env: dict[str, str]) -> Built:
    """Write the tree (files - 1 sources and the binary), `git init`, `git add -A`, `git commit`."""
    rng = random.Random(f"chromium/{seed}/{files}")
    pools = {".py": line_pool(rng, PY_LINES), ".cc": line_pool(rng, CC_LINES)}
    paths = chromium_layout(rng, files - 1)
    made: set[Path] = set()
    total = 0
    for rel in paths:
        target = tree / rel
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        pool = pools[".py" if rel.endswith(".py") else ".cc"]
        n = rng.randint(20, 200)
        at = rng.randrange(POOL_LINES - n)
        data = (b"# " if rel.endswith(".py") else b"// ") + rel.encode() + b"\n" + b"".join(pool[at : at + n - 1])
        target.write_bytes(data)
        total += len(data)
    (tree / BINARY_NAME).parent.mkdir(parents=True, exist_ok=True)
    (tree / BINARY_NAME).write_bytes(rng.randbytes(64 * 1024))
    commit_tree(tree, env)
    return Built(len(paths) + 1, len(made), total / 2**20)


# --- dirty states -------------------------------------------------------------------------------------------


def reset_tree(tree: Path, env: dict[str, str]) -> None:
    """Back to HEAD with git itself (the bench's own scratch tree: `stackmgr reset` would refuse unsaved work)."""
    run(["git", "checkout", "--", "."], tree, env)
    run(["git", "clean", "-fdq"], tree, env)
    if run(["git", "status", "--porcelain"], tree, env).strip():
        raise BenchError(f"{tree} is not clean after `git checkout -- . && git clean -fdq`")


def modify(tree: Path, env: dict[str, str], count: int, rng: random.Random) -> list[str]:
    """Append a line to `count` tracked source files."""
    sources = tracked_sources(tree, env)
    if count > len(sources):
        raise BenchError(f"{count} modified files asked of a tree of {len(sources)} sources")
    picks = sorted(rng.sample(sources, count))
    for i, rel in enumerate(picks):
        with open(tree / rel, "ab") as f:
            f.write(b"// bench change %d of %d\n" % (i, count))
    return picks


def git_changed_paths(tree: Path, env: dict[str, str]) -> set[str]:
    """Every changed path by `git status` (untracked files one by one, no rename pairing)."""
    out = run(["git", "status", "--porcelain", "-z", "--untracked-files=all", "--no-renames"], tree, env)
    return {rec[3:].decode() for rec in out.split(b"\0") if rec}


# --- one state: check, status and save against git ----------------------------------------------------------


@dataclass(frozen=True)
class Medians:
    git_status: float
    check: float
    git_numstat: float
    status: float
    pipeline: float = 0.0
    save: float = 0.0


def git_status_numstat(bench: Bench) -> None:
    """What `stackmgr status` shows, asked of git: the changes, then their line counts."""
    run(["git", "status"], bench.tree, bench.env)
    run(["git", "diff", "HEAD", "--numstat"], bench.tree, bench.env)


def measure_state(bench: Bench, rounds: int, save_rounds: int, save_as: str | None, expect: int = 1) -> Medians:
    """check and status paired with git (`rounds`); then, when `save_as` is given, save paired with the raw git
    pipeline (`save_rounds`), each round under a new name: a full save with its verification."""
    git_ms, check_ms = paired_medians(bench.git_status, lambda: bench.stackmgr_run("check", ok=(expect,)), rounds)
    numstat_ms, status_ms = paired_medians(
        lambda: git_status_numstat(bench), lambda: bench.stackmgr_run("status"), rounds
    )
    if save_as is None:
        return Medians(git_ms, check_ms, numstat_ms, status_ms)
    counter = itertools.count(1)

    def save() -> None:
        bench.stackmgr_run("save", f"{save_as}-{next(counter)}", "-m", "x")

    pipeline_ms, save_ms = paired_medians(bench.git_save_pipeline, save, save_rounds)
    return Medians(git_ms, check_ms, numstat_ms, status_ms, pipeline_ms, save_ms)


def adaptive_median(action: Callable[[], object], rounds: int, slow_rounds: int) -> float:
    """Warm once (timed): `rounds` more when that took under SLOW_MS, else `slow_rounds`."""
    first = timed(action)
    return statistics.median(timed(action) for _ in range(rounds if first < SLOW_MS else slow_rounds))


def verify(bench: Bench, label: str) -> int:
    """stackmgr must see what git sees: check's exit code, and status --json's changed paths (else BenchError).
    Returns the exit code check gives."""
    expected = git_changed_paths(bench.tree, bench.env)
    expect = 1 if expected else 0
    try:
        bench.stackmgr_run("check", ok=(expect,))
    except BenchError as exc:
        raise BenchError(f"{label}: stackmgr check is wrong ({len(expected)} changes by git): {exc}") from None
    data = json.loads(bench.stackmgr_run("--json", "status"))
    seen = {c["path"] for t in data["trees"] for c in [*t["changes"], *t["unprotected"]]}
    if seen != expected:
        missing, extra = sorted(expected - seen)[:5], sorted(seen - expected)[:5]
        raise BenchError(f"{label}: stackmgr status --json differs from git status: missing {missing}, extra {extra}")
    return expect


# --- git's big-tree settings (in the user's repository) -----------------------------------------------------


@dataclass(frozen=True)
class Setting:
    label: str
    config: tuple[tuple[str, str], ...]
    warm: tuple[str, ...]  # `git update-index` options that put the setting into the index at once


SETTINGS = (
    Setting("core.untrackedCache=true", (("core.untrackedCache", "true"),), ("--untracked-cache",)),
    Setting("index.skipHash=true", (("index.skipHash", "true"),), ()),
    Setting("core.splitIndex=true", (("core.splitIndex", "true"),), ("--split-index",)),
    Setting("feature.manyFiles=true", (("feature.manyFiles", "true"),), ("--index-version", "4", "--untracked-cache")),
)
UNDO = ("--no-split-index", "--no-untracked-cache", "--index-version", "2")


def apply_setting(tree: Path, env: dict[str, str], setting: Setting) -> None:
    for key, value in setting.config:
        run(["git", "config", key, value], tree, env)
    run(["git", "update-index", *setting.warm, "--force-write-index"], tree, env)
    for _ in range(2):  # warm: a status fills the untracked cache and writes the index
        run(["git", "status", "--porcelain"], tree, env)


def undo_setting(tree: Path, env: dict[str, str], setting: Setting) -> None:
    """Unset the keys and write the index back as it was (git itself drops the split index; nothing is removed
    inside .git by hand: a shared index file left behind is git's to expire)."""
    for key, _ in setting.config:
        run(["git", "config", "--unset", key], tree, env)
    run(["git", "update-index", *UNDO, "--force-write-index"], tree, env)
    run(["git", "status", "--porcelain"], tree, env)


def index_trailer_is_null(tree: Path) -> bool:
    """index.skipHash writes a null checksum at the end of the index (git 2.40 and later; older git ignores it)."""
    with open(tree / ".git" / "index", "rb") as f:
        f.seek(-20, 2)
        return f.read() == bytes(20)


def fsmonitor_support(tree: Path, env: dict[str, str]) -> str | None:
    """None when git's built-in fsmonitor daemon runs here, else git's reason."""
    proc = subprocess.run(["git", "fsmonitor--daemon", "status"], cwd=tree, env=env, capture_output=True)
    err = proc.stderr.decode(errors="replace").strip()
    return err.removeprefix("fatal: ") if "not supported" in err else None


# --- growth -------------------------------------------------------------------------------------------------


def slope(points: Sequence[tuple[float, float]]) -> float:
    """The log-log slope between the first and the last point: cost ∝ size^slope (0: flat, 1: linear)."""
    (x1, y1), (x2, y2) = points[0], points[-1]
    return math.log(max(y2, 1e-3) / max(y1, 1e-3)) / math.log(x2 / x1)


@dataclass
class Growth:
    command: str
    grows: str
    points: list[tuple[float, float]]
    git: list[tuple[float, float]] | None = None  # git's counterpart, measured at the same points


def render_growth(growth: Sequence[Growth]) -> str:
    lines = ["| command | grows with | measured points (size: median ms) | slope | git's slope |",
             "|---|---|---|---:|---:|"]  # fmt: skip
    for g in growth:
        shown = ", ".join(f"{x:,.0f}: {y:,.1f}" for x, y in g.points)
        git = f"{slope(g.git):.2f}" if g.git and len(g.git) > 1 else ""
        own = f"{slope(g.points):.2f}" if len(g.points) > 1 else ""
        lines.append(f"| {g.command} | {g.grows} | {shown} | {own} | {git} |")
    return "\n".join(lines)
