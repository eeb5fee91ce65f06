"""A series' result composed from what its patches are known to make, instead of applied again.

Every patch in the store's patch index was applied once (`git apply --cached`, strictly) to the pre-images its
`--full-index` lines name, and what it made of each path was recorded (safety/preserved.py). Where each patch of
a series finds exactly those pre-images (the base's, or what the patch before it made), applying it again would
make the same blobs: the result is a lookup, one `update-index` and one `write-tree`, not 40 applies writing
every intermediate blob (what full blob ids are for: docs/FORMATS.md). Anything less than certain (a patch not
verified here, a pre-image that is not there, a mode-only change, a blob missing from the object store, a path
that is a file in one place and a directory in another) returns None, and `apply` applies the patches as
always. The claims check (safety/claims.py) still judges the result.
"""

from __future__ import annotations

import os

from stackmgr.git.repo import blob_entries_answer, output, patch_paths_answer
from stackmgr.git.tempindex import TempIndex
from stackmgr.store import patchfile

TYPE_CHECKING = False  # `typing` stays out of `apply`'s start-up
if TYPE_CHECKING:
    from stackmgr.commands.apply import TreePlan
    from stackmgr.git.repo import Repo
    from stackmgr.store.config import Store
    from stackmgr.types import TreeId

Entry = tuple[str, str] | None  # (mode, blob), or None for no file
TREE_MODE = "040000"


class Composition:
    """A composition, started: git reads the patches (the paths its own parser finds) and the base (into a scratch
    index) while Python reads what the patches record (`claims.claims`). `close()` always."""

    def __init__(self, plan: TreePlan, repo: Repo) -> None:
        self.plan, self.repo = plan, repo
        self.paths = repo.start_patch_paths([ref.path for ref in plan.patches])
        try:
            self.index = TempIndex.scratch(repo, "compose")
            self.base = self.index.start_read_tree(plan.base)
        except BaseException:
            self.paths.communicate()
            raise

    def close(self) -> None:
        try:
            for proc in (self.paths, self.base):
                proc.communicate()  # reaps one not read (nothing more for one that was)
        finally:
            self.index.discard()

    def result(self, store: Store, each: list[list[patchfile.PostImage]]) -> TreeId | None:
        """The result tree, or None when it cannot be composed with certainty; `each`: every patch's own
        sections, in order (what `claims.claims` read)."""
        from stackmgr.safety.preserved import PatchIndex

        plan, repo = self.plan, self.repo
        index = PatchIndex.load(store)
        steps: list[tuple[list[patchfile.PostImage], dict[bytes, tuple[str, str | None]]]] = []
        for ref, images in zip(plan.patches, each, strict=True):
            rec = index.current(os.path.relpath(ref.path, store.patches_dir))  # never verified here: the preflight
            if rec is None or rec["sha256"] != ref.sha256 or rec["error"] or rec["tree"] != plan.tree:  # does that
                return None
            steps.append((images, {path: (mode, blob) for path, mode, blob in rec["entries"]}))
        paths = {im.path for images, _ in steps for im in images}
        if patch_paths_answer(self.paths) != paths:
            return None  # git sees a section the patch index does not (a hand-added `---`/`+++` one): git applies
        parents = {p[:i] for p in paths for i in range(len(p)) if p[i : i + 1] == b"/"}
        listing = repo.start_blob_entries(plan.base, sorted(paths | parents))
        try:  # the blobs the last patch touching each path makes (what `state` ends with), asked meanwhile
            missing = repo.missing_objects(sorted(_last_blobs(steps)))
        except BaseException:
            listing.communicate()
            raise
        at_base = blob_entries_answer(listing)
        state: dict[bytes, Entry] = {}
        below: dict[bytes, int] = {}  # directory -> how many files of `state` are under it
        for images, made in steps:
            for im in images:
                now = state[im.path] if im.path in state else _file(at_base.get(im.path))
                if im.path in at_base and at_base[im.path][0] == TREE_MODE:
                    return None  # a directory at the base where a file goes
                want = None if im.old_mode == "000000" else (im.old_mode, im.old_blob)
                if now != want or (want is not None and (not im.old_blob or len(im.old_blob) != len(plan.base))):
                    return None  # not the pre-image the patch was verified on (or not named in full)
                mode, blob = made.get(im.path, ("", None))
                if blob is None or not mode:
                    return None  # a mode-only change: its content is not recorded
                _count_below(below, im.path, -1 if _file(state.get(im.path)) else 0)
                state[im.path] = None if mode == "000000" else (mode, blob)
                _count_below(below, im.path, 1 if state[im.path] else 0)
            if self._file_and_directory(images, state, at_base, below):
                return None  # after this patch a path is a file and a directory at once: git refuses the order
        if any(_file(state[d] if d in state else at_base.get(d)) for d in parents):
            return None  # a file where another path needs a directory
        if missing:
            return None  # made in another clone: the blobs are not here
        output(self.base)
        self.index.set_entries(state)
        return self.index.write_tree()


    @staticmethod
    def _file_and_directory(images: list[patchfile.PostImage], state: dict[bytes, Entry],
                            at_base: dict[bytes, tuple[str, str]], below: dict[bytes, int]) -> bool:  # fmt: skip
        """Whether a file a patch leaves has a file above it (a file where a directory is needed), or files below
        it, as things stand after the patch (git checks each patch as a whole: within one, a file may give way
        to a directory)."""
        for im in images:
            if state.get(im.path) is None:
                continue
            if below.get(im.path):
                return True
            parent = im.path.rpartition(b"/")[0]
            while parent:
                if _file(state[parent] if parent in state else at_base.get(parent)):
                    return True
                parent = parent.rpartition(b"/")[0]
        return False


def _count_below(below: dict[bytes, int], path: bytes, step: int) -> None:
    if step:
        parent = path.rpartition(b"/")[0]
        while parent:
            below[parent] = below.get(parent, 0) + step
            parent = parent.rpartition(b"/")[0]


def _last_blobs(steps: list[tuple[list[patchfile.PostImage], dict[bytes, tuple[str, str | None]]]]) -> set[str]:
    last: dict[bytes, str | None] = {}
    for images, made in steps:
        for im in images:
            mode, blob = made.get(im.path, ("", None))
            last[im.path] = None if mode in ("", "000000") else blob
    return {blob for blob in last.values() if blob}


def _file(entry: tuple[str, str] | None) -> Entry:
    return None if entry is None or entry[0] == TREE_MODE else entry
