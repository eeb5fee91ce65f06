"""Recovery snapshots, written by `reset --force` and read by `recover`: the only copy of someone's work, so
their format lives in one place.

A recovery snapshot is a commit under `refs/stackmgr/recovery/<12 hex>` in its tree: its tree is the working tree
at the time (untracked files included), its first parent the HEAD of then, its second (when there was one) the
index, and its message carries `Stackmgr-Tree/Head/Branch/Files/Time` trailers
(docs/FORMATS.md#state-in-each-tree). Its tree holds the files as git stores them (what `check` and the index
compare); the bytes on disk of the changed files, past any conversion (`core.autocrlf`, `.gitattributes`
`text`/`eol`/`ident`, filters), are a last parent commit that the `Stackmgr-Raw` trailer names, so `recover`
gives back exactly those bytes.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git import raw_files, refs
from stackmgr.git.repo import open_repo
from stackmgr.git.tempindex import TempIndex

if TYPE_CHECKING:
    from stackmgr.git.repo import Repo
    from stackmgr.safety.snapshot import Snapshot
    from stackmgr.store.applied import Applied
    from stackmgr.store.config import Store

RECOVERY_PREFIX = "refs/stackmgr/recovery/"


def store_recovery(snap: Snapshot, applied: Applied | None = None) -> str:
    """A commit of the working tree (untracked files included) whose parents are HEAD and, when it can be
    written, the index; anchored under refs/stackmgr/recovery/ so gc keeps it. Returns its 12-hex id. The series
    `applied` to the tree (when HEAD is its base) is kept too, so `recover` puts the work back onto it."""
    repo = snap.repo
    parents = [snap.head]
    index_copy = TempIndex.scratch(repo, "recovery")
    try:
        with open(os.path.join(repo.git_dir, "index"), "rb") as src, open(index_copy.path, "wb") as dst:
            dst.write(src.read())
        index_tree = index_copy.write_tree()  # on a copy: write-tree may rewrite the index it reads
        parents.append(refs.commit_tree(repo, index_tree, [snap.head], f"index of tree {snap.tree}"))
    except (StackmgrError, FileNotFoundError):
        pass  # no index, or unmerged entries: the working tree (conflict markers and all) is still saved
    finally:
        index_copy.discard()
    branch = refs.symbolic_head(repo) or "(detached)"
    files = len(snap.changes)
    message = (f"stackmgr recovery: tree {snap.tree}, {files} changed file{'s' if files != 1 else ''}\n\n"
               f"Stackmgr-Tree: {snap.tree}\nStackmgr-Head: {snap.head}\nStackmgr-Branch: {branch}\n"
               f"Stackmgr-Files: {files}\nStackmgr-Time: {int(time.time())}\n")  # fmt: skip
    raw = raw_files.raw_tree(repo, [c.path for c in snap.changes if c.new_mode in ("100644", "100755")])
    if raw is not None:
        parents.append(refs.commit_tree(repo, raw, [snap.head], f"bytes on disk of tree {snap.tree}"))
        message += f"Stackmgr-Raw: {parents[-1]}\n"
    if applied is not None and applied.base == snap.head:
        message += f"Stackmgr-Applied: {json.dumps(applied.as_dict(), separators=(',', ':'))}\n"
    commit = refs.commit_tree(repo, snap.tree_id(), parents, message)
    refs.update_ref(repo, RECOVERY_PREFIX + commit[:12], commit, "stackmgr reset --force")
    # git writes loose objects without fsync by default, and this commit may be the only copy of the work: make it
    # durable before the tree changes, so a power cut cannot take both.
    os.sync()
    return commit[:12]


def drop_recovery(snap: Snapshot, recovery: str) -> None:
    """Forget a snapshot just stored when the reset it was for changed nothing after all."""
    refs.update_refs(snap.repo, [(RECOVERY_PREFIX + recovery, None)], "stackmgr reset --force: refused")


class Recovery:
    def __init__(self, tree: str, ref: str, commit: str, stamp: int, message: str) -> None:
        self.tree = tree
        self.ref = ref
        self.commit = commit
        self.id = commit[:12]
        self.time = stamp
        trailers = dict(line.split(": ", 1) for line in message.splitlines() if line.startswith("Stackmgr-"))
        self.files = int(trailers.get("Stackmgr-Files", "0") or 0)
        self.branch = trailers.get("Stackmgr-Branch", "(detached)")
        self.head = trailers.get("Stackmgr-Head", "")
        self.applied = _applied(trailers.get("Stackmgr-Applied"))
        self.raw = trailers.get("Stackmgr-Raw", "")  # the commit of the changed files' bytes on disk, if kept

    def index_parent(self, parents: list[str]) -> str:
        """The commit holding the index of then (HEAD's when it could not be kept)."""
        kept = [p for p in parents[1:] if p != self.raw]
        return kept[0] if kept else parents[0]

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "tree": self.tree, "time": self.time, "files": self.files, "branch": self.branch,
                "head": self.head, "commit": self.commit}  # fmt: skip


