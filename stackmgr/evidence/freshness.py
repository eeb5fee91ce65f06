"""Is a result fresh for its measured stack: what it measured (the linked patch, and every patch of the chains that
rebuild its measured trees, at the versions measured) against what the store's patches hold today. Each patch
is found by its bytes whatever it is called now (evidence/versions.py: a rename keeps a result fresh)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackmgr.evidence import artifacts
from stackmgr.evidence.records import Link, StackEntry, measured_versions
from stackmgr.evidence.versions import current_name, version_file
from stackmgr.git.repo import patch_id

if TYPE_CHECKING:
    from stackmgr.evidence.rows import Brief
    from stackmgr.evidence.states import Evidence

FRESHNESS = ("fresh", "equivalent", "stale")  # best first


def measured_stack_freshness(ev: Evidence, link: Link | Brief) -> str:
    """fresh / equivalent / stale: the linked patch and every patch of the result's measured stack
    (records.measured_versions) all at the versions measured is fresh; the same changes re-exported (`git
    patch-id --stable` equal) is equivalent; a change that changed, or a patch gone, is stale. The worst of
    them: a refresh of a lower patch of the measured stack leaves the result stale too."""
    sha = ev.sha256_of(link.patch)
    if sha == link.sha256:
        worst = "fresh"
    elif sha is not None and ev.patch_id(link.patch + ".patch") == link.patch_id:
        worst = "equivalent"
    else:
        return "stale"
    for name, version in measured_versions(link.stack) if isinstance(link, Link) else link.measured:
        worst = max(worst, version_freshness(ev, name, version), key=FRESHNESS.index)
        if worst == "stale":
            break
    return worst


def version_freshness(ev: Evidence, name: str, sha256: str) -> str:
    """fresh / equivalent / stale: the patch measured as `name` at version `sha256`, as the store has it today
    (once per command)."""
    key = (name, sha256)
    if key not in ev.versions:
        now = current_name(ev.store, name, sha256, ev.index)
        if now is None:
            ev.versions[key] = "stale"
        elif ev.sha256_of(now) == sha256:
            ev.versions[key] = "fresh"
        else:
            measured = version_patch_id(ev, name, sha256)
            same = measured is not None and ev.patch_id(now + ".patch") == measured
            ev.versions[key] = "equivalent" if same else "stale"
    return ev.versions[key]


def version_patch_id(ev: Evidence, name: str, sha256: str) -> str | None:
    """`git patch-id --stable` of a measured version, kept by its sha256 (states.PatchIds)."""
    found = ev.ids.get(sha256)
    if found is None:
        rel = version_file(ev.store, name, sha256, ev.index)
        data = artifacts.read_kept(ev.store, rel, sha256) if rel is not None else None
        if data is None:
            return None
        found = ev.ids.put(sha256, patch_id(ev.store.root, data))
    return found


def linked_version(ev: Evidence, stack: list[StackEntry], tree: str, patch: str) -> tuple[str, str]:
    """(sha256, patch-id) a new record of `patch` names: the version its tree's measured chain holds (an older
    one `apply --link` rebuilt: what was measured), else the patch file's now."""
    entry = next((s for s in stack if s.tree == tree), None)
    held = next((h for n, h in entry.patches if n == patch), None) if entry is not None else None
    now = ev.sha256_of(patch)
    if held is not None and held != now:
        return held, version_patch_id(ev, patch, held) or ""
    return now or "", ev.patch_id(patch + ".patch") or ""
