"""Link records (docs/FORMATS.md#link-record): which artifacts justify or refute a patch, measured on which stack.

`links/<patch>/<UTC timestamp>-<id>.toml`, one file per record, written once and never rewritten (a correction is
a new record that `amends` the old one). Read with tomllib; written by the small emitter below (TOML has no
null: absent fields are left out).
"""

from __future__ import annotations

import os
import time
import tomllib
from dataclasses import dataclass, field
from typing import Any

from stackmgr.errors import StackmgrError, disk_error
from stackmgr.evidence.metrics import Gate, Metric
from stackmgr.evidence.toml_out import table as _table
from stackmgr.evidence.toml_out import value as _v
from stackmgr.store.bounded import load_toml
from stackmgr.store.config import Store
from stackmgr.store.fs import read_cache, sha256_hex, write_cache
from stackmgr.store.inside import read_inside
from stackmgr.store.names import inside, patch_name

SCHEMA = "stackmgr.link/v1"
MAX_RECORD_BYTES = 4 << 20  # a link record is a few kilobytes: a bigger file is not read


@dataclass
class Artifact:
    path: str  # relative to the store when inside it, else absolute
    sha256: str
    size: int
    anchor: str = ""
    origin: str = ""  # where it was when linked, for a file copied in from outside the store (information only)
    label: str = ""  # what it is, in the lab's words (`link --label`): "detailed chronological notes"


@dataclass
class StackEntry:
    """One measured tree. `base` and `patches` (name, sha256, in order) rebuild it, with the residue patch on top
    (a content-addressed file under artifacts/) when it had changes outside those patches; `snapshot`, the tree
    id of the working tree then, proves the rebuild. `present`: every saved patch whose changes were all in the
    tree, whatever series it belongs to (current versions)."""

    tree: str
    base: str
    patches: list[tuple[str, str]]
    series: str = ""
    residue: bool = False  # the tree had changes outside `patches`
    snapshot: str = ""  # empty in records written before measured states were kept: not rebuildable
    present: list[tuple[str, str]] = field(default_factory=list)
    residue_patch: str = ""  # store-relative path of the residue, artifacts/sha256/…


@dataclass
class Link:
    id: str
    created: str  # RFC 3339 UTC
    author: str
    patch: str
    tree: str
    sha256: str
    patch_id: str
    stack: list[StackEntry] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    gates: list[Gate] = field(default_factory=list)
    verdict: str = "experimental"
    lesson: str = ""
    do_not_revive: bool = False
    amends: str = ""
    baseline: str = ""  # the link this one's metrics are compared with
    run: dict[str, Any] = field(default_factory=dict)  # what `stackmgr run` captured: command, context, config
    file: str = ""  # where it was read from (not stored)
    edited: bool = False  # changed after it was written (not stored: found when read, see `edited`)

    @property
    def tainted(self) -> bool:
        """A run during which a measured tree changed."""
        return bool(self.run.get("tainted", False))

    @property
    def measures_patch(self) -> bool:
        """Whether this result measured its own patch (`measured_patch`)."""
        return measured_patch(self.stack, self.tree, self.patch, self.sha256)

    @property
    def baseline_series(self) -> str:
        """The series whose base this result measured, as its `[run] baseline_of` says and its measured state
        agrees (its tree's stack entry has that series applied, its patch not measured); "" for none. Views say
        `BASELINE OF S` by it; evidence/baselines.is_baseline_of also checks no patch of S is in the chain."""
        said = self.run.get("baseline_of", "")
        entry = next((s for s in self.stack if s.tree == self.tree), None)
        if not isinstance(said, str) or entry is None or entry.series != said or self.measures_patch:
            return ""
        return said


def measured_patch(stack: list[StackEntry], tree: str, patch: str, sha256: str) -> bool:
    """Whether a result measured `patch` (at version `sha256` when it was linked) in `tree`: its changes were in
    that tree's measured state, in the chain that rebuilds it or present whatever the series, named by the name
    it has or by its bytes (a rename keeps them: the record names the patch as it was called then). A result with
    no measured state of `tree` did not measure it: nothing shows it did (a baseline, a tree not placed where it
    was measured). The one rule of `compare`, `show`, `links` and a promotion (`link --verdict promoted`)."""
    entry = next((s for s in stack if s.tree == tree), None)
    if entry is None:
        return False
    return any(n == patch or h == sha256 for n, h in entry.patches + entry.present)


