"""Reading link records as fast as a listing allows: by patch, by id, by run name, or every record in brief.

Parsing TOML is most of what reading thousands of records costs, so what was read is kept in
`.stackmgr/cache/` (always safe to delete), per `links/<patch>/` directory and per record file, reused while the
file's stat data (size, mtime, ctime, inode) is unchanged: a record that anything rewrote (a `git pull` of a
teammate's edit, an editor, a `git checkout` of an older store) is read again, even with its size and mtime put
back (ctime cannot be). Two caches, one file per patch in each:

- `cache/links/PATCH.marshal`: whole records (`load_links`), for the commands about a few patches (`show`,
  `compare`, `apply --link`);
- `cache/briefs/PATCH.marshal`: what a listing needs of each record (`Brief`: no stack, run table or metric
  sources, but the run configuration, read once from the run table or the vllm bench JSON artifact when the
  brief is made), for the commands over every record (`links`, the do-not-revive check, a run name's lookup).

A record is found by id from its file name (`<time>-<id>.toml`) without reading any other, and checked against
the id it holds once read.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence.metrics import Metric, configured_directions, directed
from stackmgr.evidence.records import Link, WrittenOnce, edited, read_record
from stackmgr.evidence.rows import Brief, brief_from_row, brief_row, from_row, to_row
from stackmgr.store.config import Store
from stackmgr.store.fs import read_cache, write_cache

_ID = re.compile(r"lnk-[0-9a-f]{12}")
FULL_VERSION = 8
BRIEF_VERSION = 6
FIRST_READING_IN_WORKERS = 2000  # records to parse, at the least, before worker processes share them


@contextmanager
def _quiet_collector() -> Iterator[None]:
    """Hundreds of thousands of fresh objects: collection passes would scan them again and again, so none runs
    while they are made, and they are kept out of later passes (frozen: records read live as long as the
    command)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


# --- queries ---------------------------------------------------------------------------------------------------


def load_links(store: Store, patch: str | None = None, parsed: Records | None = None) -> list[Link]:
    """Every record (of one patch, when named), oldest first. A caller reading many patches one by one passes
    one `reader()` for all of them (and saves it at the end)."""
    own = parsed is None
    parsed = parsed or Records(store)
    names = [patch] if patch is not None else _patch_dirs(store)
    links = []
    with _quiet_collector():
        for name in names:
            links.extend(parsed.directory(os.path.join(store.links_dir, name), name))
    if patch is None:
        parsed.keep_only(set(names))
    if own:
        parsed.save()
    return sorted(links, key=lambda link: (link.created, link.id))


def load_briefs(store: Store, unreadable: list[str] | None = None) -> list[Brief]:
    """Every record in brief, oldest first. With a list for `unreadable`, a record that cannot be read is left
    out and what is wrong with it added there (else it is a StackmgrError naming it)."""
    parsed = Records(store, unreadable)
    names = _patch_dirs(store)
    parsed.first_reading(names)
    briefs: list[Brief] = []
    with _quiet_collector():
        for name in names:
            briefs.extend(parsed.briefs(os.path.join(store.links_dir, name), name))
    parsed.keep_only(set(names))
    parsed.save()
    return sorted(briefs, key=lambda b: (b.created, b.id))


def reader(store: Store) -> Records:
    return Records(store)


def find_links(store: Store, ids: set[str]) -> dict[str, Link]:
    """The records with these ids (those that exist), each read from the file its name gives; a record whose
    file name does not carry its id (renamed by hand) is found by reading every record."""
    if not ids:
        return {}
    parsed = Records(store)
    found: dict[str, Link] = {}
    for ident, path in _paths_by_id(store).items():
        if ident in ids:
            directory = os.path.dirname(path)
            found.update((k.id, k) for k in parsed.directory(directory, os.path.basename(directory))
                         if k.id in ids)  # fmt: skip
    missing = {i for i in ids - set(found) if _ID.fullmatch(i)}
    if missing:  # only a well-formed id can be in a file whose name says otherwise: the briefs know every file
        for brief in load_briefs(store):
            if brief.id in missing:
                directory = os.path.dirname(brief.file)
                found.update((k.id, k) for k in parsed.directory(directory, os.path.basename(directory))
                             if k.file == brief.file)  # fmt: skip
    parsed.save()
    return found


def find_ref(store: Store, ref: str, patch: str | None = None) -> Link | None:
    """The record a user names: its id (the `lnk-` may be left out) or a run's name (`stackmgr run --name`: the
    latest record of the one run of that name, of `patch` when that run recorded one for it; its records are the
    run's draft per patch and the amendments that completed them). A name two runs were given (in two clones,
    merged) is ambiguous: a UsageProblem (exit 2) naming the link ids to give instead. None: nothing is so named."""
    ident = ref if ref.startswith("lnk-") else f"lnk-{ref}"
    hit = find_links(store, {ident}).get(ident)
    if hit is not None:
        return hit
    named = [b for b in load_briefs(store) if b.run_name == ref]
    named = [b for b in named if b.patch == patch] or named
    if not named:
        return None
    links = sorted(find_links(store, {b.id for b in named}).values(), key=lambda k: (k.created, k.id))
    runs = _runs(links)
    if len(runs) > 1:
        raise UsageProblem(f"run name {ref} is ambiguous: {len(runs)} runs have it ("
                           + ", ".join(f"{k.id} of {k.patch}" for k in runs) + ")",
                           "give the link id instead")  # fmt: skip
    return links[-1] if links else None


