"""Which paths a sparse checkout leaves out of the working tree, decided as git's `read-tree -u` decides it.

When `read-tree -m -u` brings in a path that the sparse-checkout patterns do not include, git records it in the
index with the skip-worktree bit and never writes the file: the move would report success with the change only
in the index. `safety/tree_move.move_tree` asks first (`TempIndex.hidden_paths`) and refuses instead. Cone mode
(directory sets) and the older pattern mode (gitignore syntax, last match wins, a path inheriting its
directory's verdict) follow unpack-trees.c's `clear_ce_flags` and dir.c's `path_matches_pattern_list`. Pure
Python: no git here.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    Rule = tuple[bool, bool, bool, re.Pattern[bytes]]  # negative, directories only, basename only, pattern


def checked_out(lines: list[bytes], cone: bool, ignore_case: bool = False) -> Callable[[bytes, bool], bool]:
    """A predicate: is (path, is_directory_entry) inside the checkout that `lines` (the sparse-checkout file)
    describe? `cone` is core.sparseCheckoutCone; a file that is not in cone form falls back to patterns, as in
    git."""
    fold: Callable[[bytes], bytes] = bytes.lower if ignore_case else bytes
    patterns = _lines(lines)
    sets = _cone_sets(patterns, fold) if cone else None
    if sets is not None:
        full, recursive, parents = sets
        return lambda path, _is_dir: full or _in_cone(fold(path), recursive, parents)
    rules = [_rule(p, ignore_case) for p in patterns]
    return lambda path, is_dir: _by_patterns(rules, path, is_dir)


def _lines(lines: list[bytes]) -> list[bytes]:
    """The patterns of the file: no comments or blank lines, CR and unescaped trailing spaces removed."""
    out = []
    for line in lines:
        line = line.removesuffix(b"\r")
        if not line or line.startswith(b"#"):
            continue
        while line.endswith(b" ") and not line.endswith(b"\\ "):
            line = line[:-1]
        if line:
            out.append(line)
    return out


def _cone_sets(patterns: list[bytes], fold: Callable[[bytes], bytes]) -> tuple[bool, set[bytes], set[bytes]] | None:
    """(everything included, recursive directories, parent directories), or None when a line is not of the
    cone forms `/*`, `!/*/`, `/DIR/`, `!/DIR/*/` (git then disables cone matching)."""
    full, recursive, parents = False, set(), set()
    for p in patterns:
        if p == b"/*":
            full = True
        elif p == b"!/*/":
            full = False
        elif p.startswith(b"!/") and p.endswith(b"/*/") and len(p) > 5 and not _glob(p[2:-3]):
            name = fold(_unescape(p[2:-3]))
            parents.add(name)
            recursive.discard(name)
        elif p.startswith(b"/") and p.endswith(b"/") and len(p) > 2 and not _glob(p[1:-1]):
            name = fold(_unescape(p[1:-1]))
            if name in parents:
                return None  # git: "pattern is repeated"
            recursive.add(name)
        else:
            return None
    return full, recursive, parents


def _glob(name: bytes) -> bool:
    """An unescaped glob character (not allowed in a cone directory)."""
    return re.search(rb"(?<!\\)[*?\[]|\*\*", name) is not None


def _unescape(name: bytes) -> bytes:
    return re.sub(rb"\\(.)", rb"\1", name)


def _in_cone(path: bytes, recursive: set[bytes], parents: set[bytes]) -> bool:
    """Cone mode: files at the top, files directly in a parent directory, everything below a recursive one. A
    directory that is neither leaves everything below it out."""
    parts = path.split(b"/")
    for n in range(1, len(parts) + 1):
        here = b"/".join(parts[:n])
        if here in recursive:
            return True
        if n > 1 and b"/".join(parts[: n - 1]) not in parents:
            return False
    return True


def _rule(pattern: bytes, ignore_case: bool) -> Rule:
    negative = pattern.startswith(b"!")
    body = pattern[1:] if negative else pattern
    directories = body.endswith(b"/")
    body = body.removesuffix(b"/")
    basename = b"/" not in body
    body = body.removeprefix(b"/")
    flags = re.S | (re.I if ignore_case else 0)
    return negative, directories, basename, re.compile(_wildmatch(body) + rb"\Z", flags)


def _by_patterns(rules: list[Rule], path: bytes, is_dir: bool) -> bool:
    """Pattern mode: each leading directory, then the path, takes the verdict of the last pattern that matches
    it, or else its directory's; nothing matched means left out."""
    parts = path.split(b"/")
    inside = False
    for n in range(1, len(parts) + 1):
        here, last = b"/".join(parts[:n]), n == len(parts)
        for negative, directories, basename, rx in reversed(rules):
            if directories and not (is_dir or not last):
                continue
            if rx.match(parts[n - 1] if basename else here):
                inside = not negative
                break
    return inside


