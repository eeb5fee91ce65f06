"""The patch file (docs/FORMATS.md#patch-file): a mail header git am accepts, then a full-index binary diff: bytes."""

from __future__ import annotations

import re
import time

from stackmgr.errors import StackmgrError
from stackmgr.git.checked import is_object_id, shown
from stackmgr.store.names import valid_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

FROM_LINE = b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_OID = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1 or SHA-256
_MODE = re.compile(rb"[0-7]{6}")
_STAT_TOTALS = re.compile(rb"\n (\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?\n")


class PatchHeader:
    """The mail header and trailers of a patch file."""

    __slots__ = ("author", "base", "body", "date", "subject", "tree")

    def __init__(self, tree: str, base: str, subject: str, body: str, author: str, date: str) -> None:
        self.tree = tree
        self.base = base
        self.subject = subject
        self.body = body
        self.author = author  # "Name <email>"
        self.date = date  # as written


class PostImage:
    """One file of a patch: what it was (old mode "000000" for a creation) and what it becomes (mode "000000"
    for a deletion). A blob is None where the patch does not say (a mode-only change keeps the base's blob)."""

    __slots__ = ("blob", "mode", "old_blob", "old_mode", "path")

    def __init__(self, path: bytes, mode: str, blob: str | None, old_mode: str, old_blob: str | None) -> None:
        self.path = path
        self.mode = mode
        self.blob = blob
        self.old_mode = old_mode
        self.old_blob = old_blob


def rfc2822(unix: int, tz: str) -> str:
    sign = -1 if tz.startswith("-") else 1
    offset = sign * (int(tz[1:3]) * 3600 + int(tz[3:5]) * 60)
    t = time.gmtime(unix + offset)
    return (f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} {tz}")  # fmt: skip


def check_message(message: str) -> tuple[str, str]:
    """Split a description into (subject, body); refuse lines `git am` would take for the start of the diff."""
    lines = message.replace("\r\n", "\n").strip("\n").split("\n")
    subject = " ".join(ln.strip() for ln in lines[: _para_end(lines)] if ln.strip())
    body = "\n".join(lines[_para_end(lines) :]).strip("\n")
    for n, line in enumerate(body.split("\n"), start=2):
        if line.startswith(("---", "diff -", "Index: ", "From ")):
            raise StackmgrError(f"line {n} of the message starts with '{line[:7]}', which git am misreads",
                                "reword or indent that line")  # fmt: skip
    if not subject:
        raise StackmgrError("the message is empty", "pass -m 'what this change does'")
    return subject, body


