"""`stackmgr save`: a tree's changes into patches/NAME.patch (docs/FORMATS.md#patch-file), verified by a round trip."""

from __future__ import annotations

import os

from stackmgr import output
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git import scratch
from stackmgr.git.repo import author_ident, read_changes
from stackmgr.journal.operation import operation
from stackmgr.safety.preserved import PatchIndex, assess
from stackmgr.safety.snapshot import Snapshot, take_snapshot
from stackmgr.store import patchfile
from stackmgr.store.applied import applied_result
from stackmgr.store.config import Store
from stackmgr.store.fs import discard, read_or_none, sha256_hex, write_temp
from stackmgr.store.names import VERSIONS, inside, patch_name, refuse_link_above, refuse_linked_dirs
from stackmgr.types import Change, show_path

TYPE_CHECKING = False  # mypy treats this as true; at run time `typing` and friends stay unimported (start-up)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from stackmgr.commands.save_series import Stack


class SaveResult:
    """What `save` did (plain class: `save` starts without dataclasses/inspect)."""

    def __init__(
        self, name: str, path: str, tree: str, base: str, totals: tuple[int, int, int], outcome: str,
        series: str | None, warnings: tuple[str, ...] = (), revival: tuple[str, ...] = (),
    ) -> None:  # fmt: skip
        self.name = name
        self.path = path
        self.tree = tree
        self.base = base
        self.files, self.insertions, self.deletions = totals
        self.outcome = outcome  # "saved" | "updated" | "unchanged"
        self.series = series
        self.warnings = warnings
        self.revival = revival  # a do-not-revive lane saved into a series: the warning, or the override's note


class SaveRequest:
    def __init__(
        self, name: str, tree: str | None = None, message: str | None = None, series: str | None = None,
        base: str | None = None, paths: tuple[str, ...] = (), update: bool = False,
        allow_conflict_markers: bool = False, keep_paths: tuple[bytes, ...] = (), command: str = "",
        override: str | None = None, new_series: str | None = None, overwrite: bool = False,
        leave_held: bool = False,
    ) -> None:  # fmt: skip
        self.name = name
        self.tree = tree
        self.message = message
        self.series = series
        self.base = base
        self.paths = paths
        self.update = update
        self.allow_conflict_markers = allow_conflict_markers
        self.keep_paths = keep_paths  # with `paths`: also these (the files a refreshed patch already holds)
        self.command = command  # how the journal names the operation (default `save NAME`)
        self.override = override  # why a do-not-revive lane may go into the series anyway
        self.new_series = new_series  # start this series on what the tree holds (`--new-series`)
        self.overwrite = overwrite  # rewrite the applied top even though the store holds another version of it
        self.leave_held = leave_held  # `refresh`: leave out changes another patch holds, unless among keep_paths


def tree_to_save_from(store: Store, wanted: str | None, index: PatchIndex,
                      series: str | None = None) -> tuple[str, Snapshot]:  # fmt: skip
    """The tree to save from: the default tree (store/tree_paths.py), among the trees with unsaved changes, then
    the changed ones (a tree that differs from the result of `series` applied to it counts as changed even when
    back at HEAD). The snapshot returned is frozen: the caller releases it."""
    from stackmgr.store.tree_paths import tree_to_act_on

    snaps: dict[str, Snapshot] = {}
    chosen: str | None = None

    def snap_of(name: str) -> Snapshot:
        if name not in snaps:
            config = store.tree(name)
            snaps[name] = take_snapshot(name, config.path, store.max_untracked_bytes, find_special=False, freeze=True,
                                        results=config.results, held=applied_result(store, name))  # fmt: skip
        return snaps[name]

    def changed() -> tuple[list[str], ...]:
        drifted = _drifted_from_series(store, series) if series else (lambda _s: False)
        dirty = [n for n, c in sorted(store.trees.items()) if os.path.isdir(c.path)
                 and ((s := snap_of(n)).changes or drifted(s))]  # fmt: skip
        return [n for n in dirty if assess(store, snap_of(n), index=index).unpreserved], dirty

    try:
        chosen = tree_to_act_on(store, wanted, series=series, prefer=changed, nothing=StackmgrError(
            "no tree has changes to save", "edit something first, or name the tree with -t"))  # fmt: skip
        return chosen, snap_of(chosen)
    finally:
        for name, snap in snaps.items():
            if name != chosen:
                snap.release()


def _drifted_from_series(store: Store, series: str) -> Callable[[Snapshot], bool]:
    from stackmgr.store.applied import load_applied

    applied = load_applied(store)

    def drifted(snap: Snapshot) -> bool:
        a = applied.get(snap.tree)
        return a is not None and a.series == series and snap.tree_id() != a.result_tree

    return drifted


