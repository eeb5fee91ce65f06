#!/usr/bin/env python3
"""Benchmark `stackmgr check` and `stackmgr save` against the git commands they wrap, in one run.

Builds a vLLM-size git tree deterministically from a seed, dirties it the way a working day does, registers it
in a scratch store and prints median wall times and ratios:

    check / `git status --porcelain`    (target <= 3.0; before and after the changes are saved)
    save  / the raw git save pipeline   (target <= 1.5; index copy, add -A, write-tree, diff-tree -p/--stat),
                                        for a typical (15 files) and a release-size (~1,100 files) dirty state

Stdlib only; `git` and the `stackmgr` console script run as subprocesses in a hermetic git environment.
Full mode exits 1 when a target fails; `--smoke` (a tiny tree, for CI) never fails on a target. A run that
cannot measure (a command exits unexpectedly) exits 2 in both modes.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

MIB = 1024 * 1024
BIG_NAME = "big.bin"
BIG_BYTES = 60 * MIB  # over stackmgr's default 50 MiB limit for untracked files: listed as "unprotected"
BINARY_NAME = "assets/lut.bin"  # a tracked binary file, for the binary edit
NEW_FILES = ("vllm/bench_new/probe.py", "csrc/bench_new/probe_kernel.cpp", "tests/test_probe.py")
GIT_DATE = "1781344931 +0000"
MARKER = ".stackmgr-bench-workdir"  # only a directory holding this marker (or an empty one) is ever wiped
CHECK_TARGET = 3.0
SAVE_TARGET = 1.3  # release-size save / the raw git pipeline (docs/DEVELOPMENT.md); a typical save is shown for context

TOP_DIRS = {"vllm": ".py", "tests": ".py", "benchmarks": ".py", "csrc": ".cpp"}
WORDS = (
    "attention", "backends", "layers", "quantization", "kernels", "moe", "fused", "model_executor", "models",
    "distributed", "spec_decode", "worker", "engine", "lora", "multimodal", "sampling", "cache", "ops",
    "triton", "cutlass", "gemm", "rotary", "norm", "activation", "utils", "compilation", "platforms", "xpu",
)  # fmt: skip


@dataclass(frozen=True)
class Scale:
    files: int
    lines: tuple[int, int]  # per file, inclusive range
    dirs: int
    big_file: bool
    min_total_lines: int


FULL = Scale(files=6400, lines=(40, 360), dirs=320, big_file=True, min_total_lines=1_200_000)
SMOKE = Scale(files=200, lines=(10, 60), dirs=24, big_file=False, min_total_lines=0)


class BenchError(Exception):
    """The benchmark could not measure (a command failed or answered unexpectedly)."""


# --- environment and subprocesses ---------------------------------------------------------------------------


def hermetic_env(workdir: Path, home: Path) -> dict[str, str]:
    """No user or system git config, a fixed identity and fixed dates; shared by git and stackmgr.

    Python byte-code caching is on (in the work dir), as for any installed tool: with PYTHONDONTWRITEBYTECODE
    every start of stackmgr would recompile its modules.
    """
    drop = ("GIT_", "STACKMGR_", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        PYTHONPYCACHEPREFIX=str(workdir / "pycache"), HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
        GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=str(home / ".gitconfig"), GIT_AUTHOR_DATE=GIT_DATE,
        GIT_COMMITTER_DATE=GIT_DATE, GIT_EDITOR="false", LC_ALL="C", NO_COLOR="1",
    )  # fmt: skip
    return env


def write_gitconfig(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Bench Runner\n\temail = bench@example.com\n[init]\n\tdefaultBranch = main\n"
    )


def run(
    argv: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    ok: Sequence[int] = (0,),
    stdout: IO[bytes] | None = None,
) -> bytes:
    """Run a command and return its stdout (unless redirected); an exit code outside `ok` is a BenchError."""
    out = subprocess.PIPE if stdout is None else stdout
    proc = subprocess.run(list(argv), cwd=cwd, env=env, stdout=out, stderr=subprocess.PIPE)
    if proc.returncode not in ok:
        err = proc.stderr.decode(errors="replace").strip()
        raise BenchError(f"`{' '.join(argv)}` exited {proc.returncode} (expected {list(ok)}): {err}")
    return proc.stdout


def timed(action: Callable[[], object]) -> float:
    """Wall time of one call, in milliseconds."""
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


# --- the work directory and the tree ------------------------------------------------------------------------


def prepare_workdir(workdir: Path) -> None:
    """Wipe and recreate the work directory, refusing to wipe anything this script did not create."""
    if workdir.exists():
        if any(workdir.iterdir()) and not (workdir / MARKER).exists():
            raise BenchError(f"{workdir} is not empty and has no {MARKER}; pick another --workdir")
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    (workdir / MARKER).write_text("created by bench/bench_check_save.py; wiped on every run\n")


def make_layout(rng: random.Random, scale: Scale) -> list[str]:
    """Nested directories under vllm-like top-level dirs, then file paths spread over them."""
    dirs = []
    for i in range(scale.dirs):
        top = rng.choice(sorted(TOP_DIRS))
        depth = rng.randint(1, 4)
        dirs.append("/".join([top, *rng.sample(WORDS, depth)]) + f"_{i}")
    paths = []
    for i in range(scale.files):
        directory = rng.choice(dirs)
        ext = TOP_DIRS[directory.split("/", 1)[0]]
        if ext == ".cpp" and rng.random() < 0.4:
            ext = ".h"
        paths.append(f"{directory}/{rng.choice(WORDS)}_{i}{ext}")
    return paths


PY_LINES = (
    "def {w}_{n}(x, y):", "    return x * {n} + y", "    # {w}: keep the layout stable",
    "class {W}{n}(nn.Module):", "    def forward(self, hidden_states):",
    "        out = self.{w}(hidden_states)", "        return out", "import torch",
    "from vllm.{w} import {W}{n}", "", "    assert x.shape[-1] == {n}",
)  # fmt: skip
CPP_LINES = (
    "template <typename T> __device__ T {w}_{n}(T x) {{", "  return x * static_cast<T>({n});", "}}",
    "// {w}: tile size {n}", "#include <torch/all.h>", "void {w}_launch_{n}(torch::Tensor& out) {{",
    "  TORCH_CHECK(out.is_contiguous());", "", "  for (int i = 0; i < {n}; ++i) acc += a[i] * b[i];",
)  # fmt: skip


def render_source(rng: random.Random, path: str, nlines: int) -> str:
    templates = PY_LINES if path.endswith(".py") else CPP_LINES
    out = []
    for _ in range(nlines):
        word = rng.choice(WORDS)
        camel = word.title().replace("_", "")
        out.append(rng.choice(templates).format(w=word, W=camel, n=rng.randrange(4096)))
    return "\n".join(out) + "\n"


def build_tree(tree: Path, rng: random.Random, scale: Scale) -> tuple[int, int]:
    """Write the source files and one tracked binary; return (files, lines)."""
    total = 0
    paths = make_layout(rng, scale)
    for rel in paths:
        nlines = rng.randint(*scale.lines)
        target = tree / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_source(rng, rel, nlines))
        total += nlines
    (tree / BINARY_NAME).parent.mkdir(parents=True, exist_ok=True)
    (tree / BINARY_NAME).write_bytes(rng.randbytes(64 * 1024))
    return len(paths) + 1, total


def commit_tree(tree: Path, env: dict[str, str]) -> None:
    run(["git", "init", "-q"], tree, env)
    run(["git", "add", "-A"], tree, env)
    run(["git", "commit", "-q", "-m", "base: vLLM-size synthetic tree"], tree, env)


def tracked_sources(tree: Path, env: dict[str, str]) -> list[str]:
    names = run(["git", "ls-files", "-z", "--", "*.py", "*.cpp", "*.h"], tree, env).split(b"\0")
    return sorted(n.decode() for n in names if n)


def make_dirty(tree: Path, env: dict[str, str], rng: random.Random) -> int:
    """A typical dirty state: 8 edits, 2 deletions, 3 new files, 1 binary edit, 1 mode change (15 changes)."""
    picks = rng.sample(tracked_sources(tree, env), 11)
    edits, deletions, mode_change = picks[:8], picks[8:10], picks[10]
    for i, rel in enumerate(edits):
        lines = (tree / rel).read_text().splitlines(keepends=True)
        at = rng.randrange(len(lines))
        lines[at : at + 1] = [f"# bench edit {i}: tuned block size\n", f"BLOCK_{i} = {rng.randrange(512)}\n"]
        (tree / rel).write_text("".join(lines))
    for rel in deletions:
        (tree / rel).unlink()
    for i, rel in enumerate(NEW_FILES):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(render_source(rng, rel, 80 + i))
    blob = bytearray((tree / BINARY_NAME).read_bytes())
    blob[100:116] = rng.randbytes(16)
    (tree / BINARY_NAME).write_bytes(bytes(blob))
    (tree / mode_change).chmod(0o755)
    return len(picks) + 3 + 1


def make_release_dirty(tree: Path, env: dict[str, str], rng: random.Random, scale: Scale) -> int:
    """A release-size dirty state: ~1,000 files rewritten, ~100 new files (~25 MB of diff at full scale)."""
    sources = tracked_sources(tree, env)
    rewrites = rng.sample(sources, min(len(sources) // 2, scale.files // 6))
    for rel in rewrites:
        (tree / rel).write_text(render_source(rng, rel, rng.randint(*scale.lines) * 2))
    new = max(scale.files // 60, 3)
    for i in range(new):
        rel = f"vllm/release_{i % 7}/generated_{i}.py"
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(render_source(rng, rel, scale.lines[1] * 6))
    return len(rewrites) + new


def write_big_file(tree: Path, rng: random.Random) -> None:
    with open(tree / BIG_NAME, "wb") as f:
        for _ in range(BIG_BYTES // MIB):
            f.write(rng.randbytes(MIB))


# --- the measurements ---------------------------------------------------------------------------------------


@dataclass
class Bench:
    tree: Path
    store: Path
    workdir: Path
    env: dict[str, str]
    stackmgr: str
    repeats: int

    def git_status(self) -> None:
        run(["git", "status", "--porcelain"], self.tree, self.env)

    def stackmgr_run(self, *args: str, ok: Sequence[int] = (0,)) -> bytes:
        return run([self.stackmgr, "--store", str(self.store), *args], self.workdir, self.env, ok=ok)

    def git_save_pipeline(self) -> None:
        """What save wraps, done by hand: private index, add -A, write-tree, the patch and its diffstat."""
        index = self.tree / ".git" / "bench-index"
        shutil.copy2(self.tree / ".git" / "index", index)
        env = {**self.env, "GIT_INDEX_FILE": str(index)}
        run(["git", "add", "-A", "--", ".", f":(exclude){BIG_NAME}"], self.tree, env)
        tree_id = run(["git", "write-tree"], self.tree, env).decode().strip()
        with open(self.workdir / "pipeline.patch", "wb") as out:
            patch = ["diff-tree", "-r", "-p", "--binary", "--full-index", "--no-renames", "HEAD", tree_id]
            run(["git", *patch], self.tree, self.env, stdout=out)
        run(["git", "diff-tree", "-r", "--stat", "--no-renames", "HEAD", tree_id], self.tree, self.env)


def median_ms(action: Callable[[], object], repeats: int) -> float:
    action()  # warm
    return statistics.median(timed(action) for _ in range(repeats))


def paired_medians(a: Callable[[], object], b: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Warm both, then alternate them so drift (page cache, CPU clock) hits both alike."""
    a(), b()
    times_a, times_b = [], []
    for _ in range(repeats):
        times_a.append(timed(a))
        times_b.append(timed(b))
    return statistics.median(times_a), statistics.median(times_b)


