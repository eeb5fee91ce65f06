"""`stackmgr lint`: is the store consistent?

Series ↔ `patches/` (missing, orphaned and duplicate entries, bad names), every patch's header (tree, base,
description) and content (conflict markers, CRLF damage, "Binary files differ" stubs, no full-index lines),
every series applying strictly to its base, tree by tree, to exactly what its patches record, and every link
record parsing and naming an existing patch. Nothing is written; findings are reported, never fixed.
"""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.git.repo import open_repo
from stackmgr.safety import claims
from stackmgr.store import patchfile
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none
from stackmgr.store.names import valid_name
from stackmgr.store.series import SeriesFile

CONFLICT_MARKERS = (b"\n+<<<<<<< ", b"\n+>>>>>>> ", b"\n+=======\n")


class Finding:
    def __init__(self, kind: str, where: str, message: str) -> None:
        self.kind = kind  # series | patch | apply | link
        self.where = where  # a store-relative file (with :line for series lines)
        self.message = message

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "file": self.where, "message": self.message}


def lint_store(store: Store) -> list[Finding]:
    patches = _listdir(store.patches_dir, ".patch")
    findings: list[Finding] = []
    from stackmgr.journal.operation import pending_message

    pending = pending_message(store)
    if pending:  # what the store holds now is half of something: every finding below may be about that
        findings.append(Finding("store", ".stackmgr/ops/", pending))
    findings += _tracked_state(store)
    from stackmgr.store.conflicts import missing_merge_driver

    no_driver = missing_merge_driver(store.root)
    if no_driver is not None:
        findings.append(Finding("store", ".gitattributes", no_driver))
    from stackmgr.store.temps import stale

    for path in stale(store):
        findings.append(Finding("store", os.path.relpath(path, store.root),
                                "a temp file a killed command left; `stackmgr recover` removes it"))  # fmt: skip
    listed: set[str] = set()
    series_entries: dict[str, list[str]] = {}
    unknown_listing = False  # a series mid-merge: which patches it lists is not known, so none is an orphan
    for filename in _listdir(store.series_dir, ""):
        if filename.startswith("."):
            continue
        if not valid_name(filename):
            findings.append(Finding("series", f"series/{filename}", "not a valid series name"))
            continue
        try:
            series = SeriesFile.load(store, filename)
        except StackmgrError as exc:  # "series/NAME:LINE: what" for a bad line: keep the line in `where`
            where, _, what = exc.message.partition(": ") if exc.message.startswith(f"series/{filename}:") else (
                f"series/{filename}", "", exc.message)  # fmt: skip
            findings.append(Finding("series", where, what))
            unknown_listing = unknown_listing or what.startswith("unresolved merge conflict")
            continue
        series_entries[filename] = []
        listed.update(series.kept_as_history())  # found upstream by a rebase: history, not orphans
        for entry in series.entries:
            listed.add(entry.patch)
            if entry.patch not in patches:
                findings.append(Finding("series", f"series/{filename}:{entry.lineno}",
                                        f"{entry.patch} does not exist in patches/"))  # fmt: skip
            else:
                series_entries[filename].append(entry.patch)
    headers: dict[str, patchfile.PatchHeader] = {}
    for filename in sorted(patches):
        header = _lint_patch(store, filename, findings)
        if header is not None:
            headers[filename] = header
        if filename not in listed and not unknown_listing:
            findings.append(Finding("patch", f"patches/{filename}", "in no series (orphaned)"))
    for name, entries in sorted(series_entries.items()):
        _lint_base_lines(store, name, [headers[e] for e in entries if e in headers], findings)
        _lint_applies(store, name, [e for e in entries if e in headers], headers, findings)
    for filename in sorted(set(patches) - listed):
        if filename in headers:
            _lint_applies(store, None, [filename], headers, findings)
    _lint_links(store, patches, findings)
    for f in findings:  # "FILE: unresolved merge conflict in FILE (lines …)" names the file once
        if f.message.startswith(f"unresolved merge conflict in {f.where} ("):
            f.message = "unresolved merge conflict (" + f.message.split(" (", 1)[1]
    return findings


