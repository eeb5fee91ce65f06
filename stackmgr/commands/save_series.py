"""`save NAME --series S`: where the new patch goes, like quilt's `new` + `refresh`.

- S has no patch of this tree yet (or does not exist): the patch is made against HEAD (or `--base`), S gets it,
  and S becomes the series applied to the tree.
- S is the series applied to this tree: only the changes made on top of S are saved (the diff starts at the tree
  S produced), with S's base as `Stackmgr-Base`, and the patch is appended. Re-saving S's last patch replaces it.
- Otherwise the save is refused: `apply S` first, or save without `--series`; a series that does not exist while
  another is applied is refused with a did-you-mean.
- Without `--series` on a tree where a series is applied, the patch (on HEAD) holds only what is new since the
  applied patches, never a copy of them; a new change to a file they change is refused (`--series S`).
- `--new-series NEW` starts NEW on the state the tree holds: NEW lists the applied patches first, then the new
  patch (only the change on top of them), so `apply NEW` rebuilds the tree it was saved from.
"""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git.scratch import tree_from_patches
from stackmgr.safety.preserved import PatchIndex
from stackmgr.safety.snapshot import Snapshot
from stackmgr.store.applied import Applied, load_applied, patches_changed_since_applied, record_applied
from stackmgr.store.config import Store
from stackmgr.store.position import applied_position
from stackmgr.store.series import SeriesFile
from stackmgr.types import Change, show_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.commands.save import SaveRequest


class Stack:
    """Where a saved patch lands: the series, what the diff starts from, the base the patch records."""

    def __init__(self, series: SeriesFile, tree: str, diff_from: str, base: str, before: list[tuple[str, str]],
                 pending: list[str] | None = None, guards: list[str] | None = None,
                 lead: list[str] | None = None) -> None:  # fmt: skip
        self.series = series
        self.tree = tree
        self.diff_from = diff_from  # a commit, or the tree id the series produced
        self.base = base
        self.before = before  # the series' patches of this tree that stay below the new one: (name, sha256)
        self.pending = pending or []  # those above it, not applied (the top of a partly pushed series refreshed)
        self.guards = guards or []  # the guards the series was applied with
        self.lead = lead or []  # a new series started on an applied one: the patches it lists before the new one

    def record(self, store: Store, name: str, sha256: str, result_tree: str) -> None:
        """Series file first, then the applied state (the state names what the files say)."""
        filename = name + ".patch"
        listed = [e.patch for e in self.series.entries]
        missing = [f for f in (*(n + ".patch" for n in self.lead), filename) if f not in listed]
        if missing:
            for entry in missing:
                self.series.append(entry)
            self.series.write()
        record_applied(store, self.tree, Applied(self.series.name, self.base, [*self.before, (name, sha256)],
                                                 result_tree, pending=self.pending, guards=self.guards))  # fmt: skip


def refuse_rewriting_a_changed_patch(store: Store, tree: str, applied: Applied, patch: str | None,
                                     force: bool = False) -> None:  # fmt: skip
    """A patch is written from a tree only when the store still holds the versions the tree applied: `patch`,
    rewritten (`--force` replaces it on purpose), and every one below it (a patch on top of an old version of one
    would undo that one's new change, or not apply on it)."""
    changed = patches_changed_since_applied(store, applied)
    if force and patch in changed:
        changed.remove(patch)
    if not changed:
        return
    doing = f"rewriting {patch} from this tree would drop that change" if patch == changed[0] else \
        "a patch saved from this tree would be made against the old version"  # fmt: skip
    forced = "; or `stackmgr refresh --force` replaces it with this tree's (the store's version is kept for " \
        "interdiff)" if patch == changed[0] else ""  # fmt: skip
    raise StackmgrError(f"patch {changed[0]} changed in the store since tree {tree} applied it (a pull or a save "
                        f"elsewhere); {doing}, so nothing changed",
                        f"`stackmgr push --merge` applies the new version with your edits merged on top, then save "
                        f"or refresh{forced}")  # fmt: skip


