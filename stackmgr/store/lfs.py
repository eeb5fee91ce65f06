"""Big results through git LFS (docs/FORMATS.md#store-layout): which files under the store's `artifacts/` are LFS
objects. git attributes cannot say "above a size", so `artifacts/.gitattributes` says it file by file: its first
line names the threshold `git-setup --lfs` chose, each file of at least that size gets a line of its own when it
is linked (or when `git-setup --lfs` runs), and git merges the file as a union of lines, so two engineers'
results both stay LFS objects after a pull. Small results stay plain git blobs. The file is written here; the
transfer is git-lfs's own."""

from __future__ import annotations

import os

from stackmgr.errors import UsageProblem
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none

HEADER = b"# stackmgr: files here of at least %d bytes are git LFS objects (`stackmgr git-setup --lfs`)"
ATTRS = b"filter=lfs diff=lfs merge=lfs -text"
UNION = b"/.gitattributes merge=union"  # both engineers' lines kept by `git pull`
DEFAULT_THRESHOLD = 1 << 20
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 1000**2, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1000**3, "gib": 1 << 30}  # fmt: skip


def parse_size(text: str) -> int:
    """`1MiB`, `500k`, `2 MB`, `0` as bytes; a usage error for anything else."""
    raw = text.strip().lower().replace(" ", "")
    digits = raw.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = raw[len(digits) :]
    try:
        value = float(digits)
    except ValueError:
        value = -1.0
    if value < 0 or unit not in _UNITS:
        raise UsageProblem(f"'{text}' is not a size", "give bytes or a unit, e.g. 1MiB, 500k, 0 (every file)")
    return int(value * _UNITS[unit])


def _path(store: Store) -> str:
    return os.path.join(store.root, "artifacts", ".gitattributes")


def threshold(store: Store) -> int | None:
    """The size from which an artifact is an LFS object, or None when the store is not set up for LFS. Two
    engineers who chose different sizes leave two first lines after a merge (a union): the smaller holds."""
    data = read_or_none(_path(store)) or b""
    prefix, _, rest = HEADER.partition(b"%d")
    sizes = [ln[len(prefix) : len(ln) - len(rest)] for ln in data.split(b"\n")
             if ln.startswith(prefix) and ln.endswith(rest)]  # fmt: skip
    found = [int(n) for n in sizes if n.isdigit()]
    return min(found) if found else None


def pattern(relative: str) -> bytes:
    """The gitattributes pattern that matches exactly one file below `artifacts/` (anchored): glob characters
    escaped with a backslash, and the whole pattern C-quoted (git reads `"…"` patterns so) when it holds a space,
    a quote, a backslash or any byte outside printable ASCII."""
    escaped = "".join("\\" + c if c in "\\*?[]" else c for c in relative)
    raw = ("/" + escaped).encode("utf-8", "surrogateescape")
    if "\\" not in relative and all(0x21 <= b <= 0x7E and b != 0x22 for b in raw):
        return raw
    out = bytearray(b'"')
    for b in raw:
        if b in (0x22, 0x5C):
            out += b"\\" + bytes([b])
        elif 0x20 <= b <= 0x7E:
            out.append(b)
        else:
            out += b"\\%03o" % b
    return bytes(out + b'"')


def set_up(store: Store, above: int) -> list[str]:
    """`artifacts/.gitattributes` with the threshold `above`, and every file already under `artifacts/` that is
    at least that big tracked; returns those newly tracked (store-relative)."""
    path = _path(store)
    old = (read_or_none(path) or b"").split(b"\n")
    prefix = HEADER.partition(b"%d")[0]
    kept = [ln for ln in old if ln and ln != UNION and not ln.startswith(prefix)]
    store.makedirs(os.path.dirname(path))
    store.write_file(path, b"\n".join([HEADER % above, UNION, *kept]) + b"\n")
    found = []
    for dirpath, dirnames, filenames in os.walk(os.path.dirname(path)):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        found += [os.path.relpath(os.path.join(dirpath, f), store.root) for f in sorted(filenames)
                  if f != ".gitattributes"]  # fmt: skip
    return track(store, found)


def track(store: Store, paths: list[str]) -> list[str]:
    """Give each of `paths` (store-relative) under `artifacts/` that is at least the threshold its LFS line;
    returns those newly tracked. Nothing when the store is not set up for LFS."""
    above = threshold(store)
    if above is None:
        return []
    path = _path(store)
    data = read_or_none(path) or b""
    listed = set(data.split(b"\n"))
    new, lines = [], []
    for rel in dict.fromkeys(paths):
        parts = rel.replace(os.sep, "/").split("/")
        if len(parts) < 2 or parts[0] != "artifacts" or parts[-1] == ".gitattributes":
            continue
        try:
            size = os.path.getsize(os.path.join(store.root, rel))
        except OSError:
            continue
        line = pattern("/".join(parts[1:])) + b" " + ATTRS
        if size >= above and line not in listed:
            listed.add(line)
            lines.append(line)
            new.append(rel)
    if lines:
        store.write_file(path, data + (b"" if data.endswith(b"\n") else b"\n") + b"\n".join(lines) + b"\n")
    return new
