"""Putting an operation back: roll back an interrupted or failed operation (and, for `undo`, a finished one).

Putting a tree back never trusts the record alone. The paths the operation's move touches (the diff between the
checked snapshot and the target) must each hold either their old or their new version now; they go back to the
old one, and every other path stays as it is. A path that holds something else was written after the operation
(by the user, an editor): nothing is touched and the error names it.
"""

from __future__ import annotations

import os
import sys
import time

from stackmgr.errors import NotPreserved, StackmgrError
from stackmgr.git import refs
from stackmgr.git.leftovers import drop_dead_ref_locks, drop_dead_scratch_indexes, drop_killed_git_locks
from stackmgr.git.real_index import drop_dead_locks, drop_own_lock
from stackmgr.git.repo import Repo, open_repo, read_changes
from stackmgr.git.scratch import tree_with_entries
from stackmgr.git.tempindex import start_tree_diff
from stackmgr.journal.record import (
    ANCHOR_PREFIX,
    CURRENT,
    Record,
    TreeMove,
    interrupted_name,
    ops_dir,
    read_record,
    remove_current,
    stat_key,
    store_file,
)  # fmt: skip
from stackmgr.journal.shared_index import shared_indexes_back
from stackmgr.safety import tree_move
from stackmgr.safety.snapshot import Snapshot, take_snapshot
from stackmgr.store.applied import applied_result
from stackmgr.store.config import Store
from stackmgr.store.fs import atomic_write, fsync_dir, locked, read_or_none
from stackmgr.store.names import VERSIONS
from stackmgr.types import TreeId, show_path


class LeftAsIs(StackmgrError):
    """Something written after the operation stands where the rollback would go: it is not overwritten."""


def _registered_here(store: Store, move: TreeMove, after_only: bool) -> None:
    """A record moves only a tree this machine registered, at the path registered for it: the journal is local
    state, but a record that names another directory was not written by this stackmgr (docs/SECURITY.md)."""
    tree = store.trees.get(move.tree)
    if tree is None or os.path.realpath(tree.path) != os.path.realpath(move.path):
        where = "is not registered here" if tree is None else f"is at {tree.path} here"
        raise (StackmgrError if after_only else LeftAsIs)(
            f"the operation record moved tree {move.tree} at {show_path(os.fsencode(move.path))}, which {where}",
            "nothing of that tree was put back")  # fmt: skip


def roll_back(store: Store, record: Record, directory: str) -> list[str]:
    """Put back every tree the operation moved and every store file it replaced, newest first. What was changed
    again since (a file edited after a crash) is left as it is, never overwritten: returned as notes, each
    saying where the old state is kept."""
    notes = []
    for move in reversed(record.trees):
        try:
            notes += tree_back(store, move, directory, record, after_only=False)
            if forced_reset(record):  # the bytes that were on disk, past git's conversions (its recovery snapshot)
                from stackmgr.safety.recovery import give_back_raw_of

                give_back_raw_of(store, move.tree, move.before)
        except LeftAsIs as exc:
            record.left.append(f"{exc.message}: left as it is; its state before `{record.command}` is kept as "
                               f"{ANCHOR_PREFIX}{record.id}/{move.tree}/before")  # fmt: skip
            notes.append(record.left[-1])
    for change in reversed(record.files):
        current = stat_key(store_file(store, change.path))
        backup = os.path.join(directory, "files", change.path)
        untouched = current == "-" if not change.existed else _same_file(store_file(store, change.path), backup)
        if change.after not in ("?", current) and not untouched:
            notes.append(f"{change.path} changed after `{record.command}`: left as it is; the version before is "
                         f"{backup if change.existed else 'no file'}")  # fmt: skip
            continue
        file_back(store, change.path, change.existed, directory)
    record.state = "rolled-back"
    atomic_write(os.path.join(directory, "op"), record.render())
    remove_current(store)
    return notes


