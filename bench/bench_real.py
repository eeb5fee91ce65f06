#!/usr/bin/env python3
"""Benchmark stackmgr against git on a real tree: two consecutive releases of a real project, in one run.

The tree is the old release's sdist (vLLM 0.33.0 by default) unpacked and committed; the new release (0.34.0)
supplies the changes. Both sdists come from PyPI once and are cached ($STACKMGR_BENCH_CACHE or
~/.cache/stackmgr-bench; later runs only read the cache). Every figure is a ratio against git (or quilt) measured
in the same run, the median of alternating rounds:

    check  (typical state: 20 .py files of the new release, 1 deletion, 1 new file; unsaved, exit 1)
           / `git status --porcelain`                                                        (target <= 1.6)
    check  (the same state after `stackmgr save typical`, exit 0) / `git status --porcelain`  (target <= 1.6)
    save   (release-size state: the whole new release over the old one, plus an untracked 60 MiB file that
           must show as unprotected; the user's `git status` has warmed their index first, as in real use, so
           the raw pipeline's `add -A` hashes only what changed) / the raw git save pipeline  (target <= 1.3)
    save's peak RSS / (2 x the patch + 64 MiB)                                               (target <= 1.0)
    status (release-size state, saved) / `git status` + `git diff HEAD --numstat`            (target <= 1.2)
    apply  of a real 40-patch series (the release's .py changes under the package, split in path order and
           saved one on top of the other) / a shell loop of `git apply`                     (target <= 1.0)
           and / `quilt push -a` (for context); every contender must build the saved tree (else exit 2)

Stdlib only; the environment, table and timing helpers come from bench_check_save.py, the apply contenders'
state and rounds from bench_apply.py. Full mode exits 1 when a target fails; `--smoke` (idna 3.6 and 3.7, a few
patches, 2 rounds, for CI) never fails on a target. A run that cannot measure exits 2 in both modes.
"""

from __future__ import annotations

import argparse
import filecmp
import functools
import hashlib
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_apply import Contender, State, check_results, interleaved_medians, registered
from bench_apply import contenders as apply_contenders
from bench_check_save import (
    BIG_BYTES,
    BIG_NAME,
    MARKER,
    MIB,
    Bench,
    BenchError,
    Row,
    expect_unprotected_big_file,
    finish,
    hermetic_env,
    log,
    paired_medians,
    peak_rss_mib,
    prepare_workdir,
    run,
    write_big_file,
    write_gitconfig,
)

CHECK_TARGET = 1.6  # stackmgr check / git status --porcelain
SAVE_TARGET = 1.3  # release-size save / the raw git save pipeline
RSS_SLACK_MIB = 64  # peak RSS of that save <= 2 x its patch + this
STATUS_TARGET = 1.2  # stackmgr status / (git status + git diff HEAD --numstat)
APPLY_TARGET = 1.0  # stackmgr apply / the git apply loop
TYPICAL_EDITS = 20
SERIES = "real"
FULL_DATA = ("vllm", "0.33.0", "0.34.0")
SMOKE_DATA = ("idna", "3.6", "3.7")
PYPI = "https://pypi.org/pypi/{project}/json"
CACHE_VAR = "STACKMGR_BENCH_CACHE"
MIN_ROUNDS = 5  # a full run's medians are of at least this many rounds
CHECK_ROUNDS = 3  # check is timed over this many times the rounds


# --- the data: two sdists from PyPI, cached -----------------------------------------------------------------


def default_cache() -> Path:
    return Path(os.environ.get(CACHE_VAR) or Path.home() / ".cache" / "stackmgr-bench")


@functools.cache
def releases(index: str) -> dict[str, list[dict[str, Any]]]:
    """The project's files by version, from its PyPI JSON (this mirror has no per-version JSON)."""
    try:
        with urllib.request.urlopen(index, timeout=60) as response:
            found: dict[str, list[dict[str, Any]]] = json.load(response)["releases"]
    except (OSError, ValueError, KeyError) as exc:
        raise BenchError(f"cannot read {index}: {exc}") from exc
    return found


