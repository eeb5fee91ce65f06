"""Do-not-revive lanes (docs/FORMATS.md#override-record): every move that brings a patch that a do-not-revive link
names, by name or `git patch-id --stable`, back into a tree or a series (`apply`, `push`, `apply --link`,
`import --series`, `series add`, `save --series`) asks `guard_revival`, and is refused unless `--override REASON`
says why; `lane_of` is the lane every view shows, matched the same way.
An override is kept in the store (`links/PATCH/override-TIME-ID`, written once), shown by `show` and the report,
and holds for that change from then on: the same patch-id goes ahead with a note naming the reason, who and when.
"""

from __future__ import annotations

import os

from stackmgr.errors import NotPreserved, StackmgrError
from stackmgr.store.fs import sha256_hex

TYPE_CHECKING = False  # `apply` asks the guard on every run: dataclasses, typing and the link readers stay out of its
if TYPE_CHECKING:  # start-up until a store has link records (read lazily below)
    from collections.abc import Callable, Sequence

    from stackmgr.evidence.states import Evidence, L
    from stackmgr.store.config import Store

OVERRIDE = "override-"  # links/PATCH/override-<time>-<id>: TOML like the link records beside it, not one (no .toml)


class Override:
    """An override record: a do-not-revive lane brought back anyway, and why."""

    __slots__ = ("at", "author", "command", "lanes", "patch", "patch_id", "reason", "sha256")

    def __init__(self, patch: str, sha256: str, patch_id: str, lanes: tuple[str, ...], reason: str, author: str,
                 at: str, command: str) -> None:  # fmt: skip
        self.patch, self.sha256, self.patch_id = patch, sha256, patch_id
        self.lanes = lanes  # the do-not-revive links overridden
        self.reason, self.author = reason, author
        self.at = at  # RFC 3339 UTC
        self.command = command  # the command it was given to, as typed

    def said(self) -> str:
        return f'"{self.reason}" ({self.author}, {self.at[:16].replace("T", " ")} UTC, `{self.command}`)'


def overrides(store: Store, patch: str | None = None) -> list[Override]:
    """The overrides recorded (of one patch's directory, when named), oldest first; an unreadable file is skipped
    (`lint` reads the store's files)."""
    import tomllib

    from stackmgr.evidence.records import MAX_RECORD_BYTES
    from stackmgr.store.bounded import load_toml
    from stackmgr.store.inside import read_inside

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
    from stackmgr.evidence.records import utc_now
    from stackmgr.evidence.toml_out import value as toml_value
    from stackmgr.store.names import inside, patch_name

    at = utc_now()
    fields = {"schema": 1, "kind": "override", "patch": patch, "sha256": sha256_hex(data), "patch_id": pid,
              "lanes": lanes, "reason": reason, "author": author_of(store, ""), "at": at, "command": command}
    text = "".join(f"{k} = {toml_value(v)}\n" for k, v in fields.items() if v != "").encode("utf-8")
    directory = inside(store.links_dir, patch_name(patch))
    store.makedirs(directory)
    path = os.path.join(directory, f"{OVERRIDE}{at.replace('-', '').replace(':', '')}-{sha256_hex(text)[:12]}")
    store.write_file(path, text)
    return path


class DeadLanes:
    """The store's current do-not-revive links and its override records, read once per command (nothing is read
    when the store has no link records)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.unreadable: list[str] = []  # one damaged record must not stop every apply: said, and left out
        self.links = _dead_lanes(store, self.unreadable) if _has_links(store) else []
        self._kept: list[Override] | None = None

    def matching(self, name: str, pid: Callable[[], str | None]) -> list[DeadLink]:
        """The lanes a patch belongs to: by name, or by `git patch-id --stable` (`pid` is asked only when a lane
        records one)."""
        if not self.links:
            return []
        found = (pid() or "") if any(link.patch_id for link in self.links) else ""
        return [link for link in self.links if link.patch == name or (found and link.patch_id == found)]

    def override_for(self, pid: str, sha256: str) -> Override | None:
        """The latest override recorded for this change (same patch-id; same bytes for a record without one)."""
        self._kept = overrides(self.store) if self._kept is None else self._kept
        earlier = [o for o in self._kept if (pid and o.patch_id == pid) or (not o.patch_id and o.sha256 == sha256)]
        return earlier[-1] if earlier else None


def guard_revival(store: Store, patches: Sequence[tuple[str, bytes]], override: str | None, command: str,
                  record: bool = True) -> list[str]:  # fmt: skip
    """May this move bring these patches, (name, bytes), back into a tree or a series? Every such move asks
    (`apply`, `push`, `apply --link`, `import --series`, `series add`, `save --series`). A patch of a do-not-revive
    lane (same name or same patch-id) is refused (NotPreserved, exit 1, nothing changed) unless `override` gives a
    reason (then recorded, when `record`) or one was recorded for the same change. What it says (a warning, a note)
    is written to stderr here, one line each, and returned."""
    if not patches or not _has_links(store):  # the fast path: nothing brought back, or no link record to heed
        return []
    dead = DeadLanes(store)
    said = [f"warning: {why}; its do-not-revive lane, if any, is not checked" for why in dead.unreadable]
    for name, data in patches if dead.links else ():
        pid = _PatchId(store.root, data)
        hits = dead.matching(name, pid)
        if not hits:
            continue
        if override:
            if record:
                record_override(store, name, data, pid(), [link.id for link in hits], override, command)
            said += [f"WARNING: reviving do-not-revive lane {link.patch} ({link.id}): {_lesson(link)}; "
                     f"override: {override}" for link in hits]  # fmt: skip
            continue
        earlier = dead.override_for(pid(), sha256_hex(data))
        if earlier is None:
            link = hits[0]
            raise NotPreserved(f"{name} revives a do-not-revive lane ({link.id} on {link.patch}: {_lesson(link)})",
                               'pass --override "why it is worth another try" to go ahead')  # fmt: skip
        said += [f"note: {name} revives do-not-revive lane {link.patch} ({link.id}); going ahead on the override "
                 f"recorded for it: {earlier.said()}" for link in hits]  # fmt: skip
    from stackmgr import output

    for line in said:
        output.err(f"stackmgr: {output.show_text(line)}")  # a lesson's own newlines never forge a line
    return said


class Lane:
    """A patch's lane as every view shows it (`show`, `--json`, the report, the lessons page)."""

    __slots__ = ("do_not_revive", "lanes", "lesson", "overridden_by", "status")

    def __init__(self, status: str, lanes: tuple[str, ...], lesson: str, overridden_by: Override | None) -> None:
        self.status = status  # promoted / rejected / experimental / unlinked: its own current links
        self.lanes = lanes  # the current do-not-revive links naming it, or the same change under another name
        self.do_not_revive = bool(lanes)
        self.lesson = lesson  # the latest lesson of those links, else of its own latest rejection
        self.overridden_by = overridden_by  # the override recorded for this change: the guard lets it through


