"""Changes on top of the state a series left in a tree that moving the tree would overwrite, although no current
patch keeps them: an applied patch's change put back by hand (the file back at HEAD's content, which the
preserved-work rule has nothing to say about), or content only an older version of a patch holds
(patches/.versions/: history, not something a user would apply to get the file back).

Relative to the applied series both are the user's work, which `diff -z` shows and `save` would keep. A change on
top that a current patch holds (a patch saved on its own, `save NAME`) is preserved: the move may take it away,
`apply NAME` brings it back. `push`/`pop` refuse any change on top in the files they change
(commands/navigate.py); `apply` and `apply --link` ask here.
"""

from __future__ import annotations

from stackmgr.git.repo import read_changes
from stackmgr.safety.snapshot import Snapshot
from stackmgr.store.applied import Applied

TYPE_CHECKING = False  # `collections.abc` stays out of `apply`'s start-up
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def overwritten_on_top(snap: Snapshot, held: Applied | None, target: str,
                       kept_by: Callable[[], Mapping[bytes, list[str]]]) -> list[tuple[bytes, str]]:  # fmt: skip
    """The paths (with why) that differ from the state `held` left in the tree, that a move to `target` changes,
    and that no current patch keeps: equal to HEAD's, or held only by older versions (`kept_by`: path -> the
    patches that keep it, `name@version` for an older one; asked only when needed). [] when the tree holds no
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
    if now == snap.repo.tree_of(snap.head):  # back at the base (a `git reset --hard` behind stackmgr's back): no
        return []  # work of the user's on top, only the series taken away
    changed = {c.path for c in read_changes(snap.index.start_diff_raw(snap.head, touched))}
    owners = kept_by() if changed else {}
    found = []
    for path in touched:
        holders = owners.get(path, [])
        if path not in changed:
            found.append((path, f"put back to HEAD's on top of series {held.series}"))
        elif holders and all("@" in h for h in holders):
            found.append((path, f"changed on top of series {held.series}; only {holders[0]} holds it"))
    return found
