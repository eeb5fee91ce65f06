"""What the report shows, gathered from the store: patches, artifacts, series and the links that cite them.

Everything is read once, up front, so the pages are pure rendering and the output directory is only touched after.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import BinaryIO

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence.link_state import link_state
from stackmgr.evidence.reading import load_links
from stackmgr.evidence.records import Artifact, Link
from stackmgr.evidence.revival import DeadLanes, Override, lane_of, overrides
from stackmgr.evidence.states import Evidence, effective
from stackmgr.store.bounded import load_json
from stackmgr.store.config import Store
from stackmgr.store.inside import OutsideStore, read_inside
from stackmgr.store.names import check_name
from stackmgr.store.patchfile import parse_header
from stackmgr.store.series import SeriesFile, list_series

PREVIEW_BYTES = 256 * 1024
JSON_PRETTY_BYTES = 4 * 1024 * 1024


@dataclass
class PatchInfo:
    name: str
    page: str  # site-relative path of its page
    raw: str  # site-relative path of the raw copy ("" when the file is gone)
    data: bytes | None  # the patch file's bytes, None when it is gone
    tree: str = ""
    base: str = ""
    subject: str = ""
    body: str = ""
    author: str = ""
    date: str = ""
    sha256: str = ""
    patch_id: str = ""
    stat: tuple[int, int, int] = (0, 0, 0)
    error: str = ""
    links: list[Link] = field(default_factory=list)
    series: list[tuple[str, int]] = field(default_factory=list)  # (series, 1-based position)
    status: str = "unlinked"
    dnr: bool = False
    overrides: list[Override] = field(default_factory=list)  # do-not-revive lanes brought back anyway


@dataclass
class ArtifactInfo:
    path: str
    page: str
    cites: list[tuple[Link, Artifact]] = field(default_factory=list)
    current: str | None = None  # sha256 now; None when missing
    size: int | None = None
    text: str = ""  # decoded head of the file, for the preview and for "which diff files does it mention"
    preview: str = ""  # why there is no preview, when there is none
    truncated: bool = False  # the file is longer than PREVIEW_BYTES: `text` is its head, `tail` its end
    tail: str = ""  # the whole lines of its last PREVIEW_BYTES (where a crash log says what went wrong)
    lines: int = 0  # how many lines the whole file has (when truncated)
    private: bool = False  # not read (outside the store): no hash or size is published
    outside: bool = False  # the record names a file outside the store, or through a symbolic link: never read


@dataclass
class SeriesInfo:
    name: str
    entries: list[tuple[str, list[str]]] = field(default_factory=list)  # (patch name, guards)
    error: str = ""
    description: str = ""  # its topic (`series describe`), the file's leading `## ` lines


@dataclass
class Site:
    pages: dict[str, bytes]
    patches: int
    links: int

    @property
    def html_pages(self) -> list[str]:
        return sorted(p for p in self.pages if p.endswith(".html"))


class ReportData:
    """The store as the report sees it: links with their states, series, patches and the artifacts they cite."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.ev = Evidence.gather(store)
        self.ev.index.refresh()  # the report lists every patch file
        self.links = load_links(store)
        self.by_id = {link.id: link for link in self.links}
        self.judged = {link.id: link_state(self.ev, link) for link in self.links}  # evidence/link_state.py
        self.states = {lid: judged.freshness for lid, judged in self.judged.items()}
        self.current = {link.id for link in effective(self.links)}
        self.amended_by = {link.amends: link.id for link in self.links if link.amends}
        self._configs: dict[str, dict[str, str]] = {}  # link id -> run configuration, as pages ask
        self._graves: list[Link] | None = None
        self.series = self._series()
        self.patches = self._patches()
        self.artifacts = self._artifacts()
        from stackmgr.evidence.baselines import latest_baseline
        from stackmgr.evidence.targets import targets_of

        self.target_checks = targets_of(store, None, self.ev)  # evidence/targets.py: every bound, series order
        self.targets = {c.series: "; ".join(k.line for k in self.target_checks if k.series == c.series)
                        for c in self.target_checks}  # fmt: skip
        self.baselines = {s.name: b for s in self.series if (b := latest_baseline(store, s.name, self.ev))}
        from stackmgr.evidence.reference import baseline_runs

        self.baseline_runs = {name: baseline_runs(store, name, self.ev) for name in self.baselines}
        self.ev.save()

    def _series(self) -> list[SeriesInfo]:
        out = []
        for name in list_series(self.store):
            info = SeriesInfo(name)
            try:
                found = SeriesFile.load(self.store, name)
                info.entries = [(entry.name, entry.guards) for entry in found.entries]
                info.description = found.description
            except StackmgrError as exc:
                info.error = str(exc)
            out.append(info)
        return out

    def _patches(self) -> dict[str, PatchInfo]:
        files = {f[: -len(".patch")] for f in self.ev.index.records if "/" not in f}  # what is in patches/ now
        names = files | {link.patch for link in self.links}
        patches: dict[str, PatchInfo] = {}
        by_patch: dict[str, list[Link]] = {}
        for link in self.links:
            by_patch.setdefault(link.patch, []).append(link)
        dead = DeadLanes(self.store)
        for name in sorted(names):
            stem = name if _valid_name(name) else "_" + _slug(name)
            readable = name in files or _valid_name(name)  # a record's name is not a path to follow
            data = _read_patch(self.store.root, name) if readable else None
            info = PatchInfo(name, f"patches/{stem}.html", f"raw/{stem}.patch.txt" if data is not None else "", data)
            if data is not None:
                self._fill_header(info, data)
            info.links = by_patch.get(name, [])
            if not info.tree and info.links:
                info.tree = info.links[-1].tree
            lane = lane_of(self.ev, name, info.links, self.states, dead)  # as `show` and the guard see it
            info.status, info.dnr = lane.status, lane.do_not_revive
            patches[name] = info
        for override in overrides(self.store):
            if override.patch in patches:
                patches[override.patch].overrides.append(override)
        for series in self.series:
            for position, (name, _guards) in enumerate(series.entries, start=1):
                if name in patches:
                    patches[name].series.append((series.name, position))
        return patches

    def _fill_header(self, info: PatchInfo, data: bytes) -> None:
        rec = self.ev.index.record(info.name + ".patch") or {}
        info.sha256 = str(rec.get("sha256") or hashlib.sha256(data).hexdigest())
        info.patch_id = str(rec.get("patch_id") or "")
        stat_totals = rec.get("stat")
        if stat_totals:
            info.stat = (int(stat_totals[0]), int(stat_totals[1]), int(stat_totals[2]))
        try:
            header = parse_header(data, f"patches/{info.name}.patch")
        except StackmgrError as exc:
            info.error = exc.message
            return
        info.tree, info.base, info.subject, info.body = header.tree, header.base, header.subject, header.body
        info.author, info.date = header.author, header.date
        if rec.get("error"):
            info.error = str(rec["error"])

    def _artifacts(self) -> dict[str, ArtifactInfo]:
        arts: dict[str, ArtifactInfo] = {}
        for link in self.links:
            for a in link.artifacts:
                info = arts.get(a.path)
                if info is None:
                    info = arts[a.path] = ArtifactInfo(a.path, f"artifacts/{_slug(a.path)}.html")
                info.cites.append((link, a))
        for info in arts.values():
            self._inspect(info)
        return arts

    def _inspect(self, info: ArtifactInfo) -> None:
        """Hash, size and preview of an artifact: a file in the store only, opened without leaving it (a path
        outside it, or through a symbolic link, is named, never read: docs/SECURITY.md), read a block at a time."""
        info.current = self.ev.hashes.sha256(info.path)
        if info.current is None:
            why = self.ev.hashes.why(info.path)
            info.outside = why != "is missing"
            info.private = info.outside
            info.preview = f"no preview: the file {why}" if info.outside else "the file is missing"
            return
        try:
            with self.ev.hashes.open(info.path) as f:
                info.size = os.fstat(f.fileno()).st_size
                head = f.read(PREVIEW_BYTES + 1)
                info.truncated = len(head) > PREVIEW_BYTES
                head, tail = head[:PREVIEW_BYTES], b""
                if info.truncated:
                    tail, info.lines = _tail_and_lines(f, head)
        except (OSError, OutsideStore) as exc:
            info.preview = f"cannot read it: {exc.strerror if isinstance(exc, OSError) else exc.message}"
            return
        text = _text_of(head, info.truncated)
        if text is None:
            info.preview = "binary file: no preview"
            return
        if info.truncated:
            text = text[: text.rfind("\n") + 1] or text  # whole lines, unless it is all one line
            info.tail = tail.decode("utf-8", "replace")
        if info.path.endswith(".json") and not info.truncated and len(head) <= JSON_PRETTY_BYTES:
            try:
                text = json.dumps(load_json(head, info.path), indent=2, ensure_ascii=False)
            except (ValueError, StackmgrError):  # not JSON, or nested too deep: shown as it is
                pass
        info.text = text

    def graves(self) -> list[Link]:
        """The links the graveyard shows: current ones that are rejected or marked do-not-revive (every page's
        navigation counts them: worked out once)."""
        if self._graves is None:
            self._graves = [k for k in self.links
                            if k.id in self.current and (k.verdict == "rejected" or k.do_not_revive)]  # fmt: skip
        return self._graves


