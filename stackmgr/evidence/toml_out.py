"""The small TOML emitter link records are written with (tomllib reads them; TOML has no null: absent fields,
empty strings and empty lists are left out). Keys that are not bare TOML keys are quoted."""

from __future__ import annotations

import re
from typing import Any

_ESCAPED = re.compile(r'[\x00-\x1f"\\\x7f]')
_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def key(name: str) -> str:
    return name if name and set(name) <= _BARE else _string(name)


def _string(value: str) -> str:
    if not _ESCAPED.search(value):  # most strings: nothing to escape
        return f'"{value}"'
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out) + '"'


def value(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, (int, float)):
        return repr(float(x)) if isinstance(x, float) else str(x)
    if isinstance(x, str):
        return _string(x)
    if isinstance(x, dict):
        return "{ " + ", ".join(f"{key(k)} = {value(v)}" for k, v in x.items()) + " }"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(value(v) for v in x) + "]"
    raise TypeError(type(x))


def table(name: str, fields: dict[str, Any], array: bool = False) -> str:
    head = f"[[{name}]]" if array else f"[{name}]"
    body = "".join(f"{k} = {value(v)}\n" for k, v in fields.items() if v not in ("", None, [], {}))
    return f"\n{head}\n{body}"


