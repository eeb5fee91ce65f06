"""Which series is applied to which tree (docs/FORMATS.md#applied-state): local state in `.stackmgr/applied.json`.

A tree has at most one applied series: its name, the base commit, the patches with their sha256 as applied,
and the tree id the series produced, so `status` can say whether the working tree still matches it. A state
`apply --link` rebuilt says so (`measured`): the link, its patch, and the residue on top of the patches (no
saved patch: kept by content under `artifacts/`) with the tree id the whole measured state has.
"""

from __future__ import annotations

import os
import time

from stackmgr.store.config import Store
from stackmgr.store.fs import read_cache, read_or_none, sha256_hex, write_cache
from stackmgr.store.names import inside

STATE_FILE = "applied.json"  # json is imported where it is read or written: `check` reads the marshal copy
COPY_FILE = "applied.marshal"  # in .stackmgr/cache/: per tree (base, result_tree), by the state file's stat data


class Applied:
    """The series applied to a tree (plain class: `apply` starts without dataclasses/inspect)."""

    __slots__ = ("at", "base", "branch", "guards", "link", "link_patch", "patches", "pending", "residue",
                 "residue_tree", "result_tree", "series")  # fmt: skip

    def __init__(self, series: str, base: str, patches: list[tuple[str, str]] | None = None, result_tree: str = "",
                 at: int = 0, pending: list[str] | None = None, guards: list[str] | None = None) -> None:  # fmt: skip
        self.series = series
        self.base = base
        self.patches = patches if patches is not None else []  # (patch name, sha256) in order
        self.result_tree = result_tree
        self.at = at
        self.pending = pending if pending is not None else []  # the tree's patches of the series not pushed yet
        self.guards = guards if guards is not None else []  # the MQ guards `apply --guard` was given
        self.link = ""  # `apply --link`: the link record whose measured state this is ("": a series' state)
        self.link_patch = ""  # that record's patch, while the tree holds the measured patches (`run` links to it)
        self.residue = ""  # the measured residue on top of the patches: artifacts/sha256/… (no saved patch)
        self.residue_tree = ""  # the tree id of the patches + the residue: the measured snapshot
        # The branch HEAD was on before the first `apply` detached it (`refs/heads/x`; "": none), which `reset`
        # returns to; None: the one the tree's state had before (record_applied carries it over).
        self.branch: str | None = None

    def as_dict(self) -> dict[str, object]:
        measured = {"link": self.link, "patch": self.link_patch, "residue": self.residue, "tree": self.residue_tree}
        return {"series": self.series, "base": self.base, "patches": [list(p) for p in self.patches],
                "result_tree": self.result_tree, "at": self.at, "pending": self.pending,
                **({"guards": self.guards} if self.guards else {}),
                **({"branch": self.branch} if self.branch else {}),
                **({"measured": measured} if self.link else {})}  # fmt: skip

    @classmethod
    def from_dict(cls, s: dict[str, object]) -> Applied:
        """The entry as `as_dict` wrote it; KeyError, TypeError or ValueError when it has another shape."""
        patches, pending, guards, at = s["patches"], s.get("pending", []), s.get("guards", []), s["at"]
        if not (isinstance(patches, list) and isinstance(pending, list) and isinstance(guards, list)
                and isinstance(at, int)):  # fmt: skip
            raise TypeError("applied state of another shape")
        applied = cls(str(s["series"]), str(s["base"]), [(str(n), str(h)) for n, h in patches], str(s["result_tree"]),
                      at, [str(n) for n in pending], [str(g) for g in guards])  # fmt: skip
        branch = s.get("branch", "")
        applied.branch = branch if isinstance(branch, str) and branch.startswith("refs/heads/") else ""
        measured = s.get("measured")
        if isinstance(measured, dict):
            applied.measured_from(str(measured["link"]), str(measured.get("patch", "")),
                                  str(measured.get("residue", "")), str(measured["tree"]))  # fmt: skip
        return applied

    def measured_from(self, link: str, patch: str, residue: str, tree: str) -> Applied:
        """Mark this as (the patches of) the measured state of `link`, with `residue` on top giving `tree`."""
        self.link, self.link_patch, self.residue, self.residue_tree = link, patch, residue, tree
        return self

    def carry_residue(self, before: Applied) -> Applied:
        """After push/pop: the residue `before` had is carried along on top (no longer the measured patches)."""
        if before.residue:
            self.measured_from(before.link, "", before.residue, before.residue_tree)
        return self

    @property
    def names(self) -> list[str]:
        return [name for name, _sha in self.patches]


