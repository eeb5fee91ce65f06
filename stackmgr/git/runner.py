"""The process runner behind every git call; private to `stackmgr.git` (a layout test keeps it so).

Every call runs at a tree's top level, bytes in and bytes out, with the user's diff/apply/colour configuration
pinned off and repository-locating `GIT_*` variables dropped. Modules outside `stackmgr.git` never build a git
command line: they call named operations (`Repo` in repo.py, `TempIndex`, refs, scratch, ignore, worktree).
"""

from __future__ import annotations

import os

from stackmgr.errors import GitFailed, StackmgrError
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




def literal(paths: Sequence[bytes]) -> list[bytes]:
    return [b":(literal)" + p for p in paths]


def pathspec(paths: Sequence[bytes]) -> list[str | bytes]:
    """Paths after `--`, each literal (a file named `:(glob)*` is a file, not pathspec magic)."""
    return ["--", *literal(paths)] if paths else []


def read_changes(proc: Process) -> list[Change]:
    """The changes a started `--raw -z` diff reports."""
    return parse_raw(finish(proc)[1])
