"""`stackmgr rename OLD NEW` and `stackmgr drop PATCH`: a patch's name, and a patch no series wants.

rename moves the patch file, its kept versions and `links/OLD/` to the new name, with a rename record there
(`links/NEW/renamed-from-OLD`) through which the records written under the old name are read; every series line
and the applied state follow. drop removes a patch that no series lists: its bytes stay in `patches/.versions/`,
its links stay as the graveyard's evidence (with a `dropped` record) unless `--with-links`. Both run in one
journaled operation: new files first, the series and state next, the old files last; `undo` reverts them.
"""

from __future__ import annotations

import os
import time

from stackmgr.commands.rebase_state import in_progress
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.journal.operation import operation
from stackmgr.store.applied import Applied, load_applied, record_applied
from stackmgr.store.config import Store
from stackmgr.store.conflicts import refuse_conflicted
from stackmgr.store.fs import read_or_none, sha256_hex
from stackmgr.store.names import (
    VERSIONS,
    no_patch,
    patch_file,
    patch_name,
    refuse_link_above,
    refuse_link_inside,
    refuse_linked_dirs,
)
from stackmgr.store.series import SeriesFile, list_series, series_listing

RENAMED = "renamed-from-"  # links/NEW/renamed-from-OLD: the records in links/NEW/ may name OLD
DROPPED = "dropped"  # links/NAME/dropped: the patch was dropped on purpose; its records are history


def rename_patch(store: Store, old: str, new: str) -> list[str]:
    """Rename; the series whose lines changed."""
    refuse_linked_dirs(store.root)  # nothing read, written or removed through a link a pull made
    old, new = patch_file(store, old), patch_name(new)
    if old == new:
        raise UsageProblem(f"patch {old} already has that name")
    with operation(store, f"rename {old} {new}"):
        source = os.path.join(store.patches_dir, old + ".patch")
        data = read_or_none(source)
        if data is None:
            raise no_patch(store, old, f"no patch {old} in patches/")
        refuse_conflicted(data, f"patches/{old}.patch")  # a file mid-merge is resolved first, never moved
        places = (os.path.join(store.patches_dir, new + ".patch"), os.path.join(store.links_dir, new),
                  os.path.join(store.patches_dir, VERSIONS, new))  # fmt: skip
        taken = [where for where in places if os.path.lexists(where)
                 and not (os.path.isdir(where) and not os.path.islink(where) and not os.listdir(where))]  # fmt: skip
        if taken:
            if os.path.isfile(os.path.join(store.links_dir, new, DROPPED)):
                raise StackmgrError(f"the name {new} was a dropped patch's, whose evidence links/{new}/ keeps",
                                    f"pick another name, or `stackmgr drop {new} --with-links` to let the evidence "
                                    "go")  # fmt: skip
            raise StackmgrError(f"the name {new} is taken ({os.path.relpath(taken[0], store.root)} exists)",
                                "pick another name, or `stackmgr drop` the other patch first")  # fmt: skip
        _refuse_during_rebase(store, old)
        _write(store, os.path.join(store.patches_dir, new + ".patch"), data)
        moved = _copy_dir(store, os.path.join(store.patches_dir, VERSIONS, old),
                          os.path.join(store.patches_dir, VERSIONS, new))  # fmt: skip
        moved += _copy_dir(store, os.path.join(store.links_dir, old), os.path.join(store.links_dir, new))
        if os.path.isdir(os.path.join(store.links_dir, old)):
            _write(store, os.path.join(store.links_dir, new, RENAMED + old), _record("rename", old, new, data))
        changed = []
        for name in list_series(store):
            series = SeriesFile.load(store, name)
            if series.rename(old + ".patch", new + ".patch"):
                series.write()
                changed.append(name)
        for tree, applied in load_applied(store).items():
            if old in applied.names or old in applied.pending:
                patches = [(new if n == old else n, digest) for n, digest in applied.patches]
                pending = [new if n == old else n for n in applied.pending]
                renamed = Applied(applied.series, applied.base, patches, applied.result_tree, applied.at, pending,
                                  applied.guards)  # fmt: skip
                if applied.link:  # a measured state keeps its residue; its patch is named as the link names it
                    renamed.measured_from(applied.link, new if applied.link_patch == old else applied.link_patch,
                                          applied.residue, applied.residue_tree)  # fmt: skip
                record_applied(store, tree, renamed)
        for path in [source, *moved]:
            _remove(store, path)
        return changed