@dataclass(frozen=True)
class Row:
    name: str
    ms: float
    ratio: float | None = None
    target: float | None = None

    @property
    def verdict(self) -> str:
        if self.ratio is None or self.target is None:
            return ""
        return "PASS" if self.ratio <= self.target else "FAIL"


def measure_check(bench: Bench, state: str, expect: int) -> list[Row]:
    def check() -> None:
        bench.stackmgr_run("check", ok=(expect,))

    git_ms, check_ms = paired_medians(bench.git_status, check, bench.repeats)
    return [
        Row(f"git status --porcelain ({state})", git_ms),
        Row(f"stackmgr check ({state}, exit {expect})", check_ms, check_ms / git_ms, CHECK_TARGET),
    ]


def measure_save(bench: Bench, state: str, repeats: int) -> list[Row]:
    """Each timed save gets a new patch name: every repetition is a full save with round-trip verification."""
    counter = iter(range(1, repeats + 2))

    def save() -> None:
        bench.stackmgr_run("save", f"p_{state.split()[0]}{next(counter)}", "-m", "bench")

    pipeline_ms, save_ms = paired_medians(bench.git_save_pipeline, save, repeats)
    size = (bench.workdir / "pipeline.patch").stat().st_size / MIB
    judged = state == "release-size"
    rows = [
        Row(f"git save pipeline ({state}, {size:.1f} MiB patch)", pipeline_ms),
        Row(f"stackmgr save ({state}){'' if judged else ', for context'}", save_ms, save_ms / pipeline_ms,
            SAVE_TARGET if judged else None),
    ]  # fmt: skip
    if judged:
        peak = peak_rss_mib([bench.stackmgr, "--store", str(bench.store), "save", f"p_rss{repeats}", "-m", "rss"],
                            bench)  # fmt: skip
        limit = 2 * size + 100
        rows.append(Row(f"stackmgr save ({state}) peak RSS {peak:.0f} MiB / (2 x patch + 100 MiB = {limit:.0f})",
                        peak, peak / limit, 1.0))  # fmt: skip
    return rows


