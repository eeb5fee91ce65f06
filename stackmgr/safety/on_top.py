"""Changes on top of the state a series left in a tree that moving the tree would overwrite, although neither a
patch nor HEAD tells them: an applied patch's change put back by hand (a hunk reverted, a file restored).

Relative to HEAD such a file is unchanged, so the preserved-work rule (safety/preserved.py) has nothing to say
about it; relative to the applied series it is the user's work, which `diff -z` shows and `save` would keep.
`push`/`pop` refuse it in the files they change (commands/navigate.py); `apply` and `apply --link` ask here.
"""

from __future__ import annotations

from stackmgr.git.repo import read_changes
from stackmgr.safety.snapshot import Snapshot
from stackmgr.store.applied import Applied


def overwritten_on_top(snap: Snapshot, held: Applied | None, target: str) -> list[tuple[bytes, str]]:
    """The paths (with why) that differ from the state `held` left in the tree, that a move to `target` changes,
    and that equal HEAD (what differs from HEAD the preserved-work rule judges). [] when the tree holds no
    series at its base, or is already at `target`."""
    if held is None or not held.result_tree or snap.head != held.base:
        return []
    now = snap.tree_id()
    if now in (held.result_tree, target) or not snap.repo.has_object(held.result_tree):
        return []
    on_top = {c.path for c in read_changes(snap.index.start_diff_raw(held.result_tree))}
    touched = sorted(on_top & {c.path for c in read_changes(snap.index.start_diff_raw(target))})
    if not touched:
        return []
    judged = {c.path for c in read_changes(snap.index.start_diff_raw(snap.head, touched))}
    return [(p, f"puts back a change of series {held.series}") for p in touched if p not in judged]