def measured_versions(stack: list[StackEntry]) -> list[tuple[str, str]]:
    """(name as measured, sha256) of every patch of a result's measured stack, every tree: the chains that
    rebuild it (what is merely present, not in a chain, is no part of the measured state)."""
    return list(dict.fromkeys(p for s in stack for p in s.patches))


# --- writing ---------------------------------------------------------------------------------------------------


def render(link: Link) -> bytes:
    top = {"schema": SCHEMA, "id": link.id, "created": link.created, "author": link.author,
           "amends": link.amends, "baseline": link.baseline}  # fmt: skip
    text = "".join(f"{k} = {_v(v)}\n" for k, v in top.items() if v)
    text += _table("patch", {"name": link.patch, "tree": link.tree, "sha256": link.sha256, "patch_id": link.patch_id})
    for s in link.stack:
        patches = [{"name": n, "sha256": h} for n, h in s.patches]
        present = [{"name": n, "sha256": h} for n, h in s.present]
        text += _table("stack", {"tree": s.tree, "base": s.base, "snapshot": s.snapshot, "series": s.series,
                                 "residue": s.residue, "residue_patch": s.residue_patch, "patches": patches,
                                 "present": present}, array=True)  # fmt: skip
    for a in link.artifacts:
        text += _table("artifact", {"path": a.path, "sha256": a.sha256, "size": a.size, "anchor": a.anchor,
                                    "origin": a.origin, "label": a.label}, True)  # fmt: skip
    if link.run:
        text += _table("run", link.run)
    for m in link.metrics:
        text += _table("metric", {"name": m.name, "value": m.value, "unit": m.unit, "direction": m.direction,
                                  "source": m.source}, array=True)  # fmt: skip
    for g in link.gates:
        text += _table("gate", {"name": g.name, "status": g.status, "detail": g.detail}, array=True)
    text += _table("verdict", {"status": link.verdict, "lesson": link.lesson, "do_not_revive": link.do_not_revive})
    return text.encode("utf-8")


def new_id(link: Link) -> str:
    link.id = ""
    return "lnk-" + sha256_hex(render(link))[:12]


def write_link(store: Store, link: Link) -> str:
    """Write a new record; never overwrites one (ids are content hashes, file names carry the time)."""
    directory = inside(store.links_dir, patch_name(link.patch))
    made = not os.path.isdir(directory)
    try:
        store.makedirs(directory)
    except OSError as exc:
        raise disk_error(exc, directory) or StackmgrError(f"cannot create {directory}: {exc.strerror}",
                                                          "check the store's permissions") from None  # fmt: skip
    link.id = new_id(link)
    stamp = link.created.replace("-", "").replace(":", "")
    path = os.path.join(directory, f"{stamp}-{link.id}.toml")
    if os.path.exists(path):
        raise StackmgrError(f"link {link.id} already exists ({os.path.relpath(path, store.root)})")
    data = render(link)
    try:
        store.write_file(path, data)
    except BaseException:
        if made:  # the folder was made for this record: it goes with it
            try:
                os.rmdir(directory)
            except OSError:
                pass
        raise
    WrittenOnce(store).remember({os.path.relpath(path, store.root): sha256_hex(data)})
    link.file = path
    return path


def _id_matches(path: str) -> bool:
    """Whether a record's id is still the hash of its content (`new_id`); an unreadable one is said elsewhere."""
    try:
        link, written, _ = read_record(path)
    except StackmgrError:
        return True
    return id_holds(link, written)


def id_holds(link: Link, written: str) -> bool:
    """Whether `link`, read from a record written under patch name `written`, still hashes to its id."""
    import copy

    again = copy.copy(link)
    again.patch = written
    return new_id(again) == link.id


def edited(link: Link, written: str, data: bytes, first_seen: str | None) -> bool:
    """Whether a record changed after it was written: its bytes differ from when this clone first saw them
    (`WrittenOnce`), or, first seen now, its content no longer gives its id."""
    if first_seen is not None:
        return sha256_hex(data) != first_seen
    return not (_bytes_give_id(link.id, data) or id_holds(link, written))


def _bytes_give_id(ident: str, data: bytes) -> bool:
    """Whether `data` without its id line hashes to `ident`: the bytes `render` gave `new_id`, so the record is as
    written (a fresh clone's first reading checks every record, here without rendering it again)."""
    line = f'\nid = "{ident}"\n'.encode()
    at = data.find(line)
    return at >= 0 and "lnk-" + sha256_hex(data[:at] + data[at + len(line) - 1 :])[:12] == ident