def _tracked_state(store: Store) -> list[Finding]:
    """Files of `.stackmgr/` the store's git repository tracks: they came (or go) by git, so stackmgr never reads
    them; its state lives in the repository's git directory (docs/SECURITY.md)."""
    from stackmgr.git.tracked import tracked_under
    from stackmgr.store.local_state import LEGACY, git_dir_of

    if git_dir_of(store.root) is None:
        return []
    return [Finding("store", rel, "tracked by the store's git repository (a pull can bring it): stackmgr never "
                    f"reads it; `git rm -r --cached {LEGACY}` and commit")
            for rel in tracked_under(store.root, [LEGACY]) or []]  # fmt: skip


def conflicts_only(store_dir: str | None, exc: StackmgrError) -> list[Finding]:
    """When the store's config is itself conflicted (so the store cannot be opened): every conflicted file, as
    findings; any other reason the store cannot be opened is raised as it was."""
    from stackmgr.store.config import find_store_root
    from stackmgr.store.conflicts import conflicted_files

    if not exc.message.startswith("unresolved merge conflict"):
        raise exc
    return [Finding("conflict", rel, "unresolved merge conflict (lines " + ", ".join(f"{a}–{b}" for a, b in blocks)
                    + ")") for rel, blocks in conflicted_files(find_store_root(store_dir))]  # fmt: skip


def _conflicted(path: str) -> bool:
    from stackmgr.store.conflicts import conflict_lines

    try:
        return bool(conflict_lines(read_or_none(path) or b""))
    except StackmgrError:
        return False  # a link out of the store or a special file: another finding names it


def _listdir(directory: str, suffix: str) -> set[str]:
    try:
        return {n for n in os.listdir(directory) if n.endswith(suffix)}
    except FileNotFoundError:
        return set()


def _lint_patch(store: Store, filename: str, findings: list[Finding]) -> patchfile.PatchHeader | None:
    where = f"patches/{filename}"
    if not valid_name(filename[: -len(".patch")]):
        findings.append(Finding("patch", where, "not a valid patch name"))
    try:
        data = read_or_none(os.path.join(store.patches_dir, filename)) or b""
    except StackmgrError as exc:  # a symbolic link out of patches/, a FIFO: never read
        findings.append(Finding("patch", where, exc.message))
        return None
    try:
        header = patchfile.parse_header(data, where)
    except StackmgrError as exc:
        findings.append(Finding("patch", where, exc.message.removeprefix(f"{where}: ")))
        return None
    if not header.subject.strip():
        findings.append(Finding("patch", where, "no description (empty Subject)"))
    if not store.knows(header.tree):
        findings.append(Finding("patch", where, f"its tree {header.tree} is not registered in this store"))
    diff = patchfile.diff_part(data)
    if any(marker in b"\n" + diff for marker in CONFLICT_MARKERS):
        findings.append(Finding("patch", where, "adds conflict markers (<<<<<<< / ======= / >>>>>>>)"))
    if b"\r\n" in data[: data.find(b"\ndiff --git ")]:
        findings.append(Finding("patch", where, "its header has CRLF line endings (damaged by an editor or mailer?)"))
    try:
        patchfile.post_images(diff, where)
    except StackmgrError as exc:
        findings.append(Finding("patch", where, exc.message.removeprefix(f"{where}: ")))
        return None
    return header


