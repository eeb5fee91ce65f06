"""A quilt patch read as GNU patch reads it where `git apply` reads it otherwise: an all-added hunk
(`@@ -0,0 +1,N @@`) under `--- a/PATH` (not /dev/null) against a PATH that exists. `git apply` takes such a section
for the creation of a new file and refuses it; GNU patch, and so `quilt push`, puts the N lines above the file's
own first line (zsh's Debian series has one: docs/FORMATS.md#imported-patches). For a quilt series quilt is the
reference, so the section is rewritten into the same change in the form git applies: the hunk gains the file's
first lines as context below the added ones. Likewise a git section whose `---` line names a file that is not
there, under a `diff --git` line naming one that is: GNU patch patches the one that exists. Everything else is
left byte for byte.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_CREATION = re.compile(rb"^@@ -0,0 \+1(?:,(\d+))? @@[^\n]*\n", re.M)
CONTEXT = 3  # lines of the file below the added ones: as many as a unified diff gives


def prepend_creations(diff: bytes, strip: int, existing: Callable[[bytes], bytes | None]) -> tuple[bytes, list[bytes]]:
    """`diff` with each section of one all-added hunk against an existing file (`existing(path)`: its bytes, None
    when it is missing) rewritten to put the lines above the file's own, as GNU patch does; and the paths so
    rewritten. A section `existing` says is missing, or any other shape, is left as it is."""
    out: list[bytes] = []
    done: list[bytes] = []
    pos = 0
    for m in re.finditer(rb"^--- ([^\n]*)\n\+\+\+ ([^\n]*)\n", diff, re.M):
        old, hunk = m.group(1), _CREATION.match(diff, m.end())
        if hunk is None or old.startswith(b"/dev/null"):
            continue
        path = _stripped(old.split(b"\t")[0], strip)
        added = int(hunk.group(1)) if hunk.group(1) is not None else 1
        body, end = _added_lines(diff, hunk.end(), added)
        if path is None or body is None:
            continue
        content = existing(path)
        if not content:
            continue  # missing (git creates it, as GNU patch does) or empty
        context = content.splitlines(keepends=True)[:CONTEXT]
        tail = b"".join(b" " + line for line in context)
        if not context[-1].endswith(b"\n"):
            tail += b"\n\\ No newline at end of file\n"
        header = f"@@ -1,{len(context)} +1,{added + len(context)} @@\n".encode()
        out += [diff[pos : hunk.start()], header, body, tail]
        pos = end
        done.append(path)
    out.append(diff[pos:])
    return b"".join(out), done


def _stripped(name: bytes, strip: int) -> bytes | None:
    parts = name.split(b"/")
    return b"/".join(parts[strip:]) if len(parts) > strip else None


def _added_lines(diff: bytes, start: int, count: int) -> tuple[bytes | None, int]:
    """The hunk's `count` added lines from `start`, and where the section goes on; None when the hunk is not
    exactly that (another line kind, or a last line without its newline: GNU patch would join it to the file's)."""
    pos = start
    for _ in range(count):
        end = diff.find(b"\n", pos)
        if end < 0 or diff[pos : pos + 1] != b"+":
            return None, start
        pos = end + 1
    if diff.startswith((b"\\", b"@@"), pos):
        return None, start
    return diff[start:pos], pos


_GIT_SECTION = re.compile(
    rb"^diff --git a/(\S+) b/(\S+)\n((?:(?!---|@@|diff)[^\n]*\n)*)--- a/([^\t\n]+)([^\n]*)\n", re.M
)


def old_names_as_git_header(diff: bytes, exists: Callable[[bytes], bool]) -> tuple[bytes, list[bytes]]:
    """`diff` with each git section whose `--- a/NAME` names a file that does not exist, under a `diff --git a/X
    b/X` header naming one that does (no rename: a hand-edited header, grub2's gcc12_build_dangling_pointer.patch),
    rewritten to `--- a/X`: GNU patch patches the name that exists, `git apply` the missing one and refuses. The
    paths rewritten."""
    out: list[bytes] = []
    done: list[bytes] = []
    pos = 0
    for m in _GIT_SECTION.finditer(diff):
        header, old = m.group(1), m.group(4)
        if header != m.group(2) or old == header or re.search(rb"^(?:rename|copy) ", m.group(3), re.M):
            continue
        if exists(old) or not exists(header):
            continue
        out += [diff[pos : m.start(4)], header]
        pos = m.end(4)
        done.append(header)
    out.append(diff[pos:])
    return b"".join(out), done


_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@([^\n]*)\n", re.M)


def unpin_hunks(diff: bytes, strip: int, existing: Callable[[bytes], bytes | None]) -> tuple[bytes, list[bytes]]:
    """`diff` with each hunk `git apply` pins where it does not match, and GNU patch lets float, rewritten to where
    its old lines are in the file (`existing(path)`: its bytes; None: missing or changed above, left alone). git
    pins a hunk that starts at line 1 to the file's start, and one with no context
    below its change (a `diff -U0` hunk, samba; a last hunk missing its trailing blank line) to the file's end;
    GNU patch finds either where its lines are (bluez's hunk at line 1 under a new SPDX line). Such a hunk gets
    the line it matches at nearest to the one it names, and up to three of the file's lines below as context;
    the hunk is then the same change in the form git applies. A hunk that matches where git pins it, or nowhere,
    is left byte for byte. The paths so rewritten."""
    out: list[bytes] = []
    done: list[bytes] = []
    pos = 0
    sections = list(re.finditer(rb"^--- ([^\n]*)\n\+\+\+ ([^\n]*)\n", diff, re.M))
    for n, m in enumerate(sections):
        old = m.group(1).split(b"\t")[0]
        path = None if old.startswith(b"/dev/null") else _stripped(old, strip)
        end = sections[n + 1].start() if n + 1 < len(sections) else len(diff)
        hunks = [(h, *_hunk_body(diff, h)) for h in _HUNK.finditer(diff, m.end(), end)]
        pinned = any(body is not None and _pinned(h, body) for h, body, _after in hunks)
        content = existing(path) if path is not None and pinned else None  # the file read only when needed
        if not content or path is None:
            continue
        lines = content.splitlines(keepends=True)
        offset = 0  # GNU patch looks for each hunk where the one before it was found, moved as that one was
        for h, body, after in hunks:
            if body is None or h.start() < pos:
                continue
            old_lines = [ln[1:] for ln in body if ln[:1] in (b" ", b"-")]
            if old_lines:
                at = _gnu_position(old_lines, lines, int(h.group(1)) - 1 + offset)
                offset = at - (int(h.group(1)) - 1) if at is not None else offset
                moved = _unpinned(h, body, lines, at) if _pinned(h, body) else None
            elif _pinned(h, body):  # a `diff -U0` insertion (`@@ -5,0 +6 @@`): after line 5, where git adds at the end
                moved = _inserted(h, body, lines, min(max(int(h.group(1)) + offset, 0), len(lines)))
            else:
                moved = None
            if moved is not None:
                out += [diff[pos : h.start()], moved]
                pos = after
                if path not in done:
                    done.append(path)
    out.append(diff[pos:])
    return b"".join(out), done


def _hunk_body(diff: bytes, h: re.Match[bytes]) -> tuple[list[bytes] | None, int]:
    """The hunk's lines (with their ` `/`-`/`+` tags), and where it ends; None when it is not exactly as many lines
    as its header says, or has a `\\ No newline` line (left to git)."""
    old_n = int(h.group(2)) if h.group(2) is not None else 1
    new_n = int(h.group(4)) if h.group(4) is not None else 1
    body: list[bytes] = []
    pos = h.end()
    while old_n > 0 or new_n > 0:
        end = diff.find(b"\n", pos)
        if end < 0:
            return None, pos
        line = diff[pos : end + 1]
        tag = line[:1]
        if tag == b" ":
            old_n, new_n = old_n - 1, new_n - 1
        elif tag == b"-":
            old_n -= 1
        elif tag == b"+":
            new_n -= 1
        else:
            return None, pos
        body.append(line)
        pos = end + 1
    if old_n or new_n or diff.startswith(b"\\", pos):
        return None, pos
    return body, pos


def _pinned(h: re.Match[bytes], body: list[bytes]) -> bool:
    """Whether git pins the hunk (apply.c, no --unidiff-zero: one at line 1 to the file's start, one with no
    context below to its end) where GNU patch lets it float (patch.c, locate_hunk: a hunk with as much context
    above its change as below is looked for anywhere; one with less below is pinned to the end by GNU patch too,
    one at line 1 with less above to the start). Not a creation's (`@@ -0,0`)."""
    old_at, above, below = int(h.group(1)), _leading(body), _leading(body[::-1])
    return old_at != 0 and ((old_at == 1 and above >= below) or above == below == 0)


def _gnu_position(old: list[bytes], lines: list[bytes], guess: int) -> int | None:
    """Where GNU patch finds a hunk's old lines exactly (no fuzz): at `guess`, else one line later, one earlier,
    two later… (patch.c: locate_hunk); None when they are nowhere."""
    if not old:
        return None
    last = len(lines) - len(old)
    guess = min(max(guess, 0), max(last, 0))
    for step in range(max(guess, last - guess) + 1):
        for at in (guess + step, guess - step) if step else (guess,):
            if 0 <= at <= last and lines[at : at + len(old)] == old:
                return at
    return None


def _unpinned(h: re.Match[bytes], body: list[bytes], lines: list[bytes], at: int | None) -> bytes | None:
    """The pinned hunk rewritten to start at line `at` (GNU patch's place for it), with the file's lines below it as
    context when git pins it to the end; None when git puts it there too, or GNU patch finds it nowhere."""
    old_at = int(h.group(1))
    old = [ln[1:] for ln in body if ln[:1] in (b" ", b"-")]
    pin_start, pin_end = old_at == 1, _leading(body[::-1]) == 0
    if at is None:
        return None  # GNU patch finds it nowhere (exactly): git's answer stands
    git_at = 0 if pin_start else len(lines) - len(old)
    if at == git_at and (not pin_end or at + len(old) == len(lines)):
        return None  # git puts it where GNU patch does
    below = [ln for ln in lines[at + len(old) : at + len(old) + CONTEXT] if ln.endswith(b"\n")]
    if pin_end and not below and at + len(old) < len(lines):
        return None  # only a last line without its newline below: left to git
    tail = [b" " + ln for ln in below] if pin_end else []
    old_n, new_n = len(old) + len(tail), len(body) - len(old) + len([ln for ln in body if ln[:1] == b" "]) + len(tail)
    new_at = int(h.group(3)) + at + 1 - old_at
    header = f"@@ -{at + 1},{old_n} +{new_at},{new_n} @@".encode() + h.group(5) + b"\n"
    return header + b"".join(body) + b"".join(tail)


def _inserted(h: re.Match[bytes], body: list[bytes], lines: list[bytes], at: int) -> bytes | None:
    """A hunk of added lines only, no context (`diff -U0`), rewritten with the file's lines around line `at` (GNU
    patch adds them after that line; git, pinning a hunk with no context below to the file's end, would add them
    there); None where that is the end, or only a last line without its newline follows."""
    if at >= len(lines):
        return None  # the end: where git puts it too
    before = lines[max(0, at - CONTEXT) : at]
    after = [ln for ln in lines[at : at + CONTEXT] if ln.endswith(b"\n")]
    if not after:
        return None
    new_first = int(h.group(3)) + at - int(h.group(1)) - len(before)
    context = len(before) + len(after)
    header = f"@@ -{at - len(before) + 1},{context} +{new_first},{context + len(body)} @@".encode() + h.group(5)
    return header + b"\n" + b"".join(b" " + ln for ln in before) + b"".join(body) + b"".join(b" " + ln for ln in after)


def _leading(body: list[bytes]) -> int:
    """How many context lines the hunk starts with (of `body[::-1]`: ends with)."""
    n = 0
    while n < len(body) and body[n][:1] == b" ":
        n += 1
    return n
