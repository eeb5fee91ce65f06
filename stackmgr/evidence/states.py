"""Link records at read time: creating one from what the user points at, and what each is worth today.

States (docs/FORMATS.md#link-record), computed, never stored: `edited` (the record itself changed after it was
written: records are write-once), `broken` (an artifact is missing or its bytes changed), `orphaned` (the patch
is in no series), `fresh` (the bytes of the patch and of every patch of its measured stack as measured),
`equivalent` (bytes changed, `git patch-id --stable` equal: the same changes re-exported), `stale` (a change
itself changed, the linked patch's or a lower one's: evidence/freshness.py). A patch's status comes from its links.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import TypeVar

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence import metrics
from stackmgr.evidence.artifact_hashes import ArtifactHashes
from stackmgr.evidence.reading import load_links
from stackmgr.evidence.records import Link
from stackmgr.evidence.rows import Brief
from stackmgr.git.repo import patch_id
from stackmgr.safety.preserved import PatchIndex
from stackmgr.store.config import Store
from stackmgr.store.fs import read_cache, sha256_hex, stat_key, write_cache
from stackmgr.store.inside import OutsideStore, read_inside
from stackmgr.store.series import list_series, series_listings

L = TypeVar("L", Link, Brief)
STATES = ("fresh", "equivalent", "stale", "broken", "orphaned", "edited")


# --- artifacts -------------------------------------------------------------------------------------------------


def resolve_artifact(store: Store, raw: str) -> tuple[str, str]:
    """(path to record, absolute path) for an artifact the user names; refuses what cannot be evidence."""
    if not raw or "\0" in raw or "\n" in raw:
        raise UsageProblem("an artifact path is empty or holds a newline", "name a file")
    if ".." in raw.replace("\\", "/").split("/"):
        raise UsageProblem(f"artifact '{raw}' has a '..' component", "give the path without '..' (absolute is fine)")
    full = os.path.abspath(raw)
    try:
        st = os.stat(full)
    except FileNotFoundError:
        raise UsageProblem(f"artifact '{raw}' does not exist", "check the path") from None
    except OSError as exc:
        raise UsageProblem(f"artifact '{raw}' cannot be read: {exc.strerror}", "check its permissions") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageProblem(f"artifact '{raw}' is a directory", "link the files in it, one by one")
    if not stat.S_ISREG(st.st_mode):
        raise UsageProblem(f"artifact '{raw}' is not a regular file", "copy it to a file first")
    try:
        full.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageProblem(f"artifact '{os.fsencode(raw)!r}' has a name that is not UTF-8", "rename the file") from None
    root = os.path.realpath(store.root)
    real = os.path.realpath(full)
    if os.path.commonpath([root, real]) == root:
        return os.path.relpath(real, root), full  # measured from the real paths: a symlinked store is the same store
    return full, full


class PatchIds:
    """`git patch-id --stable` of patch files by their sha256, in .stackmgr/cache/patch-ids.marshal (content-keyed:
    never stale; always safe to delete)."""

    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, "cache", "patch-ids.marshal") if state_dir else ""
        cached = read_cache(self.path) if self.path else None
        self.known: dict[str, str] = cached if isinstance(cached, dict) else {}
        self.dirty = False

    def get(self, sha256: str) -> str | None:
        return self.known.get(sha256)

    def put(self, sha256: str, pid: str) -> str:
        self.known[sha256] = pid
        self.dirty = True
        return pid

    def save(self) -> None:
        if self.dirty and self.path:
            write_cache(self.path, self.known)
            self.dirty = False


# --- states ----------------------------------------------------------------------------------------------------


@dataclass
class Evidence:
    """Everything needed to judge links, gathered once per command."""

    store: Store
    index: PatchIndex
    hashes: ArtifactHashes
    in_series: set[str] = field(default_factory=set)
    _sha: dict[str, str | None] = field(default_factory=dict)
    _ids: dict[str, str] = field(default_factory=dict)
    ids: PatchIds = field(default_factory=lambda: PatchIds(""))  # gather() gives the store's
    versions: dict[tuple[str, str], str] = field(default_factory=dict)  # freshness.version_freshness's answers

    @classmethod
    def gather(cls, store: Store) -> Evidence:
        """The patch index is read, not refreshed: judging a link needs each patch file's sha256 (and patch-id
        for a changed one), not what `check` needs of every patch."""
        index = PatchIndex.load(store)
        return cls(store, index, ArtifactHashes(store), series_members(store), ids=PatchIds(store.state_dir))

    def current(self, patch: str) -> tuple[str | None, str | None]:
        """(sha256, patch-id) of the patch file today; (None, None) when it is gone."""
        sha = self.sha256_of(patch)
        return (sha, self.patch_id(patch + ".patch")) if sha is not None else (None, None)

    def sha256_of(self, patch: str) -> str | None:
        """The patch file's sha256 today (once per command)."""
        if patch not in self._sha:
            self._sha[patch] = self.index.sha256(patch + ".patch")[0]
        return self._sha[patch]

    def patch_id(self, filename: str) -> str | None:
        """`git patch-id --stable` of the patch file today, kept by the file's sha256 (`PatchIds`)."""
        if filename in self._ids:
            return self._ids[filename]
        sha, _ = self.index.sha256(filename)
        if sha is None:
            return None
        found = self.ids.get(sha)
        if found is None:
            try:
                data = read_inside(self.store.root, f"patches/{filename}")
            except (OSError, OutsideStore):
                return None
            found = self.ids.put(sha256_hex(data), patch_id(self.store.root, data))
        self._ids[filename] = found
        return found

    def broken_artifacts(self, link: Link | Brief) -> list[str]:
        return [a.path for a in link.artifacts if self.hashes.sha256(a.path) != a.sha256]

    def state(self, link: Link | Brief) -> str:
        if link.edited:
            return "edited"
        if self.broken_artifacts(link):
            return "broken"
        if link.patch not in self.in_series:
            return "orphaned"
        from stackmgr.evidence.freshness import measured_stack_freshness

        return measured_stack_freshness(self, link)

    def save(self) -> None:
        self.index.save()
        self.hashes.save()
        self.ids.save()


