"""File names in a diff's headers, read as `git apply` reads them (git's apply.c: `find_name_traditional`,
`diff_timestamp_len`, `git_header_name`), so the paths import searches history for are the paths git will patch.

- `--- NAME` / `+++ NAME` of a traditional diff: a C-quoted name is unquoted; otherwise, when the line ends in a
  timestamp (`2010-07-05 19:41:17.620000023 -0500`, `… +08:00`, after a tab, or after spaces in a
  whitespace-damaged mail), the name is everything before it, tabs and spaces included; without one, the name
  stops at the first tab (spaces, even trailing ones, are part of it).
- `--- NAME` / `+++ NAME` of a git diff: unquoted, or up to the first tab (git ends a name with a space in it
  with a tab).
- `diff --git A B`: both names, quoted or not, with any prefix pair git writes (`a/ b/`, `i/ w/ c/ o/`,
  `--src-prefix`/`--dst-prefix`) or none (`--no-prefix`).
"""

from __future__ import annotations

import re

from stackmgr.store import patchfile

_TZ = re.compile(rb" [+-]\d{4}\Z")
_TZ_COLON = re.compile(rb" [+-]\d\d:\d\d\Z")
_TIME = re.compile(rb" \d\d:\d\d:\d\d\Z")
_FRACTIONAL_TIME = re.compile(rb" \d\d:\d\d:\d\d\.\d+\Z")
_DATE = re.compile(rb"(?:\d\d)?\d\d-\d\d-\d\d\Z")


def timestamp_len(line: bytes) -> int:
    """How many bytes at the end of a `---`/`+++` line (without its newline) are a diff timestamp with the
    blank(s) before it; 0 when there is none (git's `diff_timestamp_len`)."""
    if not line[-1:].isdigit():
        return 0
    end = len(line)
    for zone in (_TZ, _TZ_COLON):
        m = zone.search(line, 0, end)
        if m:
            end = m.start()
            break
    for clock in (_TIME, _FRACTIONAL_TIME):
        m = clock.search(line, 0, end)
        if m:
            end = m.start()
            break
    m = _DATE.search(line, 0, end)
    if m is None:
        return 0
    end = m.start()
    if end == 0:
        return 0
    if line[end - 1 : end] == b"\t":
        return len(line) - (end - 1)
    if line[end - 1 : end] != b" ":
        return 0
    while end > 0 and line[end - 1 : end].isspace():  # whitespace damage: spaces where the tab was
        end -= 1
    return len(line) - end


def file_name(text: bytes, traditional: bool) -> bytes:
    """The name on a `--- `/`+++ ` line (after those four bytes), before -p stripping."""
    text = text.split(b"\n", 1)[0]
    if text.startswith(b'"'):
        return patchfile.unquote_c(text)[0]
    if traditional:
        stamp = timestamp_len(text)
        if stamp:
            return text[: len(text) - stamp]
    return re.split(rb"[\t\r]", text, maxsplit=1)[0]


def git_header_names(rest: bytes) -> list[bytes]:
    """The two names of a `diff --git` line (after `diff --git `), or one when they cannot be told apart."""
    if rest.startswith(b'"'):
        first, tail = patchfile.unquote_c(rest)
        tail = tail.lstrip(b" ")
        second = patchfile.unquote_c(tail)[0] if tail.startswith(b'"') else tail
        return [first, second]
    if b' "' in rest:  # `diff --git a/plain "b/quoted\tname"`
        at = rest.index(b' "')
        return [rest[:at], patchfile.unquote_c(rest[at + 1 :])[0]]
    half = rest.find(b" b/")
    if half > 0 and rest.startswith(b"a/"):
        return [rest[:half], rest[half + 1 :]]
    for at in range(rest.find(b" "), len(rest)):  # `i/x w/x`, `c/x w/x`, --src-prefix/--dst-prefix forms
        if rest[at : at + 1] == b" " and prefixed([rest[:at], rest[at + 1 :]]):
            return [rest[:at], rest[at + 1 :]]
    middle = len(rest) // 2  # without prefixes: the same name twice (git's own guess for such headers)
    if len(rest) % 2 and rest[middle : middle + 1] == b" " and rest[:middle] == rest[middle + 1 :]:
        return [rest[:middle], rest[middle + 1 :]]
    return [rest]


