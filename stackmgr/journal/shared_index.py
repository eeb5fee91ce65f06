"""A split index's bytes need their `.git/sharedindex.*` file, which git deletes whenever it writes a new one
and the old one is older than splitIndex.sharedIndexExpire. The real index an operation saved for its rollback
keeps hard links to those files beside it; the rollback puts back any git deleted since, so the index it
restores can be read."""

from __future__ import annotations

import os

from stackmgr.store.fs import atomic_write, read_or_none


def keep_shared_indexes(git_dir: str, keep: str) -> None:
    """Every `.git/sharedindex.*` kept in `keep`: a hard link (no room needed), or a copy where the store is on
    another file system or links are refused. Nothing when the index is not split."""
    for name in os.listdir(git_dir):
        if name.startswith("sharedindex."):
            os.makedirs(keep, exist_ok=True)
            kept = os.path.join(keep, name)
            try:
                os.link(os.path.join(git_dir, name), kept)
            except FileExistsError:
                pass
            except OSError:  # EXDEV, EPERM (protected hard links), EMLINK
                data = read_or_none(os.path.join(git_dir, name))
                if data is not None:
                    atomic_write(kept, data)


def shared_indexes_back(kept: str, git_dir: str) -> None:
    """The shared index files kept in `kept` put back where git deleted them since."""
    for name in os.listdir(kept) if os.path.isdir(kept) else ():
        if not os.path.exists(os.path.join(git_dir, name)):
            os.link(os.path.join(kept, name), os.path.join(git_dir, name))