def fetch_sdist(project: str, version: str, cache: Path) -> Path:
    """The release's .tar.gz sdist: from the cache, else downloaded from PyPI, its sha256 checked, then cached."""
    target = cache / f"{project}-{version}.tar.gz"
    if target.exists():
        return target
    index = PYPI.format(project=project)
    log(f"downloading {project} {version} (index {index})")
    files = [f for f in releases(index).get(version, ()) if f["packagetype"] == "sdist" and
             f["filename"].endswith(".tar.gz")]  # fmt: skip
    if len(files) != 1:
        raise BenchError(f"{project} {version}: expected one .tar.gz sdist on PyPI, found {len(files)}")
    url, sha256 = urllib.parse.urljoin(index, files[0]["url"]), files[0]["digests"]["sha256"]
    cache.mkdir(parents=True, exist_ok=True)
    part = cache / f".{target.name}.{os.getpid()}.part"
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(part, "wb") as out:
            while chunk := response.read(MIB):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != sha256:
            raise BenchError(f"{url}: sha256 {digest.hexdigest()}, PyPI says {sha256}")
        os.replace(part, target)
    except OSError as exc:
        raise BenchError(f"cannot download {url}: {exc}") from exc
    finally:
        part.unlink(missing_ok=True)
    return target


def unpack(sdist: Path, dest: Path) -> None:
    """The sdist's files under `dest`, without its top directory (tarfile's "data" filter: nothing outside dest)."""
    members = []
    with tarfile.open(sdist) as tar:
        for m in tar.getmembers():
            rel = m.name.partition("/")[2].strip("/")
            if not rel:
                continue
            m.name = rel
            if m.islnk():
                m.linkname = m.linkname.partition("/")[2]
            members.append(m)
        options = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(dest, members=members, **options)  # type: ignore[arg-type]


def files_under(root: Path) -> set[str]:
    """Every file (and symlink) under root, relative, without .git."""
    found = set()
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git" or top != str(root)]
        rel = os.path.relpath(top, root)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            found.add(name if rel == "." else f"{rel}/{name}")
    return found


def copy_in(src: Path, dst: Path) -> None:
    """Write src's bytes (or link) and mode at dst, with a fresh mtime."""
    if dst.is_symlink() or src.is_symlink():
        dst.unlink(missing_ok=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst, follow_symlinks=False)
    if not src.is_symlink():
        shutil.copymode(src, dst)


@dataclass(frozen=True)
class Release:
    """How the new release differs from the committed old one (paths git sees: ignored files are left out)."""

    tracked: list[str]
    modified: list[str]
    added: list[str]
    deleted: list[str]


def compare_releases(tree: Path, new: Path, env: dict[str, str]) -> Release:
    tracked = sorted(n.decode() for n in run(["git", "ls-files", "-z"], tree, env).split(b"\0") if n)
    in_new = files_under(new)
    modified = [p for p in tracked if p in in_new and not same_file(tree / p, new / p)]
    only_new = sorted(in_new - set(tracked))
    proc = subprocess.run(["git", "check-ignore", "--stdin", "-z"], cwd=tree, env=env, capture_output=True,
                          input="".join(f"{n}\0" for n in only_new).encode())  # fmt: skip
    if proc.returncode not in (0, 1):
        raise BenchError(f"git check-ignore exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    ignored = {n.decode() for n in proc.stdout.split(b"\0") if n}
    added = [p for p in only_new if p not in ignored]
    deleted = [p for p in tracked if p not in in_new]
    return Release(tracked, modified, added, deleted)


def same_file(a: Path, b: Path) -> bool:
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)
    return filecmp.cmp(a, b, shallow=False) and (a.stat().st_mode & 0o111 != 0) == (b.stat().st_mode & 0o111 != 0)


# --- the states ---------------------------------------------------------------------------------------------


def make_typical(tree: Path, new: Path, release: Release, rng: random.Random) -> int:
    """20 changed .py files as the new release has them, 1 tracked file deleted, 1 new untracked file."""
    py = [p for p in release.modified if p.endswith(".py")]
    if not py:
        raise BenchError("the two releases have no changed .py file in common")
    picks = rng.sample(py, min(TYPICAL_EDITS, len(py)))
    for rel in picks:
        copy_in(new / rel, tree / rel)
    (tree / rng.choice([p for p in release.tracked if p.endswith(".py") and p not in picks])).unlink()
    added = [p for p in release.added if p.endswith(".py")]
    if added:
        pick = rng.choice(added)
        copy_in(new / pick, tree / pick)
    else:
        (tree / "ADDED_BY_BENCH.txt").write_text("a new file\n")
    return len(picks) + 2


def package_dir(project: str, release: Release) -> str:
    """Where the series' .py changes come from: the project's package directory when it has changed files."""
    name = project.lower().replace("-", "_")
    return name if any(p.startswith(f"{name}/") for p in release.modified + release.added) else ""


