"""Real histories with upstream movement: consecutive PyPI releases of small pure-Python projects, one commit per
release; a stack of real changes (one release's diff, split per file) carried from an older release to a newer
one by `stackmgr rebase S --onto REV` and by `git rebase` of the same commits."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.cases import Result, Side
from harness.debian import last_line, new_store
from harness.fetch import Cache, extract
from harness.sh import Env, clone_at, commit_all, new_repo, worktree_id

MAX_PATCHES = 25
MAX_LEFT_OUT = 8  # conflicting files a partial case may leave out to find a stack git carries
SERIES = "carried"
GENERATED = ("PKG-INFO", ".egg-info/")  # the sdist's metadata: regenerated per release, never carried by hand


@dataclass(frozen=True)
class Project:
    name: str
    versions: tuple[str, ...]


PROJECTS = (
    Project("six", ("1.14.0", "1.15.0", "1.16.0")),
    Project("tomli", ("2.0.0", "2.0.1", "2.0.2")),
    Project("iniconfig", ("1.1.1", "2.0.0", "2.1.0")),
    Project("idna", ("3.4", "3.5", "3.6", "3.7")),
    Project("pluggy", ("1.3.0", "1.4.0", "1.5.0")),
)


@dataclass(frozen=True)
class Plan:
    """Carry the changes `changes` (old → new release) as a stack made at release `at`, onto release `onto`."""

    kind: str  # upstream: every patch is in `onto`; drift: later changes over moved context; partial: some in;
    # moved: what `onto` changed in the files it also moved, made at their old paths
    changes: tuple[int, int]
    at: int
    onto: int


def plans(n: int) -> list[Plan]:
    out = [Plan("upstream", (i, i + 1), i, i + 1) for i in range(n - 1)]
    for i in range(n - 2):
        out += [Plan("drift", (i + 1, i + 2), i, i + 1), Plan("partial", (i, i + 2), i, i + 1)]
    return out + [Plan("moved", (i, i + 1), i, i + 1) for i in range(n - 1)]  # last: bench indexes the others


def renamed(env: Env, repo: Path, old: str, new: str) -> dict[str, str]:
    """new path → old path of the files git sees renamed from commit `old` to `new`."""
    out = env.must(["git", "diff", "-M", "--name-status", "-z", "--diff-filter=R", old, new], repo).split(b"\0")
    return {out[i + 2].decode(): out[i + 1].decode() for i in range(0, len(out) - 2, 3)}


def moved_back(env: Env, repo: Path, old: str, new: str) -> list[tuple[str, bytes]]:
    """The changes release `new` made to the files it also moved, as patches to their old paths in `old` (what a
    developer carrying the same fix before the move would have)."""
    out = []
    for to, was in sorted(renamed(env, repo, old, new).items()):
        before = env.must(["git", "show", f"{old}:{was}"], repo)
        after = env.must(["git", "show", f"{new}:{to}"], repo)
        if before == after:
            continue
        a, b = (env.must(["git", "hash-object", "-w", "--stdin"], repo, stdin=data).decode().strip()
                for data in (before, after))  # fmt: skip
        diff = env.must(["git", "diff", "--binary", "--full-index", a, b], repo)
        out.append((was, diff.replace(f"a/{a}".encode(), f"a/{was}".encode()).replace(f"b/{b}".encode(),
                                                                                        f"b/{was}".encode())))
    return out


def build_upstream(env: Env, cache: Cache, project: Project, work: Path) -> tuple[Path, list[str]]:
    """One commit per release, each the sdist's files exactly (files a release dropped are deleted)."""
    repo = new_repo(env, work / "upstream")
    commits = []
    for version in project.versions:
        sdist = cache.sdist(project.name, version, env)
        for entry in repo.iterdir():
            if entry.name != ".git":
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        extract(sdist, repo)
        commits.append(commit_all(env, repo, f"{project.name} {version}"))
    return repo, commits


def per_file_patches(env: Env, repo: Path, old: str, new: str) -> list[tuple[str, bytes]]:
    names = env.must(["git", "diff", "--no-renames", "--name-only", "-z", old, new], repo).split(b"\0")
    out = []
    for raw in filter(None, names):
        name = raw.decode()
        if not any(g in name for g in GENERATED):
            out.append((name, env.must(["git", "diff", "--no-renames", "--binary", "--full-index", old, new, "--",
                                        name], repo)))  # fmt: skip
    return out


def make_stack(env: Env, upstream: Path, at: str, patches: list[tuple[str, bytes]], where: Path) -> list[str]:
    """Branch `stack` at `at`: one commit per file patch that applies there (in order); the files carried."""
    clone_at(env, upstream, where, at)
    env.must(["git", "checkout", "-q", "-b", "stack"], where)
    carried: list[str] = []
    for name, patch in patches:
        if len(carried) == MAX_PATCHES:
            break
        if env.run(["git", "apply", "--index", "-"], where, stdin=patch).code != 0:
            continue
        env.must(["git", "commit", "-q", "--no-verify", "-m", f"carry {name}"], where)
        carried.append(name)
    return carried


def git_rebase(env: Env, repo: Path, at: str, onto: str, carried: list[str]) -> tuple[Side, dict[str, str]]:
    done = env.run(["git", "rebase", "-q", "--onto", onto, at, "stack"], repo)
    if done.code != 0:
        stopped = env.run(["git", "log", "-1", "--format=%s", "REBASE_HEAD"], repo).out.decode().strip()
        env.run(["git", "rebase", "--abort"], repo)
        name = stopped.removeprefix("carry ")
        return Side("git rebase", None, f"conflict at {name}", stop=name), {}
    kept = set(env.git(repo, "log", "--format=%s", f"{onto}..HEAD").splitlines())
    fate = {name: "kept" if f"carry {name}" in kept else "dropped" for name in carried}
    return Side("git rebase", env.git(repo, "rev-parse", "HEAD^{tree}")), fate


