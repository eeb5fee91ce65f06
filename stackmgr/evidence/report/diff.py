"""A patch's diff, parsed into files of rows (hunks, added, removed and context lines) and rendered as table rows."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from stackmgr.errors import StackmgrError
from stackmgr.evidence.report.markup import e
from stackmgr.store.patchfile import unquote_c


@dataclass
class DiffFile:
    path: str
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # (class, old no, new no, text)
    plus: int = 0
    minus: int = 0
    binary: bool = False
    kind: str = ""  # new file / deleted / mode change / binary


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def _diff_path(line: bytes) -> str:
    rest = line[len(b"diff --git ") :]
    if rest.startswith(b'"'):
        try:
            path, _ = unquote_c(rest)
            return path[2:].decode("utf-8", "replace") if path.startswith(b"a/") else path.decode("utf-8", "replace")
        except StackmgrError:
            pass
    half = (len(rest) - 5) // 2
    if rest.startswith(b"a/") and rest[2 + half : 5 + half] == b" b/":
        return rest[2 : 2 + half].decode("utf-8", "replace")
    return rest.decode("utf-8", "replace")


def parse_diff(diff: bytes) -> list[DiffFile]:
    files: list[DiffFile] = []
    cur: DiffFile | None = None
    in_hunk = in_binary = False
    old = new = 0
    lines = diff.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for raw in lines:
        if raw.startswith(b"diff --git "):
            cur = DiffFile(_diff_path(raw))
            files.append(cur)
            in_hunk = in_binary = False
            cur.rows.append(("fh", "", "", raw.decode("utf-8", "replace")))
            continue
        if cur is None:
            continue
        text = raw.decode("utf-8", "replace")
        if in_binary:
            if raw.startswith((b"literal ", b"delta ")):
                cur.rows.append(("meta", "", "", text + "  (base85 data not shown)"))
            continue
        if raw.startswith(b"@@"):
            in_hunk = True
            m = _HUNK.match(text)
            old, new = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
            cur.rows.append(("hunk", "", "", text))
        elif raw.startswith(b"GIT binary patch"):
            in_binary = cur.binary = True
            cur.kind = cur.kind or "binary"
            cur.rows.append(("meta", "", "", text))
        elif in_hunk and raw.startswith(b"+"):
            cur.rows.append(("add", "", str(new), text))
            new += 1
            cur.plus += 1
        elif in_hunk and raw.startswith(b"-"):
            cur.rows.append(("del", str(old), "", text))
            old += 1
            cur.minus += 1
        elif in_hunk and raw.startswith(b"\\"):
            cur.rows.append(("nonl", "", "", text))
        elif in_hunk and (raw.startswith(b" ") or raw == b""):
            cur.rows.append(("ctx", str(old), str(new), text))
            old += 1
            new += 1
        else:
            in_hunk = False
            if raw.startswith(b"new file mode"):
                cur.kind = "new file"
            elif raw.startswith(b"deleted file mode"):
                cur.kind = "deleted"
            elif raw.startswith(b"old mode") and not cur.kind:
                cur.kind = "mode change"
            elif raw.startswith(b"Binary files"):
                cur.binary = True
                cur.kind = cur.kind or "binary"
            cur.rows.append(("fh" if raw.startswith((b"--- ", b"+++ ")) else "meta", "", "", text))
    return files


def diff_row(row: tuple[str, str, str, str]) -> str:
    cls, old, new, text = row
    cr = ""
    if text.endswith("\r"):
        text, cr = text[:-1], '<span class="cr" title="carriage return">␍</span>'
    if cls in ("add", "del", "ctx"):
        sign, body = text[:1], text[1:]
        code = f'<span class="sign">{e(sign)}</span>{e(body)}{cr}'
    else:
        code = e(text) + cr
    return f'<tr class="{cls}"><td class="ln">{old}</td><td class="ln">{new}</td><td class="code">{code}</td></tr>'
