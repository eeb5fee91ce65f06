"""What a tree's .gitignore files cover (`git check-ignore`, `ls-files --ignored`), asked by path."""

from __future__ import annotations

import os

from stackmgr.git.runner import finish, run, start, zsplit

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


SETTLED_NS = 2_000_000_000  # rule files younger than this when the question is put leave the answer uncached


def rules_key(repo: Repo, paths: Sequence[bytes], excludes_file: str, asked_at: int) -> list[object] | None:
    """Everything `check-ignore` of `paths` reads besides the config: the .gitignore in each of their directories
    up to the top (and each directory's identity, so one turned into a symlink shows), info/exclude and the
    user's excludes file, by stat data. None when a file is younger than SETTLED_NS at `asked_at` (a coarse
    timestamp could hide a same-size rewrite in the same tick) or cannot be looked at."""
    top = os.fsencode(repo.top)
    common = repo.git_dir
    if os.path.exists(os.path.join(repo.git_dir, "commondir")):
        return None  # a linked worktree: asked every time
    places = {b"": None}
    for path in paths:
        parent = os.path.dirname(path)
        while parent and parent not in places:
            places[parent] = None
            parent = os.path.dirname(parent)
    files = [os.path.join(top, d, b".gitignore") for d in sorted(places)]
    files += [os.fsencode(os.path.join(common, "info", "exclude")), os.fsencode(excludes_file)]
    key: list[object] = [list(paths), excludes_file]
    try:
        for d in sorted(places):
            if d:
                st = os.lstat(os.path.join(top, d))
                key.append([st.st_ino, st.st_mode])
        for k, f in enumerate(files):
            # git follows a symlink for info/exclude and the excludes file (dotfiles), not for a .gitignore
            for found in _stats(f, follow=k >= len(files) - 2):
                if found is None:
                    key.append(None)
                    continue
                if asked_at - max(found.st_mtime_ns, found.st_ctime_ns) < SETTLED_NS:
                    return None
                key.append([found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns])
    except OSError:
        return None
    return key


def _stats(path: bytes, follow: bool) -> list[os.stat_result | None]:
    """lstat of `path`, and with `follow` the stat of what it points to (None where there is nothing)."""
    found: list[os.stat_result | None] = []
    for look in (os.lstat, os.stat) if follow else (os.lstat,):
        try:
            found.append(look(path))
        except (FileNotFoundError, NotADirectoryError):
            found.append(None)
    return found
