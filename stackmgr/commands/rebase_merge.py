"""A patch that does not carry by its recorded blobs, carried as `git rebase` carries a commit: the change it made
to the old series' state (the old base and the patches below it), merged by git onto the new state, following
the renames git sees. Tried only where carrying by the blobs would stop (a conflict, or no merge possible), after
StGit's merged test (`squash_merged`) found it is not upstream already."""

from __future__ import annotations

import os

from stackmgr.git.repo import open_repo
from stackmgr.git.scratch import tree_from_patches
from stackmgr.git.worktree import ScratchWorktree
from stackmgr.store.config import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.commands.rebase_state import State


def carry_by_merge(store: Store, state: State, work: ScratchWorktree, parent: str) -> bool:
    """Whether git's merge carried the patch at `state["position"]` onto `parent` (the worktree then holds the
    result); when it did not, the worktree is left as carrying by the blobs left it (the conflict to resolve)."""
    position = state["position"]
    files = [os.path.join(store.patches_dir, s["file"]) for s in state["steps"]]
    repo = open_repo(state["top"])
    before, _ = tree_from_patches(repo, state["old_base"], files[:position])
    after, _ = tree_from_patches(repo, state["old_base"], files[: position + 1]) if before else (None, "")
    if before is None or after is None:
        return False
    work.go_to(parent)  # the attempt by the blobs, undone
    if work.merge_change(before, after) is not None:
        return True
    work.merge_change(before, after, keep_conflict=True)  # submodule pointers both moved: git's own resolution
    if work.fast_forward_submodules(state["top"]):
        return True
    work.go_to(parent)
    work.apply_3way(files[position])  # its conflict back in the worktree, for the user to resolve
    if not work.has_unmerged():  # the blobs gave no conflict to resolve (a file upstream moved): git's merge's
        work.go_to(parent)
        work.merge_change(before, after, keep_conflict=True)
    return False


def squash_merged(work: ScratchWorktree, store: Store, steps: list[State], position: int,
                  merged: dict[tuple[str, int], set[int]]) -> bool:  # fmt: skip
    """StGit's merged test: its change, and every merged one's above it, reverses on the state it was carried onto.
    One walk down from the top answers for every position above where it starts: while the parent stays (a patch
    found merged leaves it), a later stuck patch reads its answer from `merged` (parent, start) -> positions."""
    parent = steps[position]["parent"]
    known = next((found for (on, start), found in merged.items() if on == parent and start <= position), None)
    if known is None:
        files = [os.path.join(store.patches_dir, s["file"]) for s in steps[position:]]
        known = merged[parent, position] = {position + n for n in work.merged_from_top(parent, files)}
    return position in known
