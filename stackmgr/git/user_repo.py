"""The repository a user's own git command line selects (for the shell guard)."""

from __future__ import annotations

import os

from stackmgr.git.runner import run_rc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


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
