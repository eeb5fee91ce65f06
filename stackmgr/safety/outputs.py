"""What of a tree's declared result directories is output, and what is work all the same.

Untracked files below a tree's result directories (`results = [...]` in its table) are outputs: left out of its
snapshot, they never block `check` or `reset` and never go into a patch. Except the files the series applied to
the tree holds there (a patch saved before the directory was declared): a series is applied uncommitted, so to
git those files are untracked like any output, yet leaving them out would make the snapshot differ from what the
series made, a patch saved on top of it delete them and a measured residue remove them. While the series stands
on the tree's HEAD, they are work like any file: in the snapshot, preserved by the patch that holds them, and a
change to one is a change to save.
"""

from __future__ import annotations

import os

from stackmgr.errors import GitFailed
from stackmgr.store.fs import read_cache, write_cache

TYPE_CHECKING = False  # mypy treats this as true; `typing` stays out of `check`'s start-up
if TYPE_CHECKING:
    from stackmgr.git.repo import Repo

Held = tuple[str, str]  # the series applied to a tree: its base commit, the tree id it produced (applied_result)


def held_paths(repo: Repo, held: Held | None, head: str, dirs: tuple[bytes, ...]) -> frozenset[bytes]:
    """The paths below `dirs` that the applied series' result holds, when it stands on `head` (a series whose
    base is not HEAD any more holds nothing here). Cached beside the private index by the result's tree id."""
    if not dirs or held is None or held[0] != head:
        return frozenset()
    key = [held[1], sorted(dirs)]
    cache = os.path.join(repo.stackmgr_dir, "held-results.marshal")
    cached = read_cache(cache)
    if isinstance(cached, list) and len(cached) == 2 and cached[0] == key and isinstance(cached[1], list):
        return frozenset(cached[1])
    try:
        paths = sorted(repo.tracked_names(held[1], dirs))
    except GitFailed:  # the series' result is no longer in the repository: it holds nothing to compare with
        return frozenset()
    write_cache(cache, [key, paths])
    return frozenset(paths)
