"""A mail's Subject, From and Date read without the email package's header registry (the most of `import`'s
start-up) where the header block is what `git format-patch` writes, and exactly as the email package reads them:
anything the short reading does not know is left to the email package."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackmgr.incoming.descriptions import MailFields, address, email_fields, mail_date, plain_mail_fields
from stackmgr.store import patchfile
from tests.conftest import Lab, commit, git
from tests.test_import import clone

FORMAT_PATCH = (b"From: Jane Dev <jane@example.com>\nDate: Tue, 5 Mar 2024 10:11:12 +0100\n"
                b"Subject: [PATCH 03/21] Fix the readme greeting, which was far too long for\n"
                b" one line\nMIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n"
                b"Content-Transfer-Encoding: 8bit")  # fmt: skip
SAMPLES = {
    "format-patch": FORMAT_PATCH,
    "no mime": b"From: J. R. Dev <j@example.org>\nSubject: x\nDate: Mon, 1 Jan 2024 00:00:00 -0000",
    "tab folded": b"From: A <a@b.c>\nSubject: one\n\ttwo\nDate: 1 Jan 2024 00:00 +0000",
    "bare address": b"From: a@b.c\nSubject: s\nDate: Mon, 1 Jan 2024 00:00:00 +0000",
    "quoted name": b'From: "Dev, Jane" <jane@example.com>\nSubject: s',
    "comment": b"From: jane@example.com (Jane Dev)\nSubject: s",
    "encoded word": b"From: =?UTF-8?q?J=C3=A9r=C3=B4me?= <j@x.org>\nSubject: =?UTF-8?q?caf=C3=A9?=",
    "latin-1": b"From: J\xe9r\xf4me <j@x.org>\nSubject: caf\xe9\nContent-Type: text/plain; charset=ISO-8859-1",
    "us-ascii": b'From: A <a@b.c>\nSubject: s\nContent-Type: text/plain; charset="us-ascii"',
    "quoted-printable": b"From: A <a@b.c>\nSubject: s\nContent-Transfer-Encoding: quoted-printable",
    "multipart": b'From: A <a@b.c>\nSubject: s\nContent-Type: multipart/mixed; boundary="xx"',
    "two subjects": b"From: A <a@b.c>\nSubject: first\nSubject: second",
    "bad date": b"From: A <a@b.c>\nSubject: s\nDate: yesterday",
    "no date": b"From: A <a@b.c>\nSubject: s",
    "spaces": b"From:   A   B   <a@b.c>  \nSubject:    lots   of   blanks   \nDate: Mon, 1 Jan 2024 00:00:00 +0000",
    "empty name": b"From: <a@b.c>\nSubject: s",
}


def used(read: MailFields | str | None) -> object:
    """What import takes of a reading: the subject, the author and date it records, the body's charset, multipart."""
    if read is None or isinstance(read, str):
        return read
    fields, charset, multipart = read
    return fields["subject"], address(fields["from"]), mail_date(fields["date"]), charset, multipart


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_header_block_is_read_as_the_email_package_reads_it_or_left_to_it(name: str) -> None:
    headers = SAMPLES[name]
    fast = plain_mail_fields(headers)
    assert fast is None or used(fast) == used(email_fields(headers)), name


def test_what_git_format_patch_writes_is_read_without_the_email_package() -> None:
    assert plain_mail_fields(FORMAT_PATCH) == (
        {"subject": "[PATCH 03/21] Fix the readme greeting, which was far too long for one line",
         "from": "Jane Dev <jane@example.com>", "date": "Tue, 5 Mar 2024 10:11:12 +0100"}, "utf-8", False)  # fmt: skip


def test_real_format_patch_mails_read_both_ways_alike(lab: Lab, tmp_path: Path) -> None:
    """Mails git itself writes, with a non-ASCII author and subject (encoded words) and an ASCII one."""
    work = clone(lab, tmp_path / "colleague")
    commit(work, {"README": "hi\n"}, "a plain subject that is long enough to be folded by git format-patch, surely")
    git(work, "-c", "user.name=Jérôme Dév", "commit", "-q", "--allow-empty", "-m", "café au lait")
    out = tmp_path / "mails"
    git(work, "format-patch", "-q", "--always", "-o", str(out), "HEAD~2")
    read = []
    for mail in sorted(out.glob("*.patch")):
        headers = mail.read_bytes().split(b"\n", 1)[1].split(b"\n\n", 1)[0]
        fast = plain_mail_fields(headers)
        assert fast is None or used(fast) == used(email_fields(headers))
        read.append(fast is not None)
    assert read == [True, False]  # the encoded words are the email package's


DATES = ["Tue, 5 Mar 2024 10:11:12 +0100", "Mon, 01 Jan 2024 00:00:00 -0000", "1 Jan 2024 00:00:00 +0000",
         "Thu, 29 Feb 2024 23:59:59 -1130", "Fri, 30 Feb 2024 10:00:00 +0000", "Sat, 1 Jan 1966 12:00:00 +0200",
         "Sun, 1 Jan 2024 24:00:00 +0000", "Wed, 31 Dec 2025 12:00:00 +2359", "yesterday", "",
         "Tue, 5 Mar 24 10:11 +0100", "Tue, 5 Mar 2024 10:11:12 GMT", "1 Jan 0050 00:00:00 +0000",
    "1 Jan 0000 00:00:00 +0000"]  # fmt: skip
ADDRESSES = ["Jane Dev <jane@example.com>", "J. R. Dev <j.r@mail.example.org>", "  A   B   <a+tag@b.c>  ",
             "<a@b.c>", "O'Brien <ob@x.ie>", "jane@example.com", "Jane <jane@localhost>", "a..b <a..b@c.d>",
             '"Dev, Jane" <jane@example.com>', "jane@example.com (Jane Dev)", "Jérôme <j@x.org>", "nobody", "",
             "Name <not an address>", "x_y-z <x_y-z=1%2@h-1.example>"]  # fmt: skip


@pytest.mark.parametrize("text", DATES)
def test_a_date_is_read_as_the_email_package_reads_it(text: str) -> None:
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(text)
        offset = when.utcoffset()
        minutes = int(offset.total_seconds() // 60) if offset is not None else 0
        tz = f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
        wanted = patchfile.rfc2822(int(when.timestamp()), tz)
    except (TypeError, ValueError, IndexError, OverflowError):
        wanted = ""
    assert mail_date(text) == wanted


@pytest.mark.parametrize("text", ADDRESSES)
def test_an_address_is_read_as_parseaddr_reads_it(text: str) -> None:
    from email.utils import parseaddr

    name, mail = parseaddr(text)
    assert address(text) == (f"{name or mail.split('@')[0]} <{mail}>" if mail and "@" in mail else "")
