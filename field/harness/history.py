"""Real histories with upstream movement: consecutive PyPI releases of small pure-Python projects, one commit per
release; a stack of real changes (one release's diff, split per file) carried from an older release to a newer
one by `stackmgr rebase S --onto REV` and by `git rebase` of the same commits. Kinds beside drift and moved: every
commit already upstream (git drops them all; the empty series applies to `onto`), an empty commit ("Initial plan")
in the middle of the stack, and a file's two releases' changes carried as two commits onto the later release
("twice": git conflicts where upstream changed the lines again, and is resolved the upstream way, as
`stg rebase --merged` finds it merged)."""

from __future__ import annotations

import json
import os
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
    per_file: bool = False  # upstream commits each changed file of a release on its own (as a real history
    # does), so git's rebase skips a carried patch whose patch-id an upstream commit has

    @property
    def label(self) -> str:
        return self.name + (" per-file" if self.per_file else "")


PROJECTS = (
    Project("six", ("1.14.0", "1.15.0", "1.16.0")),
    Project("tomli", ("2.0.0", "2.0.1", "2.0.2")),
    Project("iniconfig", ("1.1.1", "2.0.0", "2.1.0")),
    Project("idna", ("3.4", "3.5", "3.6", "3.7")),
    Project("pluggy", ("1.3.0", "1.4.0", "1.5.0")),
    Project("pluggy", ("1.3.0", "1.4.0", "1.5.0"), per_file=True),
    Project("requests", ("2.30.0", "2.31.0", "2.32.0"), per_file=True),
)


@dataclass(frozen=True)
class Plan:
    """Carry the changes `changes` (old → new release) as a stack made at release `at`, onto release `onto`."""

    kind: str  # upstream: every patch is in `onto`; drift: later changes over moved context; partial: some in;
    # moved: what `onto` changed in the files it also moved, made at their old paths; empty: drift with an empty
    # commit in the middle; twice: changes[0]→+1 then +1→changes[1] per file, onto changes[1], git's conflicts
    # resolved the upstream way
    changes: tuple[int, int]
    at: int
    onto: int


def plans(n: int) -> list[Plan]:
    out = [Plan("upstream", (i, i + 1), i, i + 1) for i in range(n - 1)]
    for i in range(n - 2):
        out += [Plan("drift", (i + 1, i + 2), i, i + 1), Plan("partial", (i, i + 2), i, i + 1)]
    out += [Plan("moved", (i, i + 1), i, i + 1) for i in range(n - 1)]
    out += [Plan("empty", (i + 1, i + 2), i, i + 1) for i in range(n - 2)]
    return out + [Plan("twice", (i, i + 2), i, i + 2) for i in range(n - 2)]  # last: bench indexes the others


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
    for k, version in enumerate(project.versions):
        sdist = cache.sdist(project.name, version, env)
        for entry in repo.iterdir():
            if entry.name != ".git":
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        extract(sdist, repo)
        if project.per_file and k:
            env.must(["git", "add", "-A", "-f"], repo)
            changed = env.must(["git", "diff", "--cached", "--no-renames", "--name-only", "-z"], repo).split(b"\0")
            env.must(["git", "reset", "-q"], repo)
            for name in (os.fsdecode(n) for n in changed if n):
                env.must(["git", "add", "-A", "-f", "--", name], repo)
                env.must(["git", "commit", "-q", "--no-verify", "-m", f"{version}: {name}"], repo)
        commits.append(commit_all(env, repo, f"{project.name} {version}"))  # per file: an empty commit marks it
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


def make_stack(env: Env, upstream: Path, at: str, patches: list[tuple[str, bytes]], where: Path,
               empty_after: int | None = None) -> list[str]:  # fmt: skip
    """Branch `stack` at `at`: one commit per file patch that applies there (in order); the files carried. With
    `empty_after`, an empty commit "Initial plan" after that many (as a coding agent's branch starts)."""
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
        if len(carried) == empty_after:
            env.must(["git", "commit", "-q", "--no-verify", "--allow-empty", "-m", "Initial plan"], where)
    return carried


