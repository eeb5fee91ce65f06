"""Submodule bumps in real histories: a superproject of one project's consecutive PyPI releases that carries another
project's releases as a submodule (as the lab's kernel repository carried oneDNN); a branch that bumps the
submodule to its next release and carries a real file change beside it. `stackmgr import` + `apply` of the
branch's `git format-patch` mails vs `git am`, and `stackmgr rebase S --onto REV` + `apply` vs `git rebase`, onto
an upstream that moved on (other files, and the submodule's pointer too: both conflict there, or both carry).
Every tree is compared with the submodule's checkout in it (`add -A` records the commit checked out)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.cases import Result, Side
from harness.debian import last_line, new_store
from harness.fetch import Cache
from harness.history import PROJECTS, build_upstream, per_file_patches
from harness.sh import Env, FieldError, commit_all, worktree_id

PAIRS = (("six", "tomli"), ("iniconfig", "idna"))  # (superproject, submodule): both from history.PROJECTS
SUB = "third_party/kernels"
FILE = ("-c", "protocol.file.allow=always")


def _project(name: str) -> object:
    return next(p for p in PROJECTS if p.name == name)


def _clone(env: Env, upstream: Path, dest: Path, rev: str) -> Path:
    """A clone of the superproject at `rev` (detached), its submodule initialized and checked out as `rev` says."""
    env.must(["git", "clone", "-q", str(upstream), str(dest)], upstream.parent)
    env.must(["git", "checkout", "-q", "--detach", rev], dest)
    env.must(["git", *FILE, "submodule", "update", "-q", "--init"], dest)
    return dest


def _with_sub(env: Env, repo: Path) -> str:
    """The tree id of `repo`'s working tree (the submodule's checked-out commit included) and that commit."""
    return f"{worktree_id(env, repo)} (submodule at {env.git(repo / SUB, 'rev-parse', 'HEAD')[:12]})"


def build(env: Env, cache: Cache, pair: tuple[str, str], work: Path) -> tuple[Path, dict[str, str], list[str]]:
    """The superproject upstream: its first release with the submodule at the other's first release (`base`), then
    `up` (its next release's files, the stack's file left out) and `up-bump` (that, and the submodule at its
    third release); branch `stack`: the submodule bumped to its second release, then one real file change."""
    top_project, sub_project = (_project(n) for n in pair)
    sub, sub_commits = build_upstream(env, cache, sub_project, work / "sub")  # type: ignore[arg-type]
    top, top_commits = build_upstream(env, cache, top_project, work / "top")  # type: ignore[arg-type]
    changes = per_file_patches(env, top, top_commits[0], top_commits[1])
    if not changes:
        raise FieldError(f"{pair[0]}: no file changes between its first two releases")
    carried_name, carried = changes[0]
    env.must(["git", "checkout", "-q", "-b", "up", top_commits[0]], top)
    env.must(["git", *FILE, "submodule", "add", "-q", str(sub), SUB], top)
    env.must(["git", "-C", SUB, "checkout", "-q", sub_commits[0]], top)
    refs = {"base": commit_all(env, top, f"{pair[0]} with {pair[1]} as a submodule")}
    env.must(["git", "checkout", "-q", "-b", "stack"], top)
    env.must(["git", "-C", SUB, "checkout", "-q", sub_commits[1]], top)
    env.must(["git", "add", SUB], top)
    env.must(["git", "commit", "-q", "-m", f"bump {pair[1]}"], top)
    env.must(["git", "apply", "--index", "-"], top, stdin=carried)
    env.must(["git", "commit", "-q", "-m", f"carry {carried_name}"], top)
    env.must(["git", "checkout", "-q", "up"], top)
    env.must(["git", "-C", SUB, "checkout", "-q", sub_commits[0]], top)
    for _name, patch in changes[1:]:  # upstream moves on in the other files
        env.run(["git", "apply", "--index", "-"], top, stdin=patch)
    refs["up"] = commit_all(env, top, f"{pair[0]} moves on")
    env.must(["git", "-C", SUB, "checkout", "-q", sub_commits[2]], top)
    env.must(["git", "add", SUB], top)
    refs["up-bump"] = env.git(top, "commit-tree", f"{env.git(top, 'write-tree')}", "-p", refs["up"], "-m",
                              f"{pair[1]} bumped upstream")  # fmt: skip
    env.must(["git", "update-ref", "refs/heads/up-bump", refs["up-bump"]], top)
    env.must(["git", "-C", SUB, "checkout", "-q", sub_commits[0]], top)
    return top, refs, [f"bump {pair[1]}", f"carry {carried_name}"]


def am_case(env: Env, top: Path, refs: dict[str, str], work: Path, label: str) -> Result:
    mails_dir = work / "mails"
    env.must(["git", "format-patch", "-q", "--no-signature", "-o", str(mails_dir), f"{refs['base']}..stack"], top)
    mails = sorted(mails_dir.glob("*.patch"))
    git_tree = _clone(env, top, work / "am", refs["base"])
    done = env.run(["git", "am", "-q", *map(str, mails)], git_tree)
    if done.code == 0:
        env.must(["git", *FILE, "submodule", "update", "-q"], git_tree)  # git am moves the pointer, not the checkout
    theirs = Side("git am", worktree_id(env, git_tree) if done.code == 0 else None, last_line(done.text))
    tree = _clone(env, top, work / "sm-am", refs["base"])
    (work / "sm-am-store").mkdir()
    store = new_store(env, work / "sm-am-store", "kernels", tree)
    imported = env.sm(store, "import", "--series", "S", "--base", refs["base"], *map(str, mails))
    applied = env.sm(store, "apply", "S") if imported.code == 0 else imported
    mine = Side("stackmgr", worktree_id(env, tree) if applied.code == 0 else None, last_line(applied.text))
    return Result(
        "submodule",
        f"submodule/{label} am: bump and a change ({len(mails)} mails)",
        mine,
        theirs,
        [f"stackmgr: {_with_sub(env, tree)}", f"git am: {_with_sub(env, git_tree)}"],
    )


def rebase_case(env: Env, top: Path, refs: dict[str, str], onto: str, work: Path, label: str) -> Result:
    mails_dir = work / f"mails-{onto}"
    env.must(["git", "format-patch", "-q", "--no-signature", "-o", str(mails_dir), f"{refs['base']}..stack"], top)
    git_tree = _clone(env, top, work / f"git-{onto}", refs["base"])
    env.must(["git", "checkout", "-q", "-b", "stack", "origin/stack"], git_tree)
    done = env.run(["git", "rebase", "-q", "--onto", f"origin/{onto}", refs["base"], "stack"], git_tree)
    if done.code == 0:
        env.must(["git", *FILE, "submodule", "update", "-q"], git_tree)
        theirs = Side("git rebase", worktree_id(env, git_tree))
    else:
        env.run(["git", "rebase", "--abort"], git_tree)
        theirs = Side("git rebase", None, "conflict", stop="bump")
    tree = _clone(env, top, work / f"sm-{onto}", refs["base"])
    (work / f"sm-{onto}-store").mkdir()
    store = new_store(env, work / f"sm-{onto}-store", "kernels", tree)
    imported = env.sm(store, "import", "--series", "S", "--base", refs["base"], *map(str, sorted(mails_dir.glob("*"))))
    if imported.code != 0:
        return Result("submodule", f"submodule/{label} rebase onto {onto}", Side("stackmgr", None,
                      f"import: {last_line(imported.text)}"), theirs)  # fmt: skip
    rebased = env.sm(store, "rebase", "S", "--onto", refs[onto], "--json")
    if rebased.code != 0:
        stuck = [p for p in json.loads(rebased.out or b"{}").get("patches", []) if not p.get("outcome")]
        env.sm(store, "rebase", "S", "--abort")
        stop = "bump" if stuck and "bump" in stuck[0]["name"] else (stuck[0]["name"] if stuck else None)
        mine = Side("stackmgr", None, f"rebase: {last_line(rebased.text)}", stop=stop)
    else:
        applied = env.sm(store, "apply", "S")
        mine = Side("stackmgr", worktree_id(env, tree) if applied.code == 0 else None, last_line(applied.text))
    detail = [f"stackmgr: {_with_sub(env, tree)}", f"git: {_with_sub(env, git_tree)}"]
    return Result("submodule", f"submodule/{label} rebase onto {onto}", mine, theirs, detail)


def run_pair(env: Env, cache: Cache, name: str, work: Path) -> list[Result]:
    pair = next(p for p in PAIRS if p[0] + "+" + p[1] == name)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    top, refs, _ = build(env, cache, pair, work)
    label = f"{pair[0]}+{pair[1]}"
    return [am_case(env, top, refs, work, label), rebase_case(env, top, refs, "up", work, label),
            rebase_case(env, top, refs, "up-bump", work, label)]  # fmt: skip
