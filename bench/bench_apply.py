#!/usr/bin/env python3
"""Benchmark `stackmgr apply SERIES` against `quilt push -a` and a shell loop of `git apply`, in one run.

Builds the vLLM-size tree of bench_check_save.py (6,401 files) deterministically from a seed, makes a series of
small text-only patches with `stackmgr save pNN --series bench` (each stacked on the ones before it: several
edited files per patch, overlapping across patches, a new file every few patches), resets the tree to its base
and then times, from that same clean base every time, three ways of bringing the series in:

    stackmgr apply bench                  then, untimed, `stackmgr reset`
    quilt push -a -q                      then, untimed, `quilt pop -a -q`     (target: stackmgr / quilt <= 0.5)
    sh: for p in …; do git apply $p; done then, untimed, `git checkout -- . && git clean -fdq`
                                                                            (target: stackmgr / loop <= 2.5)

Before timing, each contender's result must be the tree that was saved (the same working-tree id, computed in a
scratch index: read-tree HEAD, add -A, write-tree), and after each undo the tree must be clean at its base.
Stdlib only; the tree builder, environment, table and timing helpers come from bench_check_save.py. Full mode
exits 1 when a target fails; `--smoke` (a tiny tree, a few patches, for CI) never fails on a target. A run that
cannot measure (a command exits unexpectedly, or the results differ) exits 2 in both modes.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_check_save import (
    FULL,
    MARKER,
    SMOKE,
    Bench,
    BenchError,
    Row,
    Scale,
    build_tree,
    commit_tree,
    finish,
    hermetic_env,
    log,
    prepare_workdir,
    render_source,
    run,
    timed,
    tracked_sources,
    write_gitconfig,
)

SERIES = "bench"
TREE = "vllm"
QUILT_TARGET = 0.5  # stackmgr apply / quilt push -a
GIT_APPLY_TARGET = 2.5  # stackmgr apply / the git apply loop
GIT_APPLY_LOOP = 'for p in "$@"; do git apply "$p" || exit 1; done'
QUILT = ("quilt", "--quiltrc", "-")  # no ~/.quiltrc, no /etc/quilt.quiltrc: quilt's defaults only


# --- the series ---------------------------------------------------------------------------------------------


def edit_file(path: Path, rng: random.Random, patch: int, hunks: int) -> None:
    """Replace a line at `hunks` random places with a few new lines (text only, no conflict markers)."""
    lines = path.read_text().splitlines(keepends=True)
    for h in range(hunks):
        at = rng.randrange(len(lines))
        new = [f"# p{patch:02d}.{h}: tuned {rng.choice(('block', 'tile', 'chunk'))} size\n"]
        new += [f"TUNE_{patch}_{h}_{k} = {rng.randrange(4096)}\n" for k in range(rng.randint(1, 3))]
        lines[at : at + 1] = new
    path.write_text("".join(lines))


def edit_batch(tree: Path, rng: random.Random, patch: int, pool: list[str]) -> int:
    """One patch's worth of edits: 2-5 files from a shared pool (so patches overlap), a new file every third
    patch (which later patches may edit too). Returns the number of files touched."""
    picks = rng.sample(pool, rng.randint(2, 5))
    for rel in picks:
        edit_file(tree / rel, rng, patch, rng.randint(1, 2))
    if patch % 3 == 0:
        rel = f"vllm/bench_stack/feature_{patch:02d}.py"
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(render_source(rng, rel, rng.randint(20, 80)))
        pool.append(rel)
        return len(picks) + 1
    return len(picks)


def series_patches(store: Path) -> list[Path]:
    """The patch files of the series, in order (quilt's grammar: first word of each non-comment line)."""
    names = []
    for line in (store / "series" / SERIES).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            names.append(line.split()[0])
    return [store / "patches" / name for name in names]


# --- the tree's state ---------------------------------------------------------------------------------------


@dataclass
class State:
    bench: Bench
    base: str  # the base commit
    saved: str  # the working-tree id of the fully saved series

    def tree_id(self) -> str:
        """The working tree's id: tracked files as on disk and untracked (not ignored) files, via a scratch index."""
        index = self.bench.workdir / "tree-id.index"
        index.unlink(missing_ok=True)
        env = {**self.bench.env, "GIT_INDEX_FILE": str(index)}
        run(["git", "read-tree", "HEAD"], self.bench.tree, env)
        run(["git", "add", "-A"], self.bench.tree, env)
        tree = run(["git", "write-tree"], self.bench.tree, env).decode().strip()
        index.unlink()
        return tree

    def head(self) -> str:
        return run(["git", "rev-parse", "HEAD"], self.bench.tree, self.bench.env).decode().strip()

    def expect_clean(self, after: str) -> None:
        """HEAD at the base, nothing modified or untracked."""
        status = run(["git", "status", "--porcelain", "--untracked-files=all"], self.bench.tree, self.bench.env)
        if status or self.head() != self.base:
            raise BenchError(f"the tree is not clean at its base after {after}: {status.decode()[:300]}")

    def expect_result(self, who: str) -> str:
        tree = self.tree_id()
        if tree != self.saved:
            raise BenchError(f"{who} left working tree {tree}, but the saved series is {self.saved}")
        return tree


@dataclass(frozen=True)
class Contender:
    name: str
    do: Callable[[], object]  # timed
    undo: Callable[[], object]  # untimed; leaves the tree clean at its base (checked)


def contenders(bench: Bench, state: State, patches: list[Path], quilt_pc: Path,
               series: str = SERIES) -> list[Contender]:  # fmt: skip
    """stackmgr apply, quilt push -a and a git apply loop of `series` (quilt's .pc at `quilt_pc`, outside the
    tree, so it stays out of every tree id), each with its untimed undo."""
    quilt_env = {k: v for k, v in bench.env.items() if not k.startswith("QUILT_")}  # no QUILT_PATCH_OPTS etc.
    quilt_env.update(QUILT_PATCHES=str(bench.store / "patches"), QUILT_SERIES=str(bench.store / "series" / series),
                     QUILT_PC=str(quilt_pc))  # fmt: skip

    def stackmgr_apply() -> None:
        bench.stackmgr_run("apply", series)

    def stackmgr_reset() -> None:
        bench.stackmgr_run("reset")
        state.expect_clean("stackmgr reset")

    def quilt_push() -> None:
        run([*QUILT, "push", "-a", "-q"], bench.tree, quilt_env)

    def quilt_pop() -> None:
        run([*QUILT, "pop", "-a", "-q"], bench.tree, quilt_env)
        state.expect_clean("quilt pop -a")

    def git_apply_loop() -> None:
        run(["sh", "-c", GIT_APPLY_LOOP, "sh", *map(str, patches)], bench.tree, bench.env)

    def git_restore() -> None:
        run(["git", "checkout", "--", "."], bench.tree, bench.env)
        run(["git", "clean", "-fdq"], bench.tree, bench.env)
        state.expect_clean("git checkout -- . && git clean -fdq")

    return [
        Contender(f"stackmgr apply {series}", stackmgr_apply, stackmgr_reset),
        Contender("quilt push -a -q", quilt_push, quilt_pop),
        Contender("git apply loop (sh)", git_apply_loop, git_restore),
    ]


def registered(tree: Path, store: Path, workdir: Path, env: dict[str, str], repeats: int, name: str) -> Bench:
    """stackmgr and quilt found on PATH, a new store at `store` with `tree` registered as `name`."""
    exe = shutil.which("stackmgr", path=env.get("PATH"))
    if exe is None:
        raise BenchError("the `stackmgr` console script is not on PATH (activate the venv)")
    if shutil.which("quilt", path=env.get("PATH")) is None:
        raise BenchError("quilt is not installed (apt-get install quilt)")
    bench = Bench(tree, store, workdir, env, exe, repeats)
    run([exe, "init", str(store)], workdir, env)
    bench.stackmgr_run("tree", "add", name, str(tree))
    return bench


def interleaved_medians(runs: Sequence[Contender], repeats: int) -> list[float]:
    """Median wall time of each contender's `do`, its `undo` untimed; every round runs all of them, starting
    with a different one each round, so drift (page cache, CPU clock) hits all alike."""
    times: list[list[float]] = [[] for _ in runs]
    for r in range(repeats):
        for i in [(r + k) % len(runs) for k in range(len(runs))]:
            times[i].append(timed(runs[i].do))
            runs[i].undo()
    return [statistics.median(t) for t in times]


# --- driver -------------------------------------------------------------------------------------------------


def setup(workdir: Path, scale: Scale, seed: int, npatches: int, repeats: int) -> tuple[Bench, State, list[Path]]:
    prepare_workdir(workdir)
    (workdir / MARKER).write_text("created by bench/bench_apply.py; wiped on every run\n")
    home, tree, store = workdir / "home", workdir / TREE, workdir / "store"
    write_gitconfig(home)
    env = hermetic_env(workdir, home)
    rng = random.Random(seed)
    tree.mkdir()
    files, lines = build_tree(tree, rng, scale)
    if files < scale.files or lines < scale.min_total_lines:
        raise BenchError(f"tree too small: {files} files, {lines} lines")
    log(f"tree: {files} files, {lines:,} lines; committing")
    commit_tree(tree, env)
    bench = registered(tree, store, workdir, env, repeats, TREE)
    base = run(["git", "rev-parse", "HEAD"], tree, env).decode().strip()

    log(f"saving a series of {npatches} patches")
    pool = rng.sample(tracked_sources(tree, env), max(3 * npatches, 12))
    touched = 0
    for n in range(1, npatches + 1):
        touched += edit_batch(tree, rng, n, pool)
        bench.stackmgr_run("save", f"p{n:02d}", "--series", SERIES, "-m", f"bench patch {n}")
    state = State(bench, base, saved="")
    state.saved = state.tree_id()
    bench.stackmgr_run("reset")
    state.expect_clean("stackmgr reset (after saving the series)")
    patches = series_patches(store)
    if len(patches) != npatches:
        raise BenchError(f"series {SERIES} lists {len(patches)} patches, expected {npatches}")
    size = sum(p.stat().st_size for p in patches)
    log(f"series: {npatches} patches, {touched} file changes, {size / 1024:.0f} KiB")
    os.sync()  # no write-back of the fresh tree during the measurements
    return bench, state, patches


def check_results(state: State, runs: Sequence[Contender]) -> list[str]:
    """Run each contender once (also the warm-up): its result must be the saved tree, and its undo clean."""
    report = [f"saved series (before the reset): {state.saved}"]
    for c in runs:
        c.do()
        report.append(f"{c.name}: {state.expect_result(c.name)}")
        c.undo()
    return report


def run_bench(bench: Bench, state: State, patches: list[Path]) -> tuple[list[Row], list[str]]:
    quilt_pc = bench.workdir / "quilt-pc"  # quilt's .pc, outside the tree so it stays out of every tree id
    runs = contenders(bench, state, patches, quilt_pc)
    log("checking that every contender builds the saved tree")
    ids = check_results(state, runs)

    def listing() -> None:
        bench.stackmgr_run("series", SERIES)

    log(f"measuring ({bench.repeats} rounds)")
    start_up = [timed(listing) for _ in range(bench.repeats)]
    stackmgr_ms, quilt_ms, loop_ms = interleaved_medians(runs, bench.repeats)
    n = len(patches)
    rows = [
        Row(f"stackmgr series {SERIES} (start-up + click, for context)", statistics.median(start_up)),
        Row(f"quilt push -a -q ({n} patches)", quilt_ms),
        Row(f"git apply loop ({n} × `git apply` in sh)", loop_ms),
        Row(f"stackmgr apply {SERIES} / quilt push -a", stackmgr_ms, stackmgr_ms / quilt_ms, QUILT_TARGET),
        Row(f"stackmgr apply {SERIES} / git apply loop", stackmgr_ms, stackmgr_ms / loop_ms, GIT_APPLY_TARGET),
    ]
    return rows, ids


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1, help="seed of the synthetic tree and series (default 1)")
    parser.add_argument("--workdir", type=Path, default=Path(__file__).resolve().parent / "work-apply",
                        help="scratch directory, wiped and recreated (default bench/work-apply/)")  # fmt: skip
    parser.add_argument("--repeats", type=int, help="timed rounds (default 7; smoke 2)")
    parser.add_argument("--patches", type=int, help="patches in the series (default 40; smoke 6)")
    parser.add_argument("--smoke", action="store_true", help="tiny tree, few patches, 2 repeats, no targets (CI)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    scale = SMOKE if args.smoke else FULL
    repeats = args.repeats if args.repeats is not None else (2 if args.smoke else 7)
    npatches = args.patches if args.patches is not None else (6 if args.smoke else 40)
    if repeats < 1 or npatches < 1:
        print("bench: error: --repeats and --patches must be at least 1", file=sys.stderr)
        return 2
    try:
        bench, state, patches = setup(args.workdir.resolve(), scale, args.seed, npatches, repeats)
        rows, ids = run_bench(bench, state, patches)
        quilt = run(["quilt", "--version"], bench.workdir, bench.env).decode().strip()
        git = run(["git", "--version"], bench.workdir, bench.env).decode().strip()
    except BenchError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    size = sum(p.stat().st_size for p in patches) / 1024
    print(f"# stackmgr apply vs quilt and git apply ({'smoke' if args.smoke else 'full'}; seed {args.seed}; "
          f"{npatches} patches, {size:.0f} KiB; {repeats} repeats; {git}; quilt {quilt}; {platform.machine()}, "
          f"{os.cpu_count()} CPUs, load {load:.2f} at the end)")  # fmt: skip
    print("working-tree ids (identical: every contender builds the saved series):")
    for line in ids:
        print(f"  {line}")
    return finish(rows, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