def _applied(trailer: str | None) -> Applied | None:
    """The series that was applied when the snapshot was taken, from its trailer (None when there was none)."""
    from stackmgr.store.applied import Applied

    try:
        s = json.loads(trailer) if trailer else None
        if not s:
            return None
        return Applied.from_dict(s)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def list_recoveries(store: Store) -> list[Recovery]:
    found: list[Recovery] = []
    for name, config in sorted(store.trees.items()):
        if not os.path.isdir(config.path):
            continue
        repo = open_repo(config.path)
        for ref, commit, stamp, message in refs.refs_under(repo, RECOVERY_PREFIX):
            rec = Recovery(name, ref, commit, stamp, message)
            # linked worktrees share refs: each snapshot belongs to the tree its trailer names
            if f"Stackmgr-Tree: {name}\n" in message + "\n" and rec.commit not in {r.commit for r in found}:
                found.append(rec)
    return sorted(found, key=lambda r: -r.time)


def find(store: Store, wanted: str) -> Recovery:
    wanted = wanted.lower()
    if len(wanted) < 4 or any(c not in "0123456789abcdef" for c in wanted):
        raise UsageProblem(f"'{wanted}' is not a recovery id", "ids are the 12 hex digits `stackmgr recover` lists")
    hits = [r for r in list_recoveries(store) if r.commit.startswith(wanted)]
    if not hits:
        raise UsageProblem(f"no recovery snapshot {wanted}", "list them with `stackmgr recover`")
    if len(hits) > 1:
        raise UsageProblem(f"recovery id {wanted} is ambiguous", "give more of its 12 hex digits")
    return hits[0]


def give_back_raw(repo: Repo, raw_commit: str, stored_tree: str) -> list[bytes]:
    """After a move to a snapshot's tree: the changed files' bytes exactly as they were on disk (git's checkout
    applies core.autocrlf, eol, ident and smudge filters to what it writes). Paths written meanwhile stay."""
    raw = raw_files.tree_entries(repo, raw_commit)
    return raw_files.give_back(repo, raw, repo.blob_entries(stored_tree, list(raw)) if raw else {})


def give_back_raw_of(store: Store, tree: str, snapshot_tree: str) -> None:
    """After a move back to the state a `reset --force` stored (its undo): the bytes on disk that its recovery
    snapshot of `tree` kept, where that snapshot's tree is `snapshot_tree`."""
    for rec in list_recoveries(store):
        if rec.tree == tree and rec.raw:
            repo = open_repo(store.tree(tree).path)
            if repo.tree_of(rec.commit) == snapshot_tree and rec.raw in refs.commit_parents(repo, rec.commit):
                give_back_raw(repo, rec.raw, snapshot_tree)
                return
