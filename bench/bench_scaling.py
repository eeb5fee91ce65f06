#!/usr/bin/env python3
"""Benchmark stackmgr past one machine, by simulation: a Chromium-sized tree and a 50,000-patch store.

Builds, deterministically from a seed, Chromium-shaped git trees (scaling_trees.py) and stores written the way
`save` and `link` write them (bench_scale.py), and reports how each command's cost grows. Every figure with a git
counterpart is a ratio against git measured in the same run (medians of alternating rounds):

    files     trees of 10,000, 30,000 and 100,000 files in a typical dirty state (15 changes): check vs
              `git status --porcelain` (target <= 1.6 at 100,000 files), status vs `git status` +
              `git diff HEAD --numstat`, save vs the raw git save pipeline; ms per 1,000 files
    features  the 100,000-file tree with git's big-tree settings set in the tree's own repository, one at a time
              (core.untrackedCache, index.skipHash, core.splitIndex, feature.manyFiles; core.fsmonitor when
              git's daemon runs here): check and status vs git again, stackmgr's answer checked against git's
    changes   the 100,000-file tree with 10, 100, 1,000 and 10,000 modified files: check, status, save vs git
    store     stores of 5,000, 20,000 and 50,000 patches (4 link records each) on the 100,000-file tree: the
              first check (once), check vs the same with a 10-patch store (target <= 1.2 at 50,000: cost must
              not grow with the store), links, status --json, show, report -o DIR (once)

and a growth table: each command's log-log slope (cost ∝ size^slope) between the smallest and largest size, with
git's beside it. Stdlib only; helpers from bench_check_save.py and bench_scale.py. Full mode (about 9 minutes on
2 cores, 4.3 GB in the work dir) exits 1 when a target fails; `--smoke` (small sizes, one round, for CI) never
fails on a target. A run that cannot measure (a command answers unexpectedly, stackmgr's answer differs from
git's) exits 2.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench_check_save import (
    MARKER,
    Bench,
    BenchError,
    Row,
    finish,
    hermetic_env,
    log,
    make_dirty,
    paired_medians,
    prepare_workdir,
    run,
    timed,
    tracked_sources,
    write_gitconfig,
)
from bench_scale import TREE, Sizes, write_big_store
from scaling_trees import (
    SETTINGS,
    Growth,
    Medians,
    adaptive_median,
    apply_setting,
    build_chromium_tree,
    fsmonitor_support,
    git_status_numstat,
    index_trailer_is_null,
    measure_state,
    modify,
    render_growth,
    reset_tree,
    undo_setting,
    verify,
)

CHECK_TARGET = 1.6  # stackmgr check / git status --porcelain, typical state, the largest tree
STORE_TARGET = 1.2  # check with the largest store / with a 10-patch store
SMALL_STORE = 10
LINKS_PER_PATCH = 4
REPORT_NOTE_S = 600  # a report slower than this is called out in the notes
SECTIONS = ("files", "features", "changes", "store")


@dataclass(frozen=True)
class Plan:
    files: tuple[int, ...]
    changes: tuple[int, ...]
    stores: tuple[int, ...]
    artifacts: int
    settings: int  # how many of scaling_trees.SETTINGS
    rounds: int  # fast commands (paired with git)
    slow_rounds: int  # save, and store commands whose first run takes over scaling_trees.SLOW_MS


FULL_PLAN = Plan((10_000, 30_000, 100_000), (10, 100, 1_000, 10_000), (5_000, 20_000, 50_000), 500, len(SETTINGS), 7, 3)
SMOKE_PLAN = Plan((500, 1_500), (10, 100), (50, 200), 5, 1, 1, 1)


@dataclass
class Lab:
    workdir: Path
    env: dict[str, str]
    exe: str
    seed: int
    plan: Plan
    trees: dict[int, Path] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    growth: list[Growth] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def big(self) -> Path:
        return self.trees[max(self.trees)]

    def registered(self, tree: Path, name: str) -> Bench:
        """A new store `store-NAME` with `tree` registered (as TREE: bench_scale's patch headers name it)."""
        store = self.workdir / f"store-{name}"
        run([self.exe, "init", str(store)], self.workdir, self.env)
        run([self.exe, "--store", str(store), "tree", "add", TREE, str(tree)], self.workdir, self.env)
        return Bench(tree, store, self.workdir, self.env, self.exe, self.plan.rounds)

    def typical(self, tree: Path) -> None:
        """The tree at HEAD, then bench_check_save's typical dirty state (15 changes), the same in every section."""
        reset_tree(tree, self.env)
        make_dirty(tree, self.env, random.Random(self.seed))
        os.sync()


# --- rows --------------------------------------------------------------------------------------------------


def state_rows(what: str, m: Medians, files: int, target: float | None) -> list[Row]:
    def per_k(ms: float) -> str:
        return f"{ms / files * 1000:.2f} ms per 1,000 files"

    return [
        Row(f"git status --porcelain ({what}; {per_k(m.git_status)})", m.git_status),
        Row(
            f"stackmgr check ({what}, exit 1) / git status ({per_k(m.check)})", m.check, m.check / m.git_status, target
        ),
        Row(f"git status + git diff HEAD --numstat ({what})", m.git_numstat),
        Row(f"stackmgr status ({what}) / git status + numstat", m.status, m.status / m.git_numstat),
        Row(f"git save pipeline ({what})", m.pipeline),
        Row(f"stackmgr save ({what}) / git save pipeline", m.save, m.save / m.pipeline),
    ]


def add_growth(lab: Lab, grows: str, points: Sequence[tuple[int, Medians]]) -> None:
    for command, own, git in (("check", "check", "git_status"), ("status", "status", "git_numstat"),
                              ("save", "save", "pipeline")):  # fmt: skip
        lab.growth.append(Growth(command, grows, [(n, getattr(m, own)) for n, m in points],
                                 [(n, getattr(m, git)) for n, m in points]))  # fmt: skip


# --- the sections -------------------------------------------------------------------------------------------


def section_files(lab: Lab) -> None:
    points = []
    for n in lab.plan.files:
        tree = lab.trees[n]
        lab.typical(tree)
        bench = lab.registered(tree, f"files-{n}")
        log(f"files: measuring the {n:,}-file tree")
        m = measure_state(bench, lab.plan.rounds, lab.plan.slow_rounds, save_as="typical")
        lab.rows += state_rows(f"{n:,} files, typical", m, n, CHECK_TARGET if n == lab.plan.files[-1] else None)
        points.append((n, m))
    add_growth(lab, "files", points)


def feature_rows(label: str, m: Medians, base: Medians) -> list[Row]:
    return [
        Row(f"git status --porcelain [{label}] / default config", m.git_status, m.git_status / base.git_status),
        Row(f"stackmgr check [{label}] / default config", m.check, m.check / base.check),
        Row(f"stackmgr check [{label}] / git status [same]", m.check, m.check / m.git_status),
        Row(
            f"stackmgr status [{label}] / git status + numstat ({m.git_numstat:.0f} ms)",
            m.status,
            m.status / m.git_numstat,
        ),
    ]


def section_features(lab: Lab) -> None:
    tree = lab.big
    lab.typical(tree)
    bench = lab.registered(tree, "features")
    n = max(lab.trees)
    expect = verify(bench, "default config")
    log(f"features: measuring the {n:,}-file tree with the default config")
    base = measure_state(bench, lab.plan.rounds, 0, None, expect)
    lab.rows += feature_rows("default config", base, base)
    for setting in SETTINGS[: lab.plan.settings]:
        apply_setting(tree, lab.env, setting)
        if setting.label.startswith("index.skipHash") and not index_trailer_is_null(tree):
            git = run(["git", "--version"], tree, lab.env).decode().strip()
            lab.notes.append(f"index.skipHash: not supported by {git} (accepted by `git config`, the index keeps "
                             "its checksum): its row measures the default index")  # fmt: skip
        expect = verify(bench, setting.label)
        log(f"features: measuring with {setting.label}")
        lab.rows += feature_rows(setting.label, measure_state(bench, lab.plan.rounds, 0, None, expect), base)
        undo_setting(tree, lab.env, setting)
        verify(bench, f"after unsetting {setting.label}")
    reason = fsmonitor_support(tree, lab.env)
    if reason is not None:
        lab.notes.append(f"core.fsmonitor: skipped, `git fsmonitor--daemon status` says: {reason}")
        log(lab.notes[-1])
        return
    run(["git", "config", "core.fsmonitor", "true"], tree, lab.env)
    run(["git", "fsmonitor--daemon", "start"], tree, lab.env)
    try:
        for _ in range(2):
            run(["git", "status", "--porcelain"], tree, lab.env)
        expect = verify(bench, "core.fsmonitor=true")
        log("features: measuring with core.fsmonitor=true (daemon running)")
        lab.rows += feature_rows("core.fsmonitor=true", measure_state(bench, lab.plan.rounds, 0, None, expect), base)
    finally:
        run(["git", "fsmonitor--daemon", "stop"], tree, lab.env, ok=(0, 1))
        run(["git", "config", "--unset", "core.fsmonitor"], tree, lab.env, ok=(0, 5))


def section_changes(lab: Lab) -> None:
    tree, n = lab.big, max(lab.trees)
    bench = lab.registered(tree, "changes")
    points = []
    for count in lab.plan.changes:
        reset_tree(tree, lab.env)
        modify(tree, lab.env, count, random.Random(lab.seed * 7919 + count))
        os.sync()
        log(f"changes: measuring {count:,} modified files")
        m = measure_state(bench, lab.plan.rounds, lab.plan.slow_rounds, save_as=f"c{count}")
        lab.rows += state_rows(f"{n:,} files, {count:,} modified", m, n, None)
        points.append((count, m))
    add_growth(lab, "changed files", points)


def section_store(lab: Lab) -> None:
    tree = lab.big
    reset_tree(tree, lab.env)  # the patches are written against HEAD's files: every store first, then the edits
    base = run(["git", "rev-parse", "HEAD"], tree, lab.env).decode().strip()
    rng = random.Random(lab.seed)
    sources = tracked_sources(tree, lab.env)
    pool = rng.sample(sources, min(len(sources), 400))
    small = lab.registered(tree, f"p{SMALL_STORE}")
    write_big_store(small.store, tree, base, Sizes((), SMALL_STORE, 1, 2, 1), pool, random.Random(lab.seed + 1))
    stores = []
    for patches in lab.plan.stores:
        started = time.monotonic()
        bench = lab.registered(tree, f"p{patches}")
        sizes = Sizes((), patches, LINKS_PER_PATCH, lab.plan.artifacts, 1)
        write_big_store(bench.store, tree, base, sizes, pool, random.Random(lab.seed + patches))
        log(f"store: {patches:,} patches, {patches * LINKS_PER_PATCH:,} link records written in "
            f"{time.monotonic() - started:.0f} s")  # fmt: skip
        stores.append((patches, bench))
    lab.typical(tree)
    small.stackmgr_run("check", ok=(1,))
    timings: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for patches, bench in stores:
        started = time.monotonic()
        for key, point in measure_store(lab, small, bench, patches):
            timings.setdefault(key, []).append(point)
        log(f"store: {patches:,} patches measured in {time.monotonic() - started:.0f} s")
    lab.growth += [Growth(command, grows, points) for (command, grows), points in timings.items()]


def measure_store(
    lab: Lab, small: Bench, bench: Bench, patches: int
) -> list[tuple[tuple[str, str], tuple[int, float]]]:
    """One store's rows (added to the lab's) and its growth points."""
    n, records = max(lab.trees), patches * LINKS_PER_PATCH
    what = f"{patches:,} patches, {records:,} records"
    log(f"store: first check with {what}")
    first = timed(lambda: bench.stackmgr_run("check", ok=(1,)))
    small_ms, check_ms = paired_medians(
        lambda: small.stackmgr_run("check", ok=(1,)), lambda: bench.stackmgr_run("check", ok=(1,)), lab.plan.rounds
    )
    target = STORE_TARGET if patches == lab.plan.stores[-1] else None
    middle = f"lab-{patches // 2:05d}"
    links = adaptive_median(lambda: bench.stackmgr_run("links"), lab.plan.rounds, lab.plan.slow_rounds)
    show = adaptive_median(lambda: bench.stackmgr_run("show", middle), lab.plan.rounds, lab.plan.slow_rounds)
    numstat_ms, status_ms = paired_medians(
        lambda: git_status_numstat(bench), lambda: bench.stackmgr_run("status", "--json"), lab.plan.slow_rounds
    )
    out = lab.workdir / f"report-{patches}"
    log(f"store: report with {what}")
    report = timed(lambda: bench.stackmgr_run("report", "-o", str(out)))
    if report > REPORT_NOTE_S * 1000:
        lab.notes.append(f"stackmgr report -o DIR took {report / 60000:.1f} minutes with {what}")
    check_name = f"stackmgr check ({n:,} files, typical) with {what} / with {SMALL_STORE} patches ({small_ms:.0f} ms)"
    status_name = f"stackmgr status --json ({what}) / git status + numstat ({numstat_ms:.0f} ms)"
    lab.rows += [
        Row(f"stackmgr check, the first with a new store ({what}; once)", first),
        Row(check_name, check_ms, check_ms / small_ms, target),
        Row(f"stackmgr links ({what})", links),
        Row(f"stackmgr show {middle} ({what})", show),
        Row(status_name, status_ms, status_ms / numstat_ms),
        Row(f"stackmgr report -o DIR ({what}; once)", report),
    ]
    return [
        (("first check", "patches"), (patches, first)),
        (("check", "patches"), (patches, check_ms)),
        (("links", "link records"), (records, links)),
        (("show", "patches"), (patches, show)),
        (("status --json", "patches"), (patches, status_ms)),
        (("report -o DIR", "link records"), (records, report)),
    ]


# --- driver -------------------------------------------------------------------------------------------------


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def build(workdir: Path, plan: Plan, sections: Sequence[str], seed: int) -> Lab:
    """The work dir, the environment and the trees the sections need (the largest one first)."""
    prepare_workdir(workdir)
    (workdir / MARKER).write_text("created by bench/bench_scaling.py; wiped on every run\n")
    home = workdir / "home"
    write_gitconfig(home)
    env = hermetic_env(workdir, home)
    exe = shutil.which("stackmgr", path=env.get("PATH"))
    if exe is None:
        raise BenchError("the `stackmgr` console script is not on PATH (activate the venv)")
    lab = Lab(workdir, env, exe, seed, plan)
    sizes = plan.files if "files" in sections else plan.files[-1:]
    for n in sorted(sizes, reverse=True):
        tree = workdir / f"tree-{n}"
        tree.mkdir()
        started = time.monotonic()
        built = build_chromium_tree(tree, n, seed, env)
        lab.notes.append(f"tree-{n}: {built.files:,} files in {built.dirs:,} directories, {built.mib:.0f} MiB")
        log(f"{lab.notes[-1]} (written and committed in {time.monotonic() - started:.0f} s)")
        lab.trees[n] = tree
    return lab


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1, help="seed of the trees, states and stores (default 1)")
    parser.add_argument("--workdir", type=Path, default=Path(__file__).resolve().parent / "work-scaling",
                        help="scratch directory, wiped and recreated (default bench/work-scaling/)")  # fmt: skip
    parser.add_argument("--repeats", type=int, help="rounds of the fast commands (default 7; smoke 1)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma list of {', '.join(SECTIONS)} "
                        "(default: all)")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="small trees and stores, one round, no targets (CI)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    start_load = load()
    print(f"load at the start: {start_load} (1, 5, 15 min)", flush=True)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    if not sections or set(sections) - set(SECTIONS):
        print(f"bench: error: --sections takes a comma list of {', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    plan = SMOKE_PLAN if args.smoke else FULL_PLAN
    if args.repeats is not None:
        plan = Plan(**{**plan.__dict__, "rounds": max(1, args.repeats)})
    spent = []
    try:
        started = time.monotonic()
        lab = build(args.workdir.resolve(), plan, sections, args.seed)
        spent.append(f"setup (work dir, trees) {time.monotonic() - started:.0f} s")
        for name in (s for s in SECTIONS if s in sections):
            started = time.monotonic()
            {"files": section_files, "features": section_features, "changes": section_changes,
             "store": section_store}[name](lab)  # fmt: skip
            spent.append(f"{name} {time.monotonic() - started:.0f} s")
        git = run(["git", "--version"], lab.workdir, lab.env).decode().strip()
    except BenchError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    print(f"# stackmgr past one machine ({'smoke' if args.smoke else 'full'}; sections {','.join(sections)}; seed "
          f"{args.seed}; {plan.rounds} rounds, {plan.slow_rounds} for save and slow commands; {git}; Python "
          f"{platform.python_version()}; {platform.machine()}, {os.cpu_count()} CPUs, load {start_load} at the "
          f"start, {load()} at the end)")  # fmt: skip
    print(f"time per section: {', '.join(spent)}")
    for note in lab.notes:
        print(note)
    code = finish(lab.rows, args.smoke)
    if lab.growth:
        print("\n## growth (slope: cost ∝ size^slope between the first and the last point; 0 flat, 1 linear)\n")
        print(render_growth(lab.growth))
    return code


if __name__ == "__main__":
    sys.exit(main())