class WrittenOnce:
    """What each link record held when this clone first saw it (written here, or first read by `lint` or
    `verify`): records are write-once, so one whose bytes differ later was edited (by hand, or a teammate's
    edit arriving with `git pull`). Kept in `.stackmgr/record-shas.marshal`, local like all of `.stackmgr/`: git
    never carries it, so an edit cannot bring its own new sha along. A record first seen here is checked against
    its id instead, a hash of its content: a fresh clone sees an edit made before it was cloned too."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.path = os.path.join(store.state_dir, "record-shas.marshal")
        data = read_cache(self.path)
        self.shas: dict[str, str] = data if isinstance(data, dict) else {}

    def remember(self, shas: dict[str, str]) -> None:
        new = {rel: sha for rel, sha in shas.items() if rel not in self.shas}
        if new:
            self.shas.update(new)
            write_cache(self.path, self.shas)

    def changed(self) -> list[tuple[str, str]]:
        """(record, what happened) for each record whose bytes differ from when it was first seen; records
        never seen before are remembered as they are now."""
        found, seen = [], {}
        for name in sorted(os.listdir(self.store.links_dir)) if os.path.isdir(self.store.links_dir) else []:
            directory = os.path.join(self.store.links_dir, name)
            if not os.path.isdir(directory):
                continue
            for filename in sorted(os.listdir(directory)):
                if not filename.endswith(".toml"):
                    continue
                rel = f"links/{name}/{filename}"
                try:
                    sha = sha256_hex(_record_bytes(os.path.join(directory, filename)))
                except (OSError, StackmgrError):  # said by whatever reads it (lint: not a readable record)
                    continue
                first = self.shas.get(rel)
                if first is None:  # first seen here: its id, a hash of its content, says whether it was edited
                    if _id_matches(os.path.join(directory, filename)):
                        seen[rel] = sha
                    else:  # never remembered as it is now: said every time
                        found.append((rel, "changed after it was written (its content no longer gives its id): "
                                           "records are write-once; restore it (`git log -p -- FILE`), or record "
                                           "the correction as a new link that amends it"))  # fmt: skip
                elif first != sha:
                    found.append((rel, f"changed after it was written (sha256 {sha[:12]}, first seen {first[:12]}): "
                                       "records are write-once; restore it (`git log -p -- FILE`), or record "
                                       "the correction as a new link that amends it"))  # fmt: skip
        self.remember(seen)
        return found


def utc_now() -> str:
    """RFC 3339 UTC with microseconds, so records made in one second still sort in the order they were made."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


# --- reading ---------------------------------------------------------------------------------------------------


def read_link(path: str) -> Link:
    return read_record(path)[0]


def read_record(path: str) -> tuple[Link, str, bytes]:
    """The record at `path`, the patch name it was written under (a rename reads it by the new one) and its
    bytes."""
    try:
        data = _record_bytes(path)
        doc = load_toml(data, _shown(path), lambda d: d.get("run"))
        if doc.get("schema") != SCHEMA:
            raise ValueError(f"schema is {doc.get('schema')!r}")
        patch, verdict = doc["patch"], doc.get("verdict", {})
        _trustworthy(path, patch["name"], doc)
        if "verdict" not in doc:  # always written, last: a record without it was cut short
            raise ValueError("it ends before its [verdict] table (cut short?)")
        return Link(
            id=str(doc["id"]), created=str(doc["created"]), author=doc.get("author", ""),
            patch=os.path.basename(os.path.dirname(path)),  # the name it is read by (after a rename, the new one)
            tree=patch["tree"], sha256=patch["sha256"], patch_id=patch.get("patch_id", ""),
            stack=[StackEntry(s["tree"], s["base"], [(p["name"], p["sha256"]) for p in s.get("patches", [])],
                              _series_name(s.get("series", "")), bool(s.get("residue", False)),
                              str(s.get("snapshot", "")),
                              [(p["name"], p["sha256"]) for p in s.get("present", [])],
                              str(s.get("residue_patch", ""))) for s in doc.get("stack", [])],
            artifacts=[Artifact(a["path"], str(a["sha256"]), int(a["size"]), str(a.get("anchor", "")),
                                str(a.get("origin", "")), str(a.get("label", ""))) for a in doc.get("artifact", [])],
            metrics=[Metric(m["name"], float(m["value"]), m.get("unit", ""), m.get("direction", ""),
                            dict(m.get("source", {}))) for m in doc.get("metric", [])],
            gates=[Gate(g["name"], g["status"], g.get("detail", "")) for g in doc.get("gate", [])],
            verdict=verdict.get("status", "experimental"), lesson=verdict.get("lesson", ""),
            do_not_revive=bool(verdict.get("do_not_revive", False)), amends=doc.get("amends", ""),
            baseline=doc.get("baseline", ""), run=dict(doc.get("run", {})), file=path,
        ), str(patch["name"]), data  # fmt: skip
    except StackmgrError as exc:
        if exc.message.startswith("unresolved merge conflict"):
            raise  # said as it is: a record mid-merge is not a damaged one
        raise StackmgrError(
            f"{path}: not a readable link record ({str(exc).removeprefix(_shown(path) + ': ')})",
            "restore it from git (records are never edited)",
        ) from None
    except (
        OSError,
        UnicodeDecodeError,
        tomllib.TOMLDecodeError,
        KeyError,
        TypeError,
        ValueError,
        AttributeError,
    ) as exc:
        raise StackmgrError(
            f"{path}: not a readable link record ({exc})", "restore it from git (records are never edited)"
        ) from None


