"""A mail whose body is encoded (`Content-Transfer-Encoding: base64` or `quoted-printable`), decoded as `git am`
(its mailinfo) decodes it, so the diff inside is read like any other; everything else is left byte for byte."""

from __future__ import annotations

import re

_HEADER = re.compile(rb"^content-transfer-encoding:[ \t]*(base64|quoted-printable)[ \t]*\n", re.I | re.M)
_MULTIPART = re.compile(rb"^content-type:[ \t]*multipart/", re.I | re.M)
_FIELD = re.compile(rb"\A(?:From [^\n]*\n)?(?:[\w-]+:[^\n]*\n(?:[ \t][^\n]*\n)*)+\Z")


def decoded(data: bytes) -> bytes:
    """`data` with its body decoded and its header saying `8bit`, when it is a single-part mail whose body is
    base64 or quoted-printable; else `data` itself. A body that does not decode is left as it is (refused later
    as what it is)."""
    head, sep, body = data.partition(b"\n\n")
    if not sep or not _FIELD.match(head + b"\n") or _MULTIPART.search(head + b"\n"):
        return data
    m = _HEADER.search(head + b"\n")
    if m is None:
        return data
    import binascii

    try:
        if m.group(1).lower() == b"base64":
            plain = binascii.a2b_base64(body)
        else:
            import quopri

            plain = quopri.decodestring(body)
    except (binascii.Error, ValueError):
        return data
    head = (head + b"\n")[: m.start()] + b"Content-Transfer-Encoding: 8bit\n" + (head + b"\n")[m.end() :]
    return head + b"\n" + plain
