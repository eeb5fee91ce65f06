"""Identifiers and records shared between modules.

These records sit on the path of `check`, which runs in shell prompts: they are plain classes, because
`dataclasses` and `typing` alone cost more start-up time than the whole `git status` they are compared with.
"""

from __future__ import annotations

TYPE_CHECKING = False  # mypy treats this name as true; at run time `typing` is never imported
if TYPE_CHECKING:
    from typing import NewType

    CommitId = NewType("CommitId", str)
    TreeId = NewType("TreeId", str)
    BlobId = NewType("BlobId", str)
else:
    CommitId = TreeId = BlobId = str

NULL_ID = "0" * 40
EMPTY_BLOB = BlobId("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391")
EMPTY_TREE = TreeId("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

GITLINK_MODE = "160000"


class Change(tuple[bytes, str, str, str, str]):
    """One path that differs between HEAD (or a base) and the working tree: (path, old/new mode, old/new blob).

    A deletion has new mode "000000" and the null id. Paths are bytes: file names need not be UTF-8. Equality is
    the tuple's; `status` (git's letter M/A/D/T/U, where known) is extra information.
    """

    status: str

    def __new__(
        cls, path: bytes, old_mode: str, new_mode: str, old_blob: str, new_blob: str, status: str = ""
    ) -> Change:
        self = super().__new__(cls, (path, old_mode, new_mode, old_blob, new_blob))
        self.status = status
        return self

    path = property(lambda self: self[0])
    old_mode = property(lambda self: self[1])
    new_mode = property(lambda self: self[2])
    old_blob = property(lambda self: self[3])
    new_blob = property(lambda self: self[4])

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


# A submodule's own uncommitted work: not the superproject's diff, so never saved (its pointer is), never touched.
SUBMODULE_INSIDE = "uncommitted changes inside this submodule: commit them there to save its pointer"


class Unprotected:
    """A file stackmgr leaves alone: not saved, never deleted (docs/ARCHITECTURE.md#invariants, 3)."""

    __slots__ = ("path", "reason", "size")

    def __init__(self, path: bytes, reason: str, size: int) -> None:
        self.path = path
        self.reason = reason  # "large" | "special" | "nested repository" | SUBMODULE_INSIDE | "gone"
        self.size = size

    def __repr__(self) -> str:
        return f"Unprotected({self.path!r}, {self.reason!r}, {self.size})"


# Characters a terminal acts on or a line reader splits at: C0 controls, DEL, C1 controls, U+2028/U+2029.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}
_CONTROLS.update({c: f"\\u{c:04x}" for c in (*range(0x80, 0xA0), 0x2028, 0x2029)})
# bidirectional overrides, isolates and marks: a name that reads differently from what it is (Trojan Source)
_CONTROLS.update({c: f"\\u{c:04x}" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})
_CONTROLS.update({0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"})


def show_path(path: bytes) -> str:
    """A path as the user reads it, always on one line: undecodable bytes appear as \\xNN, control characters
    as \\n, \\t, \\r, \\xNN or \\uNNNN (a file name may hold a newline; a refusal naming it is still one line,
    and an escape sequence in a name never reaches the terminal)."""
    return path.decode("utf-8", "backslashreplace").translate(_CONTROLS)
