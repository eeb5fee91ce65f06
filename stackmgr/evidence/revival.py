"""Do-not-revive lanes (docs/FORMATS.md#override-record): `series add`, `apply` and `save --series` of a patch that
a do-not-revive link names, by name or `git patch-id --stable`, are refused unless `--override REASON` says why.
An override is kept in the store (`links/PATCH/override-TIME-ID`, written once), shown by `show` and the report,
and holds for that change from then on: the same patch-id goes ahead with a note naming the reason, who and when.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass

from stackmgr.errors import NotPreserved, StackmgrError
from stackmgr.evidence.reading import Brief, load_briefs
from stackmgr.evidence.records import MAX_RECORD_BYTES, utc_now
from stackmgr.evidence.states import effective
from stackmgr.evidence.toml_out import value as toml_value
from stackmgr.git.repo import patch_id
from stackmgr.store.bounded import load_toml
from stackmgr.store.config import Store
from stackmgr.store.fs import sha256_hex
from stackmgr.store.inside import read_inside
from stackmgr.store.names import inside, patch_name

OVERRIDE = "override-"  # links/PATCH/override-<time>-<id>: TOML like the link records beside it, not one (no .toml)


@dataclass(frozen=True)
class Override:
    patch: str
    sha256: str
    patch_id: str
    lanes: tuple[str, ...]  # the do-not-revive links overridden
    reason: str
    author: str
    at: str  # RFC 3339 UTC
    command: str  # the command it was given to, as typed

    def said(self) -> str:
        return f'"{self.reason}" ({self.author}, {self.at[:16].replace("T", " ")} UTC, `{self.command}`)'


def overrides(store: Store, patch: str | None = None) -> list[Override]:
    """The overrides recorded (of one patch's directory, when named), oldest first; an unreadable file is skipped
    (`lint` reads the store's files)."""
    root = store.links_dir
    names = [patch] if patch is not None else (sorted(os.listdir(root)) if os.path.isdir(root) else [])
    found = []
    for name in names:
        directory = os.path.join(root, name)
        files = sorted(f for f in os.listdir(directory) if f.startswith(OVERRIDE)) if os.path.isdir(directory) else []
        for filename in files:
            try:
                rel = f"links/{name}/{filename}"  # read inside the store, its size and nesting bounded
                doc = load_toml(read_inside(store.root, rel, MAX_RECORD_BYTES), rel)
                found.append(Override(name, str(doc["sha256"]), str(doc.get("patch_id", "")),
                                      tuple(str(x) for x in doc.get("lanes", [])), str(doc["reason"]),
                                      str(doc.get("author", "")), str(doc["at"]), str(doc.get("command", ""))))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError, StackmgrError):
                continue
    return sorted(found, key=lambda o: o.at)


def record_override(store: Store, patch: str, data: bytes, pid: str, lanes: list[str], reason: str,
                    command: str) -> str:  # fmt: skip
    """Write `links/PATCH/override-TIME-ID` (through the journal: undone with the command)."""
    from stackmgr.evidence.linking import author_of

    at = utc_now()
    fields = {"schema": 1, "kind": "override", "patch": patch, "sha256": sha256_hex(data), "patch_id": pid,
              "lanes": lanes, "reason": reason, "author": author_of(store, ""), "at": at, "command": command}
    text = "".join(f"{k} = {toml_value(v)}\n" for k, v in fields.items() if v != "").encode("utf-8")
    directory = inside(store.links_dir, patch_name(patch))
    store.makedirs(directory)
    path = os.path.join(directory, f"{OVERRIDE}{at.replace('-', '').replace(':', '')}-{sha256_hex(text)[:12]}")
    store.write_file(path, text)
    return path


def refuse_revival(store: Store, patches: Sequence[tuple[str, bytes]], override: str | None, command: str,
                   record: bool = True) -> list[str]:  # fmt: skip
    """Refuse (exit 1) to bring back a do-not-revive lane (same name or same patch-id) unless `override` gives a
    reason (then recorded, when `record`) or one was recorded for the same patch-id; return the lines to print.
    `patches` are (name, bytes); the links are read once, patch-ids computed only when a lane could match."""
    unreadable: list[str] = []  # one damaged record must not stop every apply: said, and left out
    lanes = [link for link in effective(load_briefs(store, unreadable)) if link.do_not_revive]
    said = [f"warning: {why}; its do-not-revive lane, if any, is not checked" for why in unreadable]
    if not lanes:
        return said
    kept: list[Override] | None = None
    for name, data in patches:
        pid = patch_id(store.root, data) if any(link.patch_id for link in lanes) else ""
        hits = [link for link in lanes if link.patch == name or (pid and link.patch_id == pid)]
        if not hits:
            continue
        pid = pid or patch_id(store.root, data)
        if override:
            if record:
                record_override(store, name, data, pid, [link.id for link in hits], override, command)
            said += [f"WARNING: reviving do-not-revive lane {link.patch} ({link.id}): {_lesson(link)}; "
                     f"override: {override}" for link in hits]  # fmt: skip
            continue
        kept = overrides(store) if kept is None else kept
        earlier = [o for o in kept if o.patch_id == pid or (not o.patch_id and o.sha256 == sha256_hex(data))]
        if not earlier:
            link = hits[0]
            raise NotPreserved(f"{name} revives a do-not-revive lane ({link.id} on {link.patch}: {_lesson(link)})",
                               'pass --override "why it is worth another try" to go ahead')  # fmt: skip
        said += [f"note: {name} revives do-not-revive lane {link.patch} ({link.id}); going ahead on the override "
                 f"recorded for it: {earlier[-1].said()}" for link in hits]  # fmt: skip
    return said


def _lesson(link: Brief) -> str:
    return link.lesson or "no lesson recorded"
