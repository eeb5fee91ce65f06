"""Text made safe for CommonMark (and GitHub's tables): whatever a link record says is shown as written, never read
as markup, raw HTML, a link or a table column."""

from __future__ import annotations

import re
from urllib.parse import quote

# Punctuation that can start markup anywhere in a line (emphasis, code, links, raw HTML, entities, GFM
# strikethrough and table columns).
_ANYWHERE = re.compile(r"([\\`*\[\]<>&|~])")
# An underscore opens or closes emphasis only at a word's edge: output_throughput stays as it is.
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# An ordered list item's number; `#`, `>`, `+`, `=`, `-` at a line's start (a heading, a quote, a list item, a rule,
# a setext underline) are escaped in `_escape_line`.
_ORDERED = re.compile(r"\d{1,9}(?=[.)])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(page: str) -> str:
    """The page with every control character but a newline or tab written as `\\xNN`: a record's ESC
    sequences would act on a terminal that shows the file (`cat`), as CommonMark shows them as text."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", page)


def text(value: str) -> str:
    """Ordinary text inside a line (newlines become spaces)."""
    return _escape_inline(" ".join(value.split()))


def line(value: str) -> str:
    """Ordinary text that starts a line of its own, as a paragraph (newlines become spaces)."""
    return _escape_line(" ".join(value.split()))


def paragraph_lines(value: str) -> list[str]:
    """A multi-line text as Markdown lines, its line breaks kept (a backslash at a line's end is a hard break;
    an empty line starts a new paragraph)."""
    lines = [_escape_line(line.strip()) for line in value.strip().splitlines()]
    out = []
    for i, line in enumerate(lines):
        follows = i + 1 < len(lines) and lines[i + 1] != ""
        out.append(line + ("\\" if line and follows else ""))
    return out


def code(value: str, cell: bool = False) -> str:
    """A code span holding `value` exactly (a fence longer than any run of backticks in it). In a table cell a
    value with `|` is written as escaped text instead: renderers disagree on a pipe inside a code span there."""
    value = " ".join(value.split())
    if not value:
        return ""
    if cell and "|" in value:
        return text(value)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", value)), default=0) + 1)
    pad = " " if value[:1] in ("`", " ") or value[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def link(label: str, target: str) -> str:
    """A link to a relative path: the label escaped, the destination percent-encoded."""
    return f"[{text(label)}]({quote(target, safe='/._-~')})"


def table(head: list[str], rows: list[list[str]], right: tuple[int, ...] = ()) -> list[str]:
    """A GitHub-style table of cells already made safe (`text`, `code(…, cell=True)`, `link`)."""
    rule = ["---:" if i in right else "---" for i in range(len(head))]
    return [_row(head), _row(rule)] + [_row(r) for r in rows]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c or " " for c in cells) + " |"


def _escape_inline(value: str) -> str:
    return _EDGE_UNDERSCORE.sub(r"\\_", _ANYWHERE.sub(r"\\\1", value))


def _escape_line(value: str) -> str:
    line = _escape_inline(value)
    if line[:1] in ("#", ">", "+", "=", "-"):
        return "\\" + line
    number = _ORDERED.match(line)
    return f"{line[: number.end()]}\\{line[number.end() :]}" if number else line