def _select(snap: Snapshot, changes: list[Change], wanted: Sequence[str]) -> list[Change]:
    """The changes under the PATHs given (relative to the current directory when it is inside the tree)."""
    if not wanted:
        return list(changes)
    chosen: dict[bytes, Change] = {}
    top = os.path.realpath(snap.repo.top)
    cwd = os.path.realpath(os.getcwd())
    for raw in wanted:
        base = cwd if os.path.commonpath([top, cwd]) == top else top
        rel = os.path.relpath(os.path.normpath(os.path.join(base, raw)), top)
        if rel.startswith(".."):
            raise UsageProblem(f"'{raw}' is outside tree {snap.tree} ({top})", "give paths inside the tree")
        prefix = os.fsencode(rel) if rel != "." else b""
        hits = [c for c in changes if not prefix or c.path == prefix or c.path.startswith(prefix + b"/")]
        if not hits:
            raise UsageProblem(f"no changes under '{raw}' in tree {snap.tree}", "see `stackmgr status`")
        chosen.update((c.path, c) for c in hits)
    return [chosen[p] for p in sorted(chosen)]


def save(store: Store, req: SaveRequest) -> SaveResult:
    from stackmgr.commands.save_series import (
        changes_a_refresh_takes,
        changes_beside_applied,
        refuse_nothing_new,
        stack_of_save,
    )
    from stackmgr.store.tree_paths import share_again

    name = patch_name(req.name)
    filename = name + ".patch"
    refuse_linked_dirs(store.root)  # nothing is written through a link a pull made (`patches -> ~/.bashrc.d`)
    os.makedirs(store.patches_dir, exist_ok=True)
    target = inside(store.patches_dir, filename)
    if not os.path.lexists(target) and os.path.isfile(os.path.join(store.links_dir, name, "dropped")):
        raise StackmgrError(f"the name {name} was a dropped patch's, whose evidence links/{name}/ keeps",
                            f"pick another name, or `stackmgr drop {name} --with-links` to let the evidence go")
    with operation(store, req.command or f"save {name}") as op:
        index = PatchIndex.load(store)
        tree, snap = tree_to_save_from(store, req.tree, index, req.series or req.new_series)
        output.progress_total(3)  # snapshot taken; the diff; the round trip and the write
        output.tick()
        left_out: list[str] = []  # `refresh`: changes another patch holds
        try:
            _refuse_unsafe_state(snap)
            base: str = snap.repo.resolve_commit(req.base) if req.base else snap.head
            stack = stack_of_save(store, index, tree, snap, name, base, req)
            if stack is not None:
                base = stack.base
            diff_from = stack.diff_from if stack else base
            # What there is to save: the changes since the series' result (or --base), not only since HEAD.
            candidates = snap.changes if diff_from == snap.head else snap.index.changes_against(diff_from)
            changes = _select(snap, candidates, req.paths)
            if req.paths and req.keep_paths:
                chosen = {c.path for c in changes}
                changes += [c for c in candidates if c.path in set(req.keep_paths) and c.path not in chosen]
            if req.leave_held and not req.paths:
                changes, left_out = changes_a_refresh_takes(index, tree, name, changes, set(req.keep_paths))
            beside = False  # a patch on HEAD next to an applied series: only what is new
            if stack is None and not req.update and req.base is None and changes:
                changes, beside = changes_beside_applied(store, tree, snap, changes)
            if not changes:
                refuse_nothing_new(tree, stack, name)
            paths = [c.path for c in changes] if req.paths or left_out or beside else []
            data, expected, applied = _build(store, tree, snap, diff_from, base, paths, name, req)
            output.tick()
            _refuse_conflict_markers(data, req.allow_conflict_markers)
            revival = _refuse_revival(store, stack, name, data, req) if stack is not None else []
            outcome, post_images = _write_verified(store, snap, target, data, expected, applied, req.update)
            shared = share_again(store, tree)  # a tree a pulled `tree rm` dropped: named again with its patch
            output.tick()
            op.note_tree(tree, snap.known_tree_id(), snap.head)
            result_tree = _result_tree(snap, stack.diff_from, target, paths) if stack else None
        finally:
            snap.release()
        if post_images is not None:
            index.record_saved(filename, data, post_images, snap.repo)
        if stack is not None and result_tree is not None:
            stack.record(store, name, sha256_hex(data), result_tree)
    warnings = tuple(f"{show_path(p)}: its staged version differs; the patch holds the working-tree version"
                     for p in snap.staged_differs if not paths or p in paths) + tuple(left_out) + \
        ((shared,) if shared else ())  # fmt: skip
    return SaveResult(name, target, tree, base, patchfile.stat_totals(data), outcome,
                      stack.series.name if stack else None, warnings, tuple(revival))  # fmt: skip


