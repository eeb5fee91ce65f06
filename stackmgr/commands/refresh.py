"""`stackmgr refresh [PATH…]`: fold the tree's changes on top of its current series into the top patch (quilt's
`refresh`), keeping its description, author and date. It is `save TOP --series S --update` on the applied
patches: the patch is diffed again from the state of the patches below it and verified by the same round trip,
its previous version is kept for `interdiff`, and its links become equivalent or stale by the usual rules."""

from __future__ import annotations

import os

from stackmgr.commands.navigate import pick_tree, position
from stackmgr.commands.save import SaveRequest, SaveResult, save
from stackmgr.errors import StackmgrError
from stackmgr.git.repo import open_repo
from stackmgr.store import patchfile
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none


def refresh(store: Store, tree: str | None, paths: tuple[str, ...]) -> SaveResult:
    where = position(store, pick_tree(store, tree))
    top = where.top
    if top is None:
        raise StackmgrError(f"tree {where.tree}: {where.summary()}; no patch on top to refresh",
                            "`stackmgr push` applies one")
    head = open_repo(store.tree(where.tree).path).head_commit()
    if head != where.applied.base:  # local commits would be folded into the patch
        shown = head[:12] if head else "(no commit)"
        raise StackmgrError(f"tree {where.tree}: HEAD {shown} is not the base {where.applied.base[:12]} of series "
                            f"{where.series}; nothing changed", "save local commits with `stackmgr save NAME --base "
                            "REV`, or move HEAD back to the base")  # fmt: skip
    own: tuple[bytes, ...] = ()
    if paths:  # the patch keeps the files it holds, and takes in the changes under PATHs
        data = read_or_none(os.path.join(store.patches_dir, top + ".patch")) or b""  # never through a link
        own = tuple(im.path for im in patchfile.post_images(patchfile.diff_part(data), f"patches/{top}.patch"))
    return save(store, SaveRequest(top, tree=where.tree, series=where.series, paths=paths, update=True,
                                   keep_paths=own, command=" ".join(("refresh", *paths))))  # fmt: skip
