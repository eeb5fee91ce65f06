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
    rb"^diff --git a/(\S+) b/(\S+)\n((?:(?!---|@@|diff)[^\n]*\n)*)--- a/([^\t\n]+)([^\n]*)\n\+\+\+ b/([^\t\n]+)", re.M
)


def old_names_as_git_header(diff: bytes, exists: Callable[[bytes], bool]) -> tuple[bytes, list[bytes]]:
    """`diff` with each git section whose `--- a/NAME` names a file that does not exist, under a `diff --git a/X
    b/X` header and a `+++ b/X` line naming one that does (no rename: a hand-edited header, grub2's
    gcc12_build_dangling_pointer.patch), rewritten to `--- a/X`: GNU patch patches the `+++` name that exists,
    `git apply` the missing one and refuses. The paths rewritten."""
    out: list[bytes] = []
    done: list[bytes] = []
    pos = 0
    for m in _GIT_SECTION.finditer(diff):
        header, old = m.group(1), m.group(4)
        if header != m.group(2) or header != m.group(6) or old == header:
            continue  # GNU patch takes the `+++` name when the `---` one is missing: only where it is the header's
        if re.search(rb"^(?:rename|copy|new file|deleted file) ", m.group(3), re.M):
            continue
        if exists(old) or not exists(header):
            continue
        out += [diff[pos : m.start(4)], header]
        pos = m.end(4)
        done.append(header)
    out.append(diff[pos:])
    return b"".join(out), done


_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@([^\n]*)\n", re.M)


def unpin_hunks(diff: bytes, strip: int, existing: Callable[[bytes], bytes | None]
                ) -> tuple[bytes, list[bytes], list[bytes]]:  # fmt: skip
    """`diff` with each hunk put where GNU patch puts it where `git apply` would put it elsewhere or refuse it
    (`existing(path)`: the file's bytes; None: missing, left to git). GNU patch looks for a hunk's old lines from
    the line it names moved as the hunk before it was (patch.c, locate_hunk), never above that hunk, one line later
    first, then one earlier…; it pins a hunk with less context below its change than above to the file's end, and
    one at line 1 with less above to its start. git looks from the line the hunk names, and pins one at line 1 to
    the file's start and one with no context below to its end (bluez's hunk at line 1 under a new top line, samba's
    `diff -U0` hunk; a `diff -U0` insertion git would add at the end). Such a hunk gets the line GNU patch finds its
    lines at (exactly, no fuzz), and up to three of the file's lines below as context where git would pin it to the
    end: the same change in the form git puts there. A hunk GNU patch finds nowhere without fuzz ends the rewriting
    of its file. Read only for files where a hunk is pinned or follows another. The paths so rewritten, and those
    with such a hunk whose file is not known here (`existing` raises LookupError, or an earlier section of this
    diff changed it): where git would put it is not known to be GNU patch's place."""
    out: list[bytes] = []
    done: list[bytes] = []
    unsure: list[bytes] = []
    seen: set[bytes] = set()
    pos = 0
    sections = list(re.finditer(rb"^--- ([^\n]*)\n\+\+\+ ([^\n]*)\n", diff, re.M))
    for n, m in enumerate(sections):
        old = m.group(1).split(b"\t")[0]
        path = None if old.startswith(b"/dev/null") else _stripped(old, strip)
        end = sections[n + 1].start() if n + 1 < len(sections) else len(diff)
        hunks = [(h, *_hunk_body(diff, h)) for h in _HUNK.finditer(diff, m.end(), end)]
        asked = len(hunks) > 1 or any(body is not None and _pinned(h, body) for h, body, _after in hunks)
        again = path in seen
        seen.add(path or b"")
        if not asked or path is None:
            continue
        try:
            if again:  # an earlier section of this diff changed it
                raise LookupError(path)
            content = existing(path)
        except LookupError:
            if any(body is not None and _pinned(h, body) for h, body, _after in hunks):
                unsure.append(path)
            continue
        if not content:
            continue
        lines = content.splitlines(keepends=True)
        offset = frozen = 0  # GNU patch's in_offset and last_frozen_line
        placed: list[tuple[re.Match[bytes], list[bytes], int, int, int]] = []  # hunk, body, end, found, old lines
        for h, body, after in hunks:
            if body is None or h.start() < pos:
                break
            old_at = int(h.group(1))
            old_lines = [ln[1:] for ln in body if ln[:1] in (b" ", b"-")]
            if not old_lines:  # an insertion with no context (`@@ -5,0 +6 @@`): after line 5, as GNU patch does
                if not old_at:
                    break
                found = min(max(old_at + offset, frozen), len(lines))
            else:
                where = _gnu_place(old_lines, lines, old_at, offset, frozen, (_leading(body), _leading(body[::-1])))
                if where is None:
                    break  # GNU patch would need fuzz: where it puts this and the rest is not known here
                found, offset = where, where - (old_at - 1)
            frozen = found + len(old_lines)
            placed.append((h, body, after, found, len(old_lines)))
        joined: list[tuple[re.Match[bytes], list[bytes], int, int, int, bool]] = []
        for h, body, after, found, old_n in placed:  # a hunk that ends where the next starts: one hunk for git
            if joined and joined[-1][3] + joined[-1][4] == found:
                first, above, _end, at, n_above, _ = joined[-1]
                joined[-1] = (first, above + body, after, at, n_above + old_n, True)
            else:
                joined.append((h, body, after, found, old_n, False))
        delta = 0  # the lines the hunks above add
        for k, (h, body, after, found, old_n, merged) in enumerate(joined):
            room = (joined[k + 1][3] if k + 1 < len(joined) else len(lines)) - (found + old_n)  # up to the next
            if old_n:
                moved = _placed(h, body, lines, found, delta, room, merged)
            else:
                moved = _inserted(h, body, lines, found, room)
            delta += len(body) - len([ln for ln in body if ln[:1] == b"-"]) - old_n  # new count - old
            if moved is not None:
                out += [diff[pos : h.start()], moved]
                pos = after
                if path not in done:
                    done.append(path)
    out.append(diff[pos:])
    return b"".join(out), done, unsure


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


