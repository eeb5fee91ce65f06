"""The description of a patch being imported: subject, body, author and date from a mail header (git
format-patch, a mail client's saved message, `--attach`), a DEP-3 header (kept verbatim in the body) or free
text. Text only: the diff bytes are never decoded here (incoming/read.py).

A mail's description is what `git am` makes the commit message (git's mailinfo, then stripspace): the subject
without `Re:` and `[…]` prefixes, in-body `From:`/`Subject:`/`Date:` lines overriding the mail's own, the body
up to the `---` line, trailing blanks and repeated blank lines dropped. What git am drops (other header lines
such as `Origin:` or `Bug-Debian:`, the text below `---`) is not lost: the whole header is kept byte for byte
beside the description (docs/FORMATS.md#imported-patches)."""

from __future__ import annotations

import re
import time

from stackmgr.store import patchfile

TYPE_CHECKING = False  # `typing` costs import's start-up 3 ms
if TYPE_CHECKING:
    from stackmgr.incoming.read import Incoming

_DEP3_FIELD = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):[ \t]?(.*)$")
_DEP3_KEYS = {"description", "subject", "author", "from", "origin", "bug", "forwarded", "reviewed-by",
              "acked-by", "last-update", "applied-upstream", "bug-debian", "bug-ubuntu", "signed-off-by"}  # fmt: skip


def describe(item: Incoming, head: bytes) -> str | None:
    """Subject, body, author and date from a mail header, a DEP-3 header or free text."""
    text = head.decode("utf-8", "replace").replace("\r\n", "\n")
    lines = text.split("\n")
    if lines and lines[0].startswith("From ") and re.match(r"From \S+", lines[0]):
        lines = lines[1:]
    if _is_mail_header(lines):
        return _describe_mail(item, head)
    cut = next((n for n, ln in enumerate(lines) if re.fullmatch(r"---[ \t]*", ln)), None)
    lines = lines[:cut]  # below a `---` line: a diffstat (quilt refresh --diffstat), as git am reads it
    fields, free = _dep3(lines)
    desc = fields.get("description") or fields.get("subject") or ""
    subject_lines = desc.split("\n") if desc else [ln for ln in free if ln.strip()][:1]
    item.subject = subject_lines[0].strip() if subject_lines else ""
    if fields:
        item.body = "\n".join(ln.rstrip() for ln in lines).strip("\n")  # DEP-3 kept verbatim
    else:
        rest = list(free)
        while rest and not rest[0].strip():
            rest.pop(0)
        if rest and rest[0].strip() == item.subject:
            rest.pop(0)
        item.body = "\n".join(ln.rstrip() for ln in rest).strip("\n")
    item.author = address(fields.get("author") or fields.get("from") or "")
    item.date = _dep3_date(fields.get("last-update", ""))
    item.body = _mail_safe(item.body)
    return None


def _is_mail_header(lines: list[str]) -> bool:
    """A first paragraph of RFC 822 header lines (as git format-patch or a mail client saves them) with a
    Subject; a DEP-3 header has Description instead, or is not first."""
    block = []
    for line in lines:
        if not line.strip():
            break
        block.append(line)
    fields = [ln for ln in block if not ln[:1].isspace()]
    return (bool(fields) and all(re.match(r"[A-Za-z][A-Za-z0-9-]*: ?", ln) for ln in fields)
            and any(ln.lower().startswith("subject:") for ln in fields))  # fmt: skip


def _describe_mail(item: Incoming, head: bytes) -> str | None:
    raw = head[head.find(b"\n") + 1 :] if head.startswith(b"From ") else head
    headers, _, rest = raw.replace(b"\r\n", b"\n").partition(b"\n\n")
    read = plain_mail_fields(headers) or email_fields(headers)
    if isinstance(read, str):
        return read
    fields, charset, multipart = read
    body = rest.decode(charset, "replace")
    if multipart:  # format-patch --attach/--inline: the message is the first part
        import email
        import email.policy

        whole = email.message_from_bytes(raw.replace(b"\r\n", b"\n"), policy=email.policy.default)
        text = next((p for p in whole.walk() if p.get_content_type() == "text/plain"), None)
        body = str(text.get_content()) if text is not None else ""
    body = _inbody_headers(body, fields)
    cut = next((m for m in re.finditer(r"(?m)^(?:---.*|diff -.*|Index: .*)$", body) if _patchbreak(m.group(0))), None)
    body = body[: cut.start()] if cut else body  # where git am's mailinfo stops reading the message
    body = re.sub(r"(?m)^Stackmgr-(Tree|Base):.*\n?", "", body)
    trailers = dict(re.findall(r"^(Stackmgr-Tree|Stackmgr-Base): *(\S+) *$", rest.decode("utf-8", "replace"), re.M))
    item.trailer_tree = trailers.get("Stackmgr-Tree")
    item.trailer_base = trailers.get("Stackmgr-Base")
    item.subject = _clean_subject(fields["subject"])
    item.author = address(fields["from"])
    item.date = mail_date(fields["date"])
    item.body = _mail_safe(_stripspace(body))
    return None


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_PLAIN_DATE = re.compile(r"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), )?(\d{1,2}) (" + "|".join(_MONTHS) +
                         r") ([1-9]\d{3}) ([01]\d|2[0-3]):([0-5]\d):([0-5]\d) ([+-])([01]\d)([0-5]\d)\Z")  # fmt: skip