def forced_reset(record: Record) -> bool:
    """A `reset --force` (not the undo of one): its trees' state before is kept, raw bytes too, in a recovery
    snapshot, which putting them back gives back byte for byte."""
    return record.undoes == "-" and record.command.startswith("reset ") and "--force" in record.command.split()


def _same_file(path: str, other: str) -> bool:
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def roll_back_interrupted(store: Store, *, announce: bool) -> Record | None:
    """Finish off the operation a killed command left (the caller holds the store lock): roll it back, or,
    when its record already says done, just clear the marker."""
    name = interrupted_name(store)
    if name is None:
        return None
    directory = os.path.join(ops_dir(store), name)
    try:
        record = read_record(store, name)
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        raise StackmgrError(f"the record of an interrupted operation ({directory}) is unreadable",
                            f"look at it, then remove {os.path.join(ops_dir(store), CURRENT)}") from None  # fmt: skip
    if record.state == "done":
        remove_current(store)
        return record
    try:
        notes = roll_back(store, record, directory)
    except StackmgrError as exc:
        raise StackmgrError(f"`{record.command}` was interrupted and cannot be rolled back: {exc.message}",
                            exc.hint or "then run `stackmgr recover`") from None  # fmt: skip
    for note in notes:
        sys.stderr.write(f"stackmgr: note: {note}\n")
    if announce:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.started))
        but = " except what the note above names" if record.left else ""
        sys.stderr.write(f"stackmgr: `{record.command}` (op {record.id}, {when}) was interrupted; rolled back{but}\n")
    return record


def recover_interrupted(store: Store) -> Record | None:
    """`stackmgr recover` without an id: roll back an interrupted operation, if there is one. Raises (exit 1)
    when a tree could not be put back (something written since stands there): recover never reports success
    while a path it should have put back differs."""
    with locked(store.lock_path, "the store"):
        record = roll_back_interrupted(store, announce=False)
    if record is not None and record.left:
        trees = sorted({m.tree for m in record.trees})
        raise NotPreserved(f"`{record.command}` (op {record.id}) was interrupted and rolled back only in part: "
                           f"tree {', '.join(trees)} left as it is (the note above says where its state before is)",
                           "save what stands there (`stackmgr save NAME`), then put back the rest from that ref "
                           "(`git restore --source=REF -- PATH`)")  # fmt: skip
    return record


def file_back(store: Store, rel: str, existed: bool, directory: str) -> None:
    path = store_file(store, rel)
    store.refuse_links_on_the_way(os.path.dirname(path))  # before anything is read, written or removed
    _drop_temp_files(path)
    if existed:
        data = read_or_none(os.path.join(directory, "files", rel))
        if data is None:
            raise StackmgrError(f"the saved copy of {rel} is missing from {directory}")
        if read_or_none(path) != data:
            store.makedirs(os.path.dirname(path))  # a removed file's folder may have gone with it
            if store.journal is not None or not _link_back(os.path.join(directory, "files", rel), path):
                store.write_file(path, data)
    elif os.path.lexists(path):
        if store.journal is not None:
            store.journal.file_replacing(path)
        os.unlink(path)
        folder = os.path.dirname(path)
        versions = os.path.join(store.patches_dir, VERSIONS)
        if os.path.dirname(folder) in (store.links_dir, versions):  # links/<patch>/, a version folder: made for it
            for made in (folder, versions) if os.path.dirname(folder) == versions else (folder,):
                try:
                    os.rmdir(made)  # (.versions/ too, once empty)
                except OSError:
                    break


def _link_back(saved: str, path: str) -> bool:
    """The saved file itself put back (hard-linked beside `path`, renamed over it): it needs no room, so a rollback
    works on the full disk that made the operation fail. False where links cannot be made (the bytes are written)."""
    folder, base = os.path.split(path)
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.back.tmp")
    try:
        os.link(saved, tmp)
    except OSError:
        return False
    try:
        os.replace(tmp, path)
    except OSError:
        os.unlink(tmp)
        return False
    fsync_dir(folder)
    return True