def _gnu_place(old: list[bytes], lines: list[bytes], old_at: int, offset: int, frozen: int,
               context: tuple[int, int]) -> int | None:  # fmt: skip
    """Where GNU patch (no fuzz) finds a hunk's old lines, 0-based: with less context below than above only at the
    file's end, at line 1 with less above than below only at its start, else from line `old_at` moved by `offset`
    one line later, one earlier, two later…, never above `frozen` (the end of the hunk before); None when
    nowhere. `context`: the hunk's context lines above and below its change."""
    above, below = context
    last, guess = len(lines) - len(old), old_at - 1 + offset

    def at(i: int) -> bool:
        return frozen <= i <= last and lines[i] == old[0] and lines[i : i + len(old)] == old

    if above < below and old_at <= 1:  # patch.c: "Can only match start of file"
        return 0 if frozen <= above and at(0) else None
    if below < above:  # "Can only match end of file"
        return last if at(last) else None
    for step in range(max(abs(guess - frozen), abs(last - guess)) + 1):
        for i in (guess + step, guess - step) if step else (guess,):
            if at(i):
                return i
    return None


def _placed(h: re.Match[bytes], body: list[bytes], lines: list[bytes], found: int, delta: int, room: int,
            merged: bool = False) -> bytes | None:  # fmt: skip
    """The hunk rewritten to start at line `found` (GNU patch's place for it; the hunks above added `delta` lines),
    with the file's lines below it as context where git would pin it to the end (at most `room`: up to the next
    hunk's lines); None when git puts it there as written, or the context it needs is not there."""
    old_at = int(h.group(1))
    old = [ln[1:] for ln in body if ln[:1] in (b" ", b"-")]
    pin_end = _leading(body[::-1]) == 0 and found + len(old) < len(lines)
    if found == old_at - 1 and not pin_end and int(h.group(3)) == found + 1 + delta and not merged:
        return None  # git's first try is GNU patch's place
    below = lines[found + len(old) : found + len(old) + min(CONTEXT, room)] if pin_end else []
    below = below[: len(below) - 1] if below and not below[-1].endswith(b"\n") else below
    if pin_end and not below and not merged:
        return None  # only a last line without its newline below: left to git
    tail = [b" " + ln for ln in below]
    new_n = len(body) - len([ln for ln in body if ln[:1] == b"-"]) + len(tail)
    header = f"@@ -{found + 1},{len(old) + len(tail)} +{found + 1 + delta},{new_n} @@".encode() + h.group(5) + b"\n"
    return header + b"".join(body) + b"".join(tail)


def _inserted(h: re.Match[bytes], body: list[bytes], lines: list[bytes], at: int, room: int) -> bytes | None:
    """A hunk of added lines only, no context (`diff -U0`), rewritten with the file's lines around line `at` (GNU
    patch adds them after that line; git, pinning a hunk with no context below to the file's end, would add them
    there); None where that is the end, or only a last line without its newline follows."""
    if at >= len(lines):
        return None  # the end: where git puts it too
    before = lines[max(0, at - CONTEXT) : at]
    after = lines[at : at + min(CONTEXT, room)]  # up to the next hunk's lines
    after = after[: len(after) - 1] if after and not after[-1].endswith(b"\n") else after
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
