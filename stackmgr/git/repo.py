"""A git working tree as one handle, and the named operations stackmgr asks of it.

Callers never build git command lines: they hold a `Repo` (from `open_repo`, which spawns nothing: this is on
`check`'s path) and call what they need by name. Calls that run while other work goes on return a started
`Process`; `output(proc)` and `read_changes(proc)` read its answer.
"""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.git.checked import hash_length, object_id, patch_file_for_git, revision
from stackmgr.git.runner import (
    DIFF_FLAGS,
    finish,
    literal,
    meanwhile_run,
    parse_raw,
    pathspec,
    read_changes,
    run,
    run_rc,
    start,
    zsplit,
)  # fmt: skip
from stackmgr.types import CommitId, TreeId

TYPE_CHECKING = False  # mypy treats this as true; `collections.abc`/`typing` stay out of `check`'s start-up
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from stackmgr.git.process import Process

__all__ = [
    "Repo", "author_ident", "blob_entries_answer", "discover_toplevel", "init_repo", "open_repo", "output",
    "parse_raw", "patch_id", "patch_ids", "patch_paths_answer", "read_changes", "start_author_ident",
    "upstream_moves", "upstream_patch_ids",
]  # fmt: skip


def output(proc: Process, stdin: bytes | None = None) -> bytes:
    """The stdout of a started git call; a failure raises GitFailed."""
    return finish(proc, stdin)[1]


