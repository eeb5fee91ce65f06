"""What a running `bisect` keeps so that a kill cannot leave the tree at a prefix of the series: the tree's state
before the bisect (its tree id, saved work included, HEAD, branch, applied series, the real index's bytes) in
`.stackmgr/bisect/TREE.json` (+ `TREE.index`), written before the tree first moves and removed once it is put
back, and a flock on `TREE.lock` held while the bisect runs (it dies with its process). A state file whose lock
nobody holds is a killed bisect: `check` fails and `status` says so, and `recover` (or the next `bisect` of that
tree) puts the tree back as it was before the bisect, with what was left on top carried along.

Light to import (`check` and `status` look here): json and the rest are imported where they are needed."""

from __future__ import annotations

import os

from stackmgr.store.config import Store
from stackmgr.store.fs import atomic_write, locked, read_or_none

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from stackmgr.store.applied import Applied


def _dir(store: Store) -> str:
    return os.path.join(store.state_dir, "bisect")


def _running(store: Store, tree: str, wait_seconds: float | None = None) -> locked:
    return locked(os.path.join(_dir(store), tree + ".lock"), f"the bisect of tree {tree}", wait_seconds)


class Before:
    """The tree as it was before a bisect (what `_put_back` in bisect.py restores)."""

    def __init__(self, series: str, tree: str, tree_id: str, head: str, branch: str | None, applied: Applied | None,
                 index: bytes | None) -> None:  # fmt: skip
        self.series, self.tree, self.tree_id, self.head, self.branch = series, tree, tree_id, head, branch
        self.applied = applied
        self.index = index


def hold(store: Store, before: Before) -> locked:
    """The bisect starts: its lock taken, then its state written (durably: the tree moves next). Returns the lock,
    released by `release`."""
    import json

    lock = _running(store, before.tree, wait_seconds=0)
    lock.__enter__()
    try:
        base = os.path.join(_dir(store), before.tree)
        if before.index is not None:
            atomic_write(base + ".index", before.index)
        state = {"schema": 1, "series": before.series, "tree": before.tree, "tree_id": before.tree_id,
                 "head": before.head, "branch": before.branch, "index": before.index is not None,
                 "applied": before.applied.as_dict() if before.applied is not None else None}  # fmt: skip
        atomic_write(base + ".json", json.dumps(state, indent=1).encode())
    except BaseException:
        lock.__exit__(None, None, None)
        raise
    return lock


def release(store: Store, tree: str, lock: locked) -> None:
    """The tree is back: the state goes, then the lock."""
    base = os.path.join(_dir(store), tree)
    for path in (base + ".json", base + ".index"):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    lock.__exit__(None, None, None)


def _stated(store: Store) -> list[str]:
    try:
        return sorted(n[: -len(".json")] for n in os.listdir(_dir(store)) if n.endswith(".json"))
    except OSError:
        return []


def killed_trees(store: Store) -> list[str]:
    """The trees a killed bisect left at a prefix (a state file that no running bisect holds)."""
    from stackmgr.errors import StackmgrError

    dead = []
    for tree in _stated(store):
        try:
            with _running(store, tree, wait_seconds=0):
                pass
        except StackmgrError:  # a bisect at work: its own
            continue
        dead.append(tree)
    return dead


def refuse_if_killed(store: Store, tree: str, verb: str) -> None:
    """A move of a tree a killed bisect, ab or ablate left partway is refused: `recover` would later put back the
    state before that walk over the move (one listdir when none was killed)."""
    if tree in _stated(store) and tree in killed_trees(store):
        from stackmgr.errors import StackmgrError

        raise StackmgrError(f"{verb} refused, nothing changed: a bisect, ab or ablate of tree {tree} was interrupted "
                            "and left it as one of its runs had it", "`stackmgr recover` puts it back as it was first")


def killed_message(store: Store) -> str | None:
    """For `check` and `status`: the line about a bisect that was killed before it put its tree back."""
    if not _stated(store):  # the common answer: one listdir
        return None
    dead = killed_trees(store)
    if not dead:
        return None
    return (f"a bisect, ab or ablate of tree {', '.join(dead)} was interrupted and left it as one of its runs had it; "
            "`stackmgr recover` puts it back as it was before it")  # fmt: skip


