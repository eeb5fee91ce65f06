"""Line endings a checkout would not give back: under `core.autocrlf=true`, git stores a text file with LF and
writes it out with CRLF, so a changed file on disk with LF (or mixed) endings cannot be rebuilt from any patch
(safety/snapshot.py marks it `eol_unstable`; `check` reports it unpreserved with that reason)."""

from __future__ import annotations

import os

from stackmgr.store.fs import read_cache, write_cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.git.repo import Repo
    from stackmgr.git.tempindex import TempIndex
    from stackmgr.types import Change


_ASKED = r"^(core\.(autocrlf|excludesfile)|include(if\..*)?\.path)$"  # and whether any config includes another


class AutoCrlf:
    """Is core.autocrlf true for this tree? Asked of git (alongside `git status`) only when a config file it
    reads changed since the last answer; the answer is cached by their stat data, like the store config."""

    def __init__(self, repo: Repo) -> None:
        home = os.environ.get("HOME", "")
        xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        files = [os.path.join(repo.git_dir, "config"), os.path.join(repo.git_dir, "config.worktree"),
                 os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config"), "/etc/gitconfig",
                 os.environ.get("GIT_CONFIG_GLOBAL", ""), os.environ.get("GIT_CONFIG_SYSTEM", "")]  # fmt: skip
        common = repo.common_dir
        if common != repo.git_dir:  # a linked worktree: the shared config lives in the main repository
            files.append(os.path.join(common, "config"))
        env = ("GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS")
        sig: list[object] = [os.environ.get(k) for k in env]  # (files named by include.path are not followed)
        given = ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")  # config given by environment (GIT_CONFIG_COUNT)
        sig.append(sorted([k, v] for k, v in os.environ.items() if k.startswith(given)))
        for path in files:
            try:
                st = os.stat(path) if path else None
            except OSError:
                st = None
            sig.append([path, st.st_mtime_ns, st.st_size, st.st_ino] if st else [path])
        self.sig = sig
        self.top = repo.top
        self.cache = os.path.join(repo.stackmgr_dir, "autocrlf.cache")
        cached = read_cache(self.cache)
        fresh = isinstance(cached, list) and len(cached) == 3 and cached[0] == sig
        self.known: bool | None = cached[1] if fresh else None  # type: ignore[index]
        self.excludes: str | None = cached[2] if fresh else None  # type: ignore[index]
        self.proc = None if fresh else repo.start_config_values(_ASKED)

    def on(self) -> bool:
        if self.known is None:
            assert self.proc is not None
            values = {}
            for rec in self.proc.communicate()[0].split(b"\0"):
                key, _, value = rec.partition(b"\n")
                values[key] = value  # the last one wins, as in git
            self.known = values.get(b"core.autocrlf", b"").strip().lower() in (b"true", b"yes", b"on", b"1")
            # A config that includes other files could name another excludes file there, unseen by `sig`
            included = any(key.startswith(b"include") for key in values)
            self.excludes = None if included else _excludes_file(self.top, values.get(b"core.excludesfile"))
            write_cache(self.cache, [self.sig, self.known, self.excludes])
        return bool(self.known)

    def excludes_file(self) -> str | None:
        """The ignore file core.excludesFile names (or git's default), when known without asking git now and not
        possibly set in an included config file; None otherwise (then the caller asks git about ignored paths)."""
        return self.excludes if self.known is not None else None


def _excludes_file(top: str, value: bytes | None) -> str | None:
    """Where git reads the user's own ignore rules: core.excludesFile (`~/` expanded; relative to the tree's top)
    or $XDG_CONFIG_HOME/git/ignore. None for a form this does not resolve (`~user/`, `%(prefix)/`)."""
    if value is None:
        home = os.environ.get("HOME", "")
        return os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "git", "ignore")
    path = os.fsdecode(value)
    if path.startswith("~/"):
        path = os.path.join(os.environ.get("HOME", ""), path[2:])
    elif path.startswith(("~", "%(")):  # `~user/`, `%(prefix)/`: git resolves them, this does not
        return None
    return os.path.join(top, path)


def eol_unstable(index: TempIndex, changes: list[Change]) -> list[bytes]:
    """Under core.autocrlf=true, changed text files whose bytes a checkout would not give back: git stores them
    with LF and writes them out with CRLF, so a file on disk with LF (or mixed) endings would come back changed."""
    paths = [c.path for c in changes if c.new_mode in ("100644", "100755")]
    if not paths:
        return []
    unstable = []
    for rec in index.eol_info(paths):
        meta, _, path = rec.partition(b"\t")
        fields = meta.split()
        if len(fields) >= 2 and fields[0] == b"i/lf" and fields[1] in (b"w/lf", b"w/mixed"):
            attr = fields[2] if len(fields) > 2 else b""
            if b"-text" not in attr and b"eol=lf" not in attr:
                unstable.append(path)
    return unstable