def _drop_temp_files(path: str) -> None:
    """Temp files a killed writer left beside `path` (`.NAME.<pid>.<n>.tmp`; the store lock is held here)."""
    folder, base = os.path.split(path)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(f".{base}.") and name.endswith(".tmp"):
            os.unlink(os.path.join(folder, name))


def tree_back(store: Store, move: TreeMove, directory: str, record: Record, *, after_only: bool) -> list[str]:
    """The tree as it was before `move`: the moved paths back, the real index bytes, HEAD and its branch. Returns
    notes for the user.

    `after_only` (undo): the tree must be where the operation left it (HEAD, and the moved paths at their new or
    old versions), else it refuses. After a crash (not `after_only`), what stands in the way is left as it is
    (LeftAsIs): the user can still save it, and the old state is anchored; unless git's switch was under way
    (`moving`): a path holding neither version may then be a file git was writing when it was killed, so the tree
    as it stands is kept in a recovery snapshot and every touched path is rebuilt from the state before."""
    _registered_here(store, move, after_only)
    repo = open_repo(move.path)
    drop_own_lock(repo, move.lock)
    drop_dead_locks(repo)
    drop_dead_scratch_indexes(repo.stackmgr_dir)
    drop_dead_ref_locks(repo.git_dir)  # a killed update of this operation's anchors
    drop_killed_git_locks(repo.git_dir, record.started)  # a killed move of HEAD
    drop_killed_git_locks(repo.common_dir, record.started, ("packed-refs.lock",))  # a killed delete of a packed ref
    if move.state == "planned":  # killed before git changed anything: the index.lock was all it left
        return []
    from stackmgr.git.submodules import settle

    settle(repo, read_changes(start_tree_diff(repo, move.before, move.target)), record.started)  # killed mid-move
    blocked = StackmgrError if after_only else LeftAsIs
    reason = f"stackmgr: back to before {record.command}"
    saved = read_or_none(os.path.join(directory, "index", move.tree)) if move.index == "saved" else None
    if saved is not None:
        shared_indexes_back(os.path.join(directory, "shared-index", move.tree), repo.git_dir)
    notes: list[str] = []
    snap = take_snapshot(move.tree, move.path, store.max_untracked_bytes, find_special=False, freeze=True,
                         results=store.trees[move.tree].results if move.tree in store.trees else (),
                         held=applied_result(store, move.tree))
    try:
        if snap.operation:
            raise StackmgrError(f"tree {move.tree} is in the middle of {snap.operation}", "finish or abort it first")
        allowed = (move.head_after,) if after_only else (move.head_before, move.head_after)
        if snap.head not in allowed:
            raise blocked(f"HEAD of tree {move.tree} moved since `{record.command}` (now {snap.head[:12]})",
                          "put it back where it was, or leave this operation alone")  # fmt: skip
        index_moved = saved is not None and read_or_none(os.path.join(repo.git_dir, "index")) != saved
        if snap.staged_differs and (index_moved or saved is None):  # a version only in the index, staged since
            shown = ", ".join(show_path(p) for p in snap.staged_differs[:3])
            raise blocked(f"tree {move.tree}: {shown} has a staged version that differs from the file",
                          "commit or unstage it (git restore --staged), then retry")  # fmt: skip
        now = snap.tree_id()
        branch_now = refs.symbolic_head(repo) or "-"
        if now != move.before or snap.head != move.head_before or branch_now != move.branch or index_moved:
            target, kept = now, None
            if now != move.before:
                target, stray = _old_versions(repo, move, now)
                if stray:
                    shown = ", ".join(stray[:5]) + (" …" if len(stray) > 5 else "")
                    if after_only or move.state != "moving":
                        raise blocked(f"tree {move.tree}: {shown} changed after the operation",
                                      "save the change (`stackmgr save NAME`) or put the file back, then retry")
                    kept = _keep(snap, shown, record.command)
                    notes.append(kept)
            if not after_only and move.state != "moving":  # a kill in this switch back: a switch under way too
                move.state = "moving"
                atomic_write(os.path.join(directory, "op"), record.render(), durable=True)
            try:
                tree_move.move_tree(snap, target, index_tree=repo.tree_of(move.head_before), head=move.head_before,
                                    reason=reason, op=store.journal, index_bytes=saved)  # fmt: skip
            except StackmgrError as exc:
                if kept is None:
                    raise
                raise StackmgrError(f"{exc.message} ({kept})", exc.hint) from None
    finally:
        snap.release()
    on_branch = move.branch == "-" or refs.symbolic_head(repo) == move.branch
    if not on_branch and repo.ref_commit(move.branch) == move.head_before:
        if refs.branch_checked_out_elsewhere(repo, move.branch):
            sys.stderr.write(f"stackmgr: note: tree {move.tree}: {move.branch} is checked out in another worktree; "
                             f"HEAD left detached at {move.head_before[:12]}\n")  # fmt: skip
        else:
            refs.attach_head(repo, move.branch, reason)
    return notes