def peak_rss_mib(argv: Sequence[str], bench: Bench) -> float:
    """The largest resident set of the command or any process it ran (getrusage of a fresh parent's children)."""
    probe = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(rc)")  # fmt: skip
    out = run([sys.executable, "-c", probe, *argv], bench.workdir, bench.env)
    return int(out.split()[-1]) / 1024


def measure_show(bench: Bench, links: int = 10) -> list[Row]:
    """`stackmgr show` of a patch with `links` link records (log + vllm JSON each): an absolute target, 1 s."""
    results = bench.workdir / "results"
    results.mkdir(exist_ok=True)
    for i in range(links):
        (results / f"run{i}.log").write_text(f"Output token throughput (tok/s): {100 + i}.5\nJSON gate: 8/8\n")
        (results / f"run{i}.json").write_text(f'{{"output_throughput": {100 + i}.5, "mean_ttft_ms": 40.{i}}}')
        bench.stackmgr_run("link", "p1", str(results / f"run{i}.log"), "--from-json", str(results / f"run{i}.json"),
                           "--gate", "json=pass", "--metric", "tput=/throughput \\(tok\\/s\\): ([0-9.]+)/")  # fmt: skip

    def show() -> None:
        bench.stackmgr_run("show", "p1")

    ms = median_ms(show, bench.repeats)
    return [Row(f"stackmgr show p1 ({links} links), as a fraction of 1 s", ms, ms / 1000, 1.0)]


