"""`stackmgr push`, `pop` and `top`: quilt-style moves along a tree's current series
(docs/FORMATS.md#applied-state).

A tree's current series is the one `apply` (or `save --series`) recorded for it; `push` and `pop` change how
many of its patches (the tree's entries, in series order) are applied, from the series' base. Every move goes
through the guarded switch (safety/tree_move.py): the target is built in a scratch index and checked against
what the patches record, then the working tree moves in one step. Changes on top of the applied patches are
carried along, as quilt carries them; a move that would change a file such a change touches is refused with
nothing changed, as is one that would overwrite a change no patch preserves.
"""

from __future__ import annotations

import os

from stackmgr.commands.apply import compute_result, made_on_older
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git.repo import read_changes
from stackmgr.git.scratch import merge_blobs, tree_with_entries
from stackmgr.git.tempindex import start_tree_diff
from stackmgr.journal.operation import operation
from stackmgr.safety import tree_move
from stackmgr.safety.assessment import counted, file_lines
from stackmgr.safety.preserved import assess
from stackmgr.safety.snapshot import Snapshot, take_snapshot
from stackmgr.store.applied import Applied, applied_result, load_applied, patches_changed_since_applied, record_applied
from stackmgr.store.config import Store
from stackmgr.store.plan import PatchRef, TreePlan, plan_series, read_patch
from stackmgr.store.position import Position, applied_position
from stackmgr.store.series import Entry
from stackmgr.store.tree_paths import tree_to_act_on
from stackmgr.types import Change, TreeId


class Moved:
    """What a push or pop did, for the command line."""

    def __init__(self, position: Position, before: int, changed: bool, carried: int, stale: list[str]) -> None:
        self.tree = position.tree
        self.series = position.series
        self.before = before
        self.after = position.count
        self.total = position.total
        self.top = position.top
        self.changed = changed
        self.carried = carried  # paths of changes on top of the series, carried along
        self.stale = stale  # patches made on an older version of one below: built by their context
        self.summary = position.summary()
        self.rebased = ""  # the new base HEAD moved to: the series was rebased (a pull) since the tree applied it
        self.reapplied: list[str] = []  # applied patches taken at the store's new version (push --merge)
        self.detached: tuple[str, str, str] | None = None  # (the branch HEAD left, HEAD before, HEAD now)


def tree_to_move(store: Store, wanted: str | None, patch: str | None = None) -> str:
    """`push`/`pop`/`top`/`refresh`'s tree: the default tree (store/tree_paths.py), among those with a current
    series."""
    current = [t for t in sorted(load_applied(store)) if t in store.trees]
    return tree_to_act_on(
        store,
        wanted,
        patch=patch,
        prefer=(current,),
        nothing=UsageProblem("no tree has a current series", "`stackmgr apply SERIES` first"),
    )


def position(store: Store, tree: str, in_order: bool = True) -> Position:
    """The tree's applied position (store/position.py), refused when nothing is applied, and, unless `in_order`
    is False (push, pop and top work from what is applied), when the applied patches are not the series' first k."""
    where = applied_position(store, tree)
    if where is None:
        raise StackmgrError(f"tree {tree} has no current series", "`stackmgr apply SERIES` makes one current")
    if not where.series:  # `apply --link` of a result measured with no series applied
        raise StackmgrError(f"tree {tree} holds the measured state of {where.applied.link}, which names no series",
                            "`stackmgr apply SERIES` makes one current")  # fmt: skip
    if in_order:
        where.refuse_out_of_order("refresh")
    elif where.unreadable:
        raise StackmgrError(f"the current series of tree {tree}, {where.series}, cannot be read: {where.unreadable}",
                            f"`stackmgr apply {where.series}` rebuilds the tree from it")  # fmt: skip
    return where


def _movable(store: Store, tree: str, verb: str) -> str:
    """The tree, unless a killed bisect, ab or ablate left it at a prefix (`recover` would undo the move later)."""
    from stackmgr.commands.bisect_state import refuse_if_killed

    refuse_if_killed(store, tree, verb)
    return tree


def _bare(patch: str | None) -> str | None:
    """A patch named as the user may type it: NAME or NAME.patch (quilt takes file names)."""
    return patch[: -len(".patch")] if patch is not None and patch.endswith(".patch") else patch


