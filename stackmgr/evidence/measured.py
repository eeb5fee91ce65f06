"""The measured state of a result (docs/FORMATS.md#link-record): per tree, exactly what was measured, kept so
that any clone of the store can rebuild it (`stackmgr apply --link`) and prove it by snapshot id.

`measure` snapshots each tree (the working tree's tree id, untracked files included, declared result
directories left out), finds every saved patch whose changes are all in it, whatever series it belongs to, and
the chain that rebuilds it: HEAD, then the patches of its applied series and those others, in order, each that
applies on what the ones before left; what the chain does not give (the residue) is a patch of its own, kept by
content under `artifacts/`. `rebuild` does it again from the record, anywhere."""

from __future__ import annotations

import os
import tempfile

from stackmgr.errors import StackmgrError
from stackmgr.evidence import artifacts
from stackmgr.evidence.records import StackEntry
from stackmgr.evidence.versions import version_file
from stackmgr.git import scratch
from stackmgr.git.repo import Repo, open_repo, output, parse_raw
from stackmgr.safety.preserved import PatchIndex, assess
from stackmgr.safety.snapshot import Snapshot, take_snapshot
from stackmgr.store.applied import applied_result, load_applied
from stackmgr.store.config import Store
from stackmgr.store.series import series_listings


def measure(store: Store, trees: list[str], index: PatchIndex,
            outputs: dict[str, tuple[bytes, ...]] | None = None) -> list[StackEntry]:  # fmt: skip
    """The measured state of each of `trees` (placed on this machine) as it is now; `outputs`: per tree, more
    directories (a run's result directories) left out like the declared ones."""
    entries = []
    for name in trees:
        config = store.tree(name)
        more = (outputs or {}).get(name, ())
        snap = take_snapshot(name, config.path, store.max_untracked_bytes, find_special=False,
                             results=tuple(dict.fromkeys(config.results + more)),
                             held=applied_result(store, name))  # fmt: skip
        entries.append(measure_snapshot(store, snap, index))
    return entries


def snapshot_ids(store: Store, trees: list[str], outputs: dict[str, tuple[bytes, ...]] | None = None) -> list[str]:
    """Each tree's snapshot id now, as `measure` takes it (for a run's after: did anything change?), without
    finding its patches."""
    ids: list[str] = []
    for name in trees:
        config = store.tree(name)
        more = (outputs or {}).get(name, ())
        ids.append(take_snapshot(name, config.path, store.max_untracked_bytes, find_special=False,
                                 results=tuple(dict.fromkeys(config.results + more)),
                                 held=applied_result(store, name)).tree_id())  # fmt: skip
    return ids


def changed_paths(store: Store, tree: str, old: str, new: str) -> list[tuple[str, str]]:
    """What changed in `tree` between two of its snapshots (tree ids), as a run's taint warning names it: (status,
    path) of each path that differs, the status git's letter (A for a new file, M, D, T), the path as text."""
    repo = open_repo(store.tree(tree).path)
    return [(c.status, c.path.decode("utf-8", "backslashreplace"))
            for c in parse_raw(output(repo.start_raw_diff(old, new)))]  # fmt: skip


def measure_snapshot(store: Store, snap: Snapshot, index: PatchIndex) -> StackEntry:
    snapshot = snap.tree_id()
    found = assess(store, snap, full=True, index=index)
    present = {name for name, (hits, total) in found.presence.items() if total and hits == total}
    applied = load_applied(store).get(snap.tree)
    order = [n for n in applied.names] if applied is not None and applied.base == snap.head else []
    order += [n for n in _series_order(store) if n in present and n not in order]
    order += sorted(present - set(order))
    held = dict(applied.patches) if applied is not None and applied.base == snap.head else {}
    candidates, files = [], []
    for n in order:  # a patch at the version the tree holds (`apply --link` of an older one), else its file now
        sha, file = _held_version(store, index, n, held.get(n))
        if sha is not None:
            candidates.append((n, sha))
            files.append(file)
    built, applied_flags = scratch.tree_from_what_applies(snap.repo, snap.head, files)
    chain = [c for c, ok in zip(candidates, applied_flags, strict=True) if ok]
    residue_patch = ""
    if built != snapshot:
        residue_patch = artifacts.keep(store, snap.repo.diff_trees(built, snapshot))
    return StackEntry(snap.tree, snap.head, chain, applied.series if applied is not None else "",
                      bool(residue_patch), snapshot, [(n, sha) for n, sha in candidates if n in present],
                      residue_patch)  # fmt: skip


