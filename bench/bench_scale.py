#!/usr/bin/env python3
"""Benchmark stackmgr at lab scale and beyond: long series, a large store, start-up.

On the vLLM-size tree of bench_check_save.py (6,401 files) it generates, deterministically from a seed and without
running stackmgr (patch files are written the way `save` writes them, blob ids computed as git does):

- stacked series of 40, 400 and 2,000 one-hunk patches: `stackmgr apply` of each, per-patch cost
  (target: per patch at 2,000 within 1.3x of per patch at 40);
- a store of 5,000 patches (100 series of 50) and 20,000 link records (4 per patch, with metrics, a gate and
  a verdict, over 500 artifact files), next to a 10-patch store on the same tree:
  `check` (typical dirty state) with the big store / with the small one (target <= 1.2: cost must not grow
  with the store), `links`, `show PATCH`, `status --json` (each <= 1 s, absolute: nothing in git compares) and
  `report -o DIR` (<= 30 s);
- start-up: `stackmgr --version` <= 1.5x `python -c pass`; `stackmgr check` <= 1.5x (`python -c pass` + the
  `git status --porcelain` it stands for); and `python -X importtime` of both must import none of rich,
  unidiff, click, GitPython.

Stdlib only; helpers from bench_check_save.py. Full mode exits 1 when a target fails; `--smoke` (small tree,
small numbers, for CI) never fails on a target. A run that cannot measure exits 2.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import random
import shutil
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_check_save import (
    FULL,
    MARKER,
    SMOKE,
    Bench,
    BenchError,
    Row,
    build_tree,
    commit_tree,
    finish,
    hermetic_env,
    log,
    make_dirty,
    median_ms,
    paired_medians,
    prepare_workdir,
    run,
    timed,
    tracked_sources,
    write_gitconfig,
)

TREE = "vllm"
HEAVY = ("rich", "unidiff", "click", "git")  # `git` is GitPython's package
FROM_LINE = b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"


@dataclass(frozen=True)
class Sizes:
    series: tuple[int, ...]
    store_patches: int
    links_per_patch: int
    artifacts: int
    repeats: int


FULL_SIZES = Sizes(series=(40, 400, 2000), store_patches=5000, links_per_patch=4, artifacts=500, repeats=5)
SMOKE_SIZES = Sizes(series=(4, 12), store_patches=40, links_per_patch=2, artifacts=5, repeats=1)


# --- patch files, written as `stackmgr save` writes them ------------------------------------------------------


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def one_hunk_patch(path: str, old: bytes, line: int, text: bytes) -> tuple[bytes, bytes]:
    """(the diff of replacing line `line` of `old` by `text`, the new content): a git diff with full blob ids."""
    lines = old.splitlines(keepends=True)
    new_lines = [*lines[:line], text, *lines[line + 1 :]]
    new = b"".join(new_lines)
    lo, hi = max(0, line - 3), min(len(lines), line + 4)
    body = b"".join(b" " + ln for ln in lines[lo:line]) + b"-" + lines[line] + b"+" + text
    body += b"".join(b" " + ln for ln in lines[line + 1 : hi])
    n = hi - lo
    p = path.encode()
    diff = (b"diff --git a/%s b/%s\nindex %s..%s 100644\n--- a/%s\n+++ b/%s\n@@ -%d,%d +%d,%d @@\n"
            % (p, p, blob_id(old).encode(), blob_id(new).encode(), p, p, lo + 1, n, lo + 1, n)) + body  # fmt: skip
    return diff, new


def patch_file(tree: str, base: str, subject: str, path: str, diff: bytes) -> bytes:
    head = (f"From: Bench Runner <bench@example.com>\nDate: Sat, 13 Jun 2026 10:02:11 +0000\nSubject: [PATCH] "
            f"{subject}\n\nStackmgr-Tree: {tree}\nStackmgr-Base: {base}\n---\n {path} | 2 +-\n 1 file changed, "
            "1 insertion(+), 1 deletion(-)\n\n")  # fmt: skip
    return FROM_LINE + head.encode() + diff


def write_series(store: Path, tree: Path, base: str, name: str, count: int, pool: list[str], rng: random.Random) -> int:
    """A stacked series: patch k edits one line of a file from `pool`, on top of the patches before it."""
    contents: dict[str, bytes] = {}
    names = []
    for k in range(count):
        path = pool[k % len(pool)]
        old = contents.get(path)
        if old is None:
            old = (tree / path).read_bytes()
        nlines = old.count(b"\n")
        line = 3 + rng.randrange(max(1, nlines - 8))
        diff, contents[path] = one_hunk_patch(path, old, line, b"    bench_%s_%d = %d\n" % (name.encode(), k, k))
        filename = f"{name}-{k:04d}.patch"
        (store / "patches" / filename).write_bytes(patch_file(TREE, base, f"{name} patch {k}", path, diff))
        names.append(filename)
    (store / "series" / name).write_text("".join(n + "\n" for n in names))
    return sum((store / "patches" / n).stat().st_size for n in names)


def toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_big_store(store: Path, tree: Path, base: str, sizes: Sizes, pool: list[str], rng: random.Random) -> None:
    """`store_patches` independent patches (each on the base), 100 series of 50, and link records over shared
    artifacts, as `stackmgr link` writes them."""
    results = store / "results"
    results.mkdir()
    artifacts = []
    for a in range(sizes.artifacts):
        data = b'{"output_throughput": %d.5, "mean_ttft_ms": 40.%d}\n' % (100 + a, a % 10)
        (results / f"run{a:04d}.json").write_bytes(data)
        artifacts.append((f"results/run{a:04d}.json", hashlib.sha256(data).hexdigest(), len(data)))
    per_series = 50
    series: dict[str, list[str]] = {}
    verdicts = ("promoted", "rejected", "experimental", "inconclusive")
    for k in range(sizes.store_patches):
        path = pool[k % len(pool)]
        old = (tree / path).read_bytes()
        line = 3 + rng.randrange(max(1, old.count(b"\n") - 8))
        diff, _ = one_hunk_patch(path, old, line, b"    lab_%d = %d\n" % (k, k))
        name = f"lab-{k:05d}"
        data = patch_file(TREE, base, f"lab change {k}", path, diff)
        (store / "patches" / f"{name}.patch").write_bytes(data)
        series.setdefault(f"lane-{k // per_series:03d}", []).append(f"{name}.patch")
        sha = hashlib.sha256(data).hexdigest()
        links = store / "links" / name
        links.mkdir(parents=True)
        for j in range(sizes.links_per_patch):
            art = artifacts[(k * sizes.links_per_patch + j) % len(artifacts)]
            link_id = hashlib.sha256(f"{name}/{j}".encode()).hexdigest()[:12]
            record = (
                f'schema = "stackmgr.link/v1"\nid = "lnk-{link_id}"\ncreated = "2026-06-13T10:{j:02d}:00.000000Z"\n'
                f'author = "Bench Runner <bench@example.com>"\n\n[patch]\nname = "{name}"\ntree = "{TREE}"\n'
                f'sha256 = "{sha}"\n\n[[artifact]]\npath = {toml_str(art[0])}\nsha256 = "{art[1]}"\nsize = {art[2]}\n'
                f'\n[[metric]]\nname = "output_throughput"\nvalue = {100.5 + j}\nunit = "tok/s"\n'
                f'direction = "higher"\nsource = {{ artifact = {toml_str(art[0])}, pointer = "/output_throughput" }}\n'
                f'\n[[gate]]\nname = "json"\nstatus = "{"pass" if j % 3 else "fail"}"\n'
                f'\n[verdict]\nstatus = "{verdicts[(k + j) % 4]}"\nlesson = "bench lesson {k}.{j}"\n'
            )  # fmt: skip
            (links / f"20260613T10{j:02d}00.000000Z-lnk-{link_id}.toml").write_text(record)
    for name, patches in series.items():
        (store / "series" / name).write_text("".join(p + "\n" for p in patches))


# --- measurements -------------------------------------------------------------------------------------------


def measure_apply_scaling(bench: Bench, tree_clean: str, sizes: Sizes) -> list[Row]:
    rows, per_patch = [], {}
    for count in sizes.series:
        name = f"s{count}"

        def apply(name: str = name) -> None:
            bench.stackmgr_run("apply", name)

        times = []
        for _ in range(max(2, sizes.repeats // 2) if count >= 1000 else sizes.repeats):
            times.append(timed(apply))
            bench.stackmgr_run("reset")
            if run(["git", "status", "--porcelain"], bench.tree, bench.env).strip() != tree_clean:
                raise BenchError(f"`stackmgr reset` after applying {name} did not leave the tree as it was")
        ms = statistics.median(times)
        per_patch[count] = ms / count
        rows.append(Row(f"stackmgr apply ({count} patches), {per_patch[count]:.2f} ms per patch", ms))
    first, last = sizes.series[0], sizes.series[-1]
    rows.append(Row(f"per-patch cost of apply: {last} patches / {first} patches", per_patch[last],
                    per_patch[last] / per_patch[first], 1.3))  # fmt: skip
    return rows


def measure_store(bench: Bench, small: Path, big: Path, sizes: Sizes) -> list[Row]:
    def check_in(store: Path) -> None:
        run([bench.stackmgr, "--store", str(store), "check"], bench.workdir, bench.env, ok=(1,))

    small_ms, big_ms = paired_medians(lambda: check_in(small), lambda: check_in(big), max(5, bench.repeats))
    n = sizes.store_patches
    rows = [
        Row("stackmgr check (typical, 10-patch store)", small_ms),
        Row(f"stackmgr check (typical, {n}-patch store) / 10-patch store", big_ms, big_ms / small_ms, 1.2),
    ]

    def big_run(*args: str, ok: Sequence[int] = (0,)) -> None:
        run([bench.stackmgr, "--store", str(big), *args], bench.workdir, bench.env, ok=ok)

    nlinks = n * sizes.links_per_patch
    middle = f"lab-{n // 2:05d}"
    commands = ((f"links ({nlinks} records)", ("links",)), (f"show {middle}", ("show", middle)),
                ("status --json", ("status", "--json")))  # fmt: skip
    for label, args in commands:
        ms = median_ms(lambda args=args: big_run(*args), max(3, sizes.repeats))
        rows.append(Row(f"stackmgr {label}, {n}-patch store, as a fraction of 1 s", ms, ms / 1000, 1.0))
    out = bench.workdir / "report"

    def report() -> None:
        shutil.rmtree(out, ignore_errors=True)
        big_run("report", "-o", str(out))

    ms = statistics.median(timed(report) for _ in range(1 if n >= 1000 else 2))
    rows.append(Row(f"stackmgr report ({n} patches, {nlinks} links), as a fraction of 30 s", ms, ms / 30000, 1.0))
    return rows


def heavy_imports(bench: Bench, *args: str, ok: Sequence[int] = (0,)) -> list[str]:
    """Top-level packages of HEAVY that `python -X importtime` shows the command importing."""
    store = [] if args == ("--version",) else ["--store", str(bench.store)]
    proc_err = run_stderr([sys.executable, "-X", "importtime", bench.stackmgr, *store, *args], bench, ok)
    found = set()
    for line in proc_err.splitlines():
        if line.startswith("import time:"):
            module = line.rsplit("|", 1)[-1].strip()
            if module.split(".")[0] in HEAVY:
                found.add(module.split(".")[0])
    return sorted(found)


def run_stderr(argv: Sequence[str], bench: Bench, ok: Sequence[int]) -> str:
    import subprocess

    proc = subprocess.run(list(argv), cwd=bench.workdir, env=bench.env, capture_output=True)
    if proc.returncode not in ok:
        raise BenchError(f"`{' '.join(argv)}` exited {proc.returncode}: {proc.stderr[-300:]!r}")
    return proc.stderr.decode(errors="replace")


def measure_start_up(bench: Bench) -> list[Row]:
    def python() -> None:
        run([sys.executable, "-c", "pass"], bench.workdir, bench.env)

    def version() -> None:
        run([bench.stackmgr, "--version"], bench.workdir, bench.env)

    def check() -> None:
        bench.stackmgr_run("check", ok=(1,))

    py_ms, version_ms = paired_medians(python, version, max(10, bench.repeats * 2))
    git_ms, check_ms = paired_medians(bench.git_status, check, max(10, bench.repeats * 2))
    rows = [
        Row("python -c pass", py_ms),
        Row("git status --porcelain (typical)", git_ms),
        Row("stackmgr --version / python -c pass", version_ms, version_ms / py_ms, 1.5),
        Row("stackmgr check / (python -c pass + git status)", check_ms, check_ms / (py_ms + git_ms), 1.5),
    ]
    for args, ok in ((("--version",), (0,)), (("check",), (1,))):
        heavy = heavy_imports(bench, *args, ok=ok)
        shown = ", ".join(heavy) if heavy else "none"
        rows.append(Row(f"heavy imports of `stackmgr {args[0]}` (rich, unidiff, click, GitPython): {shown}",
                        0.0, float(len(heavy)), 0.0))  # fmt: skip
    return rows


# --- driver -------------------------------------------------------------------------------------------------


def setup(workdir: Path, smoke: bool, seed: int, repeats: int, sizes: Sizes) -> tuple[Bench, Path, Path, str]:
    scale = SMOKE if smoke else FULL
    prepare_workdir(workdir)
    (workdir / MARKER).write_text("created by bench/bench_scale.py; wiped on every run\n")
    home, tree = workdir / "home", workdir / TREE
    write_gitconfig(home)
    env = hermetic_env(workdir, home)
    rng = random.Random(seed)
    tree.mkdir()
    files, lines = build_tree(tree, rng, scale)
    log(f"tree: {files} files, {lines:,} lines; committing")
    commit_tree(tree, env)
    base = run(["git", "rev-parse", "HEAD"], tree, env).decode().strip()
    exe = shutil.which("stackmgr", path=env.get("PATH"))
    if exe is None:
        raise BenchError("the `stackmgr` console script is not on PATH (activate the venv)")
    stores = {}
    for label in ("small", "big", "series"):
        store = workdir / f"store-{label}"
        run([exe, "init", str(store)], workdir, env)
        run([exe, "--store", str(store), "tree", "add", TREE, str(tree)], workdir, env)
        stores[label] = store
    sources = tracked_sources(tree, env)
    pool = rng.sample(sources, min(len(sources), 400))
    for count in sizes.series:
        size = write_series(stores["series"], tree, base, f"s{count}", count, pool, rng)
        log(f"series s{count}: {count} patches, {size / 1024:.0f} KiB")
    small = SMALL_STORE_PATCHES
    write_big_store(stores["small"], tree, base, Sizes((), small, 1, 2, 1), pool, random.Random(seed + 1))
    write_big_store(stores["big"], tree, base, sizes, pool, random.Random(seed + 2))
    log(f"stores: {small} patches and {sizes.store_patches} patches, "
        f"{sizes.store_patches * sizes.links_per_patch} link records")  # fmt: skip
    bench = Bench(tree, stores["series"], workdir, env, exe, repeats)
    return bench, stores["small"], stores["big"], base


SMALL_STORE_PATCHES = 10


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1, help="seed of the tree, series and store (default 1)")
    parser.add_argument("--workdir", type=Path, default=Path(__file__).resolve().parent / "work-scale",
                        help="scratch directory, wiped and recreated (default bench/work-scale/)")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="small tree and numbers, no targets (CI)")
    args = parser.parse_args(argv)
    sizes = SMOKE_SIZES if args.smoke else FULL_SIZES
    try:
        bench, small, big, _base = setup(args.workdir.resolve(), args.smoke, args.seed, sizes.repeats, sizes)
        log("warming the patch caches of both stores (first check indexes every patch)")
        first_ms = 0.0
        for store in (small, big):
            first_ms = timed(lambda store=store: run([bench.stackmgr, "--store", str(store), "check"], bench.workdir,
                                                     bench.env, ok=(0,)))  # fmt: skip
        first = Row(f"stackmgr check, the first of a new {sizes.store_patches}-patch store (verifies every patch; "
                    "once), as a fraction of 3 s", first_ms, first_ms / 3000, 1.0)  # fmt: skip
        clean = run(["git", "status", "--porcelain"], bench.tree, bench.env).strip()
        log("measuring apply of long series")
        rows = [first, *measure_apply_scaling(bench, clean, sizes)]
        make_dirty(bench.tree, bench.env, random.Random(args.seed))
        os.sync()
        log("measuring the big store")
        rows += measure_store(bench, small, big, sizes)
        log("measuring start-up")
        rows += measure_start_up(bench)
        git = run(["git", "--version"], bench.workdir, bench.env).decode().strip()
    except BenchError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    print(f"# stackmgr at scale ({'smoke' if args.smoke else 'full'}; seed {args.seed}; {git}; Python "
          f"{platform.python_version()}; {platform.machine()}, {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.2f} at the end)")  # fmt: skip
    return finish(rows, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
