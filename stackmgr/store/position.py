"""A tree's applied position in its series (docs/FORMATS.md#applied-state): the one answer `status`, `push`,
`pop`, `top`, `refresh`, `save --series` and `check` give.

What is applied is what `applied.json` records the tree holds, as quilt's `.pc/applied-patches`: a teammate's
pull may edit the series under it (the append/append merge puts their patch between yours; a rename or a removal
takes an applied name out of it). An applied patch whose name left the series but whose bytes a patch of the
series has (a pulled rename) is followed to that name. The position says how many of the tree's patches of the
series are applied, the top, and, when the applied patches are no longer the series' first k, what differs.
"""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.store.applied import Applied, load_applied
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none, sha256_hex
from stackmgr.store.series import Entry, active


class Position:
    """Where a tree stands in its series. `names`: the tree's patches of the series after guards, in series
    order; `stack`: the applied patches, bottom first, under their names in the series (a pulled rename
    followed); `unreadable`: why the series cannot be read ("" when it can)."""

    def __init__(self, tree: str, applied: Applied, names: list[str], stack: list[str], unreadable: str = "",
                 renamed: dict[str, str] | None = None, upstream: frozenset[str] = frozenset()) -> None:  # fmt: skip
        self.tree = tree
        self.applied = applied
        self.names = names
        self.stack = stack
        self.unreadable = unreadable
        self.renamed = renamed or {}  # applied name -> its name in the series now
        self.upstream = upstream  # patches a rebase found upstream (the series keeps them as comments)

    @property
    def series(self) -> str:
        return self.applied.series

    @property
    def count(self) -> int:
        """How many patches are applied (all of them, listed in the series or not)."""
        return len(self.stack)

    @property
    def top(self) -> str | None:
        return self.stack[-1] if self.stack else None

    @property
    def total(self) -> int:
        return len(self.names)

    @property
    def in_series(self) -> list[str]:
        return [n for n in self.stack if n in self.names]

    @property
    def not_in_series(self) -> list[str]:
        return [n for n in self.stack if n not in self.names] if self.series and not self.unreadable else []

    @property
    def pending(self) -> list[str]:
        """The tree's patches of the series not applied, in series order."""
        return [n for n in self.names if n not in self.stack]

    @property
    def in_order(self) -> bool:
        """Whether the applied patches are the series' first `count` (what push and pop move along)."""
        return not self.unreadable and self.stack == self.names[: self.count]

    def differs(self) -> list[str]:
        """What the series says now that the applied stack does not: names gone, patches listed between or
        before applied ones, applied ones reordered."""
        if self.unreadable or not self.series:
            return [self.unreadable] if self.unreadable else []
        said = [f"{n} found upstream by a rebase" if n in self.upstream else f"{n} no longer in the series"
                for n in self.not_in_series]
        kept = self.in_series
        at = {n: self.names.index(n) for n in kept}
        if kept != sorted(kept, key=at.__getitem__):
            said.append("patches reordered")
        elif kept:
            last = at[kept[-1]]
            for n in self.pending:
                if self.names.index(n) < last:
                    above = next(k for k in kept if at[k] > self.names.index(n))
                    said.append(f"{n} now comes before {above} (applied)")
        return said

    def tally(self) -> str:
        """"k of n applied": the applied patches the series lists, of the tree's patches of the series."""
        return f"{len(self.in_series)} of {self.total} applied"

    def summary(self) -> str:
        """The position line, built here only: "S: k of n applied, top P" (k: the applied patches the series
        lists, n: the tree's patches of the series), with what is applied that the series does not list."""
        top = f", top {self.top}" if self.top else ""
        if not self.series:  # a measured state `apply --link` rebuilt with no series applied
            return f"{self.count} patch{'es' if self.count != 1 else ''} applied{top}"
        if self.unreadable:
            return f"{self.series}: {self.count} applied{top} (the series cannot be read)"
        gone = [n for n in self.not_in_series if n not in self.upstream]
        found = [n for n in self.not_in_series if n in self.upstream]
        extra = f" + {', '.join(gone)} (not in {self.series})" if gone else ""
        extra += f" + {', '.join(found)} (upstream now)" if found else ""
        return f"{self.series}: {len(self.in_series)} of {self.total} applied{extra}{top}"

    def what_to_do(self) -> str:
        """For a stack that is not the series' first k: the move that makes it so."""
        if self.not_in_series and all(n in self.upstream for n in self.not_in_series):
            return (f"`stackmgr apply {self.series}` moves the tree onto the rebased series (what a rebase found "
                    "upstream comes with its new base)")  # fmt: skip
        if self.not_in_series:
            return (f"`stackmgr pop` takes off what the series does not list (pop works from what is applied), "
                    f"or `stackmgr apply {self.series}` rebuilds the tree from the series")  # fmt: skip
        return (f"`stackmgr push` re-applies in the series' new order, or `stackmgr pop` works back from what is "
                f"applied; `stackmgr apply {self.series}` rebuilds the tree from the series")  # fmt: skip

    def push_target(self, patch: str | None, every: bool) -> list[str]:
        """The patches a push leaves applied: the shortest start of the series holding every applied patch and
        PATCH (default: the first not applied). A push never takes an applied patch off: after a pull put a
        patch between applied ones it re-applies them in the series' new order."""
        if self.not_in_series:
            raise StackmgrError(f"tree {self.tree}: {self.summary()}: {', '.join(self.not_in_series)} no longer "
                                f"in series {self.series}; nothing to push onto", self.what_to_do())  # fmt: skip
        if every:
            wanted = self.pending[-1] if self.pending else None
        else:
            wanted = patch if patch is not None else (self.pending[0] if self.pending else None)
        if wanted is None and self.in_order:
            raise StackmgrError(f"tree {self.tree}: {self.summary()}; nothing to push",
                                f"`stackmgr save NAME --series {self.series}` adds a patch on top")  # fmt: skip
        end = max(self.names.index(n) for n in [*self.stack, *([wanted] if wanted else [])]) + 1
        return self.names[:end]

    def refuse_out_of_order(self, verb: str) -> None:
        """For a command that works on the series' first k (refresh, save --series): refused, nothing changed."""
        if self.unreadable:
            raise StackmgrError(f"the series of tree {self.tree}, {self.series}, cannot be read: {self.unreadable}",
                                f"`stackmgr apply {self.series}` rebuilds the tree from it")  # fmt: skip
        if not self.in_order:
            raise StackmgrError(f"{verb} refused, nothing changed: tree {self.tree}: {self.summary()}, not the "
                                f"series' first {self.count}: {'; '.join(self.differs())}",
                                self.what_to_do())  # fmt: skip


