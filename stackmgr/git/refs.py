"""Refs, HEAD and commits: moving HEAD (by compare-and-swap), branches, commits made with plumbing (no hooks),
the refs stackmgr anchors its snapshots with."""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.git.checked import env_value, ref_name, revision
from stackmgr.git.runner import finish, run, run_rc, start
from stackmgr.types import CommitId

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from stackmgr.git.process import Process
    from stackmgr.git.repo import Repo


def symbolic_head(repo: Repo) -> str | None:
    """The branch HEAD names (`refs/heads/x`), or None when HEAD is detached."""
    rc, out, _ = run_rc(repo.top, ["symbolic-ref", "-q", "HEAD"])
    return out.decode().strip() if rc == 0 else None


def detach_head(repo: Repo, commit: str, reason: str, expect: str | None = None, was: str | None = None) -> None:
    """HEAD detached at `commit`; the branch it named (`was`, if any) keeps all its commits. Logged in HEAD's
    reflog as `git checkout --detach` logs it (`checkout: moving from main to <commit> (reason)`), so `git status`
    says `HEAD detached at <commit>` rather than naming an older checkout's target. With `expect`, only if HEAD
    still points there (a commit made meanwhile is never orphaned)."""
    old = [repo.object_id(expect)] if expect else []
    new = repo.object_id(commit)
    source = (was.removeprefix("refs/heads/") if was else expect) or "HEAD"
    message = f"checkout: moving from {source} to {new} ({reason})"
    run(repo.top, ["update-ref", "--no-deref", "-m", message, "HEAD", new, *old])


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
    run(repo.top, ["symbolic-ref", "-m", reason, "HEAD", ref_name(branch)])


def commit_tree(repo: Repo, tree: str, parents: Sequence[str], message: str) -> CommitId:
    """A commit object made with plumbing (no hooks), anchored by the caller with `update_ref`."""
    args: list[str | bytes] = ["commit-tree", repo.object_id(tree)]
    for parent in parents:
        args += ["-p", repo.object_id(parent)]
    return CommitId(run(repo.top, args, stdin=message.encode("utf-8")).decode().strip())


def update_refs(repo: Repo, updates: Sequence[tuple[str, str | None]], reason: str) -> None:
    """Set (or, with None, delete) several refs in one transaction."""
    lines = [f"update {ref_name(ref)} {repo.object_id(oid)}\n" if oid else f"delete {ref_name(ref)}\n"
             for ref, oid in updates]  # a space or newline in either would be another command: refused
    run(repo.top, ["update-ref", "-m", reason, "--stdin"], stdin="".join(lines).encode())


def valid_branch_name(repo: Repo, branch: str) -> bool:
    if not branch or branch.startswith("-") or "\0" in branch:
        return False
    return run_rc(repo.top, ["check-ref-format", "--branch", branch])[0] == 0


def commit_as(repo: Repo, tree: str, parent: str, message: str, author: str, date: str) -> CommitId:
    """A commit with the author and date a patch names ("Name <email>", RFC 2822), made with plumbing."""
    name, _, email = author.partition(" <")
    env: dict[str, str] = {}
    if name and email:
        env.update(GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email.rstrip(">"))
    if date:
        env["GIT_AUTHOR_DATE"] = date
    for value in env.values():
        env_value(value, "author or date")
    args = ["commit-tree", repo.object_id(tree), "-p", repo.object_id(parent)]
    proc = start(repo.top, args, stdin=True, extra_env=env)
    return CommitId(finish(proc, message.encode("utf-8"))[1].decode().strip())


def update_ref(repo: Repo, ref: str, commit: str, reason: str) -> None:
    run(repo.top, ["update-ref", "-m", reason, ref_name(ref), repo.object_id(commit)])


def refs_under(repo: Repo, prefix: str) -> list[tuple[str, CommitId, int, str]]:
    """(ref, commit, committer time, full message) of every ref under `prefix`, newest first."""
    fmt = "%(refname)%00%(objectname)%00%(committerdate:unix)%00%(contents)%00%00"
    out = run(repo.top, ["for-each-ref", "--sort=-committerdate", f"--format={fmt}", ref_name(prefix, prefix=True)])
    rows = []
    for rec in out.split(b"\0\0\n"):
        if rec.strip():
            ref, commit, stamp, message = rec.lstrip(b"\n").split(b"\0", 3)
            rows.append((ref.decode(), CommitId(commit.decode()), int(stamp or 0), message.decode("utf-8", "replace")))
    return rows


def commit_parents(repo: Repo, commit: str) -> list[str]:
    return run(repo.top, ["rev-parse", f"{revision(commit)}^@"]).decode().split()


def unreachable_after_move(repo: Repo, target: str) -> list[str]:
    """Commits that HEAD reaches and that neither a ref nor `target` would reach once HEAD moves to `target`."""
    return run(repo.top, ["rev-list", "HEAD", "--not", "--glob=refs/*", revision(target)]).decode().split()