def _path(store: Store) -> str:
    return os.path.join(store.state_dir, STATE_FILE)


def load_applied(store: Store) -> dict[str, Applied]:
    """tree name -> applied series; an unreadable state file counts as nothing applied (it is local state)."""
    import json

    try:
        with open(_path(store), "rb") as f:
            data = json.loads(f.read())
        return {tree: Applied.from_dict(s) for tree, s in data["trees"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # unreadable or of another shape
        return {}


def _write(store: Store, state: dict[str, Applied]) -> None:
    import json

    os.makedirs(store.state_dir, exist_ok=True)
    data = {"schema": 1, "trees": {tree: a.as_dict() for tree, a in sorted(state.items())}}
    store.write_file(_path(store), (json.dumps(data, indent=2) + "\n").encode())
    _copy(store, state, _signature(store))


def _signature(store: Store) -> list[int] | None:
    try:
        st = os.stat(_path(store))
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def _copy(store: Store, state: dict[str, Applied], sig: list[int] | None) -> dict[str, list[str]]:
    """The marshal copy, under the stat data of the file `state` was read from (taken before reading it)."""
    trees = {tree: [a.base, a.result_tree, a.residue, a.residue_tree, a.link] for tree, a in state.items()}
    write_cache(os.path.join(store.state_dir, "cache", COPY_FILE), [sig, trees])
    return trees


def _copied(store: Store, tree: str) -> list[str] | None:
    """The tree's entry of the marshal copy (base, result tree, residue, residue tree, link), without json: from
    the copy while it matches the state file's stat data, else from the file (and the copy rewritten)."""
    sig = _signature(store)
    if sig is None:
        return None
    cached = read_cache(os.path.join(store.state_dir, "cache", COPY_FILE))
    if isinstance(cached, list) and len(cached) == 2 and cached[0] == sig and isinstance(cached[1], dict) \
            and all(isinstance(v, list) and len(v) == 5 for v in cached[1].values()):  # fmt: skip
        trees: dict[str, list[str]] = cached[1]
    else:
        trees = _copy(store, load_applied(store), sig)
    return trees.get(tree)


def applied_result(store: Store, tree: str) -> tuple[str, str] | None:
    """The base and result tree of the series applied to `tree` (`_copied`)."""
    entry = _copied(store, tree)
    return (str(entry[0]), str(entry[1])) if entry and entry[0] and entry[1] else None


def applied_residue(store: Store, tree: str) -> tuple[str, str, str] | None:
    """The residue an `apply --link` left on `tree`: (its artifacts/ path, the measured tree id, the link)."""
    entry = _copied(store, tree)
    return (str(entry[2]), str(entry[3]), str(entry[4])) if entry and entry[2] else None


def record_applied(store: Store, tree: str, applied: Applied) -> None:
    state = load_applied(store)
    applied.at = applied.at or int(time.time())
    if applied.branch is None:  # a move that does not know it (push, pop, save --series): the one remembered
        before = state.get(tree)
        applied.branch = before.branch if before is not None else ""
    state[tree] = applied
    _write(store, state)


def clear_applied(store: Store, tree: str) -> None:
    state = load_applied(store)
    if state.pop(tree, None) is not None:
        _write(store, state)


def patches_changed_since_applied(store: Store, applied: Applied) -> list[str]:
    """The applied patches whose file in the store is no longer the version the tree applied (a pulled refresh,
    a save from another tree): rewriting one from this tree would drop that change."""
    changed = []
    for name, sha in applied.patches:
        if not sha:
            continue
        data = read_or_none(inside(store.patches_dir, name + ".patch"))
        if data is None or sha256_hex(data) != sha:
            changed.append(name)
    return changed
