"""Identifiers and records shared between modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NewType

CommitId = NewType("CommitId", str)
TreeId = NewType("TreeId", str)
BlobId = NewType("BlobId", str)

NULL_ID = "0" * 40
EMPTY_BLOB = BlobId("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391")
EMPTY_TREE = TreeId("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

GITLINK_MODE = "160000"


@dataclass(frozen=True)
class Change:
    """One path that differs between HEAD (or a base) and the working tree.

    `new_mode`/`new_blob` are "000000"/NULL_ID for a deletion. Paths are bytes: file names need not be UTF-8.
    """

    path: bytes
    old_mode: str
    new_mode: str
    old_blob: str
    new_blob: str
    status: str = field(default="", compare=False)  # git's letter (M, A, D, T, U) where known

    @property
    def kind(self) -> str:
        if self.new_mode == "000000":
            return "deleted"
        if self.old_mode == "000000":
            return "added"
        if GITLINK_MODE in (self.old_mode, self.new_mode):
            return "submodule"
        if self.old_blob == self.new_blob:
            return "mode"
        if self.old_mode != self.new_mode:
            return "typechange" if "120000" in (self.old_mode, self.new_mode) else "modified+mode"
        return "modified"

    @property
    def is_deletion(self) -> bool:
        return self.new_mode == "000000"


@dataclass(frozen=True)
class Unprotected:
    """A file stackmgr leaves alone: not saved, never deleted (SPEC §4)."""

    path: bytes
    reason: str  # "large" | "special" | "nested repository"
    size: int


def show_path(path: bytes) -> str:
    """A path as the user reads it; undecodable bytes appear as \\xNN."""
    return path.decode("utf-8", "backslashreplace")
