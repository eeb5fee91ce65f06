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