def git_rebase(env: Env, repo: Path, at: str, onto: str, carried: list[str],
               upstream_way: bool = False) -> tuple[Side, dict[str, str]]:  # fmt: skip
    """`git rebase ONTO stack` where the stack was made on an ancestor of ONTO (git then skips a commit whose
    patch-id an upstream commit has, as its cherry finds them), else `git rebase --onto ONTO AT` (a backport: the
    form that skips nothing); a conflict stops it (the side fails there), or with `upstream_way` is resolved by
    taking upstream's version of each conflicted file (`--ours` in a rebase; upstream's deletion of a file is its
    version too) and `git rebase --continue`."""
    forward = env.run(["git", "merge-base", "--is-ancestor", at, onto], repo).code == 0
    done = env.run(["git", "rebase", "-q", onto, "stack"] if forward else
                   ["git", "rebase", "-q", "--onto", onto, at, "stack"], repo)  # fmt: skip
    resolved: list[str] = []  # the commits git stopped at
    while upstream_way and done.code != 0 and len(resolved) <= len(carried):
        conflicted = env.git(repo, "diff", "--name-only", "-z", "--diff-filter=U").split("\0")
        if not any(conflicted):
            break
        resolved.append(env.git(repo, "log", "-1", "--format=%s", "REBASE_HEAD").removeprefix("carry "))
        for path in filter(None, conflicted):
            if env.run(["git", "checkout", "--ours", "--", path], repo).code == 0:
                env.must(["git", "add", "--", path], repo)
            else:  # `path 'F' does not have our version`: upstream deleted it
                env.must(["git", "rm", "-q", "--", path], repo)
        done = env.run(["git", "-c", "core.editor=true", "rebase", "--continue"], repo)
    if done.code != 0:
        stopped = env.run(["git", "log", "-1", "--format=%s", "REBASE_HEAD"], repo).out.decode().strip()
        env.run(["git", "rebase", "--abort"], repo)
        name = stopped.removeprefix("carry ")
        return Side("git rebase", None, f"conflict at {name}", stop=name), {}
    kept = set(env.git(repo, "log", "--format=%s", f"{onto}..HEAD").splitlines())
    after = " after a conflict, resolved the upstream way"
    fate = {name: ("kept" if f"carry {name}" in kept else "dropped") + (after if name in resolved else "")
            for name in carried}  # fmt: skip
    n = len(resolved)
    note = f"{n} conflict{'s' if n != 1 else ''} resolved the upstream way" if n else ""
    return Side("git rebase", env.git(repo, "rev-parse", "HEAD^{tree}"), note), fate


