"""Refs, HEAD and commits: moving HEAD (by compare-and-swap), branches, commits made with plumbing (no hooks),
the refs stackmgr anchors its snapshots with."""

from __future__ import annotations

import os

from stackmgr.git.runner import finish, run, run_rc, start
from stackmgr.types import CommitId

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from stackmgr.git.repo import Repo


def symbolic_head(repo: Repo) -> str | None:
    """The branch HEAD names (`refs/heads/x`), or None when HEAD is detached."""
    rc, out, _ = run_rc(repo.top, ["symbolic-ref", "-q", "HEAD"])
    return out.decode().strip() if rc == 0 else None


def detach_head(repo: Repo, commit: str, reason: str, expect: str | None = None) -> None:
    """HEAD detached at `commit`; the branch it named (if any) keeps all its commits. Logged in HEAD's reflog.
    With `expect`, only if HEAD still points there (a commit made meanwhile is never orphaned)."""
    run(repo.top, ["update-ref", "--no-deref", "-m", reason, "HEAD", commit, *([expect] if expect else [])])


def branch_checked_out_elsewhere(repo: Repo, branch: str) -> bool:
    """Whether another worktree of the repository has `branch` checked out (git refuses a second checkout)."""
    out = run(repo.top, ["worktree", "list", "--porcelain", "-z"])
    here = os.path.realpath(repo.top)
    current = ""
    for field in out.split(b"\0"):
        if field.startswith(b"worktree "):
            current = os.path.realpath(os.fsdecode(field[9:]))
        elif field == b"branch " + branch.encode() and current != here:
            return True
    return False


def attach_head(repo: Repo, branch: str, reason: str) -> None:
    run(repo.top, ["symbolic-ref", "-m", reason, "HEAD", branch])


def commit_tree(repo: Repo, tree: str, parents: Sequence[str], message: str) -> CommitId:
    """A commit object made with plumbing (no hooks), anchored by the caller with `update_ref`."""
    args: list[str | bytes] = ["commit-tree", tree]
    for parent in parents:
        args += ["-p", parent]
    return CommitId(run(repo.top, args, stdin=message.encode("utf-8")).decode().strip())


def update_refs(repo: Repo, updates: Sequence[tuple[str, str | None]], reason: str) -> None:
    """Set (or, with None, delete) several refs in one transaction."""
    lines = [f"update {ref} {oid}\n" if oid else f"delete {ref}\n" for ref, oid in updates]
    run(repo.top, ["update-ref", "-m", reason, "--stdin"], stdin="".join(lines).encode())


def valid_branch_name(repo: Repo, branch: str) -> bool:
    return run_rc(repo.top, ["check-ref-format", "--branch", branch])[0] == 0 and not branch.startswith("-")


def commit_as(repo: Repo, tree: str, parent: str, message: str, author: str, date: str) -> CommitId:
    """A commit with the author and date a patch names ("Name <email>", RFC 2822), made with plumbing."""
    name, _, email = author.partition(" <")
    env: dict[str, str] = {}
    if name and email:
        env.update(GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email.rstrip(">"))
    if date:
        env["GIT_AUTHOR_DATE"] = date
    proc = start(repo.top, ["commit-tree", tree, "-p", parent], stdin=True, extra_env=env)
    return CommitId(finish(proc, message.encode("utf-8"))[1].decode().strip())


def update_ref(repo: Repo, ref: str, commit: str, reason: str) -> None:
    run(repo.top, ["update-ref", "-m", reason, ref, commit])


def refs_under(repo: Repo, prefix: str) -> list[tuple[str, CommitId, int, str]]:
    """(ref, commit, committer time, full message) of every ref under `prefix`, newest first."""
    fmt = "%(refname)%00%(objectname)%00%(committerdate:unix)%00%(contents)%00%00"
    out = run(repo.top, ["for-each-ref", "--sort=-committerdate", f"--format={fmt}", prefix])
    rows = []
    for rec in out.split(b"\0\0\n"):
        if rec.strip():
            ref, commit, stamp, message = rec.lstrip(b"\n").split(b"\0", 3)
            rows.append((ref.decode(), CommitId(commit.decode()), int(stamp or 0), message.decode("utf-8", "replace")))
    return rows


def commit_parents(repo: Repo, commit: str) -> list[str]:
    return run(repo.top, ["rev-parse", f"{commit}^@"]).decode().split()


def unreachable_after_move(repo: Repo, target: str) -> list[str]:
    """Commits that HEAD reaches and that neither a ref nor `target` would reach once HEAD moves to `target`."""
    return run(repo.top, ["rev-list", "HEAD", "--not", "--glob=refs/*", target]).decode().split()