def finish(rows: list[Row], smoke: bool) -> int:
    """Print the table; exit 1 when a target failed (never for a smoke run)."""
    print(render_table(rows, smoke))
    failed = [r.name for r in rows if r.verdict == "FAIL"]
    if failed and not smoke:
        print(f"FAILED targets: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def render_table(rows: list[Row], smoke: bool = False) -> str:
    """The results as a Markdown table; a smoke run (a tiny tree) judges no target, so it says so."""
    lines = ["| measurement | median ms | ratio | target | result |", "|---|---:|---:|---:|---|"]
    for r in rows:
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else ""
        target = f"<= {r.target:.1f}" if r.target is not None else ""
        verdict = "not judged (smoke)" if smoke and r.verdict else r.verdict
        lines.append(f"| {r.name} | {r.ms:.1f} | {ratio} | {target} | {verdict} |")
    return "\n".join(lines)


# --- driver -------------------------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def setup(workdir: Path, scale: Scale, seed: int, repeats: int) -> Bench:
    prepare_workdir(workdir)
    home, tree, store = workdir / "home", workdir / "vllm", workdir / "store"
    write_gitconfig(home)
    env = hermetic_env(workdir, home)
    rng = random.Random(seed)
    tree.mkdir()
    files, lines = build_tree(tree, rng, scale)
    if files < scale.files or lines < scale.min_total_lines:
        raise BenchError(f"tree too small: {files} files, {lines} lines")
    log(f"tree: {files} files, {lines:,} lines; committing")
    commit_tree(tree, env)
    if scale.big_file:
        write_big_file(tree, rng)
    changed = make_dirty(tree, env, rng)
    log(f"dirty state: {changed} changed files" + (f", untracked {BIG_NAME}" if scale.big_file else ""))
    exe = shutil.which("stackmgr", path=env.get("PATH"))
    if exe is None:
        raise BenchError("the `stackmgr` console script is not on PATH (activate the venv)")
    bench = Bench(tree, store, workdir, env, exe, repeats)
    run([exe, "init", str(store)], workdir, env)
    bench.stackmgr_run("tree", "add", "vllm", str(tree))
    os.sync()  # no write-back of the fresh tree and the 60 MB file during the measurements
    return bench


def expect_unprotected_big_file(bench: Bench) -> None:
    """The 60 MB file must be listed as unprotected (kept out of snapshots), or save's numbers are moot."""
    out = bench.stackmgr_run("--json", "check", ok=(1,)).decode()
    if f'"{BIG_NAME}"' not in out or '"large"' not in out:
        raise BenchError(f"stackmgr does not list {BIG_NAME} as unprotected (large): {out[:300]}")


def run_bench(bench: Bench, scale: Scale) -> list[Row]:
    def python() -> None:
        run([sys.executable, "-c", "pass"], bench.workdir, bench.env)

    def version() -> None:
        run([bench.stackmgr, "--version"], bench.workdir, bench.env)

    def listing() -> None:
        bench.stackmgr_run("series")

    rows = [Row("python -c pass (start-up, for context)", median_ms(python, bench.repeats))]
    rows.append(Row("stackmgr --version (start-up, for context)", median_ms(version, bench.repeats)))
    rows.append(Row("stackmgr series (start-up + click, for context)", median_ms(listing, bench.repeats)))
    if scale.big_file:
        expect_unprotected_big_file(bench)
    log("measuring check before saving")
    rows += measure_check(bench, "unsaved", expect=1)
    bench.stackmgr_run("save", "p1", "-m", "bench")
    log("measuring check after `save p1`")
    rows += measure_check(bench, "saved", expect=0)
    log("measuring show with 10 links")
    rows += measure_show(bench)
    log("measuring save")
    rows += measure_save(bench, "typical", bench.repeats)
    changed = make_release_dirty(bench.tree, bench.env, random.Random(bench.repeats), scale)
    log(f"measuring save of a release-size state ({changed} more changed files)")
    rows += measure_save(bench, "release-size", max(3, bench.repeats // 3))
    return rows


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1, help="seed of the synthetic tree (default 1)")
    parser.add_argument("--workdir", type=Path, default=Path(__file__).resolve().parent / "work",
                        help="scratch directory, wiped and recreated (default bench/work/)")  # fmt: skip
    parser.add_argument("--repeats", type=int, help="timed repetitions per measurement (default 15; smoke 2)")
    parser.add_argument("--smoke", action="store_true", help="tiny tree, 2 repeats, no targets enforced (CI)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    scale = SMOKE if args.smoke else FULL
    repeats = args.repeats or (2 if args.smoke else 15)
    try:
        bench = setup(args.workdir.resolve(), scale, args.seed, repeats)
        rows = run_bench(bench, scale)
    except BenchError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    print(f"# stackmgr vs git ({'smoke' if args.smoke else 'full'}; seed {args.seed}; {repeats} repeats; "
          f"{platform.machine()}, {os.cpu_count()} CPUs, load {load:.2f} at the end)")  # fmt: skip
    return finish(rows, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