def series_paths(release: Release, under: str) -> list[str]:
    """The release's changed (modified, added, deleted) .py files under `under`, in path order."""
    changed = release.modified + release.added + release.deleted
    return sorted(p for p in changed if p.endswith(".py") and p.startswith(f"{under}/" if under else ""))


def split(paths: list[str], groups: int) -> list[list[str]]:
    """Consecutive groups of (nearly) equal size, in order."""
    size, extra = divmod(len(paths), groups)
    out, at = [], 0
    for g in range(groups):
        n = size + (g < extra)
        out.append(paths[at : at + n])
        at += n
    return out


def series_patches(store: Path) -> list[Path]:
    """The patch files of the series, in order (quilt's grammar: first word of each non-comment line)."""
    lines = (store / "series" / SERIES).read_text().splitlines()
    return [store / "patches" / ln.split()[0] for ln in lines if ln.strip() and not ln.startswith("#")]


# --- the measurements ---------------------------------------------------------------------------------------


def measure_check(bench: Bench, state: str, expect: int) -> list[Row]:
    """Check is cheap (~0.1 s): CHECK_ROUNDS x the rounds, for a steadier median."""

    def check() -> None:
        bench.stackmgr_run("check", ok=(expect,))

    def python() -> None:  # the floor: any Python program's start, before it can ask git anything
        run([sys.executable, "-c", "pass"], bench.workdir, bench.env)

    git_ms, check_ms = paired_medians(bench.git_status, check, CHECK_ROUNDS * bench.repeats)
    py_ms, _ = paired_medians(python, bench.git_status, CHECK_ROUNDS * bench.repeats)
    return [
        Row(f"git status --porcelain ({state})", git_ms),
        Row(f"floor, for context: (python -c pass {py_ms:.1f} ms + git status) / git status", py_ms + git_ms,
            (py_ms + git_ms) / git_ms),
        Row(f"stackmgr check ({state}, exit {expect}) / git status", check_ms, check_ms / git_ms, CHECK_TARGET),
    ]


def measure_save(bench: Bench) -> list[Row]:
    """Each timed save gets a new patch name (rel1, rel2, …): every round is a full save with its verification."""
    counter = iter(range(1, bench.repeats + 2))

    def save() -> None:
        bench.stackmgr_run("save", f"rel{next(counter)}", "-m", "release")

    pipeline_ms, save_ms = paired_medians(bench.git_save_pipeline, save, bench.repeats)
    size = (bench.workdir / "pipeline.patch").stat().st_size / MIB
    peak = peak_rss_mib([bench.stackmgr, "--store", str(bench.store), "save", "relrss", "-m", "rss"], bench)
    patch = (bench.store / "patches" / "relrss.patch").stat().st_size / MIB
    limit = 2 * patch + RSS_SLACK_MIB
    return [
        Row(f"git save pipeline (release-size, {size:.1f} MiB patch)", pipeline_ms),
        Row("stackmgr save (release-size) / git save pipeline", save_ms, save_ms / pipeline_ms, SAVE_TARGET),
        Row(f"stackmgr save (release-size) peak RSS {peak:.0f} MiB / (2 x {patch:.1f} MiB patch + "
            f"{RSS_SLACK_MIB} MiB = {limit:.0f})", peak, peak / limit, 1.0),
    ]  # fmt: skip


def measure_status(bench: Bench) -> list[Row]:
    def git_side() -> None:
        run(["git", "status"], bench.tree, bench.env)
        run(["git", "diff", "HEAD", "--numstat"], bench.tree, bench.env)

    def status() -> None:
        bench.stackmgr_run("status")

    git_ms, status_ms = paired_medians(git_side, status, bench.repeats)
    return [
        Row("git status + git diff HEAD --numstat (release-size, saved)", git_ms),
        Row("stackmgr status (release-size, saved) / git", status_ms, status_ms / git_ms, STATUS_TARGET),
    ]


def contenders(bench: Bench, state: State, patches: list[Path]) -> list[Contender]:
    """bench_apply.py's three ways of bringing a series in, for this script's series."""
    return apply_contenders(bench, state, patches, bench.workdir / "quilt-pc", SERIES)


