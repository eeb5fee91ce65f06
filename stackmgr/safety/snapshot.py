"""The snapshot of a tree: the git tree id of its working tree, and its changes against HEAD.

One `git status` on the tree's private index finds what moved since the last snapshot; only those paths are
re-hashed (`update-index`). Untracked files over the size limit, special files and nested repositories are
left out and reported as unprotected; ignored files never enter (docs/ARCHITECTURE.md#invariants, 3 and 4).
"""

from __future__ import annotations

import os
import stat
import time

from stackmgr.errors import GitFailed, StackmgrError
from stackmgr.git import ignore, refs
from stackmgr.git.leftovers import drop_dead_lock, drop_dead_scratch_indexes, held_open
from stackmgr.git.repo import Repo, open_repo, output, parse_raw
from stackmgr.git.staged import StagedChanges
from stackmgr.git.tempindex import TempIndex
from stackmgr.safety.eol import AutoCrlf, eol_unstable
from stackmgr.safety.outputs import Held, held_paths
from stackmgr.store.fs import locked, read_cache, write_cache
from stackmgr.types import EMPTY_BLOB, SUBMODULE_INSIDE, Change, CommitId, TreeId, Unprotected


class Snapshot:
    """A tree's working tree at one moment: HEAD, the changes against it, what was left out and why."""

    def __init__(
        self, tree: str, repo: Repo, head: CommitId, changes: list[Change], unprotected: list[Unprotected]
    ) -> None:
        self.tree = tree
        self.repo = repo
        self.head = head
        self.changes = changes
        self.unprotected = unprotected
        self.staged_differs: list[bytes] = []
        self.unmerged: list[bytes] = []
        self.dirty_submodules: list[bytes] = []
        self.local_commits: list[str] = []  # on a detached HEAD and on no ref: a reset elsewhere loses them
        self.eol_unstable: list[bytes] = []  # under core.autocrlf=true: LF files a checkout would turn to CRLF
        self.operation: str | None = None
        self.index = TempIndex(repo)  # holds this snapshot; a frozen copy when asked for one
        self._tree_id: TreeId | None = None

    def tree_id(self) -> TreeId:
        """The working tree as a git tree (written on demand: `check` never needs it)."""
        if self._tree_id is None:
            self._tree_id = self.index.write_tree()
        return self._tree_id

    def known_tree_id(self) -> str:
        """The tree id if it was already written, else "-" (for records that must not cost a write-tree)."""
        return self._tree_id or "-"

    def release(self) -> None:
        """Remove a frozen copy of the index (see `take_snapshot(freeze=True)`)."""
        if self.index.path != TempIndex(self.repo).path:
            self.index.discard()

    def change_map(self) -> dict[bytes, Change]:
        return {c.path: c for c in self.changes}


class _Status:
    """What `git status --porcelain=v2` on the private index said."""

    def __init__(self) -> None:
        self.head = ""
        self.stale: list[bytes] = []  # working tree differs from the private index
        self.untracked: list[bytes] = []
        self.index_only_adds: list[bytes] = []  # in the private index, not in HEAD
        self.changes: list[Change] = []  # HEAD -> private index
        self.dirty_submodules: list[bytes] = []
        self.submodules: set[bytes] = set()


def _parse_status(out: bytes) -> _Status:
    st = _Status()
    records = out.split(b"\0")
    i = 0
    while i < len(records):
        rec = records[i]
        i += 1
        if not rec:
            continue
        kind = rec[:1]
        if kind == b"#":
            if rec.startswith(b"# branch.oid "):
                st.head = rec[13:].decode()
        elif kind == b"?":
            st.untracked.append(rec[2:])
        elif kind == b"1":
            xy, sub, mh, mi, _mw, hh, hi, path = rec[2:].split(b" ", 7)
            _ordinary(st, xy, sub, mh.decode(), mi.decode(), hh.decode(), hi.decode(), path)
        elif kind == b"u":
            st.stale.append(rec[2:].split(b" ", 9)[9])
        elif kind == b"2":  # renames are off; never expected, but never dropped either
            st.stale.append(rec[2:].split(b" ", 8)[8])
            i += 1
    return st


