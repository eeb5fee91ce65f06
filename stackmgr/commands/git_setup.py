"""`stackmgr git-setup`: make the store's git repository merge series files with stackmgr's driver
(commands/merge_series.py). `.gitattributes` (shared, committed) names the driver for `series/*`; each clone's
own git config says how to run it, since git does not clone config: `init` does both in a repository, a
teammate runs `git-setup` once after cloning."""

from __future__ import annotations

import os
import shlex
import sys

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git.store_repo import DRIVER, in_repository, lfs_install_here, lfs_version, register_merge_driver
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none

ATTRIBUTE = f"series/* merge={DRIVER}".encode()


def write_attributes(store: Store, line: bytes = ATTRIBUTE) -> bool:
    """`.gitattributes` in the store has `line` (by default: the driver for series files); whether it had to be
    written."""
    path = os.path.join(store.root, ".gitattributes")
    existing = read_or_none(path) or b""
    if line in existing.splitlines():
        return False
    store.write_file(path, existing + (b"\n" if existing and not existing.endswith(b"\n") else b"") + line
                     + b"\n")  # fmt: skip
    return True


def git_setup(store: Store, lfs: bool = False, above: int | None = None) -> list[str]:
    """The series merge driver; with `lfs`, the files of `artifacts/` of at least `above` bytes (or the size chosen
    before, else 1 MiB) through git LFS (real git-lfs, in this clone: `git lfs install --local`; the attributes,
    shared: store/lfs.py). Returns the artifacts newly made LFS objects."""
    from stackmgr.journal.operation import operation
    from stackmgr.store import lfs as lfs_files

    if not in_repository(store.root):
        raise UsageProblem(f"{store.root} is not in a git repository",
                           "`git init` it (or clone the team's store), then `stackmgr git-setup`")  # fmt: skip
    if lfs and lfs_version(store.root) is None:
        raise StackmgrError("git-lfs is not installed (nothing was set up)",
                           "install it (`apt-get install git-lfs`, or https://git-lfs.com), then "
                           "`stackmgr git-setup --lfs`")  # fmt: skip
    tracked: list[str] = []
    with operation(store, "git-setup"):
        write_attributes(store)
        if lfs:
            chosen = above if above is not None else lfs_files.threshold(store)
            tracked = lfs_files.set_up(store, lfs_files.DEFAULT_THRESHOLD if chosen is None else chosen)
    register_merge_driver(store.root, driver_command())
    if lfs:
        lfs_install_here(store.root)
    return tracked


def driver_command() -> str:
    """How git runs the driver from this clone: this very Python and stackmgr, whatever PATH git has."""
    return f"{shlex.quote(sys.executable)} -m stackmgr merge-series %O %A %B"


def set_up_new_store(root: str) -> None:
    """What `init` adds: the attribute always, this clone's driver when the store is in a repository already."""
    from stackmgr.store.config import load_store

    write_attributes(load_store(root))
    if in_repository(root):
        register_merge_driver(root, driver_command())