def header_strip(rest: bytes, moved: tuple[bytes, bytes] | None) -> int:
    """The -p level of a `diff --git` line (after `diff --git `): 1 with a prefix pair, 0 for `--no-prefix`.
    For a rename or copy the `rename from`/`rename to` lines (never prefixed) say which."""
    if moved is not None:
        old, new = moved
        if rest.startswith(b'"') or b' "' in rest:
            names = git_header_names(rest)
            return 0 if names[:1] == [old] else 1
        return 0 if rest == old + b" " + new else 1
    return 1 if prefixed(git_header_names(rest)) else 0


def prefixed(names: list[bytes]) -> bool:
    """`diff --git` names with a prefix to strip (-p1): git's `a/ b/`, its mnemonic `i/ w/ c/ o/` (one path
    component each, different, around the same name), or any `--src-prefix`/`--dst-prefix` pair of that shape.
    The same name twice is a `--no-prefix` diff."""
    if len(names) != 2:
        return False
    if names[0].startswith(b"a/") and names[1].startswith(b"b/"):
        return True
    (src, _, left), (dst, _, right) = names[0].partition(b"/"), names[1].partition(b"/")
    return bool(left) and left == right and src != dst and b" " not in src + dst


_FAILED_AT = re.compile(r"patch failed: (.+):(\d+)$", re.M)
_HUNK_AT = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def failing_hunk(diff: bytes, strip: int, err: str) -> str:
    """git apply's first complaint, with the hunk it means when it names a file and line (`patch failed: f:15`
    is the hunk of f whose old side starts at line 15): `error: patch failed: f:15 (hunk 2 of 3, @@ -15,6 +15,6 @@)`."""
    said = (err.splitlines() or ["does not apply"])[0]
    m = _FAILED_AT.search(err)
    if m is None:
        return said
    path, line = m.group(1), int(m.group(2))
    for names, hunks in _sections(diff, strip):
        if path in names:
            for n, (start, header) in enumerate(hunks, start=1):
                if start == line:
                    made = line == 0 and all(h.startswith("@@ -0,0 ") for _, h in hunks)  # all added: a creation
                    more = (f"; it creates {path}, which is there already: GNU patch would put these lines above "
                            "its own") if made else ""  # fmt: skip
                    return f"{said} (hunk {n} of {len(hunks)}, {header}{more})"
    return said


def _sections(diff: bytes, strip: int) -> list[tuple[set[str], list[tuple[int, str]]]]:
    """Per file of the diff: its names (stripped, as git prints them) and its hunks (old start line, header)."""
    sections: list[tuple[set[str], list[tuple[int, str]]]] = []
    old = new = 0
    traditional = True
    for line in diff.split(b"\n"):
        if old > 0 or new > 0:  # inside a hunk: `--- x` here is a removed line
            tag = line[:1]
            old -= tag in (b" ", b"", b"\r", b"-")
            new -= tag in (b" ", b"", b"\r", b"+")
            continue
        hunk = _HUNK_AT.match(line)
        if hunk and sections:
            old = int(hunk.group(2)) if hunk.group(2) is not None else 1
            new = int(hunk.group(3)) if hunk.group(3) is not None else 1
            end = line.find(b" @@", 3)
            sections[-1][1].append((int(hunk.group(1)), line[: end + 3].decode("utf-8", "replace")))
        elif line.startswith(b"diff --git "):
            traditional = False
            sections.append((set(), []))
            names = git_header_names(line[11:])
        elif line.startswith(b"--- ") and (traditional or not sections or sections[-1][1]):
            sections.append((set(), []))
            names = [file_name(line[4:], traditional)]
        elif line.startswith(b"+++ "):
            names = [file_name(line[4:], traditional)]
        elif line.startswith((b"rename ", b"copy ")) and sections:
            sections[-1][0].add(file_name(line.split(b" ", 2)[-1], False).decode("utf-8", "replace"))
            continue
        else:
            continue
        if sections:
            sections[-1][0].update(b"/".join(n.split(b"/")[strip:]).decode("utf-8", "replace") for n in names)
    return sections
