"""Is every change of a tree preserved? (docs/ARCHITECTURE.md#invariants, 2)

A change (path, mode, blob) is preserved when some patch of that tree ends that path with that mode and blob.
Full blob ids make this a lookup: each patch's post-images are indexed once, in a cache under `.stackmgr/`
keyed by the patch file's sha256 (and its stat data, so an unchanged file is not even re-read). What a patch
makes of its files was established in one object store (its base must be there): each record names that store,
and a tree found using another one (re-cloned, shallow, pointed elsewhere) has its patches verified again. The
cache is always safe to delete.
"""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.git import scratch
from stackmgr.git.repo import Repo, open_repo
from stackmgr.safety import shards
from stackmgr.safety.assessment import Assessment, conflicted_patches, file_name, owners, shown_name
from stackmgr.safety.residue import count_residue
from stackmgr.store.fs import read_cache, read_or_none, sha256_hex, write_cache
from stackmgr.store.names import VERSIONS, patch_stat, refuse_linked_dirs, valid_name
from stackmgr.types import show_path

TYPE_CHECKING = False  # mypy treats this as true; `typing` stays out of `check`'s start-up
if TYPE_CHECKING:
    from typing import Any

    from stackmgr.safety.snapshot import Snapshot
    from stackmgr.store import patchfile
    from stackmgr.store.config import Store
    from stackmgr.types import Change

    Record = dict[str, Any]

CACHE_VERSION = 4


class _Unverifiable(Exception):
    """A patch whose effect cannot be established here (tree or base missing): it preserves nothing for now."""