def _ordinary(st: _Status, xy: bytes, sub: bytes, mh: str, mi: str, hh: str, hi: str, path: bytes) -> None:
    x, y = xy[:1], xy[1:]
    if y != b".":
        st.stale.append(path)
    if x != b".":
        st.changes.append(Change(path, mh, mi, hh, hi))
    if x == b"A":
        st.index_only_adds.append(path)
    if sub.startswith(b"S"):
        st.submodules.add(path)
        if sub[2:3] == b"M" or sub[3:4] == b"U":
            st.dirty_submodules.append(path)


def take_snapshot(
    tree: str, path: str, max_untracked_bytes: int, *, find_special: bool = True, freeze: bool = False,
    results: tuple[bytes, ...] = (), held: Held | None = None,
) -> Snapshot:  # fmt: skip
    """Snapshot the working tree at `path`. The real index is read, never written.

    With `freeze`, the snapshot keeps its own copy of the index, taken under the tree lock, so a `check`
    running meanwhile cannot move it; the caller calls `release()` when done. Untracked files below the
    `results` directories (the tree's declared result and note directories) are outputs: left out, except
    those the series applied to the tree (`held`: its base and result, see safety/outputs.py) holds."""
    return StartedSnapshot(tree, path, max_untracked_bytes, find_special=find_special, freeze=freeze,
                           results=results, held=held).finish()  # fmt: skip


class StartedSnapshot:
    """`take_snapshot` in two halves: the tree lock taken and git's `status` (with the staged diff and the probes
    beside it) started, then `finish()` reads them. `check` starts every tree's before it imports what judges
    them, so git works while Python loads."""

    def __init__(
        self, tree: str, path: str, limit: int, *, find_special: bool = True, freeze: bool = False,
        results: tuple[bytes, ...] = (), held: Held | None = None,
    ) -> None:  # fmt: skip
        self.tree, self.limit, self.find_special, self.freeze = tree, limit, find_special, freeze
        self.results, self.held = results, held
        self.repo = open_repo(path)
        self.index = TempIndex(self.repo)
        self.lock = locked(os.path.join(self.repo.stackmgr_dir, "lock"), f"tree {tree}")
        self.lock.__enter__()
        self.work: _Work | None = None
        try:
            drop_dead_lock(self.index.path + ".lock")  # a killed command's litter: a stat, a listdir of .git/stackmgr
            drop_dead_scratch_indexes(self.repo.stackmgr_dir)
            self.work = _Work(tree, self.repo, self.index)
        except GitFailed:
            pass  # `finish` starts afresh
        except BaseException:
            self.lock.__exit__(None, None, None)
            raise

    def abandon(self) -> None:
        """Never to be read (another tree failed first): its git is waited for, the tree lock released."""
        try:
            if self.work is not None:
                self.work.wait()
        finally:
            self.lock.__exit__(None, None, None)

    def finish(self) -> Snapshot:
        try:
            try:
                snap = self.work.snapshot(self.limit, self.results, self.held) if self.work else None
            except GitFailed:
                snap = None
            if snap is None:  # the private index is only a cache: start it afresh once (a torn write)
                if held_open(self.index.path + ".lock"):
                    raise StackmgrError(f"tree {self.tree}: {self.index.path}.lock is held by a running process",
                                        "let it finish (a git that outlived its stackmgr), then retry")  # fmt: skip
                self.index.discard()
                snap = _Work(self.tree, self.repo, self.index).snapshot(self.limit, self.results, self.held)
            if self.freeze:
                snap.index = self.index.freeze()
        finally:
            self.lock.__exit__(None, None, None)
        if self.find_special:
            snap.unprotected.extend(special_files(self.repo))
        snap.operation = self.repo.operation_in_progress()
        return snap


