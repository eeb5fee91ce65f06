"""Metric regexes matched in bounded time (docs/FORMATS.md#limits): a link record's metric source and the shared
config's `[run.metrics]` arrive by `git pull` (docs/SECURITY.md), and Python's `re` backtracks: `^(a+)+$` on a
line of thirty `a`s runs for minutes.

So a metric regex is RE2's (google-re2): no backtracking, time linear in the text. Linear still grows with the
pattern when RE2 falls back from its DFA to its NFA (`(a|b)*a(a|b){20}` does), so the text is searched in
pieces of whole lines sized to the compiled program (about WORK instruction-bytes each), and each pattern gets
a time budget per file: GRACE_S plus a second per RATE bytes searched. A pattern past its budget stops, said.
A match never crosses a line (RE2's `never_nl`); `^` and `$` are a line's ends. RE2's syntax is Python's without
lookarounds, backreferences, `\\Z` (RE2 says `\\z`) and `(?x)`: such a pattern is refused with RE2's reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from stackmgr.errors import UsageProblem

MAX_PATTERN = 1000  # characters of a metric regex
MAX_PROGRAM = 4000  # RE2 instructions: beyond, a pattern is refused as too complex
WORK = 16 << 20  # instructions × characters searched at once: about a quarter second when RE2 is at its slowest
LARGEST_PIECE = 1 << 20  # characters searched at once (a longer line is searched in pieces this long)
GRACE_S = 5.0  # seconds a pattern may take on one file before its speed is judged ...
RATE = 64 << 20  # ... then it must have searched this many characters a second
_EDGES = ("\\A", "\\z")  # the text's ends: within one line, so searched line by line


class BadPattern(UsageProblem):
    """A regex that cannot be matched in bounded time here: RE2 refuses its syntax, or it is too long or too
    complex (exit 2 on the command line; a finding in `verify`)."""


@dataclass(frozen=True)
class Hit:
    """A match: its pattern as given, how many groups it has, and the text of each group (0: the whole match;
    None: a group that took no part)."""

    pattern: str
    groups: int
    texts: tuple[str | None, ...]

    def group(self, index: int = 0) -> str | None:
        return self.texts[index]


class LinePattern:
    """A compiled metric regex (`compile_pattern`): `search` finds its first match within one line of a text."""

    def __init__(self, pattern: str, compiled: Any) -> None:
        self.pattern = pattern
        self.groups: int = compiled.groups
        self._rx = compiled
        self.piece = max(4096, min(LARGEST_PIECE, WORK // max(1, compiled.programsize)))
        self.by_line = any(edge in pattern for edge in _EDGES)

    def search(self, text: str) -> Hit | None:
        """The first match in `text` (one piece: see `pieces`)."""
        m = self._rx.search(text)
        if m is None:
            return None
        return Hit(self.pattern, self.groups, tuple(m.group(i) for i in range(self.groups + 1)))

    def pieces(self, text: str) -> Iterator[str]:
        """`text` in pieces of whole lines no longer than `piece` (a longer line in pieces of that length; line
        by line for a pattern naming the text's ends, so that they are a line's)."""
        if self.by_line:
            for line in text.split("\n"):
                yield from (line[i : i + self.piece] for i in range(0, max(1, len(line)), self.piece))
            return
        start = 0
        while len(text) - start > self.piece:
            cut = text.rfind("\n", start, start + self.piece)
            stop = cut if cut > start else start + self.piece  # a line longer than a piece is cut
            yield text[start:stop]
            start = stop + 1 if stop == cut else stop
        yield text[start:]


def compile_pattern(pattern: str) -> LinePattern:
    """`pattern` compiled for `search` within a line; BadPattern saying why it cannot be."""
    if len(pattern) > MAX_PATTERN:
        raise BadPattern(f"the regex is {len(pattern)} characters long (the limit is {MAX_PATTERN})",
                         "match less of the line")  # fmt: skip
    import re2  # type: ignore[import-untyped]

    options = re2.Options()
    options.never_nl = True  # within one line, whatever the pattern says
    options.log_errors = False
    try:
        compiled = re2.compile("(?m)" + pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise BadPattern(f"bad regex ({reason})", "metric regexes are RE2's: Python's syntax without lookarounds, "
                         "backreferences, \\Z or (?x)") from None  # fmt: skip
    if compiled.programsize > MAX_PROGRAM:
        raise BadPattern(f"the regex is too complex ({compiled.programsize} RE2 instructions, the limit is "
                         f"{MAX_PROGRAM})", "use fewer or smaller counted repetitions")  # fmt: skip
    return LinePattern(pattern, compiled)


class Budget:
    """A pattern's time on one file: GRACE_S, then a second per RATE characters searched."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.searched = 0

    def spent(self, searched: int) -> bool:
        self.searched += searched
        elapsed = time.monotonic() - self.started
        return elapsed > GRACE_S and elapsed > self.searched / RATE


def first_matches(patterns: dict[str, LinePattern], blocks: Iterable[str],
                  gave_up: dict[str, str] | None = None) -> dict[str, Hit]:  # fmt: skip
    """The first match of each pattern within one line of the text given as `blocks` (whole lines each), in one
    pass; a pattern that never matches is left out, and so is one past its time budget (its name and why into
    `gave_up`)."""
    found: dict[str, Hit] = {}
    budgets = {name: Budget() for name in patterns}
    for text in blocks:
        for name, rx in patterns.items():
            if name in found or name not in budgets:
                continue
            for piece in rx.pieces(text):
                hit = rx.search(piece)
                if hit is not None:
                    found[name] = hit
                    break
                if budgets[name].spent(len(piece) + 1):
                    del budgets[name]
                    if gave_up is not None:
                        gave_up[name] = f"its regex is too slow here (under {RATE >> 20} MiB/s after {GRACE_S:g} s)"
                    break
        if all(name in found or name not in budgets for name in patterns):
            break
    return found