def _refuse_revival(store: Store, stack: Stack, name: str, data: bytes, req: SaveRequest) -> list[str]:
    """A patch going into a series brings its change into it: guarded as every such move is (evidence/revival.py;
    one the series already lists brings nothing new into it: it went in through the guard)."""
    from stackmgr.evidence.revival import guard_revival

    brought = [] if name + ".patch" in (e.patch for e in stack.series.entries) else [(name, data)]
    return guard_revival(store, brought, req.override, f"save {name} --series {stack.series.name}")


def _result_tree(snap: Snapshot, diff_from: str, patch: str, paths: list[bytes]) -> str:
    """The tree the series produces with the new patch on top: the snapshot's, unless only some paths were saved."""
    if not paths:
        return snap.tree_id()
    tree, failure = scratch.tree_from_patches(snap.repo, diff_from, [patch])
    if tree is None:
        raise StackmgrError(f"the saved patch does not apply on top of its series ({failure})", "please report this")
    return tree


def _refuse_unsafe_state(snap: Snapshot) -> None:
    if snap.operation:
        raise StackmgrError(f"tree {snap.tree} is in the middle of {snap.operation}",
                            "finish or abort it first (git status says how)")  # fmt: skip
    if snap.unmerged:
        raise StackmgrError(f"tree {snap.tree} has unmerged paths ({show_path(snap.unmerged[0])})",
                            "resolve them and `git add` them first")  # fmt: skip


def _build(
    store: Store,
    tree: str,
    snap: Snapshot,
    diff_from: str,
    base: str,
    paths: list[bytes],
    name: str,
    req: SaveRequest,
) -> tuple[bytes, list[Change], Streamed]:
    """The patch bytes (diff from `diff_from`, a commit or tree, to the snapshot; `base` recorded), the raw
    changes it must reproduce, and what its diff made of their base files, applied while git wrote it."""
    # The raw diff (what verification expects) and the author are asked for while the patch is computed.
    raw_proc, ident_proc = snap.index.start_diff_raw(diff_from, paths), snap.repo.start_author_ident()
    diff_proc = snap.index.start_format_diff(diff_from, paths)
    try:
        expected = read_changes(raw_proc)
    except BaseException:
        diff_proc.communicate()
        raise
    before = [(c.old_mode, c.old_blob, c.path) for c in expected if c.old_mode != "000000"]
    stat_and_diff, result, failure = scratch.apply_while_diffing(snap.repo, before, diff_proc)
    author, email, stamp, tz = author_ident(ident_proc)
    if not stat_and_diff:
        raise StackmgrError(f"tree {tree} has no changes to save on top of {diff_from[:12]}", "edit something first")
    date = patchfile.rfc2822(stamp, tz)
    existing = read_or_none(os.path.join(store.patches_dir, name + ".patch"))
    kept = _existing_header(existing) if existing is not None else None
    original, original_name = None, ""
    if req.message is None and kept is not None and kept.subject:  # `save --update` without -m keeps it
        subject, body = kept.subject, kept.body
        if existing is not None:  # as `quilt refresh` keeps a header
            original, original_name = patchfile.original_header(existing), patchfile.original_name(existing)
    else:
        subject, body = patchfile.check_message(req.message or name)
    if kept is not None:
        date, author, email = _keep_identity(kept, date, author, email)
    data = patchfile.render(tree=tree, base=base, subject=subject, body=body, name=author, email=email,
                            date=date, stat_and_diff=stat_and_diff, original=original,
                            original_name=original_name)  # fmt: skip
    return data, expected, Streamed(data, stat_and_diff, result, failure)


class Streamed:
    """What the diff's own bytes made of the base files (`apply_while_diffing`): the round trip of the written
    patch, when the header in front of them holds nothing `git apply` would read as a patch."""

    def __init__(self, data: bytes, diff: bytes, result: dict[bytes, tuple[str, str]] | None, failure: str) -> None:
        self.result, self.failure = result, failure
        # the patch `data` is its header and then these bytes, and nothing in the header is read as a patch
        self.speaks = data.endswith(diff) and _no_patch_in(data[: len(data) - len(diff)])