class _Work:
    """The git processes of one snapshot, started together; `snapshot()` reads them."""

    def __init__(self, tree: str, repo: Repo, index: TempIndex) -> None:
        self.tree, self.repo, self.index = tree, repo, index
        try:
            index.seed()
        except StackmgrError:
            _refuse_unborn(tree, repo)
            raise
        self.status_proc = index.start_status()
        self.autocrlf = AutoCrlf(repo)
        self.staged = StagedChanges(repo, self.autocrlf.sig)  # the config files too: core.useReplaceRefs
        self.orphans_proc = None if refs.head_on_a_ref(repo) else refs.start_commits_on_no_ref(repo)
        self.probe = _IgnoreProbe(repo, self.autocrlf.excludes_file())

    def snapshot(self, limit: int, results: tuple[bytes, ...], held: Held | None) -> Snapshot:
        tree, repo, index = self.tree, self.repo, self.index
        try:
            st = _parse_status(output(self.status_proc))
            if st.head in ("", "(initial)"):
                _refuse_unborn(tree, repo)
            code, staged_out = self.staged.output(st.head)
            if code != 0:
                raise StackmgrError(f"tree {tree}: git cannot read the index of {repo.top}", "run `git status` there")
            outputs = (results, held_paths(repo, held, st.head, results))
            snap = _reconcile(tree, repo, index, st, parse_raw(staged_out), limit, self.probe, outputs)
            snap.local_commits = refs.commits_on_no_ref(tree, repo, self.orphans_proc) if self.orphans_proc else []
            if self.autocrlf.on():
                snap.eol_unstable = eol_unstable(index, snap.changes)
            return snap
        finally:
            self.wait(status=False)

    def wait(self, status: bool = True) -> None:
        procs = (self.status_proc, self.staged.proc, self.orphans_proc, self.probe.proc, self.autocrlf.proc)
        for proc in procs if status else procs[1:]:
            if proc is not None:
                proc.communicate()


def _refuse_unborn(tree: str, repo: Repo) -> None:
    if repo.head_commit() is None:
        raise StackmgrError(f"tree {tree} ({repo.top}) has no commits yet", "make a first commit there")


def _reconcile(
    tree: str, repo: Repo, index: TempIndex, st: _Status, staged: list[Change], limit: int, probe: _IgnoreProbe,
    outputs: tuple[tuple[bytes, ...], frozenset[bytes]] = ((), frozenset()),
) -> Snapshot:  # fmt: skip
    """Bring the private index to the working tree for the paths `git status` named, then read the changes.
    `outputs`: the result directories, and the paths below them the applied series holds (work all the same)."""
    tracked_adds = {c.path for c in staged if c.old_mode == "000000" and c.new_mode != "000000"}
    index_only = set(st.index_only_adds) - tracked_adds  # untracked in reality, held from an earlier snapshot
    output_dirs, work = tuple(d + b"/" for d in outputs[0]), outputs[1] | tracked_adds
    left_out = [p for p in index_only if p.startswith(output_dirs) and p not in work] if output_dirs else []
    disk = _Disk(os.fsencode(repo.top))
    unprotected: list[Unprotected] = []
    add: list[bytes] = []
    remove: list[bytes] = []
    for p in st.stale:
        kind, size = disk.kind(p)
        if p in st.submodules and kind == "gone" and disk.is_dir(p):
            kind = "file"  # a submodule's directory: update-index records the commit checked out there
        if kind == "file" and not (p in index_only and size > limit):
            add.append(p)
            continue
        remove.append(p)  # gone, a directory now, beyond a symlink, special, or grown over the limit
        if kind != "gone":
            unprotected.append(Unprotected(p, "special" if kind == "special" else "large", size))
    for p in st.untracked:
        if output_dirs and p.startswith(output_dirs) and p not in work:
            continue  # a declared result or note: an output, not work
        if p.endswith(b"/"):
            unprotected.append(Unprotected(p.rstrip(b"/"), "nested repository", 0))
            continue
        kind, size = disk.kind(p)
        if kind == "special" or (kind == "file" and size > limit and p not in tracked_adds):
            unprotected.append(Unprotected(p, kind if kind == "special" else "large", size))
        elif kind == "file":
            add.append(p)
    if left_out:  # held from a snapshot taken before the directory was declared, or while a series held them
        add = [p for p in add if p not in set(left_out)]
        remove.extend(p for p in sorted(left_out) if p not in set(remove))
    ignored = probe.ignored(index_only - set(remove))
    if ignored:
        add = [p for p in add if p not in ignored]
        remove.extend(sorted(ignored))
    probe.remember((index_only - set(remove)) | {p for p in add if p not in tracked_adds and p not in st.stale})
    if add or remove:
        index.update(add, remove)
        changes = index.changes_against(st.head)
    else:
        changes = st.changes
    snap = Snapshot(tree, repo, CommitId(st.head), changes, unprotected)
    snap.dirty_submodules = st.dirty_submodules
    unprotected.extend(Unprotected(p, SUBMODULE_INSIDE, 0) for p in st.dirty_submodules)
    _compare_staged(snap, staged)
    return snap


