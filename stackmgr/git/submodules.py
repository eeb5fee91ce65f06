"""A submodule's checkout moved with its pointer (a gitlink, mode 160000), as `git submodule update` moves it.

`read-tree -u` and `git apply` move only the pointer in the superproject's index; the submodule's working tree stays
at the commit it had, so the tree would not be the state a patch, a reset or a recovery promised. Every switch of a
tree (`TempIndex.switch`) therefore moves each initialized submodule whose pointer it changes: detached at the new
commit, by a two-way `read-tree -m -u` in the submodule (which refuses per file, never overwrites). Before the
superproject's first file changes, a move that could not be completed is refused: a submodule with uncommitted
changes inside (its own work: never touched), a commit its repository does not have, a checked-out submodule the
move would remove or add while it is checked out (git clones and deinits submodules; stackmgr does not), one not
initialized here whose pointer moves (an empty directory: its pointer alone would not move what the user sees). A
commit the submodule leaves that no ref of its repository reaches is kept under `refs/stackmgr/kept/` there first,
so the pointer a patch records never names a commit git could collect.
"""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.git.runner import run, run_rc
from stackmgr.types import GITLINK_MODE, Change, show_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from stackmgr.git.repo import Repo


def _checkout(repo: Repo, path: bytes) -> str | None:
    """The submodule's directory when it is initialized here (a `.git` inside it), inside the tree; else None."""
    where = os.path.join(repo.top, os.fsdecode(path))
    top = os.path.realpath(repo.top)
    inside = os.path.realpath(where) == os.path.join(top, os.fsdecode(path))
    if not inside or not os.path.lexists(os.path.join(where, ".git")):
        return None  # not checked out here (or behind a symlink: never followed out of the tree)
    return where


def _gitlinks(changes: Sequence[Change]) -> list[Change]:
    return [c for c in changes if GITLINK_MODE in (c.old_mode, c.new_mode)]


def _head(where: str) -> str:
    return run(where, ["rev-parse", "--verify", "-q", "HEAD"], ok=(0, 1)).strip().decode()


def _tree(where: str, commit: str) -> str:
    return run(where, ["rev-parse", "--verify", "-q", f"{commit}^{{tree}}"], ok=(0, 1)).strip().decode()


def _moving_from(where: str, c: Change) -> str | None:
    """The tree the submodule's checkout holds, to move from: its HEAD's when clean, or, after a move this code
    made was killed between writing the files and HEAD, the old or new commit's tree its index and files hold
    (the move is then finished or undone, never taken for the user's work). None: work of the user's inside."""
    if run_rc(where, ["diff-files", "--quiet", "--ignore-submodules=none"])[0] != 0:
        return None  # unstaged edits (or an unreadable index)
    rc, out, _ = run_rc(where, ["write-tree"])  # refuses while anything is unmerged
    if rc != 0:
        return None
    held, head = out.strip().decode(), _head(where)
    if head and held == _tree(where, head):
        return held
    ends = {_tree(where, c.old_blob), _tree(where, c.new_blob)} - {""}
    return held if head in (c.old_blob, c.new_blob) and held in ends else None


def refuse_unmovable(repo: Repo, changes: Sequence[Change]) -> None:
    """Raise StackmgrError, with nothing changed, when a switch along `changes` could not move a submodule's
    checkout with its pointer: everything the move inside it needs is asked first, as a dry run."""
    for c in _gitlinks(changes):
        where, p = _checkout(repo, c.path), show_path(c.path)
        if c.old_mode != GITLINK_MODE or c.new_mode != GITLINK_MODE:
            if where is None:
                continue  # not checked out here: its empty directory comes or goes, as `git checkout` does it
            verb = "adds" if c.old_mode != GITLINK_MODE else "removes"
            raise StackmgrError(f"the move {verb} submodule {p}, which is checked out here; nothing changed",
                                f"`git submodule deinit -f {p}` first (its commits stay in .git/modules), "
                                "then retry")  # fmt: skip
        if where is None:
            raise StackmgrError(
                f"submodule {p} is not checked out here, so its checkout cannot move with its pointer; nothing changed",
                f"`git submodule update --init {p}`, then retry",
            )
        held = _moving_from(where, c)
        if held is None:
            raise StackmgrError(f"submodule {p} has uncommitted changes inside, and the move would check out "
                                "another commit there; nothing changed",
                                f"commit or stash them in {p} (stackmgr saves only its pointer), "
                                "then retry")  # fmt: skip
        if run_rc(where, ["cat-file", "-e", f"{c.new_blob}^{{commit}}"])[0] != 0:
            raise StackmgrError(f"submodule {p}: commit {c.new_blob[:12]} is not in its repository; nothing changed",
                                f"fetch it (`git -C {p} fetch`, or `git submodule update --init {p}` at a "
                                "commit that has it), then retry")  # fmt: skip
        rc, _, err = run_rc(where, ["read-tree", "--no-recurse-submodules", "-m", "-u", "-n", held, c.new_blob])
        if rc != 0:
            raise StackmgrError(f"submodule {p}: git would refuse to check out {c.new_blob[:12]} there "
                                f"({_said(err)}); nothing changed",
                                f"move or remove what is in the way inside {p}, then retry")  # fmt: skip