def parse_record(path: str) -> dict[str, Any]:
    return load_toml(_record_bytes(path), _shown(path))


def _in_store(path: str) -> tuple[str, str]:
    """(store root, store-relative path) of a record's file, `ROOT/links/PATCH/FILE`."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(path)))
    if not root:
        return os.curdir, path.replace(os.sep, "/")
    return root, path[len(root) :].lstrip(os.sep).replace(os.sep, "/")


def _shown(path: str) -> str:
    return _in_store(path)[1]


def _record_bytes(path: str) -> bytes:
    """The bytes of the record at `path`, read inside the store (store/inside.py: no symbolic link on the way,
    a regular file only), at most MAX_RECORD_BYTES."""
    root, rel = _in_store(path)
    data = read_inside(root, rel, MAX_RECORD_BYTES)
    if b"<<<<<<<" in data:
        from stackmgr.store.conflicts import refuse_conflicted

        refuse_conflicted(data, rel)
    return data


def _trustworthy(path: str, patch: str, doc: dict[str, Any]) -> None:
    """A record arrives by `git pull` like any file: its patch name must be a valid name and the directory it sits
    in, no artifact path or metric source may climb with '..', and a residue is a file stackmgr keeps under
    artifacts/sha256/. An absolute path is read as it is, but never opened: an original outside path is
    information only (its link is broken: evidence/states.py)."""
    from stackmgr.store.names import check_name

    check_name("patch", patch)
    folder = os.path.dirname(path)  # a record written before a rename sits in links/NEW/ beside the rename record
    if os.path.basename(folder) != patch and not os.path.isfile(os.path.join(folder, "renamed-from-" + patch)):
        raise ValueError(f"it names patch {patch!r} but sits in links/{os.path.basename(os.path.dirname(path))}/")
    paths = [("artifact path", a.get("path", "")) for a in doc.get("artifact", [])]
    for m in doc.get("metric", []):
        source = m.get("source", {})
        if not isinstance(source, dict) or set(map(type, source.values())) - {str}:
            raise ValueError(f"metric {str(m.get('name'))[:40]!r} has a source that is not a table of strings")
        paths.append(("metric source", source.get("artifact", "")))
    for what, named in paths:
        if not isinstance(named, str):
            raise ValueError(f"{what} {str(named)[:40]!r} is not a string")
        if ".." in named and ".." in named.replace("\\", "/").split("/"):
            raise ValueError(f"{what} {named!r} climbs with '..'")
    for entry in doc.get("stack", []):
        residue = str(entry.get("residue_patch", ""))
        if residue and not _is_kept(residue):
            raise ValueError(f"residue_patch {residue[:80]!r} is not a file under artifacts/sha256/")


def _is_kept(rel: str) -> bool:
    """Whether `rel` is `artifacts/sha256/<2 hex>/<62 hex>`, as stackmgr names a file it keeps by content."""
    parts = rel.split("/")
    hexes = set("0123456789abcdef")
    return (len(parts) == 4 and parts[:2] == ["artifacts", "sha256"] and len(parts[2]) == 2 and len(parts[3]) == 62
            and set(parts[2] + parts[3]) <= hexes)  # fmt: skip


def _series_name(value: object) -> str:
    """A stack's series, as `apply --link` records it in the applied state: a series name or none."""
    from stackmgr.store.names import valid_name

    if value == "" or (isinstance(value, str) and valid_name(value)):
        return str(value)
    raise ValueError("a [[stack]] series that is not a series name")