def _valid_name(name: str) -> bool:
    try:
        check_name("patch", name)
    except UsageProblem:
        return False
    return True


def _slug(text: str, limit: int = 60) -> str:
    """A file-name-safe, unique stand-in for any string (the tail keeps the file name readable)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", text)[-limit:].strip("._-") or "x"
    return f"{readable}-{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()[:10]}"


def _read_patch(root: str, name: str) -> bytes | None:
    """The bytes of patches/NAME.patch, a regular file reached without leaving the store (store/inside.py); a
    patch file that links to another patch beside it is that patch (an alias); else None."""
    rel = f"patches/{name}.patch"
    try:
        return read_inside(root, rel)
    except OutsideStore:
        target = os.path.realpath(os.path.join(root, rel))
        if os.path.dirname(target) != os.path.realpath(os.path.join(root, "patches")):
            return None  # a link out of patches/: never read
        rel = "patches/" + os.path.basename(target)
    except OSError:
        return None
    try:
        return read_inside(root, rel)
    except (OSError, OutsideStore):
        return None


def _tail_and_lines(f: BinaryIO, head: bytes) -> tuple[bytes, int]:
    """The whole lines of the file's last PREVIEW_BYTES after its head, and how many lines the whole file has
    (newlines counted in chunks: as cheap as the hash already taken)."""
    end = f.seek(0, os.SEEK_END)
    start = max(len(head), end - PREVIEW_BYTES)
    newlines = head.count(b"\n")
    f.seek(len(head))
    while f.tell() < start:
        newlines += f.read(min(1 << 20, start - f.tell())).count(b"\n")
    if start > len(head):
        f.seek(start - 1)
        before = f.read(1)
    else:
        before = head[-1:]
    tail = f.read(max(0, end - f.tell()))  # the file may have grown since: not past the end measured
    newlines += tail.count(b"\n")
    lines = newlines + (0 if (tail or head).endswith(b"\n") else 1)
    if before != b"\n":
        tail = tail[tail.find(b"\n") + 1 :] if b"\n" in tail else b""  # a line cut by the start: not shown
    return tail, lines


def _text_of(head: bytes, truncated: bool) -> str | None:
    """The text of a file's head, or None when it looks binary (a NUL, or not UTF-8)."""
    if b"\0" in head[:8192]:
        return None
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(head) - 3:  # a character cut by the preview limit
            return head[: exc.start].decode("utf-8", "replace")
        return None