# -- commits a move of HEAD would orphan (on `check`'s path: read without git where that is sure) ---------------


def head_on_a_ref(repo: Repo) -> bool:
    """Every commit HEAD reaches is on some ref: HEAD names a branch, or is detached at the commit a branch, tag
    or remote-tracking ref points at (where `stackmgr apply` leaves it). Read without git; False when that
    cannot be told so (reftable, another ref, an odd or unreadable file): `start_commits_on_no_ref` then asks."""
    try:
        with open(os.path.join(repo.git_dir, "HEAD"), "rb") as f:
            head = f.read(512).strip()
        if head.startswith(b"ref: "):
            return head != b"ref: refs/heads/.invalid"  # reftable's placeholder: HEAD lives in the reftable
        return _ref_points_at(repo.common_dir, head)
    except OSError:
        return False


def start_commits_on_no_ref(repo: Repo) -> Process:
    """Commits reachable from HEAD but from no ref at all: what a detached HEAD would drop on moving."""
    return start(repo.top, ["rev-list", "HEAD", "--not", "--glob=refs/*"])


def commits_on_no_ref(tree: str, repo: Repo, proc: Process) -> list[str]:
    """The answer of `start_commits_on_no_ref`. When git cannot give it (a broken ref), the commits a move would
    orphan cannot be told: refused, not taken as none."""
    out, err = proc.communicate()
    if proc.returncode != 0:
        why = err.decode(errors="replace").strip().splitlines()
        said = why[0] if why else "no reason given"
        raise StackmgrError(
            f"tree {tree}: git cannot list the commits on no branch ({said})",
            f"run `git rev-list HEAD --not --glob='refs/*'` in {repo.top} and fix the ref it names",
        )
    return out.decode().split()


_LOOSE_REFS_READ = 256  # more loose branches, tags and remote refs than this: git is asked instead
_PACKED_REFS_READ = 4 << 20  # a packed-refs file larger than this: git is asked instead
_REF_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+=,%@/")


def _plain_ref_name(name: bytes) -> bool:
    """A ref name git surely lists: plain characters, and no component git skips or refuses (one that starts
    with a dot or ends with `.lock`, as rsync and Syncthing temp files do, or holds `..`). Stricter than git
    (`git check-ref-format`): a name it refuses here only means git is asked."""
    parts = name.split(b"/")
    return (
        len(parts) >= 3 and parts[0] == b"refs" and not name.strip(bytes(_REF_CHARS)) and b".." not in name
        and all(p and not p.startswith(b".") and not p.endswith((b".", b".lock")) for p in parts)
    )  # fmt: skip


def _ref_points_at(common: str, oid: bytes) -> bool:
    """Whether a ref git lists points at commit `oid`: a loose branch, tag or remote-tracking ref, or any packed
    ref (an annotated tag by the commit it peels to). Only a sure yes counts; anything odd is a no, and the
    caller asks git: a packed ref a loose file overrides, a name git would skip or refuse, a loose ref outside
    those three places (refs/stackmgr's anchors are many, and mostly trees)."""
    if len(oid) not in (40, 64) or oid.strip(b"0123456789abcdef"):
        return False
    read = 0
    for place in ("heads", "tags", "remotes"):
        top = os.path.join(common, "refs", place)
        for dirpath, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if not d.startswith(".") and not d.endswith(".lock")]  # as git lists them
            for name in files:
                ref = os.fsencode(os.path.relpath(os.path.join(dirpath, name), common))
                if not _plain_ref_name(ref):  # also a `.lock` file: a ref being written, not a ref yet
                    continue
                read += 1
                if read > _LOOSE_REFS_READ:
                    return False
                with open(os.path.join(dirpath, name), "rb") as f:
                    if f.read(80).strip() == oid:
                        return True
    try:
        with open(os.path.join(common, "packed-refs"), "rb") as f:
            packed = f.read(_PACKED_REFS_READ + 1)
    except FileNotFoundError:
        return False
    if len(packed) > _PACKED_REFS_READ or not packed.endswith(b"\n") or b"\r" in packed:
        return False  # too big to read on every check, or not as git writes it
    at = packed.find(oid)
    while at >= 0:
        begin = packed.rfind(b"\n", 0, at) + 1
        end = packed.index(b"\n", at)
        line = packed[begin:end]  # "<oid> <ref>", or "^<oid>": the commit the tag on the line before peels to
        if line == b"^" + oid and begin > 0:
            line = packed[packed.rfind(b"\n", 0, begin - 1) + 1 : begin - 1]
            target = line.partition(b" ")[0]
        else:
            target = oid if line.startswith(oid + b" ") else b""
        ref = line.partition(b" ")[2]
        if (len(target) == len(oid) and not target.strip(b"0123456789abcdef") and _plain_ref_name(ref)
                and not os.path.lexists(os.path.join(common, os.fsdecode(ref)))):  # fmt: skip
            return True  # (a loose file of that name would override the packed line)
        at = packed.find(oid, end)
    return False
