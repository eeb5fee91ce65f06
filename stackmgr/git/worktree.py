"""The scratch worktree `rebase` carries patches in: added beside the user's tree (hooks off), worked in with
`apply --index` and plumbing commits, removed with its administrative entry. The user's own working tree,
index and HEAD are never touched by anything here."""

from __future__ import annotations

import os
import shutil

from stackmgr.git.checked import patch_file_for_git, revision
from stackmgr.git.leftovers import drop_stale_lock
from stackmgr.git.runner import DIFF_FLAGS, finish, run, run_rc, start, zsplit
from stackmgr.types import GITLINK_MODE

_BOT = {"GIT_COMMITTER_NAME": "stackmgr", "GIT_COMMITTER_EMAIL": "stackmgr@localhost"}


def add_worktree(top: str, path: str, commit: str) -> None:
    """A detached worktree at `path` on `commit`, for the repository at `top`; its hooks never run."""
    run(top, ["-c", "core.hooksPath=/dev/null", "worktree", "add", "--detach", "--force", os.path.abspath(path),
              revision(commit)])  # fmt: skip


def remove_worktree(top: str, path: str) -> None:
    """Remove our scratch worktree and its entry in the repository (never `worktree prune`, which would also
    forget the user's worktrees whose directories are away)."""
    if os.path.exists(path):
        run_rc(top, ["worktree", "remove", "--force", "--force", path])
        shutil.rmtree(path, ignore_errors=True)
    common = run(top, ["rev-parse", "--git-common-dir"]).decode().strip()
    admin = os.path.join(top, common, "worktrees")
    for name in os.listdir(admin) if os.path.isdir(admin) else []:
        try:
            with open(os.path.join(admin, name, "gitdir"), "rb") as f:
                link = f.read()
        except OSError:
            link = b""
        if os.path.dirname(link.decode("utf-8", "replace").strip()) == path:
            shutil.rmtree(os.path.join(admin, name), ignore_errors=True)


def soft_reset_line(commit: str) -> str:
    """The git command a user runs to move a worktree's HEAD back to `commit`, keeping its files."""
    return f"git reset --soft {commit}"


DISCARD_TRACKED_LINE = "git checkout -- ."  # what a user runs to undo their edits of tracked files


