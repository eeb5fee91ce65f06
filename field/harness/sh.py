"""Processes for the field suite: a hermetic environment shared by git, quilt and stackmgr, and tree ids."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

GIT_DATE = "1781344931 +0000"
QUILT = ("quilt", "--quiltrc", "-")  # quilt's defaults only: no ~/.quiltrc, no /etc/quilt.quiltrc


class FieldError(Exception):
    """The harness could not build or run a case (a tool is missing, a download failed)."""


@dataclass(frozen=True)
class Done:
    """A finished process: its exit code and output."""

    code: int
    out: bytes
    err: bytes

    @property
    def text(self) -> str:
        return (self.out + self.err).decode(errors="replace")


@dataclass(frozen=True)
class Env:
    """The one environment every tool of a run gets: no user or system git config, fixed identity and dates."""

    vars: Mapping[str, str]
    stackmgr: str

    @classmethod
    def hermetic(cls, workdir: Path) -> Env:
        home = workdir / "home"
        home.mkdir(parents=True, exist_ok=True)
        (home / ".gitconfig").write_text("[user]\n\tname = Field Runner\n\temail = field@example.com\n"
                                         "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n")
        drop = ("GIT_", "STACKMGR_", "QUILT_", "PYTHONDONTWRITEBYTECODE")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), GIT_CONFIG_NOSYSTEM="1",
                   GIT_CONFIG_GLOBAL=str(home / ".gitconfig"), GIT_AUTHOR_DATE=GIT_DATE, GIT_COMMITTER_DATE=GIT_DATE,
                   GIT_EDITOR="false", LC_ALL="C", NO_COLOR="1", PYTHONPYCACHEPREFIX=str(workdir / "pycache"))
        exe = shutil.which("stackmgr", path=env.get("PATH"))
        if exe is None:
            raise FieldError("the `stackmgr` console script is not on PATH (activate the venv)")
        return cls(env, exe)

    def run(self, argv: Sequence[str], cwd: Path, extra: Mapping[str, str] | None = None,
            stdin: bytes | None = None) -> Done:
        """Run a command to its end; never raises on its exit code (the caller judges it)."""
        env = {**self.vars, **(extra or {})}
        proc = subprocess.run(list(argv), cwd=cwd, env=env, input=stdin, capture_output=True)
        return Done(proc.returncode, proc.stdout, proc.stderr)

    def must(self, argv: Sequence[str], cwd: Path, extra: Mapping[str, str] | None = None,
             stdin: bytes | None = None) -> bytes:
        """Run a command that has to succeed for the case to be built; its stdout."""
        done = self.run(argv, cwd, extra, stdin)
        if done.code != 0:
            raise FieldError(f"{' '.join(map(str, argv))} (in {cwd}) exited {done.code}: {done.text[-600:]}")
        return done.out

    def git(self, repo: Path, *args: str) -> str:
        return self.must(["git", *args], repo).decode().strip()

    def sm(self, store: Path, *args: str) -> Done:
        return self.run([self.stackmgr, "--store", str(store), *args], store)

    def quilt(self, tree: Path, patches: Path, pc: Path, *args: str) -> Done:
        """quilt with its patches and its .pc outside the tree, so neither is part of the tree's id."""
        return self.run([*QUILT, *args], tree, {"QUILT_PATCHES": str(patches), "QUILT_PC": str(pc)})


def worktree_id(env: Env, repo: Path) -> str:
    """The working tree as a git tree id: every file on disk, ignored or not (a scratch index seeded from HEAD,
    `add -A -f`, `write-tree`); the real index is left alone. Ignored files count: a tarball's .gitignore must
    not hide a file that a patch creates, or one that a tool forgot to create."""
    index = repo / ".git" / "field-tree-id.index"
    index.unlink(missing_ok=True)
    extra = {"GIT_INDEX_FILE": str(index)}
    try:
        for argv in (["git", "read-tree", "HEAD"], ["git", "add", "-A", "-f"]):
            done = env.run(argv, repo, extra)
            if done.code != 0:
                raise FieldError(f"{' '.join(argv)} in {repo}: {done.text[-400:]}")
        return env.run(["git", "write-tree"], repo, extra).out.decode().strip()
    finally:
        index.unlink(missing_ok=True)


def commit_all(env: Env, repo: Path, message: str) -> str:
    """Commit everything in the working tree (new, changed, deleted files, ignored ones too: a release tarball
    holds files its own .gitignore names, such as a generated configure); the new commit id."""
    env.must(["git", "add", "-A", "-f"], repo)
    env.must(["git", "commit", "-q", "--allow-empty", "--no-verify", "-m", message], repo)
    return env.git(repo, "rev-parse", "HEAD")


def new_repo(env: Env, path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    env.must(["git", "init", "-q"], path)
    return path


def clone_at(env: Env, source: Path, dest: Path, rev: str) -> Path:
    """A local clone of `source` with its working tree at `rev` (detached)."""
    env.must(["git", "clone", "-q", "--no-checkout", str(source), str(dest)], source.parent)
    env.must(["git", "checkout", "-q", "--detach", rev], dest)
    return dest
