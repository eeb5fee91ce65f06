"""The process runner behind every git call; private to `stackmgr.git` (a layout test keeps it so).

Every call runs at a tree's top level, bytes in and bytes out, with the user's diff/apply/colour configuration
pinned off and repository-locating `GIT_*` variables dropped. Modules outside `stackmgr.git` never build a git
command line: they call named operations (`Repo` in repo.py, `TempIndex`, refs, scratch, ignore, worktree).
"""

from __future__ import annotations

import os

from stackmgr.errors import DiskError, GitFailed, StackmgrError
from stackmgr.git.checked import BadGitValue, shown
from stackmgr.git.process import Process
from stackmgr.types import Change

TYPE_CHECKING = False  # mypy treats this as true; `collections.abc`/`typing` stay out of `check`'s start-up
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# Settings that change what diff/apply/status print or do; always pinned (docs/ARCHITECTURE.md#invariants, 8).
PINNED = (
    "-c", "core.quotePath=true", "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false",
    "-c", "color.ui=never", "-c", "color.diff=never", "-c", "core.pager=cat",
    "-c", "apply.whitespace=nowarn", "-c", "apply.ignoreWhitespace=no",
    "-c", "diff.suppressBlankEmpty=false", "-c", "diff.indentHeuristic=true",
    "-c", "diff.renames=false", "-c", "diff.relative=false", "-c", "core.safecrlf=false",
    "-c", "diff.statGraphWidth=50", "-c", "diff.statNameWidth=60",
    "-c", "core.protectHFS=true", "-c", "core.protectNTFS=true",  # `.g\u200cit`, `git~1`: never a way into .git
    "-c", "safe.bareRepository=explicit",  # a bare repository a pull planted in the store is never discovered
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


# On stackmgr's own indexes (private, frozen, scratch: every call given `index=`): never split. A split index
# needs `.git/sharedindex.*`, which git deletes once older than splitIndex.sharedIndexExpire when it writes a new
# one, and git's own writes of those would expire the user's. The user's real index keeps the user's setting.
OWN_INDEX = ("-c", "core.splitIndex=false")


def _argv(top: str, args: Sequence[str | bytes], own_index: bool = False) -> list[str | bytes]:
    for arg in args:  # a NUL would end the argument early (Python refuses it): one line, never a traceback
        if (isinstance(arg, str) and "\0" in arg) or (isinstance(arg, bytes) and b"\0" in arg):
            raise BadGitValue(f"'{shown(arg)}' holds a NUL byte, which git cannot be given", "remove it")
    return ["git", "-C", top, *PINNED, *(OWN_INDEX if own_index else ()), *args]


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
    """Run git in `top`; its exit code, stdout and stderr for the caller to judge. A failure for lack of space (or
    a read-only or failing disk) is never an answer: it raises DiskError."""
    proc = start(top, args, index=index)
    out, err = proc.communicate()
    code = proc.wait()
    if code != 0:
        raise_disk_failure(err, top, index)
    return code, out, err


def start(
    top: str, args: Sequence[str | bytes], *, index: str | None = None, stdin: bool = False,
    extra_env: dict[str, str] | None = None,
) -> Process:  # fmt: skip
    """Start git without waiting, so independent git calls of one command overlap."""
    if args and args[0] == "commit-tree":  # stackmgr's own commits (recovery, anchors, rebase) need an identity
        extra_env = {**_stand_in_identity(top), **(extra_env or {})}
    try:
        return Process(_argv(top, args, bool(index)), {**_env(index), **(extra_env or {})}, stdin=stdin)
    except FileNotFoundError:
        raise StackmgrError("git is not installed or not on PATH", "install git") from None


_identities: dict[str, dict[str, str]] = {}


def _stand_in_identity(top: str) -> dict[str, str]:
    """Where git knows no committer (a fresh machine: no user.email, no domain to guess one from), stackmgr's own
    commits are made as the login at this host instead of failing: asked once per repository and process."""
    if top not in _identities:
        code, _ = finish(Process(_argv(top, ["var", "GIT_COMMITTER_IDENT"]), _env(None)), ok=(0, 128, 1))
        if code == 0:
            _identities[top] = {}
        else:
            import getpass
            import socket

            try:
                login = getpass.getuser()
            except (KeyError, OSError):
                login = "stackmgr"
            email = f"{login}@{socket.gethostname() or 'localhost'}"
            _identities[top] = {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
                                for what, value in (("NAME", login), ("EMAIL", email))}  # fmt: skip
    return _identities[top]


def meanwhile_run(proc: Process, meanwhile: Callable[[], object] | None) -> None:
    """Run `meanwhile` while `proc` works; if it fails, `proc` is drained and reaped before the error goes on."""
    if meanwhile is None:
        return
    try:
        meanwhile()
    except BaseException:
        proc.communicate()
        raise


def finish(proc: Process, stdin: bytes | None = None, ok: Sequence[int] = (0,)) -> tuple[int, bytes]:
    out, err = proc.communicate(stdin)
    code = proc.wait()
    if code not in ok:
        argv = [os.fsdecode(a) for a in proc.argv]
        raise_disk_failure(err, argv[2] if argv[1:2] == ["-C"] else ".", proc.index)
        raise GitFailed(argv, code, err)
    return code, out


# How git says a write failed for the file system's sake (its own wording, or strerror under LC_ALL=C).
_DISK_WORDS = (
    (b"No space left on device", "ENOSPC"), (b"Out of diskspace", "ENOSPC"), (b"Disk quota exceeded", "EDQUOT"),
    (b"Read-only file system", "EROFS"), (b"Input/output error", "EIO"),
)  # fmt: skip
_WRITE_WORDS = (b"couldn't write", b"unable to write", b"could not write", b"write error", b"short write")


def raise_disk_failure(err: bytes, top: str, index: str | None) -> None:
    """Raise DiskError when git's stderr says a write failed for lack of space, a quota, a read-only or failing
    disk; naming the file git names (else the index, else the repository). git does not always give the reason
    (`unable to write new index file`, `couldn't write '...'`): then the file system itself is asked."""
    import errno

    name = next((code for words, code in _DISK_WORDS if words in err), None)
    if name is None and not any(words in err for words in _WRITE_WORDS):
        return
    path = _named_path(err) or index or os.path.join(top, ".git")
    if not os.path.isabs(path):
        path = os.path.join(top, path)
    if name is None:
        name = _file_system_state(path)
        if name is None:
            return
    raise DiskError(getattr(errno, name), path)


def _named_path(err: bytes) -> str | None:
    """The first absolute path git quotes in its message ('...')."""
    for line in err.split(b"\n"):
        parts = line.split(b"'")
        for quoted in parts[1:-1:2]:
            if quoted.startswith(b"/"):
                return os.fsdecode(quoted)
    return None


def _file_system_state(path: str) -> str | None:
    """"EROFS" or "ENOSPC" when the file system of `path` is read-only or (all but) full, else None."""
    place = path
    while not os.path.exists(place) and os.path.dirname(place) != place:
        place = os.path.dirname(place)
    try:
        fs = os.statvfs(place)
    except OSError:
        return None
    if fs.f_flag & os.ST_RDONLY:
        return "EROFS"
    if fs.f_bavail * fs.f_frsize < 1 << 20 or (fs.f_files and fs.f_favail == 0):
        return "ENOSPC"
    return None


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




def literal(paths: Sequence[bytes]) -> list[bytes]:
    """Paths as literal pathspecs (placed after `--` by the callers: never an option)."""
    return [b":(literal)" + p for p in paths]


def pathspec(paths: Sequence[bytes]) -> list[str | bytes]:
    """Paths after `--`, each literal (a file named `:(glob)*` is a file, not pathspec magic)."""
    return ["--", *literal(paths)] if paths else []


def read_changes(proc: Process) -> list[Change]:
    """The changes a started `--raw -z` diff reports."""
    return parse_raw(finish(proc)[1])