def push(store: Store, tree: str | None, patch: str | None, every: bool, override: str | None = None,
         merge: bool = False) -> Moved:  # fmt: skip
    """Up to PATCH (default: the next patch; -a: all), never taking an applied patch off: after a pull listed a
    patch between applied ones, the applied ones are re-applied in the series' new order (Position.push_target)."""
    patch = _bare(patch)
    what = "-a" if every else (patch or "")
    with operation(store, " ".join(filter(None, ("push", what)))):
        where = position(store, _movable(store, tree_to_move(store, tree, patch), "push"), in_order=False)
        if merge and patch in (None, where.top) and patches_changed_since_applied(store, where.applied):
            return _move(store, where, where.stack, "push", merge)  # the same patches, at the store's versions now
        if patch is not None:
            if patch not in where.names:
                from stackmgr.store.suggest import did_you_mean

                raise UsageProblem(f"patch {patch} is not in series {where.series} for tree {where.tree}",
                                   did_you_mean(patch, where.names, f"see `stackmgr series {where.series}`"))
            if patch in where.stack:
                raise StackmgrError(f"patch {patch} is already applied on tree {where.tree} ({where.summary()})",
                                    f"`stackmgr pop {patch}` goes back to it")  # fmt: skip
        target = where.push_target(patch, every)
        _guard_revival(store, [name for name in target if name not in where.stack], override, what)
        return _move(store, where, target, "push", merge)


def _guard_revival(store: Store, brought: list[str], override: str | None, what: str) -> None:
    """A push brings these patches back into the tree: a do-not-revive lane is refused as `apply` refuses it."""
    from stackmgr.evidence.revival import guard_revival
    from stackmgr.store.fs import read_or_none

    patches = [(name, read_or_none(os.path.join(store.patches_dir, name + ".patch")) or b"") for name in brought]
    guard_revival(store, patches, override, " ".join(filter(None, ("push", what))))


def pop(store: Store, tree: str | None, patch: str | None, every: bool, merge: bool = False) -> Moved:
    """Down to PATCH (default: one patch off; -a: all), from what is applied (as quilt pops from
    .pc/applied-patches), whatever the series lists now."""
    patch = _bare(patch)
    what = "-a" if every else (patch or "")
    with operation(store, " ".join(filter(None, ("pop", what)))):
        where = position(store, _movable(store, tree_to_move(store, tree, patch), "pop"), in_order=False)
        n = where.count
        if n == 0:
            raise StackmgrError(f"tree {where.tree}: {where.summary()}; nothing to pop",
                                f"`stackmgr push` applies the next patch of {where.series}")  # fmt: skip
        if patch is not None:
            if patch not in where.stack:
                from stackmgr.store.suggest import did_you_mean

                raise UsageProblem(f"patch {patch} is not applied on tree {where.tree} ({where.summary()})",
                                   did_you_mean(patch, where.stack, "name an applied patch: pop leaves it on top"))
            if patch == where.top:
                raise StackmgrError(f"patch {patch} is already on top of tree {where.tree}; nothing to pop")
        wanted = 0 if every else where.stack.index(patch) + 1 if patch is not None else n - 1
        return _move(store, where, where.stack[:wanted], "pop", merge)


def move_to(store: Store, tree: str, wanted: list[str], verb: str) -> Moved:
    """The tree at exactly the patches `wanted` of its series (bottom first, any of them left out: `ab
    --leave-out`), built from the base as push and pop build it, carrying what is on top."""
    with operation(store, verb):
        return _move(store, position(store, tree, in_order=False), wanted, verb.split()[0])


def _refs(store: Store, where: Position, names: list[str]) -> list[PatchRef]:
    """The patch files of `names`: those the series lists read as `apply` reads them, the others (applied,
    gone from the series since) by their own files."""
    listed = {p.name: p for p in plan_series(store, where.series, where.tree, tuple(where.applied.guards))[0].patches
              } if any(n in where.names for n in names) else {}  # fmt: skip
    refs = []
    for name in names:
        ref = listed.get(name) or read_patch(store, Entry(name + ".patch", 0))
        if ref.tree != where.tree:
            raise StackmgrError(f"patches/{name}.patch now belongs to tree {ref.tree}, not {where.tree}",
                                f"`stackmgr apply {where.series}` rebuilds the tree from the series")  # fmt: skip
        refs.append(ref)
    return refs