def _wildmatch(pattern: bytes) -> bytes:
    """git's wildmatch with WM_PATHNAME as a regular expression: `*`, `?` and `[…]` stop at `/`; `**` between
    slashes (or at an end) crosses them."""
    out: list[bytes] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i : i + 1]
        if c == b"*":
            j = i
            while pattern[j : j + 1] == b"*":
                j += 1
            starts, ends = i == 0 or pattern[i - 1 : i] == b"/", j == n or pattern[j : j + 1] == b"/"
            if j - i >= 2 and starts and ends:
                out.append(b".*" if j == n else b"(?:.*/)?")
                j += 0 if j == n else 1
            else:
                out.append(b"[^/]*")
            i = j
        elif c == b"?":
            out.append(b"[^/]")
            i += 1
        elif c == b"[":
            i, cls = _char_class(pattern, i)
            if cls is None:
                return rb"(?!)"  # an unclosed class or an unknown [:name:] never matches (wildmatch aborts)
            out.append(cls)
        elif c == b"\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1 : i + 2]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return b"".join(out)


_POSIX = {b"alnum": rb"a-zA-Z0-9", b"alpha": rb"a-zA-Z", b"digit": rb"0-9", b"lower": rb"a-z", b"upper": rb"A-Z",
          b"xdigit": rb"0-9a-fA-F", b"space": rb" \t\n\r\f\v", b"blank": rb" \t", b"cntrl": rb"\x00-\x1f\x7f",
          b"graph": rb"!-~", b"print": rb" -~", b"punct": rb"!-/:-@\[-`{-~"}  # fmt: skip


def _char_class(pattern: bytes, i: int) -> tuple[int, bytes | None]:
    """The `[…]` at `i` (`!` or `^` negates, a leading `]` is literal, `\\` escapes, `a-z`, `[:alpha:]`) as a
    regular expression that never matches `/`; returns the index after it."""
    j, n, members = i + 1, len(pattern), list[bytes | None]()
    negate = pattern[j : j + 1] in (b"!", b"^")
    j += negate
    start = j
    while j < n and not (pattern[j : j + 1] == b"]" and j > start):
        ch = pattern[j : j + 1]
        if ch == b"[" and pattern[j + 1 : j + 2] == b":" and (end := pattern.find(b":]", j + 2)) > 0:
            members.append(_POSIX.get(pattern[j + 2 : end]))
            j = end + 2
            continue
        if ch == b"\\" and j + 1 < n:
            j += 1
            ch = pattern[j : j + 1]
        if pattern[j + 1 : j + 2] == b"-" and pattern[j + 2 : j + 3] not in (b"]", b""):
            members.append(re.escape(ch) + b"-" + re.escape(pattern[j + 2 : j + 3]))
            j += 3
            continue
        members.append(re.escape(ch))
        j += 1
    if j >= n or None in members:
        return j, None
    return j + 1, b"(?!/)[" + (b"^" if negate else b"") + b"".join(m for m in members if m is not None) + b"]"
