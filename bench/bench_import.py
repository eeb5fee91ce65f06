#!/usr/bin/env python3
"""Benchmark `stackmgr import`, `import` + `apply` and `rebase` against git and quilt, on the field suite's data.

The workloads are real (field/run.py fetches and caches them: $STACKMGR_FIELD_CACHE or ~/.cache/stackmgr-field):
Debian source packages with quilt series, their series as `git format-patch` mails, and consecutive PyPI
releases with a stack of per-file patches carried between them. In one run, interleaved, with untimed set-up
(a fresh store and a clean clone) before every timed step:

    stackmgr import --series S --base B MAILS…   vs  git am MAILS…           (target: median ratio <= 2.0)
    stackmgr import DIR --series S + apply S     vs  quilt push -a           (target: median ratio <= 1.5)
    stackmgr rebase S --onto REV                 vs  git rebase --onto REV   (target: median ratio <= 1.5)

Each contender's result is checked once before timing (the same working-tree id on both sides, else exit 2).
Per-case medians and ratios are printed, then the median ratio over the cases, which the target judges. Full
mode exits 1 when a target fails; `--smoke` (two series, two rebases, 2 repeats, for CI) never fails on a
target, and when the data is neither cached nor downloadable it measures a small synthetic series and history
instead of failing.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "field"))

from bench_check_save import MARKER, BenchError, Row, finish, log, prepare_workdir, timed  # noqa: E402
from harness import debian, history  # noqa: E402
from harness.fetch import Cache, default_cache  # noqa: E402
from harness.sh import Env, FieldError, clone_at, commit_all, new_repo, worktree_id  # noqa: E402

AM_TARGET = 2.0  # stackmgr import / git am
QUILT_TARGET = 1.5  # stackmgr import + apply / quilt push -a
REBASE_TARGET = 1.5  # stackmgr rebase / git rebase
FULL_PACKAGES = ("cowsay", "cpio", "patch", "screen", "dash", "xz-utils", "bc", "less", "openssh")
SMOKE_PACKAGES = ("cowsay", "bc")
FULL_REBASES = (("pluggy", 2), ("pluggy", 1), ("idna", 3), ("idna", 5), ("idna", 0), ("iniconfig", 0),
                ("tomli", 0))  # (project, index into history.plans): drift and upstream cases git carries cleanly
SMOKE_REBASES = (("six", 0), ("iniconfig", 2))


@dataclass(frozen=True)
class Step:
    """One timed action, with the untimed set-up that puts its inputs back before every round."""

    prepare: Callable[[], object]
    do: Callable[[], object]
    result: Callable[[], str]  # the tree id the action made (checked once, before timing)


@dataclass(frozen=True)
class Case:
    label: str
    mine: Step
    theirs: Step


def medians(case: Case, repeats: int) -> tuple[float, float]:
    """Check both results once (also the warm-up), then alternate which runs first each round."""
    ids = []
    for step in (case.mine, case.theirs):
        step.prepare()
        step.do()
        ids.append(step.result())
    if ids[0] != ids[1]:
        raise BenchError(f"{case.label}: stackmgr made tree {ids[0]}, the other side {ids[1]}")
    times: list[list[float]] = [[], []]
    steps = (case.mine, case.theirs)
    for r in range(repeats):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            steps[i].prepare()
            times[i].append(timed(steps[i].do))
    return statistics.median(times[0]), statistics.median(times[1])


def must(env: Env, argv: Sequence[str], cwd: Path, extra: dict[str, str] | None = None) -> None:
    done = env.run(argv, cwd, extra)
    if done.code != 0:
        raise BenchError(f"`{' '.join(map(str, argv))}` exited {done.code}: {done.text[-400:]}")


class Fresh:
    """A new store for every round, and the tree (one clone of the upstream repository) back clean at `base`."""

    def __init__(self, env: Env, where: Path, repo: Path, base: str, tree_name: str) -> None:
        self.env, self.where, self.repo, self.base, self.tree_name = env, where, repo, base, tree_name

    def __call__(self) -> tuple[Path, Path]:
        if self.tree.exists():
            must(self.env, ["git", "checkout", "-q", "-f", "--detach", self.base], self.tree)
            must(self.env, ["git", "clean", "-fdqx"], self.tree)
        else:
            self.where.mkdir(parents=True)
            clone_at(self.env, self.repo, self.tree, self.base)
        shutil.rmtree(self.store, ignore_errors=True)
        env, exe = self.env, self.env.stackmgr
        must(env, [exe, "init", str(self.store)], self.where)
        must(env, [exe, "--store", str(self.store), "tree", "add", self.tree_name, str(self.tree)], self.where)
        return self.store, self.tree

    @property
    def store(self) -> Path:
        return self.where / "store"

    @property
    def tree(self) -> Path:
        return self.where / "tree"


def debian_cases(env: Env, u: debian.Unpacked, work: Path) -> list[tuple[str, Case]]:
    mails, _ = debian.mails_from_quilt(env, u, work)
    name = u.source.package
    sm_am, sm_q = Fresh(env, work / "sm-am", u.repo, u.base, name), Fresh(env, work / "sm-q", u.repo, u.base, name)
    am_tree, quilt_tree = work / "am", work / "quilt"
    clone_at(env, u.repo, am_tree, u.base)
    clone_at(env, u.repo, quilt_tree, u.base)
    pc = work / "quilt.pc"

    def am_reset() -> None:
        must(env, ["git", "checkout", "-q", "-f", "--detach", u.base], am_tree)

    def quilt_reset() -> None:
        shutil.rmtree(pc, ignore_errors=True)
        must(env, ["git", "checkout", "-q", "-f", "--detach", u.base], quilt_tree)
        must(env, ["git", "clean", "-fdqx"], quilt_tree)

    def sm_import() -> None:
        must(env, [env.stackmgr, "--store", str(sm_am.store), "import", "--series", "am", "--base", u.base,
                   *map(str, mails)], sm_am.store)  # fmt: skip

    def sm_import_apply() -> None:
        must(env, [env.stackmgr, "--store", str(sm_q.store), "import", "--series", "deb", str(u.patches)],
             sm_q.store)  # fmt: skip
        must(env, [env.stackmgr, "--store", str(sm_q.store), "apply", "deb"], sm_q.store)

    def sm_am_result() -> str:  # import alone does not touch the tree: apply to see what it made
        must(env, [env.stackmgr, "--store", str(sm_am.store), "apply", "am"], sm_am.store)
        return worktree_id(env, sm_am.tree)

    am_mails = debian.git_am_takes(mails)  # an empty commit's mail: git am stops at it, import skips it
    am = Case(f"{name}: stackmgr import / git am ({len(mails)} mails)",
              Step(sm_am, sm_import, sm_am_result),
              Step(am_reset, lambda: must(env, ["git", "am", "-q", "--keep-cr", *map(str, am_mails)], am_tree),
                   lambda: worktree_id(env, am_tree)))  # fmt: skip
    n = len(debian.series_names(u.patches))
    quilt = Case(f"{name}: stackmgr import + apply / quilt push -a ({n} patches)",
                 Step(sm_q, sm_import_apply, lambda: worktree_id(env, sm_q.tree)),
                 Step(quilt_reset, lambda: must(env, [*("quilt", "--quiltrc", "-"), "push", "-a", "-q"], quilt_tree,
                                                {"QUILT_PATCHES": str(u.patches), "QUILT_PC": str(pc)}),
                      lambda: worktree_id(env, quilt_tree)))  # fmt: skip
    return [("am", am), ("quilt", quilt)]


def rebase_case(env: Env, project: str, upstream: Path, commits: list[str], plan: history.Plan, versions:
                tuple[str, ...], work: Path) -> Case:  # fmt: skip
    old, new = plan.changes
    patches = history.per_file_patches(env, upstream, commits[old], commits[new])
    git_repo = work / "git"
    carried = history.make_stack(env, upstream, commits[plan.at], patches, git_repo)
    at, onto = commits[plan.at], commits[plan.onto]
    out = work / "mails"
    env.must(["git", "format-patch", "-q", "--no-signature", "-o", str(out), f"{at}..stack"], git_repo)
    mails = sorted(out.glob("*.patch"))
    fresh = Fresh(env, work / "sm", upstream, at, project)

    def sm_prepare() -> None:
        store, _ = fresh()
        must(env, [env.stackmgr, "--store", str(store), "import", "--series", "S", "--base", at, *map(str, mails)],
             store)  # fmt: skip

    def sm_rebase() -> None:
        must(env, [env.stackmgr, "--store", str(fresh.store), "rebase", "S", "--onto", onto], fresh.store)

    def sm_result() -> str:  # a series the rebase left empty applies too: its base line gives `onto`'s tree
        must(env, [env.stackmgr, "--store", str(fresh.store), "apply", "S"], fresh.store)
        return worktree_id(env, fresh.tree)

    def git_prepare() -> None:
        must(env, ["git", "checkout", "-q", "-f", "--detach", "stack"], git_repo)
        must(env, ["git", "branch", "-f", "work", "stack"], git_repo)

    def git_rebase() -> None:
        must(env, ["git", "rebase", "-q", "--onto", onto, at, "work"], git_repo)

    label = (f"{project} {plan.kind} {versions[old]}→{versions[new]} at {versions[plan.at]} onto "
             f"{versions[plan.onto]}: stackmgr rebase / git rebase ({len(carried)} patches)")  # fmt: skip
    return Case(label, Step(sm_prepare, sm_rebase, sm_result),
                Step(git_prepare, git_rebase, lambda: env.git(git_repo, "rev-parse", "HEAD^{tree}")))


# --- the data: real when cached or downloadable, else (smoke only) synthetic -------------------------------------


def real_cases(env: Env, cache: Cache, work: Path, smoke: bool, baseline: Env | None) -> list[tuple[str, Case]]:
    """The cases on the field data; with a `baseline` stackmgr, each pits this stackmgr's step against the
    baseline's same step (instead of git's or quilt's)."""
    cases = []
    for name in SMOKE_PACKAGES if smoke else FULL_PACKAGES:
        u = debian.unpack(env, cache, name, work / name)
        cases += paired(debian_cases(env, u, work / name),
                        debian_cases(baseline, u, work / name / "baseline") if baseline else None)  # fmt: skip
    by_name = {p.name: p for p in history.PROJECTS}
    built: dict[str, tuple[Path, list[str]]] = {}
    for n, (project, index) in enumerate(SMOKE_REBASES if smoke else FULL_REBASES):
        if project not in built:
            built[project] = history.build_upstream(env, cache, by_name[project], work / f"up-{project}")
        upstream, commits = built[project]
        plan = history.plans(len(commits))[index]
        versions = by_name[project].versions
        mine = rebase_case(env, project, upstream, commits, plan, versions, work / f"rebase{n}")
        base = rebase_case(baseline, project, upstream, commits, plan, versions, work / f"rebase{n}-baseline") \
            if baseline else None  # fmt: skip
        cases += paired([("rebase", mine)], [("rebase", base)] if base else None)
    return cases