def patch_tree(store: Store, filename: str) -> str | None:
    """The tree a patch file of patches/ belongs to (its header); None when it is missing or unreadable. A patch
    mid-merge is said as it is (never counted out of its series)."""
    from stackmgr.store.patchfile import parse_header

    try:
        data = read_or_none(os.path.join(store.patches_dir, filename))
        return parse_header(data, f"patches/{filename}").tree if data is not None else None
    except StackmgrError as exc:
        if exc.message.startswith("unresolved merge conflict"):
            raise
        return None


def tree_entries(store: Store, entries: list[Entry], tree: str, guards: tuple[str, ...] | list[str]) -> list[Entry]:
    """This tree's patches of a series after guards, in series order: the entries the guards let in whose patch
    header names the tree. The one rule for it (`apply`, `push`/`pop`, `status`, `save --series`)."""
    return [e for e in entries if active(e, guards) and patch_tree(store, e.patch) == tree]


def applied_position(store: Store, tree: str) -> Position | None:
    """The tree's applied position in its series (None: nothing is applied to it). Never refuses a series that
    cannot be read (`unreadable` says why) except one mid-merge, which is said as it is."""
    applied = load_applied(store).get(tree)
    if applied is None:
        return None
    names = applied.names
    if not applied.series:
        return Position(tree, applied, [], names)
    from stackmgr.store.series import SeriesFile

    try:
        series = SeriesFile.load(store, applied.series)
        entries = series.entries
    except StackmgrError as exc:
        if exc.message.startswith("unresolved merge conflict"):
            raise
        return Position(tree, applied, [], names, f"series {applied.series} is missing or unreadable")
    listed = [e.name for e in tree_entries(store, entries, tree, applied.guards)]
    renamed = _renamed(store, applied, listed)
    gone = len(listed) < len(names)  # the history comments are read only when an applied patch left the series
    upstream = frozenset(p.removesuffix(".patch") for p in series.kept_as_history()) if gone else frozenset()
    return Position(tree, applied, listed, [renamed.get(n, n) for n in names], renamed=renamed, upstream=upstream)


def _renamed(store: Store, applied: Applied, listed: list[str]) -> dict[str, str]:
    """Applied patches the series no longer names whose bytes a patch it lists (not applied) has: renamed."""
    gone = [(n, sha) for n, sha in applied.patches if n not in listed]
    if not gone:
        return {}
    by_sha: dict[str, str] = {}
    for name in listed:
        if name in applied.names:
            continue
        try:
            data = read_or_none(os.path.join(store.patches_dir, name + ".patch"))
        except StackmgrError:
            continue
        if data is not None:
            by_sha.setdefault(sha256_hex(data), name)
    return {n: by_sha[sha] for n, sha in gone if sha in by_sha}