class Repo:
    """A non-bare git working tree: its top level and its (per-worktree) git directory."""

    __slots__ = ("_hash_length", "git_dir", "top")

    def __init__(self, top: str, git_dir: str) -> None:
        self.top = top
        self.git_dir = git_dir
        self._hash_length = 0

    @property
    def stackmgr_dir(self) -> str:
        return os.path.join(self.git_dir, "stackmgr")

    @property
    def common_dir(self) -> str:
        """The git directory shared by all worktrees (refs, objects, config): a linked worktree's `commondir`
        names it; read without git (this is on `check`'s path). Raises OSError when that file is unreadable."""
        return common_dir(self.git_dir)

    def object_id(self, value: object) -> str:
        """`value` when it is an object id of this repository (hex, as long as its hash's ids), else BadGitValue:
        every method that takes an object id asks this first (docs/SECURITY.md)."""
        if not self._hash_length:
            try:
                self._hash_length = hash_length(self.common_dir)
            except OSError:
                self._hash_length = 40
        return object_id(value, self._hash_length)

    def operation_in_progress(self) -> str | None:
        """The name of a merge/rebase/cherry-pick/revert/am/bisect in progress, if any."""
        for marker, what in (
            ("MERGE_HEAD", "a merge"), ("rebase-merge", "a rebase"), ("rebase-apply", "a rebase or am"),
            ("CHERRY_PICK_HEAD", "a cherry-pick"), ("REVERT_HEAD", "a revert"), ("BISECT_LOG", "a bisect"),
        ):  # fmt: skip
            if os.path.exists(os.path.join(self.git_dir, marker)):
                return what
        return None

    # -- commits, objects, config ------------------------------------------------------------------------------

    def head_commit(self) -> CommitId | None:
        rc, out, _ = run_rc(self.top, ["rev-parse", "-q", "--verify", "HEAD^{commit}"])
        return CommitId(out.decode().strip()) if rc == 0 else None

    def resolve_commit(self, rev: str) -> CommitId:
        if not rev or rev.startswith("-") or "\0" in rev:
            rc, out = 1, b""
        else:
            rc, out, _ = run_rc(self.top, ["rev-parse", "-q", "--verify", "--end-of-options", rev + "^{commit}"])
        if rc != 0:
            raise StackmgrError(
                f"'{rev}' is not a commit in {self.top}", "give a commit id, branch or tag that exists there"
            )
        return CommitId(out.decode().strip())

    def ref_commit(self, ref: str) -> CommitId | None:
        rc, out, _ = run_rc(self.top, ["rev-parse", "-q", "--verify", "--end-of-options", revision(ref) + "^{commit}"])
        return CommitId(out.decode().strip()) if rc == 0 else None

    def tree_of(self, commit: str) -> TreeId:
        return TreeId(run(self.top, ["rev-parse", "--verify", "--end-of-options", f"{revision(commit)}^{{tree}}"])
                      .decode().strip())  # fmt: skip

    def has_object(self, oid: str) -> bool:
        return bool(oid) and run_rc(self.top, ["cat-file", "-e", self.object_id(oid)])[0] == 0

    def patch_paths(self, patch_files: Sequence[str]) -> set[bytes]:
        """Every path git's own parser finds in these patch files (`git apply --numstat`, as layers.py reads it: the
        new name of each section), traditional `---`/`+++` sections included; nothing is applied."""
        return patch_paths_answer(self.start_patch_paths(patch_files))

    def start_patch_paths(self, patch_files: Sequence[str]) -> Process:
        """`patch_paths`, started (read with `patch_paths_answer`)."""
        return start(self.top, ["apply", "--numstat", "-z", *(patch_file_for_git(p) for p in patch_files)])

    def missing_objects(self, oids: Sequence[str]) -> list[str]:
        """Which of `oids` the object store lacks (one `cat-file --batch-check`)."""
        if not oids:
            return []
        asked = "".join(self.object_id(o) + "\n" for o in oids).encode()  # one id per line: never a second line
        out = run(self.top, ["cat-file", "--batch-check=%(objectname)"], stdin=asked)
        return [line.split()[0].decode() for line in out.splitlines() if line.endswith(b" missing")]

    def write_blob(self, data: bytes) -> str:
        """Store `data` as a blob in the tree's object store; its id."""
        return run(self.top, ["hash-object", "-w", "--stdin"], stdin=data).decode().strip()

    def has_commit(self, commit: str) -> bool:
        return bool(commit) and run_rc(self.top, ["cat-file", "-e", self.object_id(commit) + "^{commit}"])[0] == 0

    def config_bool(self, key: str) -> bool | None:
        """A boolean git setting as the tree sees it (all config levels), or None when unset."""
        rc, out, _ = run_rc(self.top, ["config", "--bool", "--get", key])
        return out.strip() == b"true" if rc == 0 else None

    def start_config_values(self, pattern: str) -> Process:
        """`git config -z --get-regexp PATTERN`: `key\\nvalue` records (exit 1 when none is set), started."""
        return start(self.top, ["config", "-z", "--get-regexp", pattern])

    def git_common_dir(self) -> str:
        return run(self.top, ["rev-parse", "--git-common-dir"]).decode().strip()

    def start_author_ident(self) -> Process:
        return start_author_ident(self.top)

    # -- trees and diffs ---------------------------------------------------------------------------------------

    def write_tree(self, index: str | None = None) -> TreeId:
        return TreeId(run(self.top, ["write-tree"], index=index).decode().strip())

    def blob_entries(self, rev: str, paths: Sequence[bytes]) -> dict[bytes, tuple[str, str]]:
        """path -> (mode, blob) of `paths` in commit `rev`."""
        return blob_entries_answer(self.start_blob_entries(rev, paths))

    def file_bytes(self, rev: str, path: bytes) -> bytes | None:
        """The bytes of the regular file `path` at `rev`; None when it is not one there."""
        entry = self.blob_entries(rev, [path]).get(path)
        if entry is None or entry[0] not in ("100644", "100755"):
            return None
        return run(self.top, ["cat-file", "blob", self.object_id(entry[1])])

    def start_blob_entries(self, rev: str, paths: Sequence[bytes]) -> Process:
        """`blob_entries`, started (read with `blob_entries_answer`)."""
        return start(self.top, ["ls-tree", "-z", "--full-tree", revision(rev), "--", *literal(paths)])

    def tracked_names(self, rev: str, paths: Sequence[bytes]) -> set[bytes]:
        """Which of `paths` commit `rev` holds."""
        return set(zsplit(run(self.top, ["ls-tree", "-r", "-z", "--name-only", revision(rev), *pathspec(paths)])))

    def tracks_below(self, directory: bytes) -> bool:
        """Whether the index tracks a file at or below `directory` (relative to the top; b"" is the whole tree)."""
        rc, out, _ = run_rc(self.top, ["ls-files", "-z", *pathspec([directory] if directory else [])])
        return rc != 0 or bool(out)  # a git that cannot say: as if it did (never suggest hiding tracked files)

    def diff_trees(self, old: str, new: str, paths: Sequence[bytes] = ()) -> bytes:
        """The binary-safe, full-index patch from tree `old` to tree `new` (only `paths`, when given)."""
        return run(self.top, ["diff-tree", "-r", "-p", *DIFF_FLAGS, revision(old), revision(new), *pathspec(paths)])

    def diff_trees_with_stat(self, old: str, new: str) -> bytes:
        """Diffstat, summary and the full-index patch from `old` to `new`: the body of a patch file."""
        return run(self.top, ["diff-tree", "-r", "-p", "--stat=72", "--summary", *DIFF_FLAGS, revision(old),
                              revision(new)])  # fmt: skip

    def start_raw_diff(self, old: str, new: str) -> Process:
        """The changes from tree `old` to tree `new` as `--raw` records (read them with `read_changes`)."""
        return start(self.top, ["diff-tree", "-r", "-z", "--raw", "--no-renames", "--full-index", revision(old),
                                revision(new)])  # fmt: skip

    def start_worktree_numstat(self, old: str, index: str) -> Process:
        """Lines added and deleted per path from commit `old` to the files on disk as the (just refreshed) snapshot
        index `index` lists them (`read_numstat` reads it): the new side is read from the files, not inflated from
        objects (a third faster than `diff-tree --numstat` between two trees)."""
        return start(self.top, ["diff-index", "-r", "-z", "--numstat", "--no-renames", revision(old)], index=index)

    def first_parents(self, depth: int, paths: Sequence[bytes] = ()) -> list[bytes]:
        """HEAD's first-parent chain, newest first, at most `depth` commits (only those touching `paths`)."""
        return run(self.top, ["rev-list", "--first-parent", f"--max-count={depth}", "HEAD", *pathspec(paths)]).split()

    def commit_all(self, message: str) -> CommitId:
        """Commit everything in the working tree with plumbing (no hooks run); returns the new HEAD."""
        run(self.top, ["add", "-A"])
        tree = self.write_tree()
        parent = self.head_commit()
        args = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
        commit = CommitId(run(self.top, args).decode().strip())
        run(self.top, ["update-ref", "HEAD", commit])
        return commit