def effective(links: list[L]) -> list[L]:
    """Links not replaced by a later record that `amends` them."""
    amended = {link.amends for link in links if link.amends}
    return [link for link in links if link.id not in amended]


def amended_verdict(amended: Link | None, verdict: str | None, lesson: str, do_not_revive: bool,
                    baseline: str) -> tuple[str, str, bool, str]:  # fmt: skip
    """(verdict, lesson, do_not_revive, baseline) of a new record, which amends `amended` (or None): a lane's
    status changes only when a verdict is given, and an amendment keeps what it does not change. No verdict
    given: the amended record's, with its do-not-revive flag; a verdict other than the amended one's lifts the
    flag unless given again; no lesson or baseline given: the amended record's."""
    if amended is None:
        return verdict or "experimental", lesson, do_not_revive, baseline
    kept_flag = amended.do_not_revive and verdict in (None, amended.verdict)
    return (
        verdict or amended.verdict,
        lesson or amended.lesson,
        do_not_revive or kept_flag,
        baseline or amended.baseline,
    )


def patch_status(links: list[L], states: dict[str, str]) -> str:
    """promoted / rejected / experimental / unlinked: the latest decision among its current links. A promotion
    counts only while its evidence is fresh or equivalent and its run neither failed nor was tainted (a record
    written before promotions of such runs were refused: evidence/link_state.py)."""
    from stackmgr.evidence.link_state import run_failure

    current = effective(links)
    if not current:
        return "unlinked"
    for link in reversed(current):
        if link.verdict == "rejected":
            return "rejected"
        if link.verdict == "promoted" and states.get(link.id) in ("fresh", "equivalent") and not link.tainted \
                and not run_failure(link):  # fmt: skip
            return "promoted"
    return "experimental"


def _lfs_pointer(hashes: ArtifactHashes, recorded: str) -> bool:
    """Whether the artifact is a git LFS pointer (what a clone holds before `git lfs pull`)."""
    try:
        with hashes.open(recorded) as f:
            return f.read(64).startswith(b"version https://git-lfs.github.com/spec/v1")
    except (OSError, OutsideStore):
        return False


