"""`stackmgr refresh [PATH…]`: fold the tree's changes on top of its current series into the top patch (quilt's
`refresh`), keeping its description, author and date. It is `save TOP --series S --update` on the applied
patches: the patch is diffed again from the state of the patches below it and verified by the same round trip,
its previous version is kept for `interdiff`, and its links become equivalent or stale by the usual rules.

Without PATHs it takes the changes to the files the patch holds and those no other patch holds: a file another
patch keeps, carried in the tree, stays that patch's (named, it is taken in, as quilt's `add` does). A patch whose
file in the store is not the version the tree applied (a teammate's refresh, pulled) is not rewritten unless
`force` says so: the store's version is then kept for `interdiff`."""

from __future__ import annotations

import os

from stackmgr.commands.navigate import position, tree_to_move
from stackmgr.commands.save import SaveRequest, SaveResult, save
from stackmgr.errors import StackmgrError
from stackmgr.git.repo import open_repo
from stackmgr.store import patchfile
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none


def refresh(store: Store, tree: str | None, paths: tuple[str, ...], force: bool = False) -> SaveResult:
    where = position(store, tree_to_move(store, tree))
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
    # The patch keeps the files it holds; it takes in the changes under PATHs, or else those no other patch holds.
    data = read_or_none(os.path.join(store.patches_dir, top + ".patch")) or b""  # never through a link
    own = tuple(im.path for im in patchfile.post_images(patchfile.diff_part(data), f"patches/{top}.patch"))
    return save(store, SaveRequest(top, tree=where.tree, series=where.series, paths=paths, update=True,
                                   keep_paths=own, command=" ".join(("refresh", *paths)), overwrite=force,
                                   leave_held=True))  # fmt: skip