def start_author_ident(cwd: str) -> Process:
    """`git var GIT_AUTHOR_IDENT` in `cwd` (a repository or not), read with `author_ident`."""
    return start(cwd, ["var", "GIT_AUTHOR_IDENT"])


def author_ident(proc: Process) -> tuple[str, str, int, str]:
    """(name, email, unix time, tz) as git would record the author (`Repo.start_author_ident`): config,
    GIT_AUTHOR_* and all."""
    out, _ = proc.communicate()
    if proc.wait() != 0:
        return _stand_in_ident()
    ident = out.decode("utf-8", "replace").strip()
    name_email, stamp, tz = ident.rsplit(" ", 2)
    name, _, email = name_email.partition(" <")
    return name, email.rstrip(">"), int(stamp), tz


def _stand_in_ident() -> tuple[str, str, int, str]:
    """No git identity on this machine (a fresh container): the patch is signed with the login and host names, as
    git itself would sign it where it can guess an email, and the user is told how to sign as themselves."""
    import getpass
    import socket
    import time

    from stackmgr import output

    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = "stackmgr"
    email = f"{name}@{socket.gethostname() or 'localhost'}"
    output.err(output.show_text(f"stackmgr: note: git does not know who you are; signed as {name} <{email}>: "
                                'set yours with `git config --global user.name "Your Name"` and '
                                "`git config --global user.email you@example.com`"))  # fmt: skip
    return name, email, int(time.time()), time.strftime("%z")


def patch_paths_answer(proc: Process) -> set[bytes]:
    return {rec.split(b"\t", 2)[2] for rec in zsplit(output(proc))}


def blob_entries_answer(proc: Process) -> dict[bytes, tuple[str, str]]:
    entries = {}
    for rec in zsplit(output(proc)):
        meta, path = rec.split(b"\t", 1)
        mode, _type, oid = meta.decode().split(" ")
        entries[path] = (mode, oid)
    return entries


def common_dir(git_dir: str) -> str:
    """`Repo.common_dir` of the (per-worktree) git directory `git_dir`."""
    try:
        with open(os.path.join(git_dir, "commondir"), "rb") as f:
            return os.path.normpath(os.path.join(git_dir, os.fsdecode(f.read().strip())))
    except FileNotFoundError:
        return git_dir


