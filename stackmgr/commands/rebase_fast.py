"""The common case of `rebase` (rebase.py) without a scratch worktree: every patch carries by the blobs it
records with no conflict. The patches are classified as the worktree way classifies them, with a few git calls
for the whole series instead of several per patch: one `git cherry`-style patch-id pass over the upstream
commits and one over the patches, the survivors merged 3-way in layers (git/layers.py: one `git apply --cached
--3way` per layer of patches that share no path), one re-diff of the chain, one patch-id pass over the new
diffs. A conflict, a patch that cannot be merged, or anything the layers cannot vouch for answers None, and the
worktree way runs from the first patch (where StGit's merged test and git's own merge take over)."""

from __future__ import annotations

import os

from stackmgr.commands.rebase_state import Carried, patch_bytes
from stackmgr.git.layers import LayerPatch, apply_in_layers, layers_of
from stackmgr.git.repo import open_repo, patch_ids, upstream_moves, upstream_patch_ids
from stackmgr.store import patchfile
from stackmgr.store.config import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.commands.rebase_state import State
    from stackmgr.store.patchfile import PostImage


def carry_at_once(store: Store, state: State) -> Carried | None:
    """Carry every step of a rebase that has carried none yet, filling each step's outcome, parent and commit as
    `rebase._run` does; what was learnt (trees, re-diffs) for `_finish`. None, with the state as it was, when
    the series does not carry cleanly this way."""
    repo = open_repo(state["top"])
    steps, onto = state["steps"], state["onto"]
    datas = [patch_bytes(store, step["file"]) for step in steps]
    diffs = [patchfile.diff_part(d) for d in datas]
    old_ids: list[str] = []
    trees: list[str] = []

    moved: dict[bytes, bytes] = {}
    images = {n: patchfile.post_images(diffs[n], step["file"]) for n, step in enumerate(steps)}
    held: dict[bytes, tuple[str, str]] = {}

    def meanwhile() -> None:  # while git reads upstream's history
        old_ids.extend(patch_ids(repo.top, diffs))
        trees.append(repo.tree_of(onto))
        held.update(repo.blob_entries(onto, sorted({im.path for ims in images.values() for im in ims})))
        if any(b"\ndeleted file mode " in d for d in diffs):
            moved.update(upstream_moves(repo.top, state["old_base"], onto))

    upstream = upstream_patch_ids(repo.top, state["old_base"], onto, meanwhile)  # as `git cherry` sees them
    kept = [n for n in range(len(steps)) if not (upstream and old_ids[n] in upstream)]
    onto_tree = trees[0]
    deletes = {n: _moved_deletions(images, kept, n, moved) for n in kept}
    there = _there_already(held, [n for n in kept if not deletes[n]], images, diffs, kept)
    kept = [n for n in kept if n not in there]  # changes nothing: "already upstream", as its empty re-diff says
    built = apply_in_layers(repo, onto_tree, [
        LayerPatch(os.path.join(store.patches_dir, steps[n]["file"]), 1, [im.path for im in images[n]], deletes[n])
        for n in kept], three_way=True, skip_applied=True)  # fmt: skip
    if built is None:
        return None
    carried = Carried(store, state)
    carried.trees[onto] = onto_tree
    new_diffs = dict(zip(kept, built.diffs, strict=True))
    new_ids = dict(zip(kept, patch_ids(repo.top, [built.diffs[k] for k in range(len(kept))]), strict=True))
    commits = dict(zip(kept, built.commits, strict=True))
    parent = onto
    for n, step in enumerate(steps):
        step["parent"] = parent
        if n not in new_diffs or not new_diffs[n]:
            step["outcome"], step["commit"] = "already upstream", parent
            continue
        step["commit"] = commits[n]
        carried.trees[step["commit"]] = built.trees[kept.index(n)]
        carried.diffs[parent, step["commit"]] = new_diffs[n]
        if datas[n].endswith(new_diffs[n]):
            step["outcome"] = "unchanged"
        else:
            step["outcome"] = "context drift" if new_ids[n] == old_ids[n] else "merged (3-way)"
        parent = step["commit"]
    state["position"] = len(steps)
    return carried


def _there_already(held: dict[bytes, tuple[str, str]], candidates: list[int], images: dict[int, list[PostImage]],
                   diffs: list[bytes], kept: list[int]) -> set[int]:  # fmt: skip
    """The patches whose every file `onto` already holds (`held`: path -> its mode and blob there) exactly as the
    patch leaves it (the full blob id and mode it records; a deletion: no such path), where no patch below touches
    those paths: carried, each would change nothing (its 3-way merge is clean and empty, its reverse applies), so
    git is not asked patch by patch. Renames, copies and mode-only changes (no blob recorded) are left to git."""
    layer = dict(zip(kept, layers_of([[im.path for im in images[n]] for n in kept]), strict=True))
    sure = [n for n in candidates if layer[n] == 1 and images[n] and all(im.blob or im.mode == "000000"
            for im in images[n]) and b"\nrename from " not in diffs[n] and b"\ncopy from " not in diffs[n]]  # fmt: skip
    return {n for n in sure if all(held.get(im.path) == ((im.mode, im.blob) if im.mode != "000000" else None)
                                   for im in images[n])}  # fmt: skip


def _moved_deletions(images: dict[int, list[patchfile.PostImage]], kept: list[int], n: int,
                     moved: dict[bytes, bytes]) -> list[bytes]:  # fmt: skip
    """The files patch `n` deletes that upstream moved, as git's merge would see it: unless a patch below it
    created the file where upstream moved it (the merge base then holds both, and git finds no rename: both
    sides deleted the old path, a clean merge)."""
    gone = [im.path for im in images[n] if im.mode == "000000" and im.path in moved]
    if not gone:
        return []
    created = {im.path for k in kept if k < n for im in images[k] if im.old_mode == "000000"}
    return [p for p in gone if moved[p] not in created]