def _load(store: Store, tree: str) -> Before | None:
    import json

    from stackmgr.store.applied import Applied

    base = os.path.join(_dir(store), tree)
    try:
        s = json.loads(read_or_none(base + ".json") or b"")
        applied = Applied.from_dict(s["applied"]) if s["applied"] is not None else None
        index = read_or_none(base + ".index") if s["index"] else None
        return Before(str(s["series"]), str(s["tree"]), str(s["tree_id"]), str(s["head"]),
                      str(s["branch"]) if s["branch"] is not None else None, applied, index)  # fmt: skip
    except (ValueError, KeyError, TypeError):
        return None


def settle_killed_bisects(store: Store, only: str | None = None) -> list[str]:
    """Each tree a killed bisect left (or `only` that one), put back as it was before that bisect; what was done,
    in words (`recover`, and a new `bisect`)."""
    from stackmgr.errors import StackmgrError

    notes = []
    for tree in killed_trees(store):
        if only is not None and tree != only:
            continue
        before = _load(store, tree)
        if before is None or before.tree != tree or tree not in store.trees:
            notes.append(f"the state a killed bisect, ab or ablate of tree {tree} left in .stackmgr/bisect/ is "
                         "damaged; remove it, and check the tree with `stackmgr status`")  # fmt: skip
            continue
        try:
            lock = _running(store, tree, wait_seconds=0)
            lock.__enter__()
        except StackmgrError:
            continue
        from stackmgr.store.applied import load_applied

        now = load_applied(store).get(tree)
        as_before = (now.as_dict() if now else None) == (before.applied.as_dict() if before.applied else None)
        if not as_before and (now is None or now.series != before.series):  # moved since by another command
            release(store, tree, lock)
            notes.append(f"a bisect, ab or ablate of series {before.series} was interrupted, and tree {tree} was moved "
                         "since; it is left as it is (what was saved before it is in patches/)")  # fmt: skip
            continue
        try:
            put_back(store, before)
        except BaseException:
            lock.__exit__(None, None, None)
            raise
        release(store, tree, lock)
        notes.append(f"a bisect, ab or ablate of series {before.series} was interrupted: tree {tree} is back as it was "
                     "before it")
    return notes


def give_back(store: Store, tree: str, before: Before, lock: locked, restore_signals: Callable[[], None]) -> None:
    """The end of a walk along a series (`bisect`, `ab`), however it ended: the tree put back as it was `before`,
    the signal handlers restored, the state and the lock let go. If putting back fails, the state stays on disk
    (and the lock is dropped): `recover` puts the tree back."""
    try:
        put_back(store, before)
    except BaseException:
        lock.__exit__(None, None, None)
        raise
    finally:
        restore_signals()
    release(store, tree, lock)


def put_back(store: Store, before: Before) -> None:
    """The tree as it was before the bisect, with what the tests left on top carried along (the changes against
    the applied prefix), and its index as it was (the bytes, in the same journaled step as the move)."""
    from stackmgr.git import refs
    from stackmgr.git.scratch import tree_with_entries
    from stackmgr.journal.operation import operation
    from stackmgr.safety import tree_move
    from stackmgr.safety.snapshot import take_snapshot
    from stackmgr.store.applied import applied_result, clear_applied, load_applied, record_applied

    tree, head = before.tree, before.head
    config = store.tree(tree)
    with operation(store, f"bisect: back to {tree}'s state before"):
        snap = take_snapshot(tree, config.path, store.max_untracked_bytes, find_special=False, freeze=True,
                             results=config.results, held=applied_result(store, tree))  # fmt: skip
        try:
            now = load_applied(store).get(tree)
            left = snap.index.changes_against(now.result_tree) if now is not None else []
            target = tree_with_entries(snap.repo, before.tree_id, {c.path: None if c.new_mode == "000000" else
                                                                   (c.new_mode, c.new_blob) for c in left})  # fmt: skip
            if target != snap.tree_id() or snap.head != head or tree_move.real_index(snap.repo) != before.index:
                tree_move.move_tree(snap, target, index_tree=head, head=head, reason="stackmgr bisect: back",
                                    op=store.journal, index_bytes=before.index)  # fmt: skip
            if before.branch is not None:
                refs.attach_head(snap.repo, before.branch, "stackmgr bisect: back")
        finally:
            snap.release()
        if before.applied is not None:
            record_applied(store, tree, before.applied)
        else:
            clear_applied(store, tree)