def measure_apply(bench: Bench, state: State, patches: list[Path]) -> tuple[list[Row], list[str]]:
    runs = contenders(bench, state, patches)
    log("checking that every contender builds the saved series")
    ids = check_results(state, runs)
    log(f"measuring apply ({bench.repeats} rounds)")
    stackmgr_ms, quilt_ms, loop_ms = interleaved_medians(runs, bench.repeats)
    n = len(patches)
    rows = [
        Row(f"quilt push -a -q ({n} patches)", quilt_ms),
        Row(f"git apply loop ({n} × `git apply` in sh)", loop_ms),
        Row(f"stackmgr apply {SERIES} / quilt push -a, for context", stackmgr_ms, stackmgr_ms / quilt_ms),
        Row(f"stackmgr apply {SERIES} / git apply loop", stackmgr_ms, stackmgr_ms / loop_ms, APPLY_TARGET),
    ]
    return rows, ids


# --- driver -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Data:
    project: str
    old: str
    new: str


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def build(workdir: Path, data: Data, cache: Path, repeats: int) -> tuple[Bench, Path, Release]:
    """The old release committed and registered in a fresh store; the new one unpacked beside it."""
    prepare_workdir(workdir)
    (workdir / MARKER).write_text("created by bench/bench_real.py; wiped on every run\n")
    old_sdist, new_sdist = fetch_sdist(data.project, data.old, cache), fetch_sdist(data.project, data.new, cache)
    home, tree, new, store = workdir / "home", workdir / data.project, workdir / "new-release", workdir / "store"
    write_gitconfig(home)
    env = hermetic_env(workdir, home)
    log(f"unpacking {old_sdist.name} and {new_sdist.name}")
    unpack(old_sdist, tree)
    unpack(new_sdist, new)
    run(["git", "init", "-q"], tree, env)
    run(["git", "add", "-A"], tree, env)
    run(["git", "commit", "-q", "-m", f"{data.project} {data.old}"], tree, env)
    release = compare_releases(tree, new, env)
    return registered(tree, store, workdir, env, repeats, data.project), new, release


def save_series(bench: Bench, new: Path, paths: list[str], npatches: int) -> tuple[State, list[Path]]:
    """The release's .py changes in `npatches` consecutive groups, each saved on top of the ones before it."""
    base = run(["git", "rev-parse", "HEAD"], bench.tree, bench.env).decode().strip()
    for n, group in enumerate(split(paths, npatches), 1):
        for rel in group:
            if (new / rel).exists() or (new / rel).is_symlink():
                copy_in(new / rel, bench.tree / rel)
            else:
                (bench.tree / rel).unlink()
        bench.stackmgr_run("save", f"p{n:02d}", "--series", SERIES, "-m", f"p{n:02d}")
    state = State(bench, base, saved="")
    state.saved = state.tree_id()
    bench.stackmgr_run("reset")
    state.expect_clean("stackmgr reset (after saving the series)")
    patches = series_patches(bench.store)
    if len(patches) != npatches:
        raise BenchError(f"series {SERIES} lists {len(patches)} patches, expected {npatches}")
    return state, patches


