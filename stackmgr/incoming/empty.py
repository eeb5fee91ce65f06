"""Which incoming patches are empty: they change nothing, and `import` skips them with a note instead of refusing
the stack (docs/FORMATS.md#imported-patches)."""

from __future__ import annotations

import re

_DIFF_START = re.compile(rb"^(?:diff --git |diff -|Index: |--- .*\n\+\+\+ )", re.M)


def diff_start(data: bytes) -> int:
    """Where the diff of a patch file starts (its first `diff `, `Index: ` or `---`/`+++` pair); -1: none."""
    m = _DIFF_START.search(data)
    return -1 if m is None else m.start()


_MAIL_HEAD = re.compile(rb"\A(?:From [0-9a-f]{40} Mon Sep 17 00:00:00 2001\n)?(?:[\w-]+:.*\n(?:[ \t].*\n)*)*?"
                        rb"Subject:", re.I)  # fmt: skip
GIT_AM_EMPTY = "empty, it changes nothing (as git am --empty=drop)"
QUILT_EMPTY = "empty (quilt applies it as nothing); kept as a comment in the series"


def empty_patch(data: bytes, quilt: bool) -> str | None:
    """Why a patch file is skipped as empty, None when it is not: the one rule for import. A 0-byte file (what
    `git format-patch` of git 2.39 writes for an empty commit) applies as nothing under `quilt push` and
    `git am --empty=drop`; so, outside a quilt series, does a file of blanks and a mail with a subject and no diff
    (newer git's form of the empty commit). In a quilt series GNU patch finds "only garbage" in those: not empty."""
    if not data:
        return QUILT_EMPTY if quilt else GIT_AM_EMPTY
    if quilt:
        return None
    if not data.strip() or (diff_start(data) < 0 and _MAIL_HEAD.match(data) and not _encoded(data)):
        return GIT_AM_EMPTY
    return None


_ENCODED = re.compile(rb"^content-(?:transfer-encoding:[ \t]*(?!(?:7bit|8bit|binary)[ \t]*$)\S|type:[ \t]*multipart/)",
                      re.I | re.M)  # fmt: skip


def _encoded(data: bytes) -> bool:
    """A mail whose body is encoded (base64, quoted-printable) or in parts (an attachment): its diff may be in
    there, as `git am` finds it, so it is never taken for empty (the reader refuses what it cannot read)."""
    head = data.replace(b"\r\n", b"\n").split(b"\n\n", 1)[0]
    return _ENCODED.search(head) is not None
