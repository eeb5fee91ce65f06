"""The one module that talks to git.

Every call runs at a tree's top level, bytes in and bytes out, with the user's diff/apply/colour configuration
pinned off. Plumbing goes through one small runner (the same contract as GitPython's
`Git.execute(..., stdout_as_string=False, strip_newline_in_stdout=False)`, without its 80 ms import, which
alone would exceed the budget of `check` in a shell prompt); GitPython's `Repo` is used, lazily, to discover
and validate a repository when a tree is registered.
"""

from __future__ import annotations

import os

from stackmgr.errors import GitFailed, StackmgrError
from stackmgr.git.process import Process
from stackmgr.types import Change, CommitId, TreeId

TYPE_CHECKING = False  # mypy treats this as true; `collections.abc`/`typing` stay out of `check`'s start-up
if TYPE_CHECKING:
    from collections.abc import Sequence

# Settings that change what diff/apply/status print or do; always pinned (docs/ARCHITECTURE.md#invariants, 8).
PINNED = (
    "-c", "core.quotePath=true", "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false",
    "-c", "color.ui=never", "-c", "color.diff=never", "-c", "core.pager=cat",
    "-c", "apply.whitespace=nowarn", "-c", "apply.ignoreWhitespace=no",
    "-c", "diff.suppressBlankEmpty=false", "-c", "diff.indentHeuristic=true",
    "-c", "diff.renames=false", "-c", "diff.relative=false", "-c", "core.safecrlf=false",
    "-c", "diff.statGraphWidth=50", "-c", "diff.statNameWidth=60",
    "-c", "core.protectHFS=true", "-c", "core.protectNTFS=true",  # `.g\u200cit`, `git~1`: never a way into .git
)  # fmt: skip
DIFF_FLAGS = (
    "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--full-index", "--binary",
    "--src-prefix=a/", "--dst-prefix=b/", "-U3", "--diff-algorithm=myers", "--ignore-submodules=none",
    "-O/dev/null",
)  # fmt: skip
_DROP_ENV = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_COMMON_DIR", "GIT_NAMESPACE",
    "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_LITERAL_PATHSPECS", "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS", "GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS", "GIT_PAGER",
    "GIT_CONFIG_PARAMETERS",
)  # fmt: skip


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    env.update(LC_ALL="C", LANGUAGE="C", GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", PAGER="cat")
    return env


def _argv(top: str, args: Sequence[str | bytes]) -> list[str | bytes]:
    return ["git", "-C", top, *PINNED, *args]


def _env(index: str | None) -> dict[str, str]:
    env = _base_env()
    if index:
        env["GIT_INDEX_FILE"] = index
    return env


def run(
    top: str, args: Sequence[str | bytes], *, index: str | None = None, stdin: bytes | None = None,
    ok: Sequence[int] = (0,),
) -> bytes:  # fmt: skip
    """Run git in `top`; return stdout bytes. Any exit code outside `ok` raises GitFailed."""
    return finish(start(top, args, index=index, stdin=stdin is not None), stdin, ok)[1]


def run_rc(top: str, args: Sequence[str | bytes], *, index: str | None = None) -> tuple[int, bytes, bytes]:
    proc = start(top, args, index=index)
    out, err = proc.communicate()
    return proc.wait(), out, err


def start(
    top: str, args: Sequence[str | bytes], *, index: str | None = None, stdin: bool = False,
    extra_env: dict[str, str] | None = None,
) -> Process:  # fmt: skip
    """Start git without waiting, so independent git calls of one command overlap."""
    try:
        return Process(_argv(top, args), {**_env(index), **(extra_env or {})}, stdin=stdin)
    except FileNotFoundError:
        raise StackmgrError("git is not installed or not on PATH", "install git") from None


def finish(proc: Process, stdin: bytes | None = None, ok: Sequence[int] = (0,)) -> tuple[int, bytes]:
    out, err = proc.communicate(stdin)
    code = proc.wait()
    if code not in ok:
        raise GitFailed([os.fsdecode(a) for a in proc.argv], code, err)
    return code, out


def zsplit(data: bytes) -> list[bytes]:
    return [p for p in data.split(b"\0") if p]


def parse_raw(data: bytes) -> list[Change]:
    """Parse `--raw -z` output (no renames): ':om nm ob nb S\\0path\\0' records."""
    fields = data.split(b"\0")
    changes = []
    for i in range(0, len(fields) - 1, 2):
        meta = fields[i]
        if not meta:
            break
        om, nm, ob, nb, status = meta[1:].decode("ascii").split(" ")
        changes.append(Change(fields[i + 1], om, nm, ob, nb, status[:1]))
    return changes


class Repo:
    """A non-bare git working tree: its top level and its (per-worktree) git directory."""

    __slots__ = ("git_dir", "top")

    def __init__(self, top: str, git_dir: str) -> None:
        self.top = top
        self.git_dir = git_dir

    @property
    def stackmgr_dir(self) -> str:
        return os.path.join(self.git_dir, "stackmgr")

    def head_on_branch(self) -> bool:
        """HEAD names a branch (read without git: this is on `check`'s path); its commits are then on a ref."""
        try:
            with open(os.path.join(self.git_dir, "HEAD"), "rb") as f:
                return f.read(5) == b"ref: "
        except OSError:
            return False

    def operation_in_progress(self) -> str | None:
        """The name of a merge/rebase/cherry-pick/revert/am/bisect in progress, if any."""
        for marker, what in (
            ("MERGE_HEAD", "a merge"), ("rebase-merge", "a rebase"), ("rebase-apply", "a rebase or am"),
            ("CHERRY_PICK_HEAD", "a cherry-pick"), ("REVERT_HEAD", "a revert"), ("BISECT_LOG", "a bisect"),
        ):  # fmt: skip
            if os.path.exists(os.path.join(self.git_dir, marker)):
                return what
        return None


def start_commits_on_no_ref(repo: Repo) -> Process:
    """Commits reachable from HEAD but from no ref at all: what a detached HEAD would drop on moving."""
    return start(repo.top, ["rev-list", "HEAD", "--not", "--glob=refs/*"])


def open_repo(path: str) -> Repo:
    """Find the git directory of the working tree at `path` without spawning git (this is on `check`'s path)."""
    if not os.path.isdir(path):
        raise StackmgrError(f"{path} does not exist", "fix the tree's path in the store config")
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


def head_commit(top: str) -> CommitId | None:
    rc, out, _ = run_rc(top, ["rev-parse", "-q", "--verify", "HEAD^{commit}"])
    return CommitId(out.decode().strip()) if rc == 0 else None


def resolve_commit(top: str, rev: str) -> CommitId:
    rc, out, _ = run_rc(top, ["rev-parse", "-q", "--verify", "--end-of-options", rev + "^{commit}"])
    if rc != 0:
        raise StackmgrError(f"'{rev}' is not a commit in {top}", "give a commit id, branch or tag that exists there")
    return CommitId(out.decode().strip())


def ref_commit(top: str, ref: str) -> CommitId | None:
    rc, out, _ = run_rc(top, ["rev-parse", "-q", "--verify", "--end-of-options", ref + "^{commit}"])
    return CommitId(out.decode().strip()) if rc == 0 else None


def config_bool(top: str, key: str) -> bool | None:
    """A boolean git setting as the tree sees it (all config levels), or None when unset."""
    rc, out, _ = run_rc(top, ["config", "--bool", "--get", key])
    return out.strip() == b"true" if rc == 0 else None


def has_object(top: str, oid: str) -> bool:
    return bool(oid) and run_rc(top, ["cat-file", "-e", oid])[0] == 0


def has_commit(top: str, commit: str) -> bool:
    return run_rc(top, ["cat-file", "-e", commit + "^{commit}"])[0] == 0


def start_author_ident(top: str) -> Process:
    return start(top, ["var", "GIT_AUTHOR_IDENT"])


def author_ident(proc: Process) -> tuple[str, str, int, str]:
    """(name, email, unix time, tz) as git would record the author: config, GIT_AUTHOR_* and all."""
    out, _ = proc.communicate()
    if proc.wait() != 0:
        raise StackmgrError("git does not know who you are", "set it with `git config --global user.name/user.email`")
    ident = out.decode("utf-8", "replace").strip()
    name_email, stamp, tz = ident.rsplit(" ", 2)
    name, _, email = name_email.partition(" <")
    return name, email.rstrip(">"), int(stamp), tz


def write_tree(top: str, index: str) -> TreeId:
    return TreeId(run(top, ["write-tree"], index=index).decode().strip())


def blob_entries(top: str, rev: str, paths: Sequence[bytes]) -> dict[bytes, tuple[str, str]]:
    """path -> (mode, blob) of `paths` in commit `rev`."""
    out = run(top, ["ls-tree", "-z", "--full-tree", rev, "--", *_literal(paths)])
    entries = {}
    for rec in zsplit(out):
        meta, path = rec.split(b"\t", 1)
        mode, _type, oid = meta.decode().split(" ")
        entries[path] = (mode, oid)
    return entries


def _literal(paths: Sequence[bytes]) -> list[bytes]:
    return [b":(literal)" + p for p in paths]


def pathspec(paths: Sequence[bytes]) -> list[str | bytes]:
    """Paths after `--`, each literal (a file named `:(glob)*` is a file, not pathspec magic)."""
    return ["--", *_literal(paths)] if paths else []


def diff_trees(top: str, old: str, new: str, paths: Sequence[bytes] = ()) -> bytes:
    """The binary-safe, full-index patch from tree `old` to tree `new` (only `paths`, when given)."""
    return run(top, ["diff-tree", "-r", "-p", *DIFF_FLAGS, old, new, *pathspec(paths)])


def start_staged_changes(repo: Repo) -> Process:
    """What the user's real index holds against HEAD (staged edits, unmerged paths); read-only."""
    return start(repo.top, ["--no-optional-locks", "diff-index", "--cached", "-r", "-z", "--raw", "--no-renames",
                            "--full-index", "HEAD"])  # fmt: skip


def ignored_directories(repo: Repo) -> list[bytes]:
    """Untracked directories that are ignored as a whole (build outputs): nothing there is ever saved."""
    out = run(repo.top, ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"])
    return [p for p in zsplit(out) if p.endswith(b"/")]


def ignore_question(paths: Sequence[bytes]) -> bytes:
    """Paths for `check-ignore --stdin`, each as `./path`: a name like `:build` is a file name, not pathspec magic."""
    return b"".join(b"./" + p + b"\0" for p in paths)


def ignore_answer(out: bytes) -> list[bytes]:
    return [p[2:] if p.startswith(b"./") else p for p in zsplit(out)]


def ignored_paths(repo: Repo, paths: Sequence[bytes]) -> list[bytes]:
    """Which of `paths` (files, relative to the top) a .gitignore covers."""
    if not paths:
        return []
    rc, out = finish(start_check_ignore(repo), ignore_question(paths), ok=(0, 1))
    return ignore_answer(out) if rc == 0 else []


def start_ignored_args(repo: Repo, paths: Sequence[bytes]) -> Process | None:
    """`check-ignore` with the paths on its command line, so it runs while other work goes on. Its answer is one
    path per line (-z needs --stdin), so only plain ASCII names go this way: None for others, or too many."""
    plain = all(all(32 < c < 127 and c not in b'"\\' for c in p) for p in paths)
    if not paths or len(paths) > 2000 or not plain:
        return None
    return start(repo.top, ["check-ignore", "--no-index", "--", *(b"./" + p for p in paths)])


def ignored_from_args(proc: Process) -> list[bytes]:
    out, _ = proc.communicate()
    return [p[2:] if p.startswith(b"./") else p for p in out.split(b"\n") if p]


def start_check_ignore(repo: Repo) -> Process:
    return start(repo.top, ["check-ignore", "--no-index", "-z", "--stdin"], stdin=True)


def numstat(top: str, old: str, new: str) -> dict[bytes, tuple[int, int] | None]:
    """path -> (lines added, lines deleted); None for a binary file."""
    out = run(top, ["diff-tree", "-r", "-z", "--numstat", "--no-renames", old, new])
    stats: dict[bytes, tuple[int, int] | None] = {}
    for rec in zsplit(out):
        added, deleted, path = rec.split(b"\t", 2)
        stats[path] = None if added == b"-" else (int(added), int(deleted))
    return stats


def init_repo(path: str) -> Repo:
    """A new repository with a `main` branch (used by `demo` for its scratch tree)."""
    os.makedirs(path, exist_ok=True)
    run(path, ["init", "-q", "--initial-branch=main"])
    return open_repo(path)


def commit_all(repo: Repo, message: str) -> CommitId:
    """Commit everything in the working tree with plumbing (no hooks run); returns the new HEAD."""
    index = os.path.join(repo.git_dir, "index")
    run(repo.top, ["add", "-A"], index=index)
    tree = write_tree(repo.top, index)
    parent = head_commit(repo.top)
    args = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
    commit = CommitId(run(repo.top, args).decode().strip())
    run(repo.top, ["update-ref", "HEAD", commit])
    return commit


def tree_of(top: str, commit: str) -> TreeId:
    return TreeId(run(top, ["rev-parse", "--verify", f"{commit}^{{tree}}"]).decode().strip())


def patch_id(cwd: str, patch: bytes) -> str:
    """`git patch-id --stable` of a patch: equal for the same change re-exported (context, headers, order)."""
    out = run(cwd, ["patch-id", "--stable"], stdin=patch)
    return out.decode().split()[0] if out.strip() else ""


class UserRepo:
    """The repository a user's own git command line selects, asked read-only questions before that command runs
    (`stackmgr guard`): the command's -C/-c/--git-dir/--work-tree options and GIT_DIR/GIT_WORK_TREE, from the
    directory it was typed in. A question git cannot answer (no repository, no such rev) is None."""

    def __init__(self, cwd: str, selectors: Sequence[str]) -> None:
        env = os.environ  # the runner drops GIT_DIR/GIT_WORK_TREE; the user's git would obey them
        from_env = [f"--git-dir={env['GIT_DIR']}"] if env.get("GIT_DIR") else []
        from_env += [f"--work-tree={env['GIT_WORK_TREE']}"] if env.get("GIT_WORK_TREE") else []
        self.cwd = cwd
        self.selectors = [*from_env, *selectors]  # the command's own options win, as they do in git

    def _ask(self, *args: str) -> str | None:
        rc, out, _ = run_rc(self.cwd, [*self.selectors, *args])
        return os.fsdecode(out).rstrip("\n") if rc == 0 else None

    def toplevel(self) -> str | None:
        top = self._ask("rev-parse", "--show-toplevel")
        return os.path.realpath(top) if top else None

    def commit(self, rev: str) -> str | None:
        return self._ask("rev-parse", "-q", "--verify", "--end-of-options", rev + "^{commit}")

    def config(self, key: str) -> str | None:
        return self._ask("config", "--get", key)

    def stash_entries(self) -> list[tuple[str, str, str]]:
        """(commit, `stash@{N}`, subject) of each stash entry, newest first."""
        out = self._ask("stash", "list", "--format=%H%x09%gd%x09%gs") or ""
        return [(f[0], f[1], f[2]) for f in (line.split("\t", 2) for line in out.splitlines()) if len(f) == 3]