def drop_patch(store: Store, name: str, with_links: bool) -> str:
    """Drop; where its bytes were kept."""
    name = patch_name(name)
    refuse_linked_dirs(store.root)
    with operation(store, f"drop {name}{' --with-links' if with_links else ''}"):
        source = os.path.join(store.patches_dir, name + ".patch")
        links = refuse_link_inside(store.root, os.path.join(store.links_dir, name))  # `links/P -> ~` is no folder
        data = read_or_none(source)
        if data is not None:
            refuse_conflicted(data, f"patches/{name}.patch")
        if data is None and with_links and os.path.isfile(os.path.join(links, DROPPED)):
            for filename in sorted(os.listdir(links)):  # the evidence a drop kept, let go now
                _remove(store, os.path.join(links, filename))
            return f"links/{name}/ (removed)"
        if data is None:
            raise no_patch(store, name, f"no patch {name} in patches/")
        applied = sorted(t for t, a in load_applied(store).items() if name in a.names)
        users = series_listing(store, name)
        if applied or users:  # every blocker at once, and every step that clears it
            said = ([f"applied to tree{'s' if len(applied) > 1 else ''} {', '.join(applied)}"] if applied else []) + (
                [f"in series {', '.join(users)}"] if users else [])  # fmt: skip
            steps = [f"`stackmgr reset {t}` (or `stackmgr pop {name}` and one more `stackmgr pop -t {t}`)"
                     for t in applied] + [f"`stackmgr series remove {u} {name}`" for u in users]  # fmt: skip
            raise StackmgrError(f"patch {name} is {' and '.join(said)}; nothing changed",
                                f"{', then '.join(steps)} first")  # fmt: skip
        kept = os.path.join(store.patches_dir, VERSIONS, name, sha256_hex(data)[:12] + ".patch")
        if read_or_none(kept) != data:
            _write(store, kept, data)
        if os.path.isdir(links):
            if with_links:
                for filename in sorted(os.listdir(links)):
                    _remove(store, os.path.join(links, filename))
            else:
                _write(store, os.path.join(links, DROPPED), _record("drop", name, "", data))
        _remove(store, source)
        return os.path.relpath(kept, store.root)


def _refuse_during_rebase(store: Store, patch: str) -> None:
    for series in in_progress(store):
        if patch + ".patch" in _files(store, series):
            raise StackmgrError(f"a rebase of series {series}, which holds {patch}, is in progress",
                                "finish it (`stackmgr rebase --continue`) or abort it first")  # fmt: skip


def _write(store: Store, path: str, data: bytes) -> None:
    refuse_link_above(store.root, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    store.write_file(path, data)


def _files(store: Store, series: str) -> list[str]:
    return [e.patch for e in SeriesFile.load(store, series).entries]


def _copy_dir(store: Store, src: str, dst: str) -> list[str]:
    """Every file of `src` (one level) written under `dst`; the sources, for removal once all is in place."""
    if not os.path.isdir(refuse_link_inside(store.root, src)):
        return []
    sources = []
    for filename in sorted(os.listdir(src)):
        path = os.path.join(src, filename)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                _write(store, os.path.join(dst, filename), f.read())
            sources.append(path)
    return sources


def _record(kind: str, old: str, new: str, data: bytes) -> bytes:
    """The rename or drop record: TOML, like the link records beside it (but not one: no `.toml` suffix)."""
    from stackmgr.evidence.records import utc_now

    lines = ["schema = 1", f'kind = "{kind}"', f'patch = "{old}"'] + ([f'to = "{new}"'] if new else [])
    lines += [f'sha256 = "{sha256_hex(data)}"', f'at = "{utc_now()}"', f"at_unix = {int(time.time())}"]
    return ("\n".join(lines) + "\n").encode()


def _remove(store: Store, path: str) -> None:
    """Remove a store file, recorded by the journal first (so `undo` and a crash rollback put it back)."""
    if store.journal is not None:
        store.journal.file_replacing(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    if store.journal is not None:
        store.journal.file_replaced(path)
    folder = os.path.dirname(path)
    if folder not in (store.patches_dir, store.links_dir) and not os.listdir(folder):
        os.rmdir(folder)
