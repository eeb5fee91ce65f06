"""`stackmgr apply --link LINK`: rebuild the exact state a result was measured on, every tree it names.

Each tree's measured state (evidence/measured.py) is rebuilt in a scratch index from its record alone: the
measured HEAD, the patch versions by sha256, the residue from `artifacts/`; the result must be the recorded
snapshot id, or nothing changes. Then, as `apply` does, every tree must be preserved, and each switches in one
step (HEAD detached at the measured HEAD); if a later tree refuses, the earlier ones are put back. A tree
already at the measured state (that snapshot id, HEAD at the measured HEAD) moves nothing, so it has nothing to
preserve. Each tree's applied state then says what it holds (store/applied.py): the patches, the series the
record names, the link, and the residue on top, which no patch holds (safety/residue.py counts it preserved
while it is byte for byte what `artifacts/` keeps)."""

from __future__ import annotations

from stackmgr.commands.apply import preflight, refuse_overwriting_on_top
from stackmgr.errors import UsageProblem
from stackmgr.evidence.measured import rebuild
from stackmgr.evidence.reading import find_ref
from stackmgr.evidence.records import Link, StackEntry
from stackmgr.git.refs import symbolic_head
from stackmgr.git.repo import open_repo
from stackmgr.journal.operation import operation
from stackmgr.safety import tree_move
from stackmgr.safety.preserved import PatchIndex
from stackmgr.safety.snapshot import Snapshot
from stackmgr.store.applied import Applied, load_applied, record_applied
from stackmgr.store.config import Store
from stackmgr.types import TreeId


class Rebuilt:
    def __init__(self, entry: StackEntry, changed: bool) -> None:
        self.tree = entry.tree
        self.base = entry.base
        self.snapshot = entry.snapshot
        self.patches = [name for name, _sha in entry.patches]
        self.residue = entry.residue_patch
        self.changed = changed
        self.head_before = ""  # HEAD before the move, and the branch it was on (None: detached)
        self.branch_before: str | None = None


def find_link(store: Store, wanted: str) -> Link:
    """The record with id `wanted` (the `lnk-` may be left out), or a run's name (`stackmgr run --name`)."""
    found = find_ref(store, wanted)  # a run name two runs were given: refused there, with their ids
    if found is None:
        from stackmgr.evidence.ref_names import unknown_ref

        raise unknown_ref(store, wanted, f"no link {wanted}", "see `stackmgr links` for ids")
    return found


def apply_link(store: Store, wanted: str, *, only_tree: str | None = None, dry_run: bool = False,
               override: str | None = None) -> list[Rebuilt]:  # fmt: skip
    link = find_link(store, wanted)
    entries = [s for s in link.stack if only_tree in (None, s.tree)]
    if not entries:
        raise UsageProblem(f"link {link.id} measured no tree {only_tree}" if only_tree else
                           f"link {link.id} records no measured tree", "see `stackmgr show " + link.patch + "`")
    with operation(store, f"apply --link {link.id}"):
        built = [rebuild(store, entry, open_repo(store.tree(entry.tree).path)) for entry in entries]
        _guard_revival(store, link, entries, override, dry_run, only_tree)
        targets = [TreeId(tree) for tree, _below in built]
        snaps: list[Snapshot] = []
        try:
            held = load_applied(store)
            for entry, target in zip(entries, targets, strict=True):
                preflight(store, entry.tree, entry.base, snaps.append, already=target)
                refuse_overwriting_on_top(store, entry.tree, snaps[-1], held.get(entry.tree), target, "apply --link")
            outcomes = [Rebuilt(e, not _there(s, e, t)) for e, s, t in zip(entries, snaps, targets, strict=True)]
            if not dry_run:
                branches = [symbolic_head(snap.repo) for snap in snaps]  # HEAD leaves them: `reset` returns
                for o, snap, branch in zip(outcomes, snaps, branches, strict=True):
                    o.head_before, o.branch_before = snap.head, branch
                _switch_all(store, link, entries, snaps, targets)
                for entry, (_tree, below), branch in zip(entries, built, branches, strict=True):
                    applied = Applied(entry.series, entry.base, _names_now(store, entry), below).measured_from(
                        link.id, link.patch if entry.tree == link.tree else "", entry.residue_patch, entry.snapshot)
                    applied.branch = branch or None  # None: the branch an earlier apply remembered
                    record_applied(store, entry.tree, applied)
            return outcomes
        finally:
            for snap in snaps:
                snap.release()


def _guard_revival(store: Store, link: Link, entries: list[StackEntry], override: str | None, dry_run: bool,
                   only_tree: str | None) -> None:  # fmt: skip
    """The measured patches come back into their trees: a do-not-revive lane is refused as `apply` refuses it."""
    from stackmgr.evidence.artifacts import read_kept
    from stackmgr.evidence.revival import guard_revival
    from stackmgr.evidence.versions import version_file

    patches = []
    for name, sha in (p for entry in entries for p in entry.patches):
        rel = version_file(store, name, sha)
        data = read_kept(store, rel, sha) if rel is not None else None
        if data is not None:  # `rebuild` read every one of them
            patches.append((name, data))
    command = f"apply --link {link.id}" + (f" -t {only_tree}" if only_tree else "")
    guard_revival(store, patches, override, command, record=not dry_run)


def _names_now(store: Store, entry: StackEntry) -> list[tuple[str, str]]:
    """The measured patches, each by the name it has now (renamed since: found by its bytes), at the version
    measured: what the tree holds."""
    from stackmgr.evidence.versions import current_name

    index = PatchIndex.load(store)
    return [(current_name(store, name, sha, index) or name, sha) for name, sha in entry.patches]


def _switch_all(store: Store, link: Link, entries: list[StackEntry], snaps: list[Snapshot],
                targets: list[TreeId]) -> None:  # fmt: skip
    done: list[tree_move.Moved] = []
    reason = f"stackmgr apply --link {link.id}"
    try:
        for entry, snap, target in zip(entries, snaps, targets, strict=True):
            if not _there(snap, entry, target):  # already at the measured state: nothing to move
                done.append(tree_move.move_tree(snap, target, index_tree=entry.base, head=entry.base, reason=reason,
                                                op=store.journal))  # fmt: skip
    except BaseException:
        for moved in reversed(done):
            tree_move.move_back(moved, f"{reason}: rolled back")
        raise


def _there(snap: Snapshot, entry: StackEntry, target: str) -> bool:
    return snap.head == entry.base and snap.tree_id() == target


def describe(outcome: Rebuilt) -> str:
    n = len(outcome.patches)
    residue = f" + residue {outcome.residue}" if outcome.residue else ""
    there = "" if outcome.changed else "; already at the measured state, nothing changed"
    return (f"{outcome.tree}: {n} patch{'es' if n != 1 else ''}{residue} on {outcome.base[:12]}; tree "
            f"{outcome.snapshot} (the measured snapshot){there}")