class PatchIndex:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.patches_dir = store.patches_dir  # asked for every patch file: once here, not per stat
        self.path = os.path.join(store.state_dir, "cache", "patch-index.marshal")
        self.records: dict[str, Record] = {}
        self.dirty = False
        self._bases: dict[tuple[str, str], bool] = {}
        self._prefetched: dict[str, tuple[tuple[tuple[str, str, bytes], ...], dict[bytes, tuple[str, str]]]] = {}

    @classmethod
    def load(cls, store: Store) -> PatchIndex:
        """The index; a symbolic link where the store keeps its patches (`patches -> ~/.ssh`) is refused first."""
        refuse_linked_dirs(store.root, ("patches", f"patches/{VERSIONS}"))
        idx = cls(store)
        data = read_cache(idx.path)
        if isinstance(data, dict) and data.get("version") == CACHE_VERSION:
            idx.records = data["patches"]
        else:
            idx.dirty = True
        return idx

    def save(self) -> None:
        if not self.dirty:
            return
        write_cache(self.path, {"version": CACHE_VERSION, "patches": self.records})
        self.dirty = False

    def refresh(self) -> None:
        """Bring every patch file's record up to date (stat first, re-read only what changed). The versions that
        `save --update` and `rebase` replaced (patches/.versions/NAME/HEX.patch) preserve what they hold too: a
        tree still holding a series as it was before a rebase is not unpreserved work."""
        try:
            names = {n for n in os.listdir(self.store.patches_dir) if n.endswith(".patch")}
        except FileNotFoundError:
            names = set()
        kept = os.path.join(self.store.patches_dir, VERSIONS)
        for patch in os.listdir(kept) if os.path.isdir(kept) else ():
            versions = os.path.join(kept, patch)
            if valid_name(patch) and os.path.isdir(versions) and not os.path.islink(versions):
                names.update(f"{VERSIONS}/{patch}/{v}" for v in os.listdir(versions) if v.endswith(".patch"))
        for gone in set(self.records) - names:
            del self.records[gone]
            self.dirty = True
        sigs = {n: self._signature(n) for n in sorted(names)}  # one stat per file, taken before any read
        stale = [n for n, sig in sigs.items() if sig is not None and self._needs_look(n, sig)]
        if len(stale) >= 8:  # many new or changed patches (a first look, a pull): verified in batches first
            from stackmgr.safety.batch_verify import prefetch

            self._prefetched = prefetch(self.store, stale)
        try:
            for name, sig in sigs.items():
                self.record(name, retry=True, sig=sig)
        finally:
            self._prefetched = {}

    def _needs_look(self, filename: str, sig: list[int] | None) -> bool:
        rec = self.records.get(filename)
        return rec is None or rec["sig"] != sig or bool(rec.get("retry"))

    def record(self, filename: str, retry: bool = False, sig: list[int] | bool | None = False) -> Record | None:
        """The up-to-date record of one patch file; `retry` re-examines one that could not be checked before
        (its tree or base may have arrived since). `sig`: its stat data when just taken (else taken here); taken
        before the file is read, a change since shows as a stale record next time."""
        path = os.path.join(self.patches_dir, filename)
        if sig is False:
            sig = self._signature(filename)
        assert sig is not True
        if sig is None:  # gone, or a directory where a patch file should be
            if self.records.pop(filename, None) is not None:
                self.dirty = True
            return None
        rec = self.records.get(filename)
        if rec is not None and rec["sig"] == sig and not (retry and rec.get("retry")):
            return rec
        data = read_or_none(path)  # never through a link out of patches/ (one made since `_signature` looked)
        if data is None:
            return None
        digest = sha256_hex(data)
        if rec is None or rec["sha256"] != digest or rec.get("retry"):
            rec = self._parse(filename, data, digest)
        rec["sig"] = sig
        self.records[filename] = rec
        self.dirty = True
        return rec

    def current(self, filename: str) -> Record | None:
        """The record of a patch file when it is up to date (by stat), without examining anything (no git)."""
        rec = self.records.get(filename)
        return rec if rec is not None and rec["sig"] == self._signature(filename) else None

    def _signature(self, filename: str) -> list[int] | None:
        """The stat data a record is kept by, or None when `filename` is not a patch file of the store."""
        st = patch_stat(self.patches_dir, filename)[0]  # the patch-by-name rule (store/names.py)
        if st is None:
            return None
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]  # ctime: utime() cannot forge it

    def sha256(self, filename: str) -> tuple[str | None, Record | None]:
        """(sha256 of the patch file now, its record when that is up to date) without examining a changed file
        as `record` does (no git): what judging a link needs. (None, None) for no patch file."""
        sig = self._signature(filename)
        if sig is None:
            return None, None
        rec = self.records.get(filename)
        if rec is not None and rec["sig"] == sig:
            return str(rec["sha256"]), rec
        try:
            data = read_or_none(os.path.join(self.store.patches_dir, filename))
        except (OSError, StackmgrError):
            return None, None
        return (sha256_hex(data), None) if data is not None else (None, None)

    def record_saved(self, filename: str, data: bytes, changes: list[Change], repo: Repo, save: bool = True) -> None:
        """Record a just-written, verified patch from what save already knows (no re-read, no git); `repo` is the
        tree it was verified in. `save=False`: the caller saves once after recording several (import)."""
        from stackmgr.store import patchfile

        st = os.stat(os.path.join(self.store.patches_dir, filename))
        header = patchfile.parse_header(data, filename)
        images = patchfile.post_images(patchfile.diff_part(data), filename) if b"\nold mode " in data else []
        modes = patchfile.mode_only(images)  # no blob recorded for those, as a fresh read records them
        objects = object_store(repo)
        self.forget_other_stores(header.tree, objects)
        self.records[filename] = {
            "sha256": sha256_hex(data), "tree": header.tree, "base": header.base,
            "subject": header.subject, "stat": patchfile.stat_totals(data), "error": None,
            "entries": [[c.path, c.new_mode, None if c.path in modes else c.new_blob] for c in changes],
            "objects": objects,
            "sig": [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino],
        }  # fmt: skip
        self.dirty = True
        if save:
            self.save()

    def forget_other_stores(self, tree: str, store: list[object]) -> None:
        """Drop what was verified for `tree` in another object store than `store` (see `object_store`): the patches
        are verified again against the one the tree uses now, where a base may be missing."""
        stale = [n for n, rec in self.records.items()
                 if rec["tree"] == tree and rec["entries"] and rec.get("objects") != store]  # fmt: skip
        for name in stale:
            del self.records[name]
        self.dirty = self.dirty or bool(stale)

    def _parse(self, filename: str, data: bytes, digest: str) -> Record:
        from stackmgr.store import patchfile

        rec: Record = {"sha256": digest, "tree": None, "base": None, "subject": "", "entries": [], "error": None}
        try:
            header = patchfile.parse_header(data, f"patches/{filename}")
            images = patchfile.post_images(patchfile.diff_part(data), filename)
        except StackmgrError as exc:
            rec["error"] = exc.message
            return rec
        except (ValueError, IndexError) as exc:  # hostile bytes must never crash `check`
            rec["error"] = f"{filename}: unreadable ({exc})"
            return rec
        rec.update(tree=header.tree, base=header.base, subject=header.subject, stat=patchfile.stat_totals(data))
        try:
            rec["entries"], rec["error"], rec["objects"] = self._applied_entries(filename, header, images)
        except _Unverifiable as exc:
            rec["error"], rec["retry"] = str(exc), True
        return rec

    def _applied_entries(
        self, filename: str, header: patchfile.PatchHeader, images: list[patchfile.PostImage]
    ) -> tuple[list[list[object]], str | None, list[object]]:
        """What the patch really makes of each file it touches: applied strictly (git apply --cached) to the
        versions its index lines name, in the patch's tree, whose base must exist. The index lines alone are
        a claim: a hand-edited hunk can make them lie. Also returns the object store this was established in."""
        config = self.store.trees.get(header.tree)
        if config is None:
            if header.tree in self.store.unplaced:
                raise _Unverifiable(f"{filename}: tree {header.tree} has no path on this machine (`stackmgr tree "
                                    f"set {header.tree} PATH`)")  # fmt: skip
            raise _Unverifiable(f"{filename}: tree {header.tree} is not registered in this store")
        try:
            repo = open_repo(config.path)
            objects = object_store(repo)  # before the checks: a re-clone meanwhile makes the record stale, not wrong
            known = (repo.top, header.base)
            if known not in self._bases:  # a store's patches share few bases: asked once per refresh
                self._bases[known] = repo.has_commit(header.base)
            if not self._bases[known]:
                raise _Unverifiable(f"{filename}: base {header.base[:12]} is not a commit of tree {header.tree}")
            unknown = [im.path for im in images if im.old_blob is None or not im.old_mode]
            at_base = repo.blob_entries(header.base, unknown) if unknown else {}
            kept = {p: blob for p, (_m, blob) in at_base.items()}
            # a mode change (git writes no index line for one) names no content: it preserves the mode only (as
            # `record_saved` records it); of a file an earlier patch created, neither the base nor the patch knows
            # the content, so it is checked on the empty blob
            from stackmgr.store.patchfile import mode_only

            modes = mode_only(images)
            standins = {im.path for im in images if im.old_blob is None and im.old_mode not in ("", "000000")
                        and im.path not in at_base}  # fmt: skip
            empty = repo.write_blob(b"") if standins else ""
            # a pure rename (hand-made `git diff -M`) states neither mode nor blob: the base has them
            before = [(im.old_mode or at_base.get(im.path, ("", ""))[0],
                       im.old_blob or kept.get(im.path, empty if im.path in standins else ""), im.path)
                      for im in images]  # fmt: skip
            applied = [b for b in before if b[0] != "000000"]
            batched = self._prefetched.pop(filename, None)
            result: dict[bytes, tuple[str, str]] | None
            if batched is not None and list(batched[0]) == applied:  # verified in a batch, from the same pre-images
                result, failure = batched[1], ""
            else:
                result, failure = scratch.apply_to_entries(repo, applied, os.path.join(self.store.patches_dir,
                                                                                       filename))  # fmt: skip
        except StackmgrError as exc:
            raise _Unverifiable(f"{filename}: cannot be checked against tree {header.tree} ({exc.message})") from None
        if result is None:
            raise _Unverifiable(f"{filename}: does not apply to the files it names ({failure})")
        made: dict[bytes, tuple[str, str | None]] = dict(result)
        for path in standins:
            if result.get(path, ("000000", ""))[1] != empty:
                raise _Unverifiable(f"{filename}: changes {show_path(path)}, which its base does not have, without "
                                    "naming the blob it changes (no index line)")  # fmt: skip
        for path in modes:
            made[path] = (result.get(path, ("000000", ""))[0], None)
        zeros = "0" * len(header.base)
        entries: list[list[object]] = [[im.path, *made.get(im.path, ("000000", zeros))] for im in images]
        claimed = [[im.path, im.mode or entry[1], None if im.path in modes else im.blob if im.blob is not None
                    else kept.get(im.path, entry[2])] for im, entry in zip(images, entries, strict=True)]  # fmt: skip
        lie = None if entries == claimed else f"{filename}: its index lines do not match what its hunks produce"
        return entries, lie, objects

    def entries_by_path(self, tree: str) -> dict[bytes, list[tuple[str, str | None, str]]]:
        table: dict[bytes, list[tuple[str, str | None, str]]] = {}
        for filename, rec in self.records.items():
            if rec["tree"] != tree:
                continue
            for path, mode, blob in rec["entries"]:
                table.setdefault(path, []).append((mode, blob, filename))
        return table