def ambiguous_run_names(store: Store) -> dict[str, list[str]]:
    """Each run name more than one run was given (in two clones, merged), with the latest record of each of
    those runs: the names `find_ref` refuses."""
    by_name: dict[str, set[str]] = {}
    for brief in load_briefs(store, []):
        if brief.run_name:
            by_name.setdefault(brief.run_name, set()).add(brief.id)
    found: dict[str, list[str]] = {}
    for name, ids in sorted(by_name.items()):
        if len(ids) > 1:
            runs = _runs(sorted(find_links(store, ids).values(), key=lambda k: (k.created, k.id)))
            if len(runs) > 1:
                found[name] = [k.id for k in runs]
    return found


def _runs(links: list[Link]) -> list[Link]:
    """The latest record of each run among `links` (oldest first): the records of one run (one per patch it was
    linked to, and the amendments completing them) keep its run table's start and host."""
    latest: dict[tuple[str, str], Link] = {}
    for k in links:
        start = k.run.get("start")
        latest[(str(start), str(k.run.get("host"))) if start else (k.id, "")] = k
    return sorted(latest.values(), key=lambda k: (k.created, k.id))


def _patch_dirs(store: Store) -> list[str]:
    root = store.links_dir
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


def _paths_by_id(store: Store) -> dict[str, str]:
    """id -> record file, from the file names alone."""
    paths: dict[str, str] = {}
    for name in _patch_dirs(store):
        directory = os.path.join(store.links_dir, name)
        try:
            filenames = os.listdir(directory)
        except OSError:
            continue
        for filename in filenames:
            if filename.endswith(".toml") and "-lnk-" in filename:
                paths["lnk-" + filename[: -len(".toml")].rsplit("-lnk-", 1)[1]] = os.path.join(directory, filename)
    return paths


# --- the caches ------------------------------------------------------------------------------------------------