def _series_order(store: Store) -> list[str]:
    """Every listed patch, series by series (which series list which patch: store/series.py's one reading)."""
    return list(dict.fromkeys(n for listed in series_listings(store).values() for n in listed))


def _held_version(store: Store, index: PatchIndex, name: str, held: str | None) -> tuple[str | None, str]:
    """(sha256, file) of the version of patch `name` to try in the chain: the one the applied state says the
    tree holds when a file of it is kept (an older version `apply --link` rebuilt), else the patch file now."""
    now = _sha(index, name)
    if held is not None and held != now:
        kept = version_file(store, name, held, index)
        if kept is not None:
            return held, os.path.join(store.root, kept)
    return now, os.path.join(store.patches_dir, f"{name}.patch")


def _sha(index: PatchIndex, name: str) -> str | None:
    rec = index.record(f"{name}.patch")
    return None if rec is None or rec["tree"] is None else str(rec["sha256"])


def rebuild(store: Store, entry: StackEntry, repo: Repo) -> tuple[str, str]:
    """The tree id the record rebuilds in `repo`, which must be its snapshot id, and the tree its patches alone
    give (below the residue); a StackmgrError (exit 3) saying what is missing or different otherwise. Reads the
    patch versions by sha256 (the file, or the version `save --update` kept) and the residue from `artifacts/`."""
    if not entry.snapshot:
        raise StackmgrError(f"tree {entry.tree}: this result was recorded before measured states were kept (no "
                            "snapshot id)", "rebuild it by hand from its stack: `stackmgr show PATCH`")  # fmt: skip
    if not repo.has_object(entry.base):
        raise StackmgrError(f"tree {entry.tree}: the measured HEAD {entry.base[:12]} is not in this clone of the tree",
                            "fetch it (`git fetch`, or from the engineer who measured it), then retry")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="stackmgr-rebuild-") as scratch_dir:
        files = [_version(store, name, sha, entry.tree) for name, sha in entry.patches]
        chain = files[:]
        if entry.residue_patch:
            name = os.path.basename(entry.residue_patch)
            data = artifacts.read_kept(store, entry.residue_patch, os.path.basename(
                os.path.dirname(entry.residue_patch)) + name)  # fmt: skip
            if data is None:
                raise StackmgrError(f"tree {entry.tree}: the residue {entry.residue_patch} is missing or damaged",
                                    "`git pull` the store (or `git lfs pull`), then retry")  # fmt: skip
            residue = os.path.join(scratch_dir, "residue.patch")
            with open(residue, "wb") as f:
                f.write(data)
            files.append(residue)
        tree, failed = scratch.tree_from_patches(repo, entry.base, files, together=True)
        below = tree
        if tree is not None and len(chain) < len(files):
            below, failed = scratch.tree_from_patches(repo, entry.base, chain, together=True)
    if tree is None or below is None:
        raise StackmgrError(f"tree {entry.tree}: the measured state does not rebuild ({failed})",
                            "the tree's history may have been rewritten: see the stack in `stackmgr show`")  # fmt: skip
    if tree != entry.snapshot:
        raise StackmgrError(f"tree {entry.tree}: the rebuilt tree is {tree[:12]}, not the measured "
                            f"{entry.snapshot[:12]}",
                            "nothing was changed; please report this with the link record")  # fmt: skip
    return tree, below


def _version(store: Store, name: str, sha: str, tree: str) -> str:
    """The file holding version `sha` of the patch measured as `name`, wherever the store keeps those bytes now
    (evidence/versions.py: the patch renamed since, or the version `save --update` kept)."""
    found = version_file(store, name, sha)
    if found is None:
        raise StackmgrError(f"tree {tree}: patch {name} as measured (sha256 {sha[:12]}) is in no patch file and no "
                            "kept version", "`git pull` the store; a patch edited by hand keeps no old version")
    return os.path.join(store.root, found)