def mail_date(text: str) -> str:
    """A mail's Date as the patch file's date (docs/FORMATS.md#patch-file); "" when unreadable (the date of an
    earlier import of it, or the file's time, is then used). The date `git format-patch` writes is read here; any
    other as the email package reads it."""
    m = _PLAIN_DATE.match(text)
    if m and m[7] + m[8] + m[9] != "-0000":  # -0000: no zone, read as local time by the email package
        import calendar

        year, month, day = int(m[3]), _MONTHS.index(m[2]) + 1, int(m[1])
        if 1 <= day <= calendar.monthrange(year, month)[1]:
            east = (1 if m[7] == "+" else -1) * (int(m[8]) * 3600 + int(m[9]) * 60)
            unix = calendar.timegm((year, month, day, int(m[4]), int(m[5]), int(m[6]))) - east
            return patchfile.rfc2822(unix, m[7] + m[8] + m[9])
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(text)
        offset = when.utcoffset()
        minutes = int(offset.total_seconds() // 60) if offset is not None else 0
        tz = f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
        return patchfile.rfc2822(int(when.timestamp()), tz)
    except (TypeError, ValueError, IndexError, OverflowError):
        return ""


MailFields = tuple[dict[str, str], str, bool]  # subject/from/date (blanks folded), the body's charset, multipart


def email_fields(headers: bytes) -> MailFields | str:
    """A mail header block as Python's email package (policy.default) reads it; a str: why it is refused."""
    import email
    import email.policy

    msg = email.message_from_bytes(headers + b"\n\n", policy=email.policy.default)
    cte = str(msg.get("content-transfer-encoding", "")).lower()
    if cte in ("base64", "quoted-printable"):
        return f"a {cte} mail body (save the message raw, or apply it with git am first)"
    charset = msg.get_content_charset() or "utf-8"
    try:
        "".encode(charset)
    except LookupError:
        charset = "utf-8"
    if charset != "utf-8" and not headers.isascii():  # raw 8-bit headers in the declared charset
        msg = email.message_from_string(headers.decode(charset, "replace") + "\n\n", policy=email.policy.default)
    fields = {key: " ".join(str(msg.get(key, "")).split()) for key in ("subject", "from", "date")}
    return fields, charset, msg.get_content_maintype() == "multipart"


_HEADER_NAME = re.compile(r"[!-9;-~]+\Z")  # RFC 5322 field name: printable ASCII but ':'
_PLAIN_FROM = re.compile(r"[^\"(),;:\\<>@\[\]]*<[^<>@\s\"(),;:\\]+@[^<>@\s\"(),;:\\]+>\Z")
_PLAIN_TYPE = re.compile(r"text/plain(?:;\s*charset=\"?(utf-8|us-ascii)\"?)?\Z", re.I)


def plain_mail_fields(headers: bytes) -> MailFields | None:
    """What `email_fields` reads, for the header block `git format-patch` writes (ASCII, no encoded words, a
    plain `Name <addr>` sender, a text/plain body in 7 or 8 bit), without the email package's header registry
    (most of import's start-up); None for anything else, which `email_fields` then reads."""
    if not headers.isascii() or b"=?" in headers:
        return None
    seen: dict[str, str] = {}
    key = ""
    for line in headers.decode("ascii").split("\n"):
        if line[:1] in (" ", "\t"):
            if not key:
                return None
            seen[key] += " " + line
            continue
        name, colon, value = line.partition(":")
        if not colon or not _HEADER_NAME.match(name):
            return None
        key = name.lower()
        if key in seen:  # the first of a repeated field is the one read; a second one: leave it to the email package
            return None
        seen[key] = value
    fields = {k: " ".join(seen.get(k, "").split()) for k in ("subject", "from", "date")}
    kind = _PLAIN_TYPE.match(" ".join(seen.get("content-type", "text/plain").split()))
    if (kind is None or " ".join(seen.get("content-transfer-encoding", "8bit").split()).lower() not in ("7bit", "8bit")
            or not _PLAIN_FROM.match(fields["from"])):  # fmt: skip
        return None
    return fields, (kind.group(1) or "utf-8").lower(), False


def _inbody_headers(body: str, fields: dict[str, str]) -> str:
    """git mailinfo's in-body headers: `From:`, `Subject:`, `Date:` lines (and their continuations) at the top
    of the body, after blank lines, override the mail's own; the body goes on after them."""
    lines = body.split("\n")
    at = 0
    while at < len(lines) and not lines[at].strip():
        at += 1
    found, last = False, ""
    while at < len(lines):
        m = re.match(r"(From|Subject|Date):[ \t]*(.*)$", lines[at], re.I)
        if m:
            last = m.group(1).lower()
            fields[last], found = m.group(2).strip(), True
        elif last and lines[at][:1] in (" ", "\t"):
            fields[last] += " " + lines[at].strip()
        else:
            break
        at += 1
    if not found:
        return body
    if at < len(lines) and not lines[at].strip():
        at += 1
    return "\n".join(lines[at:])


def _patchbreak(line: str) -> bool:
    """A line where git mailinfo's message ends and the patch begins."""
    if line.startswith(("diff -", "Index: ")):
        return True
    return line.startswith("---") and ((line[3:4] == " " and line[4:5] not in ("", " ", "\t")) or not line[3:].strip())


def _clean_subject(subject: str) -> str:
    """git mailinfo's `cleanup_subject`: leading blanks, `:`, `Re:` and `[…]` groups go, again and again."""
    while True:
        stripped = re.sub(r"^(?:[ \t:]+|[Rr][Ee]:|\[[^\]]*\])", "", subject, count=1)
        if stripped == subject:
            return subject.strip()
        subject = stripped


def _stripspace(text: str) -> str:
    """git stripspace, as git am cleans a message: trailing blanks and repeated or outer blank lines removed."""
    out: list[str] = []
    for line in text.split("\n"):
        line = line.rstrip()
        if line or (out and out[-1]):
            out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def _dep3(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """DEP-3 fields (continuations joined, ` .` as a blank line) when the header is DEP-3; else free text."""
    fields: dict[str, str] = {}
    last = None
    for line in lines:
        m = _DEP3_FIELD.match(line)
        if m and m.group(1).lower() in _DEP3_KEYS:
            last = m.group(1).lower()
            fields[last] = m.group(2).strip() if last not in fields else fields[last] + "\n" + m.group(2).strip()
        elif last and line[:1] in (" ", "\t"):
            fields[last] += "\n" + ("" if line.strip() == "." else line.strip())
        elif line.strip():
            last = None
    if "description" not in fields and "subject" not in fields:
        return {}, lines
    return fields, []


_PLAIN_ADDRESS = re.compile(r"([A-Za-z0-9 ._'-]*)<([A-Za-z0-9_%+=-]+(?:\.[A-Za-z0-9_%+=-]+)*"
                            r"@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)>\Z")  # fmt: skip


def address(text: str) -> str:
    """A From or Author field as the patch's author, "Name <email>"; "" when it names no address. A plain
    `Name <user@host>` is read here; any other as the email package's parseaddr reads it."""
    plain = _PLAIN_ADDRESS.match(text.strip())
    if plain:
        name, mail = " ".join(plain[1].split()), plain[2]
        return f"{name or mail.split('@')[0]} <{mail}>"
    from email.utils import parseaddr

    name, mail = parseaddr(text)
    if not mail or "@" not in mail:
        return ""
    return f"{name or mail.split('@')[0]} <{mail}>"


def _dep3_date(text: str) -> str:
    m = re.match(r"(\d{4})-(\d{2})-(\d{2})$", text.strip())
    if not m:
        return ""
    try:
        stamp = time.mktime((int(m[1]), int(m[2]), int(m[3]), 0, 0, 0, 0, 0, 0)) - time.timezone
    except (OverflowError, ValueError):
        return ""
    return patchfile.rfc2822(int(stamp), "+0000")


def _mail_safe(body: str) -> str:
    """Lines git am would take for the start of the diff are indented by one space."""
    risky = ("---", "diff -", "Index: ", "From ")
    return "\n".join(" " + ln if ln.startswith(risky) else ln for ln in body.split("\n"))