def run_bench(bench: Bench, new: Path, release: Release, data: Data, seed: int, npatches: int
              ) -> tuple[list[Row], list[str]]:  # fmt: skip
    """Every measurement, in order; returns the table and the apply contenders' working-tree ids."""
    rng = random.Random(seed)
    sizes = [f"tree: {data.project} {data.old}, {len(release.tracked):,} tracked files; {data.new} changes "
             f"{len(release.modified):,}, adds {len(release.added):,}, deletes {len(release.deleted):,}"]  # fmt: skip
    changes = make_typical(bench.tree, new, release, rng)
    sizes.append(f"typical state: {changes} changes")
    log(sizes[-1] + "; measuring check before saving")
    os.sync()
    rows = measure_check(bench, "typical, unsaved", expect=1)
    bench.stackmgr_run("save", "typical", "-m", "x")
    log("measuring check after `save typical`")
    rows += measure_check(bench, "typical, saved", expect=0)
    bench.stackmgr_run("reset")
    if run(["git", "status", "--porcelain"], bench.tree, bench.env):
        raise BenchError("the tree is not clean after `stackmgr reset` of the typical state")

    for rel in sorted(files_under(new)):
        copy_in(new / rel, bench.tree / rel)
    write_big_file(bench.tree, rng)
    expect_unprotected_big_file(bench)
    run(["git", "status", "--porcelain"], bench.tree, bench.env)  # the user's own look: their index warm, as in use
    os.sync()
    log(f"measuring save of the release-size state ({bench.repeats} rounds)")
    rows += measure_save(bench)
    changed = run(["git", "diff", "HEAD", "--name-only", "-z"], bench.tree, bench.env).count(b"\0")
    untracked = run(["git", "ls-files", "-o", "--exclude-standard", "-z"], bench.tree, bench.env).count(b"\0")
    patch = (bench.workdir / "pipeline.patch").stat().st_size / MIB
    sizes.append(f"release-size state: {changed:,} changed tracked files, {untracked - 1:,} new files, "
                 f"{patch:.1f} MiB patch; untracked {BIG_NAME} {BIG_BYTES // MIB} MiB (unprotected)")  # fmt: skip
    log("measuring status of the saved release-size state")
    rows += measure_status(bench)

    (bench.tree / BIG_NAME).unlink()
    bench.stackmgr_run("reset")
    under = package_dir(data.project, release)
    paths = series_paths(release, under)
    if not paths:
        raise BenchError(f"no changed .py file under {under or 'the tree'} for the series")
    if len(paths) < npatches:
        log(f"only {len(paths)} changed .py files under {under or 'the tree'}: {len(paths)} patches, not {npatches}")
        npatches = len(paths)
    log(f"saving a series of {npatches} patches ({len(paths)} .py files under {under or 'the tree'})")
    state, patches = save_series(bench, new, paths, npatches)
    size = sum(p.stat().st_size for p in patches) / MIB
    sizes.append(f"series {SERIES}: {npatches} patches of {len(paths)} .py files under {under or '.'}/, "
                 f"{size:.1f} MiB")  # fmt: skip
    os.sync()
    apply_rows, ids = measure_apply(bench, state, patches)
    sizes.append("working-tree ids (identical: every contender builds the saved series):")
    return rows + apply_rows, [*sizes, *(f"  {line}" for line in ids)]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1, help="seed of the typical state and the big file (default 1)")
    parser.add_argument("--workdir", type=Path, default=Path(__file__).resolve().parent / "work-real",
                        help="scratch directory, wiped and recreated (default bench/work-real/)")  # fmt: skip
    parser.add_argument("--repeats", type=int, help=f"timed rounds per measurement (default 7, at least "
                        f"{MIN_ROUNDS}; check {CHECK_ROUNDS} x as many; smoke 2)")  # fmt: skip
    parser.add_argument("--patches", type=int, help="patches in the real series (default 40; smoke 3)")
    parser.add_argument("--project", help=f"PyPI project (default {FULL_DATA[0]}; smoke {SMOKE_DATA[0]})")
    parser.add_argument("--old", help=f"the release the tree starts from (default {FULL_DATA[1]})")
    parser.add_argument("--new", help=f"the release that supplies the changes (default {FULL_DATA[2]})")
    parser.add_argument("--cache", type=Path, help=f"sdist cache (default ${CACHE_VAR} or ~/.cache/stackmgr-bench)")
    parser.add_argument("--smoke", action="store_true", help=f"{' '.join(SMOKE_DATA)}, 3 patches, 2 rounds, "
                        "no targets (CI)")  # fmt: skip
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    start_load = load()
    print(f"load at the start: {start_load} (1, 5, 15 min)", flush=True)
    defaults = SMOKE_DATA if args.smoke else FULL_DATA
    if args.project not in (None, defaults[0]) and not (args.old and args.new):
        print("bench: error: --project needs --old and --new", file=sys.stderr)
        return 2
    data = Data(args.project or defaults[0], args.old or defaults[1], args.new or defaults[2])
    repeats = args.repeats if args.repeats is not None else (2 if args.smoke else 7)
    npatches = args.patches if args.patches is not None else (3 if args.smoke else 40)
    if npatches < 1 or repeats < 1:
        print("bench: error: --repeats and --patches must be at least 1", file=sys.stderr)
        return 2
    if repeats < MIN_ROUNDS and not args.smoke:
        log(f"--repeats {repeats}: {MIN_ROUNDS} rounds instead (a full run's medians are of at least {MIN_ROUNDS})")
        repeats = MIN_ROUNDS
    try:
        bench, new, release = build(args.workdir.resolve(), data, (args.cache or default_cache()).resolve(), repeats)
        rows, sizes = run_bench(bench, new, release, data, args.seed, npatches)
        quilt = run(["quilt", "--version"], bench.workdir, bench.env).decode().strip()
        git = run(["git", "--version"], bench.workdir, bench.env).decode().strip()
    except BenchError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    print(f"# stackmgr vs git on {data.project} {data.old} -> {data.new} ({'smoke' if args.smoke else 'full'}; "
          f"seed {args.seed}; {repeats} rounds; {git}; quilt {quilt}; {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load {start_load} at the start, {load()} at the end)")  # fmt: skip
    for line in sizes:
        print(line)
    return finish(rows, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