def stackmgr_rebase(env: Env, upstream: Path, mails: list[Path], at: str, onto: str, project: str,
                    carried: list[str], where: Path) -> tuple[Side, dict[str, str]]:  # fmt: skip
    where.mkdir(parents=True)
    tree = clone_at(env, upstream, where / "tree", at)
    store = new_store(env, where, project, tree)
    imported = env.sm(store, "import", "--json", "--series", SERIES, "--base", at, *map(str, mails))
    notes = []
    empty = [m for m in mails if not m.stat().st_size]  # `git format-patch` of an empty commit: a 0-byte file
    if imported.code != 0 and empty:  # an import that refuses it: the series built without it, and said
        notes.append(f"import refused the empty commit's 0-byte mail ({last_line(imported.text)}); without it")
        shutil.rmtree(store, ignore_errors=True)
        store = new_store(env, where, project, tree)
        kept = [str(m) for m in mails if m.stat().st_size]
        imported = env.sm(store, "import", "--json", "--series", SERIES, "--base", at, *kept)
    if imported.code != 0:
        return Side("stackmgr", None, f"import exit {imported.code}: {last_line(imported.text)}"), {}
    names = [item["name"] for item in json.loads(imported.out)["imported"]]
    if len(names) != len(carried):
        return Side("stackmgr", None, f"import gave {len(names)} patches for {len(carried)} commits"), {}
    file_of = dict(zip(names, carried, strict=True))
    done = env.sm(store, "rebase", SERIES, "--onto", onto, "--json")
    try:
        state = json.loads(done.out)
    except ValueError:
        return Side("stackmgr", None, f"rebase exit {done.code}: {last_line(done.text)}"), {}
    outcomes = {file_of[p["name"]]: p["outcome"] or "-" for p in state["patches"]}
    outcomes.update({f"note {n}": note for n, note in enumerate(notes, start=1)})
    if done.code != 0:
        stuck = [p["name"] for p in state["patches"] if not p["outcome"]]
        env.sm(store, "rebase", SERIES, "--abort")
        name = file_of.get(stuck[0]) if stuck else None
        return Side("stackmgr", None, f"conflict at {name}" if name else last_line(done.text), stop=name), outcomes
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
    case = f"{project.label} {plan.kind}: {v[old]}→{v[new]} at {v[plan.at]} onto {v[plan.onto]}"
    if left_out:
        case += f", without {len(left_out)} conflicting"
    if plan.kind == "moved":  # git rebase follows a rename; does stackmgr carry the change, or refuse?
        patches = moved_back(env, upstream, commits[old], commits[new])
    elif plan.kind == "twice":  # the files both releases changed: the first change of each, then its second
        first = dict(per_file_patches(env, upstream, commits[old], commits[old + 1]))
        second = dict(per_file_patches(env, upstream, commits[old + 1], commits[new]))
        both = [name for name in first if name in second][: MAX_PATCHES // 2]
        patches = [(name, first[name]) for name in both] + [(f"{name} again", second[name]) for name in both]
    else:
        patches = [p for p in per_file_patches(env, upstream, commits[old], commits[new]) if p[0] not in left_out]
    shutil.rmtree(work, ignore_errors=True)
    git_repo = work / "git"
    carried = make_stack(env, upstream, commits[plan.at], patches, git_repo,
                         empty_after=1 if plan.kind == "empty" else None)  # fmt: skip
    if not carried or (plan.kind == "empty" and len(carried) < 2):
        return None
    out = work / "mails"
    env.must(["git", "format-patch", "-q", "--no-signature", "-o", str(out), f"{commits[plan.at]}..stack"],
             git_repo)  # fmt: skip
    mails = sorted(out.glob("*.patch"))
    at, onto = commits[plan.at], commits[plan.onto]
    theirs, fate = git_rebase(env, git_repo, at, onto, carried, upstream_way=plan.kind == "twice")
    mine, outcomes = stackmgr_rebase(env, upstream, mails, at, onto, project.name, carried, work / "sm")
    detail = []
    for name in carried:
        said, did = outcomes.get(name, "-"), fate.get(name, "-")
        differs = did != "-" and (said == "already upstream") != did.startswith("dropped")
        detail.append(f"{name}: stackmgr {said}; git {did}{'  <- not as git' if differs else ''}")
    detail += [f"stackmgr: {note}" for key, note in outcomes.items() if key.startswith("note ")]
    detail += [f"git: {theirs.note}"] if theirs.note and not theirs.failed else []
    if mine.stop and "after a conflict" in fate.get(mine.stop, "") and theirs.tree:  # a conflict git has too:
        # stackmgr leaves it to the user (not provably upstream); git's upstream-way tree is one choice of many
        theirs = Side("git rebase", None, f"conflict at {mine.stop} (upstream way: {theirs.tree[:12]})", mine.stop)
    return Result("rebase", f"{case} ({len(carried)} patches)", mine, theirs, detail)


def run_project(env: Env, cache: Cache, name: str, work: Path) -> list[Result]:
    project = next(p for p in PROJECTS if p.label == name)
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