class _Disk:
    """What a path is on disk, as git would see it: a file (regular or symlink, with its size), "special", or
    "gone" (missing, a directory now, or behind a symlinked or missing parent directory)."""

    def __init__(self, top: bytes) -> None:
        self.top = top
        self.real_dirs: dict[bytes, bool] = {b"": True}

    def _parent_ok(self, parent: bytes) -> bool:
        known = self.real_dirs.get(parent)
        if known is None:
            try:
                known = stat.S_ISDIR(os.lstat(os.path.join(self.top, parent)).st_mode)
            except OSError:
                known = False
            known = known and self._parent_ok(os.path.dirname(parent))
            self.real_dirs[parent] = known
        return known

    def is_dir(self, path: bytes) -> bool:
        return self._parent_ok(path)

    def kind(self, path: bytes) -> tuple[str, int]:
        if not self._parent_ok(os.path.dirname(path)):
            return "gone", 0
        try:
            st = os.lstat(os.path.join(self.top, path))
        except OSError:
            return "gone", 0
        if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            return "file", st.st_size
        if stat.S_ISDIR(st.st_mode):
            return "gone", 0
        return "special", 0


class _IgnoreProbe:
    """Which files held only by the private index does a .gitignore now cover? It asks `git check-ignore` about
    the set the last snapshot left (remembered beside the private index) while `git status` runs, so the
    question costs no extra wait; only paths new since then are asked afterwards."""

    def __init__(self, repo: Repo, excludes_file: str | None) -> None:
        self.repo = repo
        self.cache = os.path.join(repo.stackmgr_dir, "index-only.marshal")
        previous = read_cache(self.cache)
        self.asked: set[bytes] = set(previous) if isinstance(previous, list) else set()
        # The answer about the same paths is reused while no rule file they depend on changed (ignore.rules_key).
        self.answers = os.path.join(repo.stackmgr_dir, "ignored.marshal")
        asked = sorted(self.asked)
        self.key = ignore.rules_key(repo, asked, excludes_file, time.time_ns()) if asked and excludes_file else None
        known = read_cache(self.answers) if self.key is not None else None
        self.known = known[1] if isinstance(known, list) and len(known) == 2 and known[0] == self.key else None
        self.query = ignore.Query(repo, asked if self.known is None else [])
        self.proc = self.query.proc

    def ignored(self, paths: set[bytes]) -> set[bytes]:
        new = paths - self.asked
        found = set(self.known) if self.known is not None else self.query.answer()
        if found is None:  # a remembered path is now behind a symlink: ask again about the live ones only
            found, new = set(), paths
        elif self.key is not None and self.known is None:
            write_cache(self.answers, [self.key, sorted(found)])
        if new:
            found |= set(ignore.ignored_paths(self.repo, sorted(new)))
        return found & paths

    def remember(self, paths: set[bytes]) -> None:
        if paths != self.asked:
            write_cache(self.cache, sorted(paths))


def _compare_staged(snap: Snapshot, staged: list[Change]) -> None:
    """Find unmerged paths and paths whose staged version is neither HEAD's nor the working tree's."""
    worktree = snap.change_map()
    for c in staged:
        if c.status == "U":
            snap.unmerged.append(c.path)
            continue
        if c.new_mode == "000000" or (c.old_mode == "000000" and c.new_blob == EMPTY_BLOB):
            continue  # a staged deletion or an intent-to-add entry holds no content of its own
        w = worktree.get(c.path)
        w_state = (w.new_mode, w.new_blob) if w else (c.old_mode, c.old_blob)
        if w_state != (c.new_mode, c.new_blob):
            snap.staged_differs.append(c.path)


def special_files(repo: Repo) -> list[Unprotected]:
    """FIFOs, sockets and devices: git never lists them, so look (status/save only, not `check`). The kind of
    each entry comes from the directory listing itself (d_type): no stat per file, a third of the time."""
    found = []
    top = os.fsencode(repo.top)
    skip = {os.path.join(top, d.rstrip(b"/")) for d in ignore.ignored_directories(repo)}
    below = [top]
    while below:
        try:
            entries = os.scandir(below.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != b".git" and entry.path not in skip:
                            below.append(entry.path)
                    elif not (entry.is_file(follow_symlinks=False) or entry.is_symlink()):
                        found.append(os.path.relpath(entry.path, top))
                except OSError:
                    continue
    found.sort()
    ignored = set(ignore.ignored_paths(repo, found))
    return [Unprotected(p, "special", 0) for p in found if p not in ignored]
