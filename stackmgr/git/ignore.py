"""What a tree's .gitignore files cover (`git check-ignore`, `ls-files --ignored`), asked by path."""

from __future__ import annotations

import os

from stackmgr.git.runner import finish, run, start, zsplit
from stackmgr.store.fs import stat_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from stackmgr.git.process import Process
    from stackmgr.git.repo import Repo


def _start_stdin(repo: Repo) -> Process:
    return start(repo.top, ["check-ignore", "--no-index", "-z", "--stdin"], stdin=True)


class Query:
    """A `check-ignore` of known paths started now, while other work goes on; `answer()` reads it. A path that
    has come to lie behind a symlink makes git fail (exit 128): `answer()` is then None, so ask again."""

    def __init__(self, repo: Repo, paths: Sequence[bytes]) -> None:
        self.proc: Process | None = _start_stdin(repo) if paths else None
        self._question = _question(paths)

    def answer(self) -> set[bytes] | None:
        if self.proc is None:
            return set()
        rc, out = finish(self.proc, self._question, ok=(0, 1, 128))
        if rc == 128:
            return None
        return set(_answer(out)) if rc == 0 else set()


def ignored_directories(repo: Repo) -> list[bytes]:
    """Untracked directories that are ignored as a whole (build outputs): nothing there is ever saved."""
    out = run(repo.top, ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"])
    return [p for p in zsplit(out) if p.endswith(b"/")]


def _question(paths: Sequence[bytes]) -> bytes:
    """Paths for `check-ignore --stdin`, each as `./path`: a name like `:build` is a file name, not pathspec magic."""
    return b"".join(b"./" + p + b"\0" for p in paths)


def _answer(out: bytes) -> list[bytes]:
    return [p[2:] if p.startswith(b"./") else p for p in zsplit(out)]


def ignored_paths(repo: Repo, paths: Sequence[bytes]) -> list[bytes]:
    """Which of `paths` (files, relative to the top) a .gitignore covers."""
    if not paths:
        return []
    rc, out = finish(_start_stdin(repo), _question(paths), ok=(0, 1))
    return _answer(out) if rc == 0 else []


def start_ignored(repo: Repo, paths: Sequence[bytes]) -> Process | None:
    """`check-ignore` with the paths on its command line, so it runs while other work goes on. Its answer is one
    path per line (-z needs --stdin), so only plain ASCII names go this way: None for others, or too many."""
    plain = all(all(32 < c < 127 and c not in b'"\\' for c in p) for p in paths)
    if not paths or len(paths) > 2000 or not plain:
        return None
    return start(repo.top, ["check-ignore", "--no-index", "--", *(b"./" + p for p in paths)])


def started_answer(proc: Process) -> list[bytes]:
    out, _ = proc.communicate()
    return [p[2:] if p.startswith(b"./") else p for p in out.split(b"\n") if p]


def rules_key(repo: Repo, paths: Sequence[bytes], excludes_file: str, asked_at: int) -> list[object] | None:
    """Everything `check-ignore` of `paths` reads besides the config, by stat data (store.fs.stat_key): the
    .gitignore in each of their directories up to the top (never followed, as git does not) and each directory's
    identity (one turned into a symlink shows), info/exclude and the user's excludes file (followed too: git
    reads through a dotfiles symlink). None when it cannot be cached."""
    if os.path.exists(os.path.join(repo.git_dir, "commondir")):
        return None  # a linked worktree: asked every time
    top = os.fsencode(repo.top)
    places = {b"": None}
    for path in paths:
        parent = os.path.dirname(path)
        while parent and parent not in places:
            places[parent] = None
            parent = os.path.dirname(parent)
    try:  # each directory's identity, not its mtime (that moves with every file made in it)
        dirs = [[(st := os.lstat(os.path.join(top, d))).st_ino, st.st_mode] for d in sorted(places) if d]
    except OSError:
        return None
    rules = [os.path.join(top, d, b".gitignore") for d in sorted(places)]
    user = [os.fsencode(os.path.join(repo.git_dir, "info", "exclude")), os.fsencode(excludes_file)]
    parts = (stat_key(rules + user, asked_at), stat_key(user, asked_at, follow=True))
    if parts[0] is None or parts[1] is None:
        return None
    return [list(paths), excludes_file, dirs, *parts[0], *parts[1]]