def series_a_save_lands_in(
    store: Store, tree: str, series: str | None, new_series: str | None, default: str | None
) -> str | None:  # fmt: skip
    """The series a save goes into: the one named (a series that does not exist while another is applied to the
    tree is refused with a did-you-mean), the one `--new-series` starts (refused when it exists), else `default`
    (the caller's); None: a patch on HEAD (`changes_beside_applied` keeps it to what is new)."""
    applied = load_applied(store).get(tree)
    on = applied.series if applied is not None and applied.series and applied.patches else None
    if series is not None and new_series is not None:
        raise UsageProblem("give --series or --new-series, not both",
                           "--series adds to a series; --new-series starts one")  # fmt: skip
    if new_series is not None:
        if SeriesFile.load_or_new(store, new_series).entries:  # one `series new` made, still empty, may start
            raise UsageProblem(f"series {new_series} exists", f"add to it with `--series {new_series}` (after "
                               f"`stackmgr apply {new_series}`), or pick another name for a new series")  # fmt: skip
        return new_series
    if series is not None:
        named = SeriesFile.load_or_new(store, series)
        if on is not None and on != series and named.exists and not named.entries:
            raise UsageProblem(f"series {series} is empty and tree {tree} has series {on} applied: a patch on HEAD "
                               f"would repeat {on}'s patches", f"`--new-series {series}` starts {series} on them; "
                               f"`--series {on}` adds to {on}")  # fmt: skip
        if on is not None and on != series and not named.exists:
            from stackmgr.store.series import series_names
            from stackmgr.store.suggest import close_names, did_you_mean

            close = close_names(series, series_names(store)) or close_names(series, [on])
            guess = f"{did_you_mean(series, close[:1])} " if close else ""
            raise UsageProblem(f"no series named {series}, and tree {tree} has series {on} applied",
                               f"{guess}`--series {close[0] if close else on}` adds to it; `--new-series {series}` "
                               f"starts {series} on the state the tree holds")  # fmt: skip
        return series
    return default


def changes_beside_applied(store: Store, tree: str, snap: Snapshot, changes: list[Change]) -> tuple[list[Change], bool]:
    """A patch on HEAD (no series) from a tree whose series has patches applied holds only what is new since the
    state they produced, never a copy of them; a new change to a file they change cannot be a patch on HEAD
    (refused: `--series S` or `--new-series`). Returns the changes kept, and whether some were left to the series."""
    applied = load_applied(store).get(tree)
    if applied is None or not applied.patches or not applied.result_tree or \
            not snap.repo.has_object(applied.result_tree):  # fmt: skip
        return changes, False
    new = {c.path: c for c in snap.index.changes_against(applied.result_tree)}
    kept = [c for c in changes if c.path in new]
    named = f"series {applied.series}" if applied.series else "the patches applied to it"
    if not kept:
        raise StackmgrError(f"nothing to save: every change in tree {tree} is preserved by {named}",
                            "edit something first")  # fmt: skip
    for c in kept:
        if (new[c.path].old_mode, new[c.path].old_blob) != (c.old_mode, c.old_blob):
            series = applied.series or "S"
            raise UsageProblem(f"{show_path(c.path)} is changed by {named} in tree {tree}: a patch of it on HEAD "
                               "would repeat that change", f"`--series {series}` saves it on top of {series}; "
                               f"`--new-series NAME` starts a series on {series}'s patches")  # fmt: skip
    return kept, len(kept) != len(changes)


def new_series_stack(store: Store, tree: str, series_name: str, base: str, explicit_base: bool) -> Stack:
    """`--new-series`: a series started on the patches applied to the tree (listed first), or on HEAD."""
    series = SeriesFile.load_or_new(store, series_name)
    applied = load_applied(store).get(tree)
    if applied is None or not applied.patches:
        return Stack(series, tree, base, base, [])
    if explicit_base:
        raise UsageProblem(f"--base does not combine with a new series on top of series {applied.series}",
                           "drop --base: the applied series' base is used")  # fmt: skip
    refuse_rewriting_a_changed_patch(store, tree, applied, None)
    return Stack(series, tree, applied.result_tree, applied.base, list(applied.patches), lead=applied.names)


