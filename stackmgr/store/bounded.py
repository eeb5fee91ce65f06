"""TOML and JSON from the store parsed with their nesting bounded (docs/FORMATS.md#limits): every such file may
have arrived by `git pull` (docs/SECURITY.md), and a few kilobytes of `[[[[…` would otherwise take the parser
as deep as Python's recursion limit, then everything that walks the result (marshal into a cache, `--json`).

The depth is counted before the parser runs, in linear time at C speed: strings and comments are cut out with
a pattern in which every token, once started, matches (so a scan never restarts inside an unterminated string),
and what is left is reduced to its brackets. TOML's dotted keys (`a.b.c = 1`, `[a.b.c]`) nest tables without
brackets: a key of more than MAX_DEPTH parts is refused before parsing too (tomllib takes time quadratic in
them), and a parsed document with enough dots is walked (headers and keys add up). A RecursionError the counts
missed is turned into the same error.

TOML is parsed by rtoml (tomllib where it is missing). Plain functions; the parsers, json and re are imported
when first used: `check` loads the store's config on its start-up path.
"""

from __future__ import annotations

from stackmgr.errors import StackmgrError

TYPE_CHECKING = False  # `typing` costs every command that reads the config 2.5 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_DEPTH = 64  # arrays, tables and objects within one another; stackmgr's own files nest a few

# Every alternative matches once its first character is seen (a closing quote is optional): linear in the input.
_TOML_SKIPPED = (
    rb'"""(?:[^"\\]++|\\.|"(?!""))*+(?:""")?'  # multi-line basic string
    rb"|'''(?:[^']++|'(?!''))*+(?:''')?"  # multi-line literal string
    rb'|"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"?'  # basic string
    rb"|'[^'\n]*+'?"  # literal string
    rb"|#[^\n]*+"  # comment
)
_JSON_SKIPPED = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"?'
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_KEY_PARTS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_- \t"  # a bare key's, and blanks
_DOTS_ONLY = bytes(b if b == ord(".") else ord("|") for b in range(256))
_compiled: dict[bytes, Any] = {}


def depth(data: bytes, skipped: bytes) -> int:
    """How deep the brackets of `data` nest, outside what the pattern `skipped` (strings, comments) matches."""
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return 0  # too few brackets to go over the limit: the common case costs two counts
    return _bracket_depth(_cut(data, skipped))


def _cut(data: bytes, skipped: bytes) -> bytes:
    """`data` without what `skipped` matches."""
    rx = _compiled.get(skipped)
    if rx is None:
        import re

        rx = _compiled[skipped] = re.compile(skipped, re.S)
    return bytes(rx.sub(b"", data))


def _bracket_depth(cut: bytes) -> int:
    from itertools import accumulate

    return max(accumulate(map(_STEP.__getitem__, cut.translate(None, _NOT_BRACKETS))), default=0)


def _dots_on_one_line(data: bytes) -> bool:
    """Whether a line of `data` holds MAX_DEPTH dots: a dotted key or table header lies on one line (TOML allows
    no line break inside either), so a document without such a line has no key too long (what a record with many
    numbers and paths needs checked, without cutting its strings)."""
    from itertools import repeat

    return max(map(bytes.count, data.split(b"\n"), repeat(b".")), default=0) >= MAX_DEPTH


def _dotted_too_long(cut: bytes) -> bool:
    """Whether a dotted key (`a.b.c = 1`, `[a.b.c]`) of `cut` (TOML without strings and comments) has more than
    MAX_DEPTH parts: its parts and the blanks around its dots are dropped, anything else splits, and such a key
    is a run of MAX_DEPTH dots (tomllib takes time quadratic in a key's parts)."""
    return b"." * MAX_DEPTH in cut.translate(_DOTS_ONLY, _KEY_PARTS)


def load_toml(data: bytes, name: str, kept: Callable[[dict[str, Any]], object] | None = None) -> dict[str, Any]:
    """The TOML document `data` (from the file `name`, as the message names it). Raises StackmgrError naming
    the file when it nests deeper than MAX_DEPTH; UnicodeDecodeError and tomllib.TOMLDecodeError as they are.
    `kept`: the part of the document its reader keeps as it is (a link record's run table: every other field is
    read as a string, number or flat table), which alone is walked for dotted keys' nesting after rtoml, itself
    bounded, parsed it (a record's sixty metric tables would take longer to walk than to parse)."""
    parse, bounded = _parser()
    brackets = data.count(b"[") + data.count(b"{") > MAX_DEPTH
    dots = data.count(b".") >= MAX_DEPTH
    if not bounded and (brackets or (dots and _dots_on_one_line(data))):
        cut = _cut(data, _TOML_SKIPPED)
        if (brackets and _bracket_depth(cut) > MAX_DEPTH) or (dots and _dotted_too_long(cut)):
            raise _too_deep(name)
    text = data.decode("utf-8")
    try:
        doc: dict[str, Any] = parse(text)
    except RecursionError:
        raise _too_deep(name) from None
    walked = kept(doc) if kept is not None and bounded else doc
    if (brackets or dots) and _nesting(walked) > MAX_DEPTH:  # dotted keys nest tables without brackets too
        raise _too_deep(name)
    return doc


def _parser() -> tuple[Any, bool]:
    """rtoml's `loads` (a TOML 1.0 parser in Rust, over ten times tomllib's speed: a fresh clone's first `links`
    parses every record; it bounds its own recursion, a little deeper than MAX_DEPTH, and takes linear time in a
    dotted key), its errors raised as tomllib's; else tomllib's, which needs the nesting counted first. And
    whether the parser bounds itself."""
    found = _compiled.get(b"toml")
    if found is None:
        try:
            import rtoml
        except ImportError:
            import tomllib

            found = _compiled[b"toml"] = (tomllib.loads, False)
            return found

        def parse(text: str) -> Any:
            try:
                return rtoml.loads(text)
            except rtoml.TomlParsingError as exc:
                if "recurs" in str(exc):  # "cannot recurse further", "recursion limit"
                    raise RecursionError from None
                import tomllib  # its error type, which every reader catches: imported only for an error

                raise tomllib.TOMLDecodeError(str(exc)) from None

        found = _compiled[b"toml"] = (parse, True)
    return found


def load_json(data: bytes, name: str) -> Any:
    """The JSON document `data` (from the file `name`). Raises StackmgrError naming the file when it nests
    deeper than MAX_DEPTH; ValueError (json.JSONDecodeError, UnicodeDecodeError) as json.loads does."""
    if depth(data, _JSON_SKIPPED) > MAX_DEPTH:
        raise _too_deep(name)
    import json

    try:
        return json.loads(data)
    except RecursionError:
        raise _too_deep(name) from None


def _nesting(doc: object) -> int:
    """How deep tables and arrays nest in a parsed document (walked without recursion)."""
    deepest, todo = 0, [(doc, 0)]  # the document itself is no level: `a = [1]` nests 1, as its brackets say
    while todo:
        node, level = todo.pop()
        if level > deepest:
            deepest = level
        if level <= MAX_DEPTH and (type(node) is dict or type(node) is list):  # as parsers give them
            todo += [(v, level + 1) for v in (node.values() if type(node) is dict else node)
                     if type(v) is dict or type(v) is list]  # fmt: skip
    return deepest


def _too_deep(name: str) -> StackmgrError:
    return StackmgrError(f"{name}: nested more than {MAX_DEPTH} levels deep (arrays, tables or objects)",
                         "stackmgr writes no such file: restore it from git, or remove it")  # fmt: skip
