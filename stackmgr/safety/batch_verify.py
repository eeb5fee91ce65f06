"""Many patches verified in few git calls (the first look at a big store, a `git pull` of many patches).

Each patch is verified by applying it strictly to the versions its index lines name (safety/preserved.py). Done
one patch at a time that is three git processes a patch: 5,000 patches took 25 s. Patches that touch disjoint
paths (no path, and no path that is a directory of another's) do not meet in an index: a batch of them is applied
to one scratch index holding all their pre-images, in one `git apply --cached`, and each patch's result is what
its own paths end as. When a batch's call refuses, none of its results is kept: each of those patches is then
verified alone, as before, so the verdict (and the failing hunk named) never depends on the batching.
"""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.git import scratch
from stackmgr.git.repo import open_repo
from stackmgr.store.fs import read_or_none

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from stackmgr.store.config import Store

    Before = tuple[tuple[str, str, bytes], ...]  # (mode, blob, path) of each file the patch finds at its base
    Job = tuple[str, Before, frozenset[bytes]]  # patch file name, its pre-images, the paths it touches

BATCH = 200  # patches per git call
WORTH_IT = 8  # below this many patches to verify, one at a time is as fast


def prefetch(store: Store, names: Sequence[str]) -> dict[str, tuple[Before, dict[bytes, tuple[str, str]]]]:
    """The results of the patches `names` that could be verified in batches: file name -> (the pre-images used,
    what the patch's paths end as). Patches whose pre-images need git to find (no index line), that are too big
    for one call, or that do not parse, are left to the one-at-a-time path."""
    if len(names) < WORTH_IT:
        return {}
    by_tree: dict[str, list[Job]] = {}
    for name in names:
        found = _job(store, name)
        if found is not None:
            by_tree.setdefault(found[0], []).append(found[1])
    results: dict[str, tuple[Before, dict[bytes, tuple[str, str]]]] = {}
    for top, jobs in by_tree.items():
        try:
            repo = open_repo(top)
        except StackmgrError:
            continue
        for batch in disjoint_batches(jobs, BATCH):
            if len(batch) < 2:
                continue
            try:
                made = scratch.apply_disjoint(repo, [(before, os.path.join(store.patches_dir, name), paths)
                                                     for name, before, paths in batch])  # fmt: skip
            except StackmgrError:
                continue
            for (name, before, _paths), result in zip(batch, made, strict=True):
                if result is not None:
                    results[name] = (before, result)
    return results


def _job(store: Store, name: str) -> tuple[str, Job] | None:
    from stackmgr.store import patchfile

    path = os.path.join(store.patches_dir, name)
    try:
        if os.stat(path).st_size > scratch.PART:
            return None
        data = read_or_none(path)  # never through a symbolic link
        if data is None:
            return None
        header = patchfile.parse_header(data, name)
        images = patchfile.post_images(patchfile.diff_part(data), name)
    except (OSError, StackmgrError, ValueError, IndexError):
        return None
    config = store.trees.get(header.tree)
    if config is None or not images or any(im.old_blob is None or not im.old_mode for im in images):
        return None
    before = tuple((im.old_mode, im.old_blob or "", im.path) for im in images if im.old_mode != "000000")
    return config.path, (name, before, frozenset(im.path for im in images))


def disjoint_batches(jobs: Iterable[Job], size: int) -> list[list[Job]]:
    """The jobs in batches of at most `size` whose paths never meet: no path twice, and no path that is a directory
    of another's (a file deleted by one patch where another adds `file/x`). First fit, in the order given."""
    batches: list[tuple[list[Job], set[bytes], set[bytes]]] = []  # jobs, paths, directories of paths
    for job in jobs:
        paths = job[2]
        dirs = {p[:i] for p in paths for i in range(len(p)) if p[i : i + 1] == b"/"}
        for members, taken, parents in batches:
            if len(members) < size and not (paths & taken or paths & parents or dirs & taken):
                members.append(job)
                taken |= paths
                parents |= dirs
                break
        else:
            batches.append(([job], set(paths), dirs))
    return [members for members, _taken, _parents in batches]