def lane_of(ev: Evidence, patch: str, links: list[L], states: dict[str, str],
            dead: DeadLanes | None = None) -> Lane:  # fmt: skip
    """The lane of `patch` (its own `links`, judged by `states`), matched to the do-not-revive lanes as
    `guard_revival` matches them: by name or patch-id. `dead`: read once when many patches are asked."""
    from stackmgr.evidence.states import effective, patch_status

    dead = DeadLanes(ev.store) if dead is None else dead
    hits = dead.matching(patch, lambda: ev.patch_id(patch + ".patch"))
    lessons = [k.lesson for k in effective(links) if k.verdict == "rejected"] + [k.lesson for k in hits]
    lesson = next((said for said in reversed(lessons) if said), "")
    sha = ev.sha256_of(patch)
    kept = dead.override_for(ev.patch_id(patch + ".patch") or "", sha) if hits and sha is not None else None
    return Lane(patch_status(links, states), tuple(k.id for k in hits), lesson, kept)


class DeadLink:
    """What a lane's check needs of a current do-not-revive link (kept in the dead-lanes cache)."""

    __slots__ = ("id", "lesson", "patch", "patch_id")

    def __init__(self, id: str, patch: str, patch_id: str, lesson: str) -> None:
        self.id, self.patch, self.patch_id, self.lesson = id, patch, patch_id, lesson


_DEAD_CACHE = 1  # the dead-lanes cache's format


def _dead_lanes(store: Store, unreadable: list[str]) -> list[DeadLink]:
    """The current do-not-revive links (amendments applied). Reading every record is most of `show` and of every
    guarded move on a big store, so the answer is kept by the stat data of every record file (size, mtime, ctime,
    inode: an edit in place changes ctime) and reused while none changed; an unreadable record is never cached."""
    from stackmgr.evidence.reading import load_briefs
    from stackmgr.evidence.states import effective
    from stackmgr.store.fs import read_cache, write_cache

    sig: list[object] = []
    for name in sorted(os.listdir(store.links_dir)):
        try:
            with os.scandir(os.path.join(store.links_dir, name)) as entries:
                files = sorted((e.name, *_stat(e)) for e in entries if e.name.endswith(".toml"))
        except OSError:  # not a directory: no records there
            continue
        sig.append((name, files))
    cache = os.path.join(store.state_dir, "cache", "dead-lanes.marshal")
    hit = read_cache(cache)
    if isinstance(hit, list) and len(hit) == 3 and hit[0] == _DEAD_CACHE and hit[1] == sig:
        return [DeadLink(*row) for row in hit[2]]
    briefs = load_briefs(store, unreadable)
    dead = [DeadLink(k.id, k.patch, k.patch_id, k.lesson) for k in effective(briefs) if k.do_not_revive]
    if not unreadable:
        write_cache(cache, [_DEAD_CACHE, sig, [(k.id, k.patch, k.patch_id, k.lesson) for k in dead]])
    return dead


def _stat(entry: os.DirEntry[str]) -> tuple[int, int, int, int]:
    st = entry.stat(follow_symlinks=False)
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _has_links(store: Store) -> bool:
    return os.path.isdir(store.links_dir) and bool(os.listdir(store.links_dir))


class _PatchId:
    """`git patch-id --stable` of one patch's bytes, computed once, when first asked."""

    def __init__(self, root: str, data: bytes) -> None:
        self.root, self.data, self.value = root, data, ""

    def __call__(self) -> str:
        from stackmgr.git.repo import patch_id

        self.value = self.value or patch_id(self.root, self.data)
        return self.value


def _lesson(link: DeadLink) -> str:
    return link.lesson or "no lesson recorded"