def stack_for(
    store: Store, index: PatchIndex, tree: str, snap: Snapshot, series_name: str, patch: str, base: str,
    explicit_base: bool, overwrite: bool = False,
) -> Stack:  # fmt: skip
    series = SeriesFile.load_or_new(store, series_name)
    applied = load_applied(store).get(tree)
    where = applied_position(store, tree) if applied is not None and applied.series == series_name else None
    if where is not None:  # the tree's patches of S after guards (store/position.py)
        listed = {e.name: e for e in series.entries}
        mine = [listed[n] for n in where.names if n in listed]
    else:
        mine = [e for e in series.entries if (rec := index.record(e.patch)) is not None and rec["tree"] == tree]
    if not mine:
        recorded = series.base_lines().get(tree)
        if recorded is not None and recorded[0] != base:  # an empty series keeps its base: a patch goes on it
            raise StackmgrError(f"series {series_name} is empty at its base {recorded[0][:12]} for tree {tree} "
                                f"(series/{series_name}:{recorded[1]}), but the patch would be made on "
                                f"{base[:12]}", f"`git switch --detach {recorded[0][:12]}` (your edits come "
                                "along where git can carry them), then save; or save into another series")  # fmt: skip
        return Stack(series, tree, base, base, [])
    names = [e.name for e in mine]
    if explicit_base:
        raise UsageProblem(f"--base does not combine with series {series_name}, which has patches for tree {tree}",
                           "drop --base: the series' own base is used")  # fmt: skip
    if applied is None or where is None:
        raise UsageProblem(f"series {series_name} is not the series applied to tree {tree}",
                           f"`stackmgr apply {series_name}` first, or save without --series")  # fmt: skip
    where.refuse_out_of_order("save --series")
    refuse_head_off_base(tree, snap.head, applied.base, series_name)
    if where.stack != names and (not where.stack or patch != where.top):
        verb = "is" if where.count == 1 else "are"
        raise UsageProblem(f"only {where.count} of the {len(names)} patches of series {series_name} {verb} "
                           f"applied to tree {tree}", f"`stackmgr push -a` (or `stackmgr apply {series_name}`) "
                           "first; `stackmgr refresh` rewrites the top one")  # fmt: skip
    pending: list[str] = []
    if patch == where.top and where.stack != names:  # refreshing the top of a partly applied series
        pending = names[where.count :]
        names, mine = where.stack, mine[: where.count]
    if patch in names[:-1]:
        raise UsageProblem(f"patch {patch} is in the middle of series {series_name}",
                           "only its last patch can be saved again; save a new patch on top")  # fmt: skip
    refuse_rewriting_a_changed_patch(store, tree, applied, patch, force=overwrite)
    if patch == names[-1]:  # refreshing the top patch: diff from the series without it
        below = [os.path.join(store.patches_dir, e.patch) for e in mine[:-1]]
        start, failure = tree_from_patches(snap.repo, applied.base, below)
        if start is None:
            raise UsageProblem(f"series {series_name} no longer rebuilds ({failure})", "re-apply it first")
        return Stack(series, tree, start, applied.base, applied.patches[:-1], pending, applied.guards)
    if not snap.repo.has_object(applied.result_tree):
        raise UsageProblem(f"the state series {series_name} left in tree {tree} is gone", f"apply {series_name} again")
    return Stack(series, tree, applied.result_tree, applied.base, list(applied.patches), guards=applied.guards)


def refuse_head_off_base(tree: str, head: str, base: str, series: str) -> None:
    """HEAD moved off the base the series was applied on (a `git switch`, a commit): the tree is that commit plus
    the patches, so a patch saved on the series would take in every commit between the base and HEAD."""
    if head != base:
        raise StackmgrError(f"HEAD of tree {tree} moved off series {series}'s base {base[:12]} since it was applied "
                            f"(now {head[:12]}: a `git switch` or a commit?); a patch saved now would take in what "
                            "git has between them", f"`git switch --detach {base[:12]}` (your edits come along), "
                            f"then save; or carry the series: `stackmgr rebase {series} --onto {head[:12]}`")