def _keep(snap: Snapshot, shown: str, command: str) -> str:
    """Paths the interrupted switch touched hold neither their version before nor after it (a file git was
    writing when it was killed, or an edit since): the tree as it stands goes into a recovery snapshot first."""
    from stackmgr.safety.recovery import store_recovery

    rid = store_recovery(snap)
    return (f"tree {snap.tree}: {shown} held neither its version before `{command}` nor after it (git was killed "
            f"while writing it, or it was edited since): the tree as it stood is kept as recovery snapshot {rid} "
            f"(`stackmgr recover {rid}` brings it back); put back as before `{command}`")


def _old_versions(repo: Repo, move: TreeMove, now: str) -> tuple[TreeId, list[str]]:
    """The tree `now` with every path the move touched set back to its version in `move.before`, and the touched
    paths that hold neither their old nor their new version now."""
    changes = read_changes(start_tree_diff(repo, move.before, move.target))
    current = repo.blob_entries(now, [c.path for c in changes]) if changes else {}
    stray = []
    old: dict[bytes, tuple[str, str] | None] = {}
    for c in changes:
        was = None if c.old_mode == "000000" else (c.old_mode, c.old_blob)
        became = None if c.new_mode == "000000" else (c.new_mode, c.new_blob)
        if current.get(c.path) not in (was, became):
            stray.append(c.path.decode("utf-8", "backslashreplace"))
        old[c.path] = was
    return tree_with_entries(repo, now, old), stray


def forget_unmoved(record: Record, anchored: list[tuple[str, str]]) -> None:
    """Drop the before-anchors of moves that never changed their tree (refused, or put back at once)."""
    for top, tree in anchored:
        if os.path.isdir(top):
            refs.update_refs(open_repo(top), [(f"{ANCHOR_PREFIX}{record.id}/{tree}/before", None)],
                             f"stackmgr {record.command}: refused")  # fmt: skip


def anchor_moves(store: Store, record: Record) -> None:
    """Refs to each moved tree's state before and after (tree objects: `git log --all` does not list them), and
    to the HEAD it left, under refs/stackmgr/ops/<id>/<tree>/, so `git gc` keeps what `undo` needs."""
    for move in record.trees:
        if move.state != "moved":
            continue
        base = f"{ANCHOR_PREFIX}{record.id}/{move.tree}/"
        anchors: list[tuple[str, str | None]] = [(base + "after", move.target)]
        if move.head_before != move.head_after:
            anchors.append((base + "head-before", move.head_before))
        refs.update_refs(open_repo(move.path), anchors, f"stackmgr {record.command}")


# -- undo, log, gc ----------------------------------------------------------------------------------------------
