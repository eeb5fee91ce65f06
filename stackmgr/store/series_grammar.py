"""The series file's grammar, line by line (docs/FORMATS.md#series-file): patch entries with `-p1`, guards and a
comment, comments, and the base line `# stackmgr-base TREE COMMIT`. Reads only; store/series.py edits the file."""

from __future__ import annotations

import re

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.store.names import check_name, valid_name

_GUARD = re.compile(r"#[+-][A-Za-z0-9_.-]+")
BLANKS = " \t\r\f\v"  # quilt and MQ split on ASCII blanks only; a no-break space is part of a name
BASE_LINE = "# stackmgr-base"  # `# stackmgr-base TREE COMMIT`: exactly so, one space between the words
_BASE = re.compile(r"# stackmgr-base ([^ ]+) ([0-9a-f]{40}|[0-9a-f]{64})")


class Entry:
    """One patch line of a series (plain class: `apply` starts without dataclasses/inspect)."""

    __slots__ = ("comment", "guards", "lineno", "patch", "strip")

    def __init__(self, patch: str, lineno: int, guards: list[str] | None = None, strip: bool = False,
                 comment: str = "") -> None:  # fmt: skip
        self.patch = patch  # file name relative to patches/, e.g. "fix.patch"
        self.lineno = lineno
        self.guards = guards if guards is not None else []  # "+xpu" / "-xpu"
        self.strip = strip  # an explicit -p1 was written
        self.comment = comment  # a trailing "# ..." kept as written

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Entry) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self) -> str:
        return f"Entry({self.patch!r}, {self.lineno}, {self.guards!r}, {self.strip!r}, {self.comment!r})"

    @property
    def name(self) -> str:
        return self.patch[: -len(".patch")] if self.patch.endswith(".patch") else self.patch

    def render(self) -> str:
        parts = [self.patch] + (["-p1"] if self.strip else []) + ["#" + g for g in self.guards]
        return " ".join(parts + ([self.comment] if self.comment else []))


def active(entry: Entry, guards: tuple[str, ...] | list[str]) -> bool:
    """MQ's guard rule: a negative guard that is active skips the patch; positive guards need one active."""
    if any(g[1:] in guards for g in entry.guards if g.startswith("-")):
        return False
    positive = [g[1:] for g in entry.guards if g.startswith("+")]
    return not positive or any(g in guards for g in positive)


class Line:
    __slots__ = ("ending", "entry", "text")

    def __init__(self, text: str, ending: str, entry: Entry | None = None) -> None:
        self.text = text  # without its line ending
        self.ending = ending
        self.entry = entry


class SeriesError(StackmgrError):
    def __init__(self, path: str, lineno: int, message: str, hint: str | None = None) -> None:
        super().__init__(f"{path}:{lineno}: {message}", hint or "edit the series file to fix it")


def parse_entry(path: str, lineno: int, text: str) -> Entry | None:
    stripped = text.strip(BLANKS)
    if not stripped:
        return None
    if text.startswith("#"):
        return None
    if stripped.startswith("#"):
        raise SeriesError(path, lineno, "comment not in column 0", "move the '#' to the start of the line")
    words = re.split(f"[{BLANKS}]+", stripped)
    entry = Entry(words[0], lineno)
    try:
        check_name("patch", entry.patch)
    except UsageProblem as exc:
        raise SeriesError(path, lineno, exc.message) from None
    for n, word in enumerate(words[1:], start=1):
        if word == "-p1":
            entry.strip = True
        elif _GUARD.fullmatch(word):
            entry.guards.append(word[1:])
        elif word.startswith(("#+", "#-")):
            raise SeriesError(path, lineno, f"bad guard '{word}'", "guards look like #+name or #-name")
        elif word.startswith("#"):
            entry.comment = " ".join(words[n:])
            break
        elif word.startswith("-p"):
            raise SeriesError(path, lineno, f"'{word}' is not supported",
                              "patches are stored for -p1; drop the option")  # fmt: skip
        else:
            raise SeriesError(path, lineno, f"unexpected '{word}' after the patch name",
                              "one patch name per line, then optional -p1 and #+guard / #-guard")  # fmt: skip
    return entry


def is_base_line(text: str) -> bool:
    return text == BASE_LINE or text.startswith((BASE_LINE + " ", BASE_LINE + "\t"))


def parse_base_line(path: str, lineno: int, text: str) -> tuple[str, str]:
    """(tree, commit) of a base line; SeriesError naming the file and line for anything else (untrusted input:
    a valid tree name, a full lowercase object id, nothing more)."""
    m = _BASE.fullmatch(text)
    if m is None or not valid_name(m.group(1)):
        shown = text.encode("unicode_escape").decode("ascii")[:120]
        raise SeriesError(path, lineno, f"bad base line '{shown}'",
                          "it reads `# stackmgr-base TREE COMMIT` (a tree name, a full lowercase commit id); "
                          "fix or delete the line")  # fmt: skip
    return m.group(1), m.group(2)
