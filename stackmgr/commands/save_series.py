"""`save NAME --series S`: where the new patch goes, like quilt's `new` + `refresh`.

- S has no patch of this tree yet (or does not exist): the patch is made against HEAD (or `--base`), S gets it,
  and S becomes the series applied to the tree.
- S is the series applied to this tree: only the changes made on top of S are saved (the diff starts at the tree
  S produced), with S's base as `Stackmgr-Base`, and the patch is appended. Re-saving S's last patch replaces it.
- Otherwise the save is refused: `apply S` first, or save without `--series`.
"""

from __future__ import annotations

import os

from stackmgr.errors import UsageProblem
from stackmgr.git.scratch import tree_from_patches
from stackmgr.safety.preserved import PatchIndex
from stackmgr.safety.snapshot import Snapshot
from stackmgr.store.applied import Applied, load_applied, record_applied
from stackmgr.store.config import Store
from stackmgr.store.series import SeriesFile, active


class Stack:
    """Where a saved patch lands: the series, what the diff starts from, the base the patch records."""

    def __init__(self, series: SeriesFile, tree: str, diff_from: str, base: str, before: list[tuple[str, str]],
                 pending: list[str] | None = None, guards: list[str] | None = None) -> None:  # fmt: skip
        self.series = series
        self.tree = tree
        self.diff_from = diff_from  # a commit, or the tree id the series produced
        self.base = base
        self.before = before  # the series' patches of this tree that stay below the new one: (name, sha256)
        self.pending = pending or []  # those above it, not applied (the top of a partly pushed series refreshed)
        self.guards = guards or []  # the guards the series was applied with

    def record(self, store: Store, name: str, sha256: str, result_tree: str) -> None:
        """Series file first, then the applied state (the state names what the files say)."""
        filename = name + ".patch"
        if filename not in (e.patch for e in self.series.entries):
            self.series.append(filename)
            self.series.write()
        record_applied(store, self.tree, Applied(self.series.name, self.base, [*self.before, (name, sha256)],
                                                 result_tree, pending=self.pending, guards=self.guards))  # fmt: skip


def stack_for(
    store: Store, index: PatchIndex, tree: str, snap: Snapshot, series_name: str, patch: str, base: str,
    explicit_base: bool,
) -> Stack:  # fmt: skip
    series = SeriesFile.load_or_new(store, series_name)
    mine = [e for e in series.entries if (rec := index.record(e.patch)) is not None and rec["tree"] == tree]
    applied = load_applied(store).get(tree)
    if applied is not None and applied.series == series_name:  # the patches its guards let in
        mine = [e for e in mine if active(e, applied.guards)]
    if not mine:
        return Stack(series, tree, base, base, [])
    names = [e.name for e in mine]
    if explicit_base:
        raise UsageProblem(f"--base does not combine with series {series_name}, which has patches for tree {tree}",
                           "drop --base: the series' own base is used")  # fmt: skip
    current = applied is not None and applied.series == series_name
    if applied is None or not current or names[: len(applied.names)] != applied.names:
        raise UsageProblem(f"series {series_name} is not the series applied to tree {tree}",
                           f"`stackmgr apply {series_name}` first, or save without --series")  # fmt: skip
    if applied.names != names and (not applied.names or patch != applied.names[-1]):
        raise UsageProblem(f"only {len(applied.names)} of the {len(names)} patches of series {series_name} are "
                           f"applied to tree {tree}", f"`stackmgr push -a` (or `stackmgr apply {series_name}`) "
                           "first; `stackmgr refresh` rewrites the top one")  # fmt: skip
    pending: list[str] = []
    if patch == applied.names[-1] and applied.names != names:  # refreshing the top of a partly applied series
        pending = names[len(applied.names) :]
        names, mine = applied.names, mine[: len(applied.names)]
    if patch in names[:-1]:
        raise UsageProblem(f"patch {patch} is in the middle of series {series_name}",
                           "only its last patch can be saved again; save a new patch on top")  # fmt: skip
    if patch == names[-1]:  # refreshing the top patch: diff from the series without it
        below = [os.path.join(store.patches_dir, e.patch) for e in mine[:-1]]
        start, failure = tree_from_patches(snap.repo, applied.base, below)
        if start is None:
            raise UsageProblem(f"series {series_name} no longer rebuilds ({failure})", "re-apply it first")
        return Stack(series, tree, start, applied.base, applied.patches[:-1], pending, applied.guards)
    if not snap.repo.has_object(applied.result_tree):
        raise UsageProblem(f"the state series {series_name} left in tree {tree} is gone", f"apply {series_name} again")
    return Stack(series, tree, applied.result_tree, applied.base, list(applied.patches), guards=applied.guards)