def follow_pointers(repo: Repo, index: str, trees: tuple[str, str], gitlinks: Sequence[Change]) -> None:
    """After the superproject's switch from `trees[0]` to `trees[1]` (in `index`): each submodule's checkout
    moved with its pointer. Should one refuse after all (something appeared inside it since the dry run), the
    submodules moved so far and the superproject's files are switched back before the error goes on."""
    try:
        move_checkouts(repo, gitlinks, "the tree's submodule moved with its pointer")
    except BaseException:
        old, new = trees
        switch = ["-c", "checkout.workers=0", "read-tree", "--no-recurse-submodules", "-m", "-u", new, old]
        run_rc(repo.top, switch, index=index)
        back = [Change(c.path, c.new_mode, c.old_mode, c.new_blob, c.old_blob) for c in gitlinks]
        move_checkouts(repo, back, "put back: the move stopped")
        raise


def settle(repo: Repo, changes: Sequence[Change], since: int) -> None:
    """After a kill of an operation started at `since` (seconds): each submodule a move along `changes` was
    moving loses the locks its killed git left there (`index.lock`, `HEAD.lock`, on `refs/stackmgr/kept/`); one
    whose index and files hold one end of that move while HEAD holds the other (killed between the two), is put
    back at its HEAD's commit, the pointer the superproject's snapshot then reads. Anything else inside it is left
    as it is."""
    from stackmgr.git.leftovers import drop_dead_ref_locks, drop_killed_git_locks

    for c in _gitlinks(changes):
        where = _checkout(repo, c.path)
        if where is None or c.old_mode != GITLINK_MODE or c.new_mode != GITLINK_MODE:
            continue
        rc, out, _ = run_rc(where, ["rev-parse", "--absolute-git-dir"])
        if rc == 0:
            drop_killed_git_locks(os.fsdecode(out.strip()), since, ("index.lock", "HEAD.lock"))
            drop_dead_ref_locks(os.fsdecode(out.strip()))
        head, held = _head(where), _moving_from(where, c)
        if head and held is not None and held != _tree(where, head):
            run_rc(where, ["read-tree", "--no-recurse-submodules", "-m", "-u", held, head])


def fast_forward(top: str, path: bytes, base: str | None, ours: str | None, theirs: str | None) -> str | None:
    """The pointer git's merge gives a submodule both sides moved (merge-ort's rule): the side that contains the
    other, when both descend from the base; None (a conflict) where they diverged, a side deleted it, or the
    submodule is not checked out in `top` to ask."""
    where = os.path.join(top, os.fsdecode(path))
    if not (base and ours and theirs) or not os.path.lexists(os.path.join(where, ".git")):
        return None

    def contains(later: str, earlier: str) -> bool:
        return run_rc(where, ["merge-base", "--is-ancestor", earlier, later])[0] == 0

    if not (contains(ours, base) and contains(theirs, base)):
        return None
    if contains(ours, theirs):
        return ours
    return theirs if contains(theirs, ours) else None


def _said(err: bytes) -> str:
    return (err.decode(errors="replace").strip().splitlines() or ["it failed"])[-1]


def move_checkouts(repo: Repo, changes: Sequence[Change], reason: str) -> None:
    """After the superproject switched along `changes`: each initialized submodule whose pointer moved is checked
    out, detached, at its new commit (refused per file by git if anything there would be overwritten)."""
    for c in _gitlinks(changes):
        where = _checkout(repo, c.path)
        if where is None or c.new_mode != GITLINK_MODE or c.old_mode != GITLINK_MODE:
            continue
        head, held = _head(where), _moving_from(where, c)
        if head == c.new_blob and held == _tree(where, c.new_blob):
            continue  # already there (a put-back of a move that stopped before this one)
        if held is None:
            raise StackmgrError(f"submodule {show_path(c.path)} changed inside while it was being moved",
                                "`stackmgr status`, then commit or stash what is there")  # fmt: skip
        if head and not run(where, ["for-each-ref", "--count=1", "--format=x", "--contains", head]).strip():
            run(where, ["update-ref", "-m", f"stackmgr: {reason}", f"refs/stackmgr/kept/{head}", head])
        rc, _, err = run_rc(where, ["read-tree", "--no-recurse-submodules", "-m", "-u", held, c.new_blob])
        if rc != 0:
            raise StackmgrError(
                f"submodule {show_path(c.path)}: git refused to check out {c.new_blob[:12]} there ({_said(err)})",
                "move or remove what is in the way inside it, then retry",
            )
        run(where, ["update-ref", "--no-deref", "-m", f"stackmgr: {reason}", "HEAD", c.new_blob])