def paired(cases: list[tuple[str, Case]], baseline: list[tuple[str, Case]] | None) -> list[tuple[str, Case]]:
    if baseline is None:
        return cases
    def label(text: str) -> str:
        for other in (" / git am", " / quilt push -a", " / git rebase"):
            text = text.replace(other, " / baseline")
        return text

    return [(kind, Case(label(c.label), c.mine, b.mine)) for (kind, c), (_, b) in zip(cases, baseline, strict=True)]


def synthetic_cases(env: Env, work: Path) -> list[tuple[str, Case]]:
    """A made-up package (a quilt series of 6 patches) and a made-up 3-release history, for offline smoke runs."""
    repo = new_repo(env, work / "syn" / "orig")
    for n in range(8):
        (repo / f"f{n}.c").write_text("".join(f"int v{n}_{k} = {k};\n" for k in range(60)))
    base = commit_all(env, repo, "synthetic upstream")
    patches = work / "syn" / "patches"
    patches.mkdir()
    for n in range(6):
        old = (repo / f"f{n}.c").read_text().splitlines(keepends=True)
        hunk = "".join([f"--- a/f{n}.c\n+++ b/f{n}.c\n@@ -8,5 +8,6 @@\n", *(f" {x}" for x in old[7:10]),
                        f"+int added_{n} = 1;\n", *(f" {x}" for x in old[10:12])])  # fmt: skip
        (patches / f"p{n}.patch").write_text(f"Description: synthetic change {n}\n\n{hunk}")
    (patches / "series").write_text("".join(f"p{n}.patch\n" for n in range(6)))
    from harness.fetch import DebianSource

    u = debian.Unpacked(DebianSource("synthetic", "1.0-1", Path(), Path()), repo, base, patches)
    cases = debian_cases(env, u, work / "syn")
    up = new_repo(env, work / "syn-up")
    commits = []
    for release in range(3):
        for n in range(6):
            lines = [f"x{n}_{k} = {k}\n" for k in range(50)]
            for r in range(release + 1):
                lines[5 + 7 * r + n % 3] = f"x{n}_{r} = 'release {r}'\n"
            (up / f"m{n}.py").write_text("".join(lines))
        commits.append(commit_all(env, up, f"release {release}"))
    plan = history.plans(3)[3]  # partial: the release 0→2 changes at release 0, onto release 1 (half upstream)
    cases.append(("rebase", rebase_case(env, "synthetic", up, commits, plan, ("0", "1", "2"), work / "syn-rb")))
    return cases