def _move(store: Store, where: Position, wanted: list[str], verb: str, merge: bool = False) -> Moved:
    """Move the tree to the patches `wanted` (bottom first) from the series' base, carrying the changes made on
    top of the applied ones; with `merge`, a change on top of a file the move changes is merged into its new
    version by git (`_merge_carried`), as `git checkout -m` carries it."""
    config = store.tree(where.tree)
    applied = where.applied
    refs = _refs(store, where, wanted)
    snap = take_snapshot(
        where.tree,
        config.path,
        store.max_untracked_bytes,
        find_special=False,
        freeze=True,
        results=config.results,
        held=applied_result(store, where.tree),
    )
    try:
        _refuse_off_base(snap, applied)
        prefix = TreePlan(where.tree, config.path)
        prefix.patches = refs
        target, stale = _build(prefix, store.root) if wanted else (snap.repo.tree_of(applied.base), [])
        base = refs[0].base if refs else applied.base  # a series rebased since (a pull): HEAD goes to its new base
        if base != applied.base and not snap.repo.has_commit(base):
            raise StackmgrError(f"series {where.series} now stands on {base[:12]}, which tree {where.tree} does not "
                                "have; nothing changed", f"fetch it into {config.path}, then retry")  # fmt: skip
        carried = _carried(snap, applied)
        moving = read_changes(start_tree_diff(snap.repo, applied.result_tree, target))
        merged = _merge_carried(snap, where, verb, carried, moving) if merge else {}
        _refuse_in_the_way(store, snap, where, verb, [c for c in carried if c.path not in merged], moving, merged)
        final = target
        if carried:
            entries: dict[bytes, tuple[str, str] | None] = {c.path: None if c.new_mode == "000000" else
                                                             (c.new_mode, c.new_blob) for c in carried}  # fmt: skip
            final = tree_with_entries(snap.repo, target, {**entries, **merged})
        before = where.count
        changed = final != snap.tree_id()
        branch = None  # the branch HEAD leaves: `reset` returns to it
        if changed:
            branch = tree_move.move_tree(snap, final, index_tree=base, head=base,
                                         reason=f"stackmgr {verb} {where.series}", op=store.journal).branch  # fmt: skip
        now = Applied(applied.series, base, [(p.name, p.sha256) for p in refs], target,
                      pending=[n for n in where.names if n not in wanted],
                      guards=applied.guards).carry_residue(applied)  # fmt: skip
        now.branch = branch or None  # None: the branch an earlier move remembered
        record_applied(store, where.tree, now)
        moved = Moved(Position(where.tree, now, where.names, list(wanted)), before, changed, len(carried), stale)
        moved.rebased = base if base != applied.base else ""
        moved.detached = (branch or "", snap.head, base) if branch else None  # HEAD left a branch: said, as apply
        moved.reapplied = [p.name for p in refs if (p.name, p.sha256) not in applied.patches and p.name in where.stack]
        return moved
    finally:
        snap.release()


def _build(plan: TreePlan, store_root: str) -> tuple[TreeId, list[str]]:
    """The tree the patches build, checked against what they record. A patch made on an older version of one
    below it (refreshed since, as quilt users do) records contents its hunks no longer give: built by its context
    as quilt would (files and modes still checked), and named, so it can be refreshed to record the new state."""
    try:
        return compute_result(plan, False, store_root), []
    except StackmgrError as exc:
        stale = made_on_older(plan)
        if not stale or "as it records" not in exc.message:
            raise
    return compute_result(plan, False, store_root, loose=True), stale


def _refuse_off_base(snap: Snapshot, applied: Applied) -> None:
    if snap.operation:
        raise StackmgrError(f"tree {snap.tree} is in the middle of {snap.operation}", "finish or abort it first")
    if snap.head != applied.base:
        raise StackmgrError(f"tree {snap.tree}: HEAD {snap.head[:12]} is not the base {applied.base[:12]} of series "
                            f"{applied.series}", f"`stackmgr apply {applied.series}` rebuilds it there")  # fmt: skip
    if not snap.repo.has_object(applied.result_tree):
        raise StackmgrError(f"the state series {applied.series} left in tree {snap.tree} is gone",
                            f"`stackmgr apply {applied.series}` rebuilds it")  # fmt: skip


def _carried(snap: Snapshot, applied: Applied) -> list[Change]:
    """The changes on top of the applied patches: what the working tree holds beyond the state they made."""
    if snap.tree_id() == applied.result_tree:
        return []
    return read_changes(snap.index.start_diff_raw(applied.result_tree))