def object_store(repo: Repo) -> list[object]:
    """Which object store a tree's verdicts were established in: its common git directory's `objects` by device
    and inode (a re-clone at the same path is another directory), and the `shallow` and `objects/info/alternates`
    files by inode, size and mtime (a shallow re-clone or fetch, or dropped alternates, can take a patch's base
    away). Stat calls only, no git process: this is on `check`'s path."""
    try:
        common = repo.common_dir
    except OSError:
        common = repo.git_dir
    found: list[object] = []
    for name, whole in (("objects", False), ("shallow", True), ("objects/info/alternates", True)):
        try:
            st = os.stat(os.path.join(common, name))
        except OSError:
            found.append(None)
            continue
        found.append([st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns] if whole else [st.st_dev, st.st_ino])
    return found


def _match(idx: PatchIndex, snap: Snapshot) -> Assessment:
    """Each change preserved by the patches that end its path with its mode and content (for a submodule's
    pointer, mode 160000, its commit: every switch moves the submodule's checkout with it, git/submodules.py)."""
    table = idx.entries_by_path(snap.tree)
    result = Assessment()
    for change in snap.changes:
        found = owners(table.get(change.path, ()), change.new_mode, change.new_blob, change.old_blob)
        if found:
            result.preserved[change.path] = sorted({shown_name(e[2]) for e in found})
        else:
            result.unpreserved.append(change)
    return result