def _lint_base_lines(store: Store, name: str, headers: list[patchfile.PatchHeader], findings: list[Finding]) -> None:
    """Each `# stackmgr-base TREE COMMIT` line: a tree this store knows, the base its first patch records (when the
    series has patches of that tree), a commit the tree has."""
    from stackmgr.git.repo import open_repo

    first = {}
    for header in reversed(headers):
        first[header.tree] = header.base
    for tree, (commit, lineno) in SeriesFile.load(store, name).base_lines().items():
        where = f"series/{name}:{lineno}"
        if not store.knows(tree):
            findings.append(Finding("series", where, f"the base line names tree {tree}, which this store does not "
                                    "know"))  # fmt: skip
        elif tree in first and first[tree] != commit:
            findings.append(Finding("series", where, f"the base line says tree {tree} at {commit[:12]}, but the "
                                    f"series' first patch of it records {first[tree][:12]}"))  # fmt: skip
        elif tree not in first and os.path.isdir(store.tree(tree).path):
            try:
                there = open_repo(store.tree(tree).path).has_commit(commit)
            except StackmgrError as exc:  # not an id of that repository's hash, or no repository there
                findings.append(Finding("series", where, f"the base of tree {tree}: {exc.message}"))
                continue
            if not there:
                findings.append(Finding("series", where, f"the base {commit[:12]} of tree {tree} is not a commit "
                                        "there (fetch it, or rebase the series)"))  # fmt: skip


def _lint_applies(store: Store, series: str | None, filenames: list[str], headers: dict[str, patchfile.PatchHeader],
                  findings: list[Finding]) -> None:  # fmt: skip
    """Each tree's patches, in order, applied strictly to the first one's base, must build what they record."""
    from stackmgr.git.scratch import tree_from_patches
    from stackmgr.store.plan import PatchRef
    from stackmgr.store.series import Entry

    by_tree: dict[str, list[str]] = {}
    for filename in filenames:
        by_tree.setdefault(headers[filename].tree, []).append(filename)
    where = f"series/{series}" if series else f"patches/{filenames[0]}"
    for tree, names in sorted(by_tree.items()):
        config = store.trees.get(tree)
        if config is None or not os.path.isdir(config.path):
            continue  # reported per patch (unregistered) or not checkable here (the tree is elsewhere)
        base = headers[names[0]].base
        try:
            repo = open_repo(config.path)
            if not repo.has_commit(base):
                findings.append(Finding("apply", where, f"base {base[:12]} of tree {tree} is not a commit there "
                                        "(fetch it, or rebase the series)"))  # fmt: skip
                continue
            paths = [os.path.join(store.patches_dir, n) for n in names]
            result, failure = tree_from_patches(repo, base, paths)
            if result is None:
                findings.append(Finding("apply", where, f"does not apply strictly to {base[:12]} in tree {tree}: "
                                        f"{failure}"))  # fmt: skip
                continue
            refs = []
            for n, path in zip(names, paths, strict=True):
                refs.append(PatchRef(Entry(n, 0), path, read_or_none(path) or b"", headers[n]))
            claims.check_result(repo, base, result, claims.claims(refs, repo, store.root), tree)
        except StackmgrError as exc:
            findings.append(Finding("apply", where, exc.message.replace("; nothing was changed", "")))


def _lint_links(store: Store, patches: set[str], findings: list[Finding]) -> None:
    from stackmgr.evidence.records import WrittenOnce, read_link

    findings.extend(Finding("link", rel, what) for rel, what in WrittenOnce(store).changed()
                    if not _conflicted(os.path.join(store.root, rel)))  # fmt: skip

    from stackmgr.evidence.reading import ambiguous_run_names

    for run_name, ids in ambiguous_run_names(store).items():
        findings.append(Finding("link", "links/", f"run name {run_name} was given to {len(ids)} runs ("
                                + ", ".join(ids) + "): name them by link id"))  # fmt: skip
    for name in sorted(_listdir(store.links_dir, "")):
        directory = os.path.join(store.links_dir, name)
        if not os.path.isdir(directory):
            continue
        if f"{name}.patch" not in patches and not os.path.isfile(os.path.join(directory, "dropped")):
            findings.append(Finding("link", f"links/{name}/", f"evidence for patch {name}, which does not exist"))
        for filename in sorted(os.listdir(directory)):
            if filename.endswith(".toml"):
                try:
                    read_link(os.path.join(directory, filename))
                except StackmgrError as exc:
                    findings.append(Finding("link", f"links/{name}/{filename}", exc.message.split(": ", 1)[-1]))