def verify_all(store: Store) -> tuple[list[tuple[str, str, str]], int]:
    """Re-hash every artifact and re-derive every metric that records its source.
    Returns ([(link, patch, what is wrong)], number of links checked)."""
    hashes = ArtifactHashes(store)
    hashes.cache = {}  # verify re-reads every artifact: the stat-keyed cache is what it checks, not what it trusts
    problems: list[tuple[str, str, str]] = []
    links = []
    from stackmgr import output
    from stackmgr.evidence.reading import reader
    from stackmgr.evidence.records import WrittenOnce

    parsed = reader(store)
    for directory in sorted(os.listdir(store.links_dir)) if os.path.isdir(store.links_dir) else []:
        try:
            links += load_links(store, directory, parsed)
        except StackmgrError as exc:  # an unreadable record is a finding, not the end of the check
            problems.append(("?", directory, exc.message))
    parsed.save()
    unreadable = {p for _, _, p in problems}
    problems += [("?", rel.split("/")[1], f"{rel} {what}") for rel, what in WrittenOnce(store).changed()
                 if not any(rel in said for said in unreadable)]  # fmt: skip
    output.progress_total(len(links))
    for link in links:
        output.tick()
        problems += [(link.id, link.patch, said) for said in _verify_link(hashes, link)]
    hashes.save()
    return problems, len(links)


def _verify_link(hashes: ArtifactHashes, link: Link) -> list[str]:
    """What is wrong with one link's artifacts and metrics today (verify_all)."""
    said = []
    for a in link.artifacts:
        now = hashes.sha256(a.path)
        if now is None:
            said.append(f"artifact {a.path} {hashes.why(a.path)}")
        elif now != a.sha256 and _lfs_pointer(hashes, a.path):
            said.append(f"artifact {a.path} is a git LFS pointer here, not the file: `git lfs pull` in the store "
                        "fetches it")  # fmt: skip
        elif now != a.sha256:
            said.append(f"artifact {a.path} changed (sha256 {now[:12]}, recorded {a.sha256[:12]})")
    artifacts = {a.path for a in link.artifacts}
    for m in link.metrics:
        source = m.source.get("artifact")
        if not source:
            continue
        if hashes.sha256(source) is None:  # an artifact of the link was said once, above
            if source not in artifacts:
                said.append(f"metric {m.name}: its source {source} {hashes.why(source)}")
            continue
        if _lfs_pointer(hashes, source):
            continue
        try:
            with hashes.open(source) as f:
                value = metrics.rederive(m, f)  # a regex's log is read a block at a time
        except (OSError, OutsideStore):
            said.append(f"metric {m.name}: its source {source} cannot be read now")
            continue
        except StackmgrError as exc:
            said.append(f"metric {m.name}: {exc.message.removeprefix(f'--metric {m.name}: ')}")
            continue
        if value is None:
            said.append(f"metric {m.name} no longer found in {source}")
        elif value != m.value:
            said.append(f"metric {m.name} is {value:g} in {source}, recorded {m.value:g}")
    return said


def series_members(store: Store) -> set[str]:
    """Every patch some series lists. Reading a thousand series files is most of `show` on a big store, so the
    answer is kept by the series files' stat data (store.fs.stat_key, taken before they are read) and reused
    while none changed."""
    import time

    listed_at = time.time_ns()
    names = list_series(store)
    stats = stat_key([os.path.join(store.series_dir, name) for name in names], listed_at, follow=True)
    sig = None if stats is None else [names, stats]
    cache = os.path.join(store.state_dir, "cache", "series-members.marshal")
    cached = read_cache(cache) if sig is not None else None
    if isinstance(cached, list) and len(cached) == 2 and cached[0] == sig:
        return set(cached[1])
    members = {name for listed in series_listings(store).values() for name in listed}  # one rule: an unreadable
    if sig is not None:  # series is refused (store/series.py), as a patch left mid-merge is
        write_cache(cache, [sig, sorted(members)])
    return members