def _owners_current(idx: PatchIndex, result: Assessment) -> bool:
    """Every preserving patch named in `result` is still the file that was indexed."""
    files = {file_name(n) for owners in result.preserved.values() for n in owners}
    before = {f: idx.records.get(f, {}).get("sha256") for f in files}
    return all((rec := idx.record(f)) is not None and rec["sha256"] == before[f] for f in files)


def assess(store: Store, snap: Snapshot, *, full: bool = False, index: PatchIndex | None = None) -> Assessment:
    """Match the snapshot's changes against the store's patches.

    Fast path (shell prompts): trust the cache, then re-validate only the patches that preserve something. Any
    doubt (an unmatched change, a changed owner, `full`) re-reads the whole store before answering.
    """
    objects = object_store(snap.repo)
    if not full and index is None:
        quick = shards.quick_assess(store, snap, objects)
        if quick is not None:
            return count_residue(store, snap, quick)
    dirs = shards.dirs_signature(store)  # before the records are brought up to date (see shards.write)
    idx = index or PatchIndex.load(store)
    idx.forget_other_stores(snap.tree, objects)
    refreshed = full or not idx.records
    if refreshed:
        idx.refresh()
    result = _match(idx, snap)
    if not full and (result.unpreserved or not _owners_current(idx, result)):
        idx.refresh()
        refreshed = True
        result = _match(idx, snap)
    if full:
        result.presence = _presence(idx, snap)
    count_residue(store, snap, result)  # what `apply --link` put on top, still exactly as the store keeps it
    if result.unpreserved:
        result.conflicted = conflicted_patches(idx.records)
    if idx.dirty or shards.needs_write(store, dirs):
        idx.save()
        shards.write(store, idx, dirs if refreshed else None)
    return result


def _presence(idx: PatchIndex, snap: Snapshot) -> dict[str, tuple[int, int]]:
    state = {c.path: (c.new_mode, c.new_blob) for c in snap.changes}
    presence = {}
    for filename, rec in idx.records.items():
        if rec["tree"] != snap.tree or not rec["entries"] or filename.startswith(VERSIONS):
            continue
        hits = sum(1 for p, mode, blob in rec["entries"]
                   if (now := state.get(p)) is not None and now[0] == mode and blob in (None, now[1]))  # fmt: skip
        presence[filename[: -len(".patch")]] = (hits, len(rec["entries"]))
    return presence
