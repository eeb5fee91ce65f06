"""A series' patches read for building them, grouped by tree (docs/FORMATS.md#series-file), by the rule for "this
tree's patches of S after guards" (store/position.py `tree_entries`). Reads only; `apply`, `push`, `pop`,
`export`, `bisect` and `rebase` read a series through it."""

from __future__ import annotations

import os
import threading

from stackmgr.errors import StackmgrError
from stackmgr.store import patchfile
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none, sha256_hex
from stackmgr.store.series import Entry, SeriesError, SeriesFile, active
from stackmgr.types import TreeId

TYPE_CHECKING = False  # `collections.abc` stays out of `apply`'s start-up
if TYPE_CHECKING:
    from collections.abc import Callable

    from stackmgr.safety.snapshot import Snapshot

MAX_PATCH_BYTES = 1 << 30  # git apply refuses input of 1 GiB or more
_hashing = threading.Lock()  # a patch is hashed once, by whichever thread asks first


class PatchRef:
    def __init__(self, entry: Entry, path: str, data: bytes, header: patchfile.PatchHeader) -> None:
        self.name = entry.name
        self.path = path
        self.tree = header.tree
        self.base = header.base
        self.data = data
        self._sha256: str | None = None

    @property
    def sha256(self) -> str:
        """Hashed once, when first asked (`apply` asks on a thread of its own: hashlib lets go of the GIL on large
        data, so 13 MiB hash beside the snapshot and the reading of the patches, not before them)."""
        return self.hash(sha256_hex)

    def hash(self, hexdigest: Callable[[bytes], str]) -> str:
        with _hashing:
            if self._sha256 is None:
                self._sha256 = hexdigest(self.data)
            return self._sha256


class TreePlan:
    """The patches of one tree, in series order; the tree's base is the first patch's Stackmgr-Base, or, with no
    patch of the tree, the series' base line for it (`empty_base`: the series' patches all found upstream)."""

    def __init__(self, tree: str, path: str, empty_base: str = "") -> None:
        self.tree = tree
        self.path = path
        self.empty_base = empty_base
        self.patches: list[PatchRef] = []
        self.snap: Snapshot | None = None
        self.result: TreeId | None = None

    @property
    def base(self) -> str:
        return self.patches[0].base if self.patches else self.empty_base


def read_patch(store: Store, entry: Entry) -> PatchRef:
    """The patch file an entry names, read and its header parsed; one line when it cannot be applied."""
    path = os.path.join(store.patches_dir, entry.patch)  # the series grammar already refused `/` and `..`
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        raise StackmgrError(f"patches/{entry.patch} does not exist", "see `stackmgr series`") from None
    if size >= MAX_PATCH_BYTES:
        raise StackmgrError(f"patches/{entry.patch} is too large ({size >> 20} MiB; git apply "
                            "takes less than 1 GiB)", "split the change into smaller patches")  # fmt: skip
    data = read_or_none(path) or b""  # never through a link out of patches/
    return PatchRef(entry, path, data, patchfile.parse_header(data, f"patches/{entry.patch}"))


def plan_series(store: Store, name: str, only_tree: str | None, guards: tuple[str, ...]) -> list[TreePlan]:
    """Read and validate the series and its patches; group them by tree (`tree_entries`' rule, every patch read
    and checked). Touches nothing."""
    series = SeriesFile.load(store, name)
    series.check_files()
    if only_tree is not None:
        store.tree(only_tree)
    plans: dict[str, TreePlan] = {}
    for entry in series.entries:
        if not active(entry, guards):
            continue
        ref = read_patch(store, entry)  # `check_files` refused a symbolic link out of patches/
        if not store.knows(ref.tree):
            raise StackmgrError(f"patches/{entry.patch} belongs to tree {ref.tree}, which this store does not know",
                                f"register it with `stackmgr tree add {ref.tree} PATH`")  # fmt: skip
        if only_tree in (None, ref.tree):
            store.tree(ref.tree)  # a tree with no path on this machine says so
        if only_tree is not None and ref.tree != only_tree:
            continue
        plan = plans.setdefault(ref.tree, TreePlan(ref.tree, store.tree(ref.tree).path))
        plan.patches.append(ref)
    _plan_bases(store, series, only_tree, plans)
    if not plans:
        where = f" for tree {only_tree}" if only_tree else ""
        raise StackmgrError(f"series {name} has no patches to apply{where}", f"see `stackmgr series {name}`")
    return list(plans.values())


def _plan_bases(store: Store, series: SeriesFile, only_tree: str | None, plans: dict[str, TreePlan]) -> None:
    """The series' base lines (docs/FORMATS.md#series-file): a tree with no patch gets an empty plan at its line's
    base; a tree with patches takes its base from them, and a line saying another base is an error at its line."""
    rel = os.path.relpath(series.path, store.root)
    for tree, (commit, lineno) in series.base_lines().items():
        if only_tree not in (None, tree):
            continue
        if tree in plans:
            first = plans[tree].patches[0]
            if first.base != commit:
                raise SeriesError(rel, lineno, f"the series' base line says tree {tree} at {commit[:12]}, but its "
                                  f"first patch {first.name} records {first.base[:12]}",
                                  f"delete line {lineno} (the patches give the base), or save that patch again "
                                  f"on {commit[:12]}")  # fmt: skip
            continue
        if not store.knows(tree):
            raise SeriesError(rel, lineno, f"the series' base line names tree {tree}, which this store does not know",
                              f"register it with `stackmgr tree add {tree} PATH`")  # fmt: skip
        plans[tree] = TreePlan(tree, store.tree(tree).path, empty_base=commit)