def _no_patch_in(header: bytes) -> bool:
    """Nothing `git apply` would read as the start of a patch: no line of a diff's header or a hunk."""
    header = b"\n" + header
    return not any(start in header for start in (b"\ndiff ", b"\n--- ", b"\n+++ ", b"\n@@ ", b"\nGIT binary"))


def _existing_header(existing: bytes) -> patchfile.PatchHeader | None:
    try:
        return patchfile.parse_header(existing, "existing patch")
    except StackmgrError:
        return None


def _keep_identity(header: patchfile.PatchHeader, date: str, author: str, email: str) -> tuple[str, str, str]:
    """Re-saving keeps the first author and date, so an unchanged state gives identical bytes."""
    name, _, mail = header.author.rpartition(" <")
    if not (name and mail.endswith(">") and header.date):
        return date, author, email
    return header.date, name, mail[:-1]


def _refuse_conflict_markers(data: bytes, allowed: bool) -> None:
    """Refuse added lines that start a conflict marker (`<<<<<<< ` or `>>>>>>> `; a lone `=======` is common
    in reStructuredText). bytes.find, not a regex: a release-size patch is tens of megabytes."""
    if allowed:
        return
    for marker in (b"\n+<<<<<<<", b"\n+>>>>>>>"):
        at = data.find(marker)
        while at >= 0:
            after = data[at + len(marker) : at + len(marker) + 1]
            if after in (b" ", b"\n", b""):
                start = data.rfind(b"\ndiff --git ", 0, at)
                name = data[start + 12 : data.find(b"\n", start + 1)].decode("utf-8", "replace")
                raise StackmgrError(f"conflict markers in {name}",
                                    "resolve them, or pass --allow-conflict-markers if they are content")  # fmt: skip
            at = data.find(marker, at + 1)


def _write_verified(
    store: Store, snap: Snapshot, target: str, data: bytes, expected: list[Change], applied: Streamed, update: bool
) -> tuple[str, list[Change] | None]:
    """Publish the patch only once its bytes, applied to the base, reproduce the snapshot for the saved paths.

    Returns the outcome and the verified changes (None when the file was already there, byte for byte).
    """
    existing = read_or_none(target)
    if existing == data:
        return "unchanged", None
    if existing is not None and not update:
        raise StackmgrError(f"patch {os.path.basename(target)} already exists",
                            "pass --update to replace it, or pick another name")  # fmt: skip
    if applied.speaks:  # the diff's bytes were applied as git wrote them: the round trip, done
        _judge_round_trip(applied.result, applied.failure, expected)
    tmp = write_temp(target, data, root=store.root)
    try:
        if not applied.speaks:
            _verify_round_trip(snap, tmp, expected)
        if existing is not None:
            keep_previous(store, os.path.basename(target), existing)
        store.publish(tmp, target)
    finally:
        discard(tmp)
    return ("updated" if existing is not None else "saved"), expected


def _verify_round_trip(snap: Snapshot, patch_path: str, expected: list[Change]) -> None:
    """Apply the written bytes to the base versions of the files they touch (`expected`: base → snapshot);
    each file must come out exactly as in the snapshot (mode and blob), and nothing else may appear."""
    before = [(c.old_mode, c.old_blob, c.path) for c in expected if c.old_mode != "000000"]
    result, failure = scratch.apply_to_entries(snap.repo, before, patch_path)
    _judge_round_trip(result, failure, expected)


def _judge_round_trip(result: dict[bytes, tuple[str, str]] | None, failure: str, expected: list[Change]) -> None:
    """Each file must come out of the patch exactly as in the snapshot (mode and blob), and nothing else appear."""
    if result is None:
        raise StackmgrError(f"the written patch does not apply to its base ({failure})",
                            "nothing was saved; please report this")  # fmt: skip
    if result != {c.path: (c.new_mode, c.new_blob) for c in expected if c.new_mode != "000000"}:
        raise StackmgrError(
            "the written patch does not reproduce the working tree", "nothing was saved; please report this"
        )


def keep_previous(store: Store, filename: str, existing: bytes) -> None:
    """--update keeps the replaced version under patches/.versions/ for interdiff."""
    digest = sha256_hex(existing)[:12]
    directory = os.path.join(store.patches_dir, VERSIONS, filename[: -len(".patch")])
    kept = refuse_link_above(store.root, os.path.join(directory, f"{digest}.patch"))  # never through a link
    made = [d for d in (os.path.dirname(directory), directory) if not os.path.isdir(d)]
    os.makedirs(directory, exist_ok=True)
    try:
        store.write_file(kept, existing)
    except BaseException:
        for folder in reversed(made):  # made for this version (a full disk): they go with it
            try:
                os.rmdir(folder)
            except OSError:
                pass
        raise