class Records:
    """The records read in one command, through the two caches (module docstring)."""

    def __init__(self, store: Store, unreadable: list[str] | None = None) -> None:
        self.store = store
        self.unreadable = unreadable  # where an unreadable record is said, when it is to be left out
        self.first_seen: dict[str, str] | None = None  # WrittenOnce's, read when a record is first parsed
        self.full_root = os.path.join(store.state_dir, "cache", "links")
        self.brief_root = os.path.join(store.state_dir, "cache", "briefs")
        self.dirs: dict[str, Any] = {}  # name -> (directory signature, rows), read from its file when first asked
        self.brief_dirs: dict[str, Any] = {}
        self.changed: set[str] = set()
        self.brief_changed: set[str] = set()
        self.directions = configured_directions(store)  # each record's metrics are read by them

    def directory(self, directory: str, name: str) -> list[Link]:
        """Every record of one patch's directory, whole, in file-name order."""
        sig = _signature(directory)
        if sig is None:
            return []
        if name not in self.dirs:
            self.dirs[name] = _cached(os.path.join(self.full_root, f"{name}.marshal"), FULL_VERSION)
        hit = self.dirs[name]
        rows, links, changed = [], [], hit is None or hit[0] != sig
        for filename, path, stat, row in _files(directory, sig, hit):
            link = from_row(row, path) if row is not None else self.read(path, name, filename)
            changed = changed or row is None
            links.append(link)
            rows.append((filename, stat, row if row is not None else to_row(link)))
        if changed or len(rows) != len(hit[1]):
            self.dirs[name] = (sig, rows)
            self.changed.add(name)
        for link in links:  # as every view judges them (kept as recorded in the cache)
            for m in link.metrics:
                m.direction = directed(m, self.directions)
        return links

    def briefs(self, directory: str, name: str) -> list[Brief]:
        """Every record of one patch's directory, in brief; only the files changed since their briefs were kept
        are parsed (not through the whole records' cache: a pull touching many patches would load all of it)."""
        sig = _signature(directory)
        if sig is None:
            return []
        if name not in self.brief_dirs:
            self.brief_dirs[name] = _cached(os.path.join(self.brief_root, f"{name}.marshal"), BRIEF_VERSION)
        hit = self.brief_dirs[name]
        found = list(_files(directory, sig, hit))
        if hit is not None and hit[0] == sig and len(found) == len(hit[1]) and all(r is not None for *_, r in found):
            return [self._directed(brief_from_row(row, path)) for _, path, _, row in found]
        rows, briefs, complete = [], [], True
        for filename, path, stat, row in found:
            if row is None:
                try:
                    row = brief_row(self.read(path, name, filename), self.store)
                except StackmgrError as exc:
                    if self.unreadable is None:
                        raise
                    self.unreadable.append(exc.message)
                    complete = False  # not kept: the next reader must find it again
                    continue
            rows.append((filename, stat, row))
            briefs.append(self._directed(brief_from_row(row, path)))
        if complete:
            self.brief_dirs[name] = (sig, rows)
            self.brief_changed.add(name)
        return briefs

    def first_reading(self, names: list[str]) -> None:
        """Make the briefs of the directories no brief was kept of (a fresh clone: every one) in worker
        processes, when there are thousands of records to parse (store/workers.py). A directory holding a record
        that cannot be read is left to `briefs`, which says so."""
        todo = []
        for name in names:
            directory = os.path.join(self.store.links_dir, name)
            if name not in self.brief_dirs:
                self.brief_dirs[name] = _cached(os.path.join(self.brief_root, f"{name}.marshal"), BRIEF_VERSION)
            if self.brief_dirs[name] is None and (sig := _signature(directory)) is not None:
                todo.append((name, directory, sig, sorted(f for f in os.listdir(directory) if f.endswith(".toml"))))
        if sum(len(files) for *_, files in todo) < FIRST_READING_IN_WORKERS:
            return
        from stackmgr.store.workers import fork_map

        todo.sort(key=lambda job: -len(job[3]))  # the largest first: the workers end together

        def rows_of(i: int) -> tuple[str, Any, list[Any] | None]:
            name, directory, sig, files = todo[i]
            rows = []
            for filename, path, stat, _ in _files(directory, sig, (sig, [(f, None, None) for f in files])):
                try:
                    rows.append((filename, stat, brief_row(self.read(path, name, filename), self.store)))
                except StackmgrError:
                    return name, sig, None
            return name, sig, rows

        for name, sig, rows in fork_map(rows_of, len(todo)):
            if rows is not None:
                self.brief_dirs[name] = (sig, rows)
                self.brief_changed.add(name)

    def _directed(self, brief: Brief) -> Brief:
        """The brief with each metric's direction as every view judges it (evidence/metrics.direction_of)."""
        if self.directions and any(row[0] in self.directions for row in brief.metric_rows):
            brief.metric_rows = tuple((n, v, u, directed(Metric(n, v, u, d), self.directions))
                                      for n, v, u, d in brief.metric_rows)  # fmt: skip
        return brief

    def read(self, path: str, name: str, filename: str) -> Link:
        """Parse one record, and find whether it changed after it was written (`records.edited`)."""
        link, written, data = read_record(path)
        if self.first_seen is None:
            self.first_seen = WrittenOnce(self.store).shas
        link.edited = edited(link, written, data, self.first_seen.get(f"links/{name}/{filename}"))
        return link

    def keep_only(self, names: set[str]) -> None:
        """Forget the cache files of patches that have no links directory any more."""
        for root in (self.full_root, self.brief_root):
            try:
                files = os.listdir(root)
            except OSError:
                continue
            for filename in files:
                if filename.endswith(".marshal") and filename[: -len(".marshal")] not in names:
                    try:
                        os.unlink(os.path.join(root, filename))
                    except OSError:
                        pass

    def save(self) -> None:
        for root, dirs, changed, version in ((self.full_root, self.dirs, self.changed, FULL_VERSION),
                                             (self.brief_root, self.brief_dirs, self.brief_changed, BRIEF_VERSION)):
            for name in sorted(changed):
                write_cache(os.path.join(root, f"{name}.marshal"), {"v": version, "dir": dirs[name]})
            changed.clear()


def _signature(directory: str) -> tuple[int, int] | None:
    try:
        st = os.stat(directory)
    except OSError:
        return None
    if not os.path.isdir(directory):
        return None
    return (st.st_mtime_ns, st.st_ino)


def _cached(path: str, version: int) -> Any:
    data = read_cache(path)
    return data["dir"] if isinstance(data, dict) and data.get("v") == version else None


def _files(directory: str, sig: tuple[int, int], hit: Any) -> Iterator[tuple[str, str, tuple[int, ...], Any]]:
    """(file name, path, stat data, cached row or None when stale) of each record file; the directory is listed
    only when it changed since the cache was kept (a file added, removed or renamed changes its mtime)."""
    known = {filename: (stat, row) for filename, stat, row in hit[1]} if hit is not None else {}
    names = [row[0] for row in hit[1]] if hit is not None and hit[0] == sig else sorted(
        f for f in os.listdir(directory) if f.endswith(".toml"))  # fmt: skip
    for filename in names:
        path = os.path.join(directory, filename)
        try:
            fst = os.stat(path)
        except OSError:  # gone since the directory was listed: read it again next time
            continue
        stat = (fst.st_size, fst.st_mtime_ns, fst.st_ctime_ns, fst.st_ino)
        cached = known.get(filename)
        yield filename, path, stat, (cached[1] if cached is not None and cached[0] == stat else None)