def _para_end(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        if not line.strip():
            return i
    return len(lines)


def _mime_word(text: str) -> str:
    if text.isascii():
        return text
    from email.header import Header

    return Header(text, "utf-8", maxlinelen=1000).encode()


def render(
    *,
    tree: str,
    base: str,
    subject: str,
    body: str,
    name: str,
    email: str,
    date: str,
    stat_and_diff: bytes,
    original: bytes | None = None,
    original_name: str = "",
) -> bytes:
    """The patch file bytes; `stat_and_diff` is git's own output, copied untouched. `original`: the header an
    imported file came with, kept below `---` with the name it had in its quilt series (see `original_block`)."""
    eight_bit = not (subject.isascii() and body.isascii() and name.isascii())
    head = [f"From: {_mime_word(name)} <{email}>", f"Date: {date}", f"Subject: [PATCH] {_mime_word(subject)}"]
    if eight_bit:
        head += [
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=UTF-8",
            "Content-Transfer-Encoding: 8bit",
        ]
    text = "\n".join(head) + "\n\n" + (body + "\n\n" if body else "")
    text += f"Stackmgr-Tree: {tree}\nStackmgr-Base: {base}\n---\n"
    block = original_block(original, original_name) if original is not None else b""
    return FROM_LINE + text.encode("utf-8") + block + stat_and_diff


ORIGINAL = b"Stackmgr-Original-Header:"


def original_block(header: bytes, name: str = "") -> bytes:
    """An imported file's own header (everything above its diff, byte for byte), as it is kept below `---`:
    a label line (with the file's name in its quilt series, if it came from one), then each line behind `| `
    (`|` alone for an empty one), so that no line of it can start a mail, a diff or a diffstat; `git am` and
    `git apply` skip it, `export --quilt` writes it back."""
    lines = header.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    label = ORIGINAL + (b" " + name.encode("utf-8", "surrogateescape") if name else b"") + b"\n"
    return label + b"".join(b"| " + ln + b"\n" if ln else b"|\n" for ln in lines)


def original_block_of(data: bytes) -> bytes:
    """The `original_block` of a patch file, as it stands there; b"" when it has none."""
    start = data.find(b"\n---\n" + ORIGINAL)
    label_end = data.find(b"\n", start + 5)
    if start < 0 or 0 <= data.find(b"\n---\n") < start or label_end < 0:
        return b""
    if data[start + 5 + len(ORIGINAL) : label_end + 1][:1] not in (b" ", b"\n"):
        return b""
    at = label_end + 1
    while data.startswith((b"| ", b"|\n"), at) and data.find(b"\n", at) >= 0:
        at = data.find(b"\n", at) + 1
    return data[start + 5 : at]


def original_header(data: bytes) -> bytes | None:
    """The header an imported patch file came with (its `original_block`), or None."""
    block = original_block_of(data)
    if not block:
        return None
    lines = block.split(b"\n")[1:-1]
    return b"".join(ln[2:] + b"\n" if ln.startswith(b"| ") else b"\n" for ln in lines)


def original_name(data: bytes) -> str:
    """The name an imported patch had in its quilt series (on its `original_block`'s label line); "" if none."""
    block = original_block_of(data)
    return block[len(ORIGINAL) : block.find(b"\n")].strip().decode("utf-8", "surrogateescape") if block else ""


def stat_part(data: bytes) -> bytes:
    """The diffstat and summary between `---` (and an `original_block`) and the diff."""
    start = data.find(b"\n---\n") + 5 + len(original_block_of(data))
    end = data.find(b"\ndiff --git ")
    return data[start:end] if start >= 5 and end >= start else b""


def diff_part(data: bytes) -> bytes:
    at = data.find(b"\ndiff --git ")
    return data[at + 1 :] if at >= 0 else b""


def parse_header(data: bytes, source: str) -> PatchHeader:
    """Read the mail header and Stackmgr trailers; a file without them is not a stackmgr patch."""
    if b"\n<<<<<<<" in data or data.startswith(b"<<<<<<<"):
        from stackmgr.store.conflicts import refuse_conflicted

        refuse_conflicted(data, source)
    end = data.find(b"\n---\n")
    diff_at = data.find(b"\ndiff --git ")
    if end < 0 or (0 <= diff_at < end):
        end = diff_at
    if end < 0:
        raise StackmgrError(f"{source}: not a patch (no diff found)", "save it again or import it")
    text = data[:end].decode("utf-8", "replace")
    head, _, desc = text.partition("\n\n")
    fields = _header_fields(head)
    trailers = dict(re.findall(r"^(Stackmgr-Tree|Stackmgr-Base): *(\S+) *$", desc, re.M))
    if "Stackmgr-Tree" not in trailers or "Stackmgr-Base" not in trailers:
        if b"\r\n" in data[:end] and b"Stackmgr-Tree:" in data[:end]:
            raise StackmgrError(f"{source}: its line endings were changed to CRLF (an editor or a mailer?)",
                                "restore its original bytes (git checkout it, or save the patch again)")  # fmt: skip
        raise StackmgrError(f"{source}: no Stackmgr-Tree/Stackmgr-Base lines",
                            "it was not written by stackmgr save; save the change again from a tree")  # fmt: skip
    tree, base = trailers["Stackmgr-Tree"], trailers["Stackmgr-Base"]
    if not is_object_id(base):  # it reaches git's command line: never an option, never a ref name
        raise StackmgrError(f"{source}: its Stackmgr-Base '{shown(base)}' is not a commit id (40 or 64 hex digits)",
                            "restore the file from the store's git history, or save the change again")  # fmt: skip
    if not valid_name(tree):
        raise StackmgrError(f"{source}: its Stackmgr-Tree '{shown(tree)}' is not a tree name",
                            "restore the file from the store's git history, or save the change again")  # fmt: skip
    body = re.sub(r"(?m)^Stackmgr-(Tree|Base):.*\n?", "", desc).strip("\n")
    subject = re.sub(r"^\[PATCH[^\]]*\] *", "", fields.get("subject", ""))
    return PatchHeader(tree, base, subject, body, fields.get("from", ""), fields.get("date", ""))


def _header_fields(head: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    last = ""
    for line in head.split("\n")[1:]:
        if line[:1] in (" ", "\t") and last:
            fields[last] += " " + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            last = key.strip().lower()
            fields[last] = value.strip()
    for key in ("subject", "from"):
        if "=?" in fields.get(key, ""):
            from email.header import decode_header, make_header  # only for RFC 2047 words: costly import

            fields[key] = str(make_header(decode_header(fields[key])))
    return fields


def post_images(diff: bytes, source: str) -> list[PostImage]:
    """Every file a `--full-index --no-renames` diff touches, with the mode and blob it ends with."""
    images: dict[bytes, PostImage] = {}
    for line, lines in _section_heads(diff):
        moved = _rename_or_copy(lines)
        if moved is None:
            image = _post_image(_diff_git_path(line, source), lines, source)
            was = images.get(image.path)
            if was is not None and was.mode == "000000" and image.old_mode == "000000":
                # a type change is a deletion then a creation: it starts as the one, ends as the other
                image = PostImage(image.path, image.mode, image.blob, was.old_mode, was.old_blob)
            images[image.path] = image
            continue
        kind, old, new = moved  # a hand-made `git diff -M/-C` patch; stackmgr itself never writes renames
        image = _post_image(new, lines, source, unknown_ok=True)
        if kind == "rename" and not (old in images and images[old].old_mode == "000000"):  # swaps: a→b, b→a
            images[old] = PostImage(old, "000000", None, image.old_mode, image.old_blob)
        images[new] = PostImage(new, image.mode, image.blob, "000000", None)
    return list(images.values())


def mode_only(images: list[PostImage]) -> set[bytes]:
    """The paths whose section only changes the mode (git writes no index line: no blob named on either side)."""
    return {im.path for im in images if im.old_blob is None and im.blob is None
            and im.old_mode not in ("", "000000") and im.mode not in ("", "000000")}  # fmt: skip


_DIFF_GIT = b"diff --git "
_BODY_STARTS = (b"@@", b"GIT binary patch", b"--- ")


def _section_heads(diff: bytes) -> Iterator[tuple[bytes, list[bytes]]]:
    """Each `\ndiff --git ` section's first line (after that prefix) and its extended header lines, up to the
    body (hunks, binary data, or `---`). Read in place with `find`: a 13 MiB series is mostly body, and splitting
    or slicing it copies every byte."""
    at, size = 0, len(diff)
    while True:
        nxt = diff.find(b"\n" + _DIFF_GIT, at)
        end = nxt if nxt >= 0 else size
        if diff.startswith(_DIFF_GIT, at, end):
            at += len(_DIFF_GIT)
        if at < end:
            nl = diff.find(b"\n", at, end)
            line = diff[at : nl if nl >= 0 else end]
            lines = []
            while 0 <= nl < end:
                start = nl + 1
                nl = diff.find(b"\n", start, end)
                header = diff[start : nl if nl >= 0 else end]
                if header.startswith(_BODY_STARTS):
                    break
                lines.append(header)
            yield line, lines
        if nxt < 0:
            return
        at = nxt + 1 + len(_DIFF_GIT)


def _rename_or_copy(lines: list[bytes]) -> tuple[str, bytes, bytes] | None:
    found: dict[bytes, bytes] = {}
    for line in lines:
        for key in (b"rename from ", b"rename to ", b"copy from ", b"copy to "):
            if line.startswith(key):
                value = line[len(key) :]
                found[key.strip()] = unquote_c(value)[0] if value.startswith(b'"') else value
                if b"\0" in found[key.strip()]:
                    raise StackmgrError("a NUL byte in a file name in a patch")
    for kind in ("rename", "copy"):
        old, new = found.get(f"{kind} from".encode()), found.get(f"{kind} to".encode())
        if old is not None and new is not None:
            return kind, old, new
    return None


def _post_image(path: bytes, lines: list[bytes], source: str, unknown_ok: bool = False) -> PostImage:
    shown = path.decode(errors="replace")
    mode = old_mode = None
    blob = old_blob = None
    for line in lines:
        if line.startswith(b"Binary files "):
            raise StackmgrError(f"{source}: '{shown}' is a 'Binary files differ' stub without the file's content",
                                "save the patch again (stackmgr writes --binary)")  # fmt: skip
        word = line.rsplit(b" ", 1)[-1]
        if line.startswith(b"new file mode "):
            old_mode, mode = "000000", _mode(word, source, shown)
        elif line.startswith(b"deleted file mode "):
            old_mode, mode = _mode(word, source, shown), "000000"
        elif line.startswith(b"old mode "):
            old_mode = _mode(word, source, shown)
        elif line.startswith(b"new mode "):
            mode = _mode(word, source, shown)
        elif line.startswith(b"index "):
            parts = line[6:].split(b" ")
            ids = parts[0].split(b"..")
            if len(ids) != 2 or not all(_OID.fullmatch(x) for x in ids):
                raise StackmgrError(f"{source}: '{shown}' has no full-index line",
                                    "save the patch again (stackmgr writes --full-index)")  # fmt: skip
            old_blob, blob = ids[0].decode(), ids[1].decode()
            if len(parts) > 1:
                mode = old_mode = _mode(parts[1], source, shown)
    if mode is None or old_mode is None:
        if not unknown_ok:
            raise StackmgrError(f"{source}: cannot tell the mode of '{shown}'", "save the patch again")
        mode = old_mode = mode or old_mode or ""  # a pure rename keeps a mode it does not state
    return PostImage(path, mode, blob, old_mode, old_blob)


def _mode(word: bytes, source: str, shown: str) -> str:
    if not _MODE.fullmatch(word):
        raise StackmgrError(f"{source}: bad file mode for '{shown}'", "save the patch again")
    return word.decode("ascii")


def _diff_git_path(line: bytes, source: str) -> bytes:
    """The path of a `diff --git a/P b/P` line (renames are off, so both sides name the same path); a NUL in
    it, which no file name holds, would forge a record of the NUL-separated lists git is given."""
    if b"\0" in line:
        raise StackmgrError(f"{source}: a NUL byte in 'diff --git {line[:60].decode(errors='replace')}'",
                            "restore the file from the store's git history, or save the change again")  # fmt: skip
    if line.startswith(b'"'):
        path, _ = unquote_c(line)
        if path.startswith(b"a/") and b"\0" not in path:
            return path[2:]
    else:
        half = (len(line) - 5) // 2
        if line.startswith(b"a/") and line[2 + half : 5 + half] == b" b/" and line[2 : 2 + half] == line[5 + half :]:
            return line[2 : 2 + half]
    raise StackmgrError(f"{source}: cannot read the file name in 'diff --git {line[:60].decode(errors='replace')}'",
                        "save the patch again without renames")  # fmt: skip


_ESCAPES = {ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12, ord("r"): 13,
            ord('"'): 34, ord("\\"): 92}  # fmt: skip


def unquote_c(data: bytes) -> tuple[bytes, bytes]:
    """Undo git's C-quoting of a path that starts `data`; return (path, what follows the closing quote)."""
    out = bytearray()
    i = 1
    while i < len(data):
        ch = data[i]
        if ch == 34:  # closing quote
            return bytes(out), data[i + 1 :]
        if ch == 92:
            octal = data[i + 1 : i + 4]
            if len(octal) == 3 and all(48 <= c <= 55 for c in octal) and octal[0] <= 51:
                out.append(int(octal, 8))
                i += 4
                continue
            if i + 1 >= len(data) or data[i + 1] not in _ESCAPES:
                raise StackmgrError("bad escape in a quoted file name in a patch")
            out.append(_ESCAPES[data[i + 1]])
            i += 2
            continue
        out.append(ch)
        i += 1
    raise StackmgrError("unterminated quoted file name in a patch")


def stat_totals(data: bytes) -> tuple[int, int, int]:
    """(files, insertions, deletions) from the diffstat above the diff."""
    head = data[: max(data.find(b"\ndiff --git "), 0)]
    m = _STAT_TOTALS.search(head)
    if not m:
        return 0, 0, 0
    return int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)