def stack_of_save(
    store: Store, index: PatchIndex, tree: str, snap: Snapshot, name: str, base: str, req: SaveRequest
) -> Stack | None:  # fmt: skip
    """Where a saved patch lands: a series (`series_a_save_lands_in`), or none (a patch on HEAD or --base)."""
    default = _applied_series_of(store, tree, name) if req.update and not req.paths and req.series is None else None
    if not req.update and req.series is None and req.new_series is None and req.base is None:
        where = applied_position(store, tree)  # on top of an applied series: what is new, appended to it
        default = where.series if where is not None and where.stack and where.series else None
    if req.update and default is None and req.series is None and req.new_series is None:
        return None  # `save P --update` of a patch the tree does not hold applied: rewritten on its own
    series = series_a_save_lands_in(store, tree, req.series, req.new_series, default)
    if series is None:
        return None
    if req.new_series is not None:
        return new_series_stack(store, tree, series, base, req.base is not None)
    return stack_for(store, index, tree, snap, series, name, base, req.base is not None, req.overwrite)


def _applied_series_of(store: Store, tree: str, name: str) -> str | None:
    """`save P --update` (no PATHs) of a patch applied to the tree: P is rewritten as the top of its series (as
    `refresh` does), so the series and what is recorded as applied stay one; below the top it would have to be
    carried through the patches above it, which is `push`/`pop`'s work."""
    where = applied_position(store, tree)
    if where is None or not where.stack:
        return None  # nothing applied: the patch is rewritten on its own, against HEAD
    if name not in where.stack:  # against HEAD it would take in the applied patches' changes, and lose its own
        member = where.series and name in where.names
        raise UsageProblem(f"{name} is not applied in tree {tree} ({where.summary()}): updating it here would write "
                           "the applied patches' changes into it",
                           f"`stackmgr push {name}` (it is then the top), edit, `stackmgr refresh`" if member else
                           f"`stackmgr reset {tree}` first (nothing applied: it is rewritten against HEAD), or "
                           "`stackmgr save NEWNAME` for a new patch")  # fmt: skip
    if where.top != name:
        raise UsageProblem(f"{name} is applied below {where.top} in series {where.series}: updating it "
                           "here would leave the patches above it on its old version",
                           f"`stackmgr pop {name}` (it is then the top), edit, `stackmgr refresh`, then "
                           "`stackmgr push -a`")  # fmt: skip
    return where.series


def refuse_nothing_new(tree: str, stack: Stack | None, name: str) -> None:
    """Nothing to save: never a patch that repeats what the applied patches hold."""
    if stack is not None and stack.before and name + ".patch" not in (e.patch for e in stack.series.entries):
        of = "" if stack.lead else f" of series {stack.series.name}"  # `--new-series`: the series is not made yet
        raise StackmgrError(f"nothing to save: every change in tree {tree} is preserved by the patches{of} "
                            "applied to it", "edit something first")  # fmt: skip
    raise StackmgrError(f"tree {tree} has no changes to save", "edit something first")


def changes_a_refresh_takes(
    index: PatchIndex, tree: str, name: str, changes: list[Change], own: set[bytes]
) -> tuple[list[Change], list[str]]:  # fmt: skip
    """`refresh` without PATHs takes the changes the patch holds or no other patch does (quilt refreshes the files
    of the patch): a file another patch holds, carried in the tree, stays that patch's. Returns the changes taken
    and one note per change left out."""
    from stackmgr.safety.assessment import owners, shown_name  # `save` starts without collections.abc

    if all(c.path in own for c in changes):
        return changes, []
    index.refresh()
    table = index.entries_by_path(tree)
    taken: list[Change] = []
    notes: list[str] = []
    for change in changes:
        held = [] if change.path in own else owners(table.get(change.path, ()), change.new_mode, change.new_blob)
        others = sorted({shown_name(e[2]).split("@")[0] for e in held} - {name})
        if others:
            notes.append(f"{show_path(change.path)}: left out, patch {', '.join(others)} holds it "
                         f"(`stackmgr refresh {show_path(change.path)}` takes it in)")  # fmt: skip
        else:
            taken.append(change)
    return taken, notes