class ScratchWorktree:
    """Named operations in one scratch worktree (its path is where git runs)."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def head(self) -> str:
        return run(self.path, ["rev-parse", "HEAD"]).decode().strip()

    def tree_of(self, commit: str) -> str:
        return run(self.path, ["rev-parse", "--verify", "--end-of-options", f"{revision(commit)}^{{tree}}"]
                   ).decode().strip()  # fmt: skip

    def drop_dead_locks(self) -> list[str]:
        """The `index.lock` and `HEAD.lock` a git killed with stackmgr left in this scratch worktree's own git dir:
        removed when no running process holds the file open (leftovers.drop_stale_lock). Returns the locks left
        because a live process may hold them (a git at work there, or no /proc to tell)."""
        locks = [os.path.join(self.git_dir(), name) for name in ("index.lock", "HEAD.lock")]
        return [lock for lock in locks if not drop_stale_lock(lock)]

    def git_dir(self) -> str:
        """This worktree's own git directory (`.git/worktrees/NAME` of the repository), from its `.git` file."""
        with open(os.path.join(self.path, ".git"), encoding="utf-8", errors="surrogateescape") as f:
            where = f.read().strip().removeprefix("gitdir: ")
        return os.path.normpath(os.path.join(self.path, where))

    def reset_hard(self, commit: str) -> None:
        run(self.path, ["reset", "-q", "--hard", revision(commit)])

    def reset_soft(self, commit: str) -> None:
        run(self.path, ["reset", "-q", "--soft", revision(commit)])

    def head_descends_from(self, commit: str) -> bool:
        return run_rc(self.path, ["merge-base", "--is-ancestor", revision(commit), "HEAD"])[0] == 0

    def stage_tracked(self) -> str:
        """`git add -u` (tracked files as the user left them; new files count once `git add`ed), then the tree
        the index holds."""
        run(self.path, ["add", "-u"])
        return self.write_tree()

    def write_tree(self) -> str:
        return run(self.path, ["write-tree"]).decode().strip()

    def go_to(self, commit: str) -> None:
        """HEAD, index and files at `commit` (detached)."""
        run(self.path, ["update-ref", "--no-deref", "HEAD", revision(commit)])
        run(self.path, ["read-tree", "--reset", "-u", revision(commit)])

    def merge_change(self, before: str, after: str, keep_conflict: bool = False) -> str | None:
        """git's own merge (ort, renames followed, as `git rebase` carries a commit) of the change from tree
        `before` to tree `after` onto HEAD: the index and files set to the merged tree, which is returned; None
        when it conflicts (nothing touched, or with `keep_conflict` the conflict left as `git rebase` leaves it:
        files with markers where the merge put them, renamed paths included, and unmerged index entries). The
        merge base is made explicit: both sides are committed on a root commit of `before` (git 2.39's
        merge-tree has no --merge-base)."""
        env = dict(_BOT, GIT_AUTHOR_NAME="stackmgr", GIT_AUTHOR_EMAIL="stackmgr@localhost")

        def commit(tree: str, *parents: str) -> str:
            args = ["commit-tree", revision(tree), *(a for p in parents for a in ("-p", revision(p)))]
            return finish(start(self.path, args, stdin=True, extra_env=env), b"carry\n")[1].decode().strip()

        root = commit(before)
        ours, theirs = commit(self.tree_of("HEAD"), root), commit(after, root)
        rc, out, _ = run_rc(self.path, ["merge-tree", "--write-tree", "--no-messages", "-z", revision(ours),
                                        revision(theirs)])  # fmt: skip
        if rc != 0:
            if rc == 1 and keep_conflict:
                self._leave_conflict(out)
            return None
        merged = out.split(b"\0", 1)[0].decode().strip()
        run(self.path, ["read-tree", "--reset", "-u", merged])
        return merged

    def _leave_conflict(self, out: bytes) -> None:
        """merge-tree's conflicted result (`-z`: the tree, then `mode oid stage<TAB>path` records, then an empty
        one) into the files and the index: each conflicted path's stages replace its entry."""
        records = out.split(b"\0")
        run(self.path, ["read-tree", "--reset", "-u", records[0].decode().strip()])
        stages = []
        for rec in records[1:]:
            if not rec:
                break
            stages.append(rec)
        paths = sorted({rec.split(b"\t", 1)[1] for rec in stages})
        info = b"".join(b"0 " + b"0" * 40 + b"\t" + p + b"\0" for p in paths) + b"".join(r + b"\0" for r in stages)
        run(self.path, ["update-index", "-z", "--index-info"], stdin=info)

    def merged_from_top(self, commit: str, patches: list[str]) -> set[int]:
        """StGit's test for patches merged upstream: from the top of the stack down, each patch whose change can be
        reversed (strict `git apply -R --cached`) on `commit`, as the reversals above it left it, is merged. The
        positions in `patches` of those. Stricter than StGit: a hunk must reverse where the patch put it, not at
        an offset, so an identical block elsewhere that upstream changed the same way does not count."""
        import tempfile

        merged: set[int] = set()
        with tempfile.TemporaryDirectory(prefix="stackmgr-merged-") as tmp:
            index = os.path.join(tmp, "index")
            run(self.path, ["read-tree", revision(commit)], index=index)
            for n in reversed(range(len(patches))):
                args = ["apply", "--cached", "-R", "-p1", patch_file_for_git(patches[n])]
                rc, _, err = run_rc(self.path, [*args[:1], "--check", "-v", *args[1:]], index=index)
                if rc == 0 and b"(offset " not in err and run_rc(self.path, args, index=index)[0] == 0:
                    merged.add(n)
        return merged

    def reverse_applies(self, patch: str) -> bool:
        return run_rc(self.path, ["apply", "--index", "--check", "-R", "-p1", patch_file_for_git(patch)])[0] == 0

    def apply_3way(self, patch: str) -> tuple[bool, bytes]:
        """(merged, git's stderr) of `apply --index --3way`: a 3-way merge between the patch's full blob ids first
        (git 2.32 and later), a direct application only when those blobs are missing."""
        rc, _, err = run_rc(self.path, ["apply", "--index", "--3way", "--whitespace=nowarn", "-p1",
                                        patch_file_for_git(patch)])  # fmt: skip
        return rc == 0, err

    def has_unmerged(self) -> bool:
        return bool(run(self.path, ["ls-files", "-u"]).strip())

    def fast_forward_submodules(self, top: str) -> bool:
        """Where the only conflicts are submodule pointers both sides moved, each resolved as git's merge resolves
        it (`submodules.fast_forward`, asked of the submodule checked out in the user's tree `top`). True when
        every conflict was resolved so."""
        from stackmgr.git.submodules import fast_forward

        stages: dict[bytes, dict[str, str]] = {}
        for rec in zsplit(run(self.path, ["ls-files", "-u", "-z"])):
            meta, path = rec.split(b"\t", 1)
            mode, oid, stage = meta.decode().split(" ")
            if mode != GITLINK_MODE:
                return False
            stages.setdefault(path, {})[stage] = oid
        picks = {path: fast_forward(top, path, s.get("1"), s.get("2"), s.get("3")) for path, s in stages.items()}
        if not picks or None in picks.values():
            return False
        info = b"".join(f"{GITLINK_MODE} {oid}\t".encode() + path + b"\0" for path, oid in picks.items() if oid)
        run(self.path, ["update-index", "-z", "--index-info"], stdin=info)
        return True

    def unmerged_names(self) -> list[str]:
        return run(self.path, ["diff", "--name-only", "--diff-filter=U"]).decode().split()

    def tracked_changed(self) -> bool:
        return bool(run(self.path, ["status", "--porcelain", "--untracked-files=no"]).strip())

    def stat_and_diff(self, old: str, new: str) -> bytes:
        return run(self.path, ["diff-tree", "-r", "-p", "--stat=72", "--summary", *DIFF_FLAGS, revision(old),
                               revision(new)])  # fmt: skip

    def patch_ids(self, old: str, new: str) -> set[str]:
        from stackmgr.git.repo import upstream_patch_ids

        return upstream_patch_ids(self.path, old, new)

    def staged_diff(self, parent: str) -> bytes:
        return run(self.path, ["diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv", revision(parent)])

    def run_shell(self, command: str) -> int:
        """The user's `--exec` command, run by the shell in this worktree; its output goes to stderr (stdout is
        stackmgr's, for --json). Its exit code."""
        import subprocess
        import sys

        try:
            done = subprocess.run(command, shell=True, cwd=self.path, check=False, stdout=sys.stderr.fileno())
            return done.returncode
        except (AttributeError, OSError, ValueError):  # stderr is not a file (captured): relay what it printed
            proc = subprocess.run(command, shell=True, cwd=self.path, check=False, capture_output=True)
            sys.stderr.write((proc.stdout + proc.stderr).decode("utf-8", "replace"))
            return proc.returncode

    def commit_index(self, tree: str, parent: str, message: str) -> str:
        """Commit the `tree` this worktree's index holds already (its `write_tree`, right after an `apply
        --index` that kept the stat data fresh) on `parent`; HEAD is left where it is (`set_head` moves it)."""
        env = dict(_BOT, GIT_AUTHOR_NAME="stackmgr", GIT_AUTHOR_EMAIL="stackmgr@localhost")
        proc = start(self.path, ["commit-tree", revision(tree), "-p", revision(parent)], stdin=True, extra_env=env)
        return finish(proc, message.encode())[1].decode().strip()

    def set_head(self, commit: str) -> None:
        run(self.path, ["update-ref", "--no-deref", "HEAD", revision(commit)])

    def commit(self, tree: str, parent: str, message: str) -> str:
        """Commit `tree` on `parent` as stackmgr (plumbing, no hooks) and move HEAD and the index there."""
        commit = self.commit_index(tree, parent, message)
        self.set_head(commit)
        run(self.path, ["read-tree", revision(commit)])
        run_rc(self.path, ["update-index", "-q", "--refresh"])  # stat info back, or the next `apply --index` refuses
        return commit