def _refuse_in_the_way(store: Store, snap: Snapshot, where: Position, verb: str, carried: list[Change],
                       moving: list[Change], merged: dict[bytes, tuple[str, str]]) -> None:  # fmt: skip
    """Nothing changed when a change on top touches a file the move changes (quilt: "does not remove cleanly"),
    or when the move would change a file whose state no patch preserves (`merged`: carried, merged in)."""
    index = [(p, "staged and unstaged versions differ") for p in snap.staged_differs]
    index += [(p, "unmerged") for p in snap.unmerged]
    if index:  # the switch sets the index to the base: git's view of these would be lost
        raise StackmgrError(f"{verb} refused, nothing changed: tree {where.tree} has index state a {verb} would "
                            f"lose ({counted(index)})", "resolve or `git add` them (then save), and retry",
                            file_lines(index))  # fmt: skip
    paths = {c.path for c in moving}
    dirs = {p[:i] for p in paths for i in range(len(p)) if p[i : i + 1] == b"/"}  # a file where the move makes a dir
    touched = [(c.path, c.kind) for c in carried if c.path in paths or c.path in dirs
               or any(c.path[:i] in paths for i in range(len(c.path)) if c.path[i : i + 1] == b"/")]  # fmt: skip
    if touched:
        raise StackmgrError(f"{verb} refused, nothing changed: tree {where.tree} has changes on top of "
                            f"{where.top or 'the base'} in files the {verb} would change ({counted(touched)})",
                            f"`stackmgr {verb} --merge` merges them into the new versions (as `git checkout -m`); "
                            "`stackmgr refresh PATH…` folds them into the top patch", file_lines(touched))  # fmt: skip
    lost = [(p, why) for p, why in assess(store, snap).blockers(snap) if p in paths and p not in merged]
    if lost and _rebuilds(store, where):
        lost = []  # what the move takes away, the series' patch files build again (`push` brings it back)
    if lost:
        raise StackmgrError(f"{verb} refused, nothing changed: tree {where.tree} holds changes no patch preserves "
                            f"in files the {verb} would change ({counted(lost)})",
                            "save them (`stackmgr save NAME`) first", file_lines(lost))  # fmt: skip


def _merge_carried(snap: Snapshot, where: Position, verb: str, carried: list[Change],
                   moving: list[Change]) -> dict[bytes, tuple[str, str]]:  # fmt: skip
    """`--merge`: each file both a change on top and the move change, merged by git (`git merge-file`: the
    applied state's version the base, yours and the move's new one the sides), path -> (mode, merged blob).
    Refused, nothing changed, when one conflicts or is not an edit of a text file on both sides (added, deleted,
    a mode or type changed); `stackmgr undo` puts the tree back byte for byte after a merge."""
    moved = {c.path: c for c in moving}
    merged, refused = {}, []
    for c in carried:
        m = moved.get(c.path)
        if m is None:
            continue
        edits = c.old_mode == c.new_mode == m.old_mode == m.new_mode and c.new_mode in ("100644", "100755") \
            and c.old_blob == m.old_blob  # fmt: skip
        blob = merge_blobs(snap.repo, c.old_blob, c.new_blob, m.new_blob) if edits else None
        if blob is None:
            refused.append((c.path, "conflicts" if edits else "not a text edit on both sides"))
        else:
            merged[c.path] = (c.new_mode, blob)
    if refused:
        raise StackmgrError(f"{verb} --merge refused, nothing changed: tree {where.tree}: your changes and the "
                            f"{verb} do not merge in {counted(refused)}", "`stackmgr reset --force` keeps your "
                            "tree in a recovery snapshot (`stackmgr recover ID` shows it back), then `stackmgr apply "
                            f"{where.series}` and redo those edits on the new version",
                            file_lines(refused))  # fmt: skip
    return merged


def _rebuilds(store: Store, where: Position) -> bool:
    """Whether the applied patches, as their files are now, still build the state they left in the tree."""
    if not where.count:
        return True
    applied = TreePlan(where.tree, store.tree(where.tree).path)
    try:
        applied.patches = _refs(store, where, where.stack)
        return _build(applied, store.root)[0] == where.applied.result_tree
    except StackmgrError:
        return False


def top(store: Store, tree: str | None) -> Position:
    return position(store, tree_to_move(store, tree), in_order=False)