def open_repo(path: str) -> Repo:
    """Find the git directory of the working tree at `path` without spawning git (this is on `check`'s path)."""
    if not os.path.isdir(path):
        raise StackmgrError(f"{path} does not exist", "`stackmgr tree set NAME PATH` says where it is on this machine")
    dotgit = os.path.join(path, ".git")
    if os.path.isdir(dotgit):
        return Repo(path, dotgit)
    if os.path.isfile(dotgit):
        with open(dotgit, "rb") as f:
            line = f.read(4096).strip()
        if line.startswith(b"gitdir: "):
            return Repo(path, os.path.normpath(os.path.join(path, os.fsdecode(line[8:]))))
    raise StackmgrError(f"{path} is not the top level of a git working tree", "register the repository's top directory")


def discover_toplevel(path: str) -> str:
    """The top level of the git working tree containing `path` (GitPython's Repo discovery)."""
    import git  # GitPython: only here, where start-up time does not matter

    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise StackmgrError(
            f"{path} is not inside a git repository", "run `git init` there or pick another path"
        ) from None
    try:
        if repo.bare or repo.working_tree_dir is None:
            raise StackmgrError(f"{path} is a bare repository", "register a repository with a working tree")
        return os.path.realpath(str(repo.working_tree_dir))
    finally:
        repo.close()


def init_repo(path: str) -> Repo:
    """A new repository with a `main` branch (used by `demo` for its scratch tree)."""
    os.makedirs(path, exist_ok=True)
    run(path, ["init", "-q", "--initial-branch=main"])
    return open_repo(path)


def patch_id(cwd: str, patch: bytes) -> str:
    """`git patch-id --stable` of a patch: equal for the same change re-exported (context, headers, order).
    Needs no repository: `cwd` is only where git runs."""
    out = run(cwd, ["patch-id", "--stable"], stdin=patch)
    return out.decode().split()[0] if out.strip() else ""


def diffstat(cwd: str, patch: bytes) -> bytes:
    """git's diffstat of a patch's bytes (`git apply --stat`, the shape of `git diff --stat`): read from the patch
    itself, nothing applied; `cwd` is only where git runs. Empty for an empty patch."""
    return run(cwd, ["apply", "--stat", "-p1"], stdin=patch) if patch else b""


def upstream_patch_ids(cwd: str, old: str, new: str, meanwhile: Callable[[], object] | None = None) -> set[str]:
    """`git patch-id --stable` of every non-merge commit in old..new (what `git cherry` compares); `meanwhile`
    runs while git reads the history."""
    between = f"{revision(old)}..{revision(new)}"
    proc = start(cwd, ["log", "--no-merges", "-p", "--format=commit %H", *DIFF_FLAGS, between])
    meanwhile_run(proc, meanwhile)
    log = finish(proc)[1]
    if not log.strip():
        return set()
    out = run(cwd, ["patch-id", "--stable"], stdin=log)
    return {line.split()[0] for line in out.decode().splitlines() if line.strip()}


def upstream_moves(cwd: str, old: str, new: str) -> dict[bytes, bytes]:
    """The paths of `old` that git's rename detection finds moved in `new`, and where to (`diff -M` renames):
    where a patch deleting one stops with a rename/delete conflict in `git rebase`."""
    out = run(cwd, ["diff-tree", "-r", "-z", "-M", "--diff-filter=R", "--name-status", "--no-ext-diff", revision(old),
                    revision(new)])  # fmt: skip
    fields = out.split(b"\0")
    return {fields[n + 1]: fields[n + 2] for n in range(0, len(fields) - 2, 3) if fields[n].startswith(b"R")}


def patch_ids(cwd: str, patches: Sequence[bytes]) -> list[str]:
    """`patch_id` of each patch, in one git process: each goes in after a `commit <n>` line of its own (git's
    own separator, as in `git log -p | git patch-id`), and its id comes back beside that number."""
    if not patches:
        return []
    numbered = b"".join(b"commit %040x\n" % (n + 1) + p + (b"" if p.endswith(b"\n") else b"\n")
                        for n, p in enumerate(patches))  # fmt: skip
    ids = {}
    for line in run(cwd, ["patch-id", "--stable"], stdin=numbered).decode().splitlines():
        pid, _, commit = line.partition(" ")
        ids[int(commit, 16)] = pid
    return [ids.get(n + 1, "") for n in range(len(patches))]


def read_numstat(proc: Process) -> dict[bytes, tuple[int, int] | None]:
    """path -> (lines added, lines deleted); None for a binary file."""
    stats: dict[bytes, tuple[int, int] | None] = {}
    for rec in zsplit(output(proc)):
        added, deleted, path = rec.split(b"\t", 2)
        stats[path] = None if added == b"-" else (int(added), int(deleted))
    return stats