def stackmgr_rebase(env: Env, upstream: Path, mails: list[Path], at: str, onto: str, project: str,
                    carried: list[str], where: Path) -> tuple[Side, dict[str, str]]:  # fmt: skip
    where.mkdir(parents=True)
    tree = clone_at(env, upstream, where / "tree", at)
    store = new_store(env, where, project, tree)
    imported = env.sm(store, "import", "--json", "--series", SERIES, "--base", at, *map(str, mails))
    if imported.code != 0:
        return Side("stackmgr", None, f"import exit {imported.code}: {last_line(imported.text)}"), {}
    names = [item["name"] for item in json.loads(imported.out)["imported"]]
    file_of = dict(zip(names, carried, strict=True))
    done = env.sm(store, "rebase", SERIES, "--onto", onto, "--json")
    try:
        state = json.loads(done.out)
    except ValueError:
        return Side("stackmgr", None, f"rebase exit {done.code}: {last_line(done.text)}"), {}
    outcomes = {file_of[p["name"]]: p["outcome"] or "-" for p in state["patches"]}
    if done.code != 0:
        stuck = [p["name"] for p in state["patches"] if not p["outcome"]]
        env.sm(store, "rebase", SERIES, "--abort")
        name = file_of.get(stuck[0]) if stuck else None
        return Side("stackmgr", None, f"conflict at {name}" if name else last_line(done.text), stop=name), outcomes
    if all(o == "already upstream" for o in outcomes.values()):
        return Side("stackmgr", env.git(tree, "rev-parse", f"{onto}^{{tree}}")), outcomes
    applied = env.sm(store, "apply", SERIES)
    if applied.code != 0:
        return Side("stackmgr", None, f"apply exit {applied.code}: {last_line(applied.text)}"), outcomes
    return Side("stackmgr", worktree_id(env, tree)), outcomes


def git_stops_at(env: Env, upstream: Path, commits: list[str], plan: Plan, work: Path,
                 left_out: tuple[str, ...]) -> str | None:  # fmt: skip
    """Only git's side of a case: the file `git rebase` stops at, None when it carries the stack (or the stack is
    empty). Finding a stack git carries this way costs no stackmgr run per try."""
    old, new = plan.changes
    patches = [p for p in per_file_patches(env, upstream, commits[old], commits[new]) if p[0] not in left_out]
    shutil.rmtree(work, ignore_errors=True)
    carried = make_stack(env, upstream, commits[plan.at], patches, work / "git")
    if not carried:
        return None
    return git_rebase(env, work / "git", commits[plan.at], commits[plan.onto], carried)[0].stop


def rebase_case(env: Env, project: Project, upstream: Path, commits: list[str], plan: Plan, work: Path,
                left_out: tuple[str, ...] = ()) -> Result | None:  # fmt: skip
    """One case, or None when no file patch of the plan applies at its starting release."""
    v = project.versions
    old, new = plan.changes
    case = f"{project.name} {plan.kind}: {v[old]}→{v[new]} at {v[plan.at]} onto {v[plan.onto]}"
    if left_out:
        case += f", without {len(left_out)} conflicting"
    if plan.kind == "moved":  # git rebase follows a rename; does stackmgr carry the change, or refuse?
        patches = moved_back(env, upstream, commits[old], commits[new])
    else:
        patches = [p for p in per_file_patches(env, upstream, commits[old], commits[new]) if p[0] not in left_out]
    shutil.rmtree(work, ignore_errors=True)
    git_repo = work / "git"
    carried = make_stack(env, upstream, commits[plan.at], patches, git_repo)
    if not carried:
        return None
    out = work / "mails"
    env.must(["git", "format-patch", "-q", "--no-signature", "-o", str(out), f"{commits[plan.at]}..stack"],
             git_repo)  # fmt: skip
    mails = sorted(out.glob("*.patch"))
    at, onto = commits[plan.at], commits[plan.onto]
    theirs, fate = git_rebase(env, git_repo, at, onto, carried)
    mine, outcomes = stackmgr_rebase(env, upstream, mails, at, onto, project.name, carried, work / "sm")
    detail = []
    for name in carried:
        said, did = outcomes.get(name, "-"), fate.get(name, "-")
        differs = did != "-" and (said == "already upstream") != (did == "dropped")
        detail.append(f"{name}: stackmgr {said}; git {did}{'  <- not as git' if differs else ''}")
    return Result("rebase", f"{case} ({len(carried)} patches)", mine, theirs, detail)


def run_project(env: Env, cache: Cache, name: str, work: Path) -> list[Result]:
    project = next(p for p in PROJECTS if p.name == name)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    upstream, commits = build_upstream(env, cache, project, work)
    results = []
    for n, plan in enumerate(plans(len(commits))):
        result = rebase_case(env, project, upstream, commits, plan, work / f"case{n}")
        if result is None:
            continue
        results.append(result)
        # the same stack without the files git stops at: what is left merges 3-way over real drift
        left_out: tuple[str, ...] = ()
        stop = result.other.stop if plan.kind == "partial" else None
        while stop and len(left_out) < MAX_LEFT_OUT:
            left_out += (stop,)
            stop = git_stops_at(env, upstream, commits, plan, work / f"case{n}", left_out)
        if left_out and not stop:
            last = rebase_case(env, project, upstream, commits, plan, work / f"case{n}", left_out)
            if last is not None:
                results.append(last)
    return results