def rows_of(measured: list[tuple[str, Case, float, float]], baseline: bool = False) -> list[Row]:
    rows = []
    summaries = (("am", "git am", "stackmgr import / git am", AM_TARGET),
                 ("quilt", "quilt push -a", "stackmgr import + apply / quilt push -a", QUILT_TARGET),
                 ("rebase", "git rebase", "stackmgr rebase / git rebase", REBASE_TARGET))  # fmt: skip
    for kind, other, title, target in summaries:
        if baseline:  # this stackmgr against another: no target, the ratio is the speed-up
            other, title, target = "baseline", title.split(" / ")[0] + ": this / baseline", None
        mine = [(c, a, b) for k, c, a, b in measured if k == kind]
        if not mine:
            continue
        for case, ms_mine, ms_theirs in mine:
            rows.append(Row(f"{case.label} [{other}: {ms_theirs:.0f} ms]", ms_mine, ms_mine / ms_theirs))
        ratios = [a / b for _, a, b in mine]
        rows.append(Row(f"median of {len(mine)}: {title}", statistics.median(a for _, a, _ in mine),
                        statistics.median(ratios), target))  # fmt: skip
    return rows


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path(__file__).resolve().parent / "work-import",
                        help="scratch directory, wiped and recreated (default bench/work-import/)")  # fmt: skip
    parser.add_argument("--cache", type=Path, help="the field suite's download cache")
    parser.add_argument("--repeats", type=int, help="timed rounds per case (default 5; smoke 2)")
    parser.add_argument("--synthetic", action="store_true", help="measure the synthetic fallback (no downloads)")
    parser.add_argument("--smoke", action="store_true", help="two series, two rebases, 2 repeats, no targets (CI)")
    parser.add_argument("--only", action="append", choices=("am", "quilt", "rebase"), default=[],
                        help="measure only these comparisons (repeatable): am (import / git am), quilt (import + "
                        "apply / quilt push -a), rebase")  # fmt: skip
    parser.add_argument("--baseline", metavar="EXE", help="time this stackmgr against another stackmgr "
                        "executable (an install of main) on the same cases, not git and quilt; no targets")  # fmt: skip
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    repeats = args.repeats if args.repeats is not None else (2 if args.smoke else 5)
    if repeats < 1:
        print("bench: error: --repeats must be at least 1", file=sys.stderr)
        return 2
    workdir = args.workdir.resolve()
    try:
        prepare_workdir(workdir)
        (workdir / MARKER).write_text("created by bench/bench_import.py; wiped on every run\n")
        env = Env.hermetic(workdir)
        cache = Cache((args.cache or default_cache()).expanduser().resolve())
        data = "synthetic"
        if args.synthetic:
            cases = synthetic_cases(env, workdir)
        else:
            try:
                baseline = Env(env.vars, str(Path(args.baseline).resolve())) if args.baseline else None
                cases, data = real_cases(env, cache, workdir / "real", args.smoke, baseline), "field data"
            except FieldError as exc:
                if not args.smoke:
                    raise BenchError(f"{exc} (the field data is needed; run with network once, or --smoke)") from exc
                log(f"no field data ({exc}); measuring the synthetic fallback")
                cases = synthetic_cases(env, workdir)
        measured = []
        for kind, case in [(k, c) for k, c in cases if not args.only or k in args.only]:
            log(f"measuring {case.label} ({repeats} rounds)")
            measured.append((kind, case, *medians(case, repeats)))
        git = env.git(workdir, "--version")
    except (BenchError, FieldError) as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    mode = "smoke" if args.smoke else "full"
    print(f"# stackmgr import, import + apply, rebase vs git am, quilt push -a, git rebase ({mode}; {data}; "
          f"{repeats} repeats; {git}; {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} "
          "at the end)")  # fmt: skip
    print("every case built the same working-tree id on both sides (checked before timing)")
    if args.baseline:
        print(f"against the baseline stackmgr {args.baseline}: ratios below 1 are speed-ups")
    return finish(rows_of(measured, bool(args.baseline)), args.smoke)


if __name__ == "__main__":
    sys.exit(main())
