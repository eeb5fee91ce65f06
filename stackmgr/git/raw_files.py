"""Working-tree files as bytes on disk, past git's conversions.

git stores a file's *cleaned* content (`core.autocrlf`, `.gitattributes` `text`/`eol`, `ident`, clean filters)
and writes the *smudged* one back on checkout, so a snapshot's tree does not always give back the bytes that
were on disk: a file written with LF under `core.autocrlf=true` comes back CRLF, `$Id$` comes back expanded, a
smudge filter rewrites it. For the recovery snapshot of `reset --force` (the only copy of someone's work) the
raw bytes are kept too: `raw_tree` hashes the files with no conversion at all, and `give_back` writes those
bytes over what a checkout just wrote, file by file, when the file still holds exactly what the checkout gave it.
"""

from __future__ import annotations

import os
import stat

from stackmgr.git.checked import revision
from stackmgr.git.runner import run, zsplit
from stackmgr.git.tempindex import TempIndex
from stackmgr.types import TreeId

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from stackmgr.git.repo import Repo

_REGULAR = ("100644", "100755")


def _regular(repo: Repo, paths: Sequence[bytes]) -> list[tuple[bytes, str]]:
    top = os.fsencode(repo.top)
    found = []
    for path in paths:
        try:
            st = os.lstat(os.path.join(top, path))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((path, "100755" if st.st_mode & 0o100 else "100644"))
    return found


def _hash_files(repo: Repo, paths: Sequence[bytes], *, raw: bool, write: bool = False) -> list[str]:
    """Blob ids of files (relative to the top): their bytes as they are (`raw`), or as `git add` would store them
    (the path's attributes, autocrlf and clean filters applied)."""
    if not paths:
        return []
    args = ["hash-object", "--stdin-paths", *(["--no-filters"] if raw else []), *(["-w"] if write else [])]
    out = run(repo.top, args, stdin=b"".join(p + b"\n" for p in paths))
    return out.decode().split()


def raw_tree(repo: Repo, paths: Sequence[bytes]) -> TreeId | None:
    """A tree of the regular files among `paths` with their bytes exactly as on disk (None: there are none).
    Paths with a newline cannot go through `--stdin-paths`: left out (a checkout gives them back as git has them)."""
    files = [(p, mode) for p, mode in _regular(repo, paths) if b"\n" not in p]
    if not files:
        return None
    blobs = _hash_files(repo, [p for p, _ in files], raw=True, write=True)
    with TempIndex.scratch(repo, "raw") as index:
        index.set_entries({p: (mode, blob) for (p, mode), blob in zip(files, blobs, strict=True)})
        return index.write_tree()


def tree_entries(repo: Repo, tree: str) -> dict[bytes, tuple[str, str]]:
    """Every file of a tree: path -> (mode, blob)."""
    entries = {}
    for rec in zsplit(run(repo.top, ["ls-tree", "-r", "-z", "--full-tree", revision(tree)])):
        meta, path = rec.split(b"\t", 1)
        mode, _type, oid = meta.decode().split(" ")
        entries[path] = (mode, oid)
    return entries


def _batch(repo: Repo, blobs: Sequence[str]) -> list[bytes]:
    """Blob contents, one `cat-file --batch`."""
    out = run(repo.top, ["cat-file", "--batch"], stdin="".join(repo.object_id(b) + "\n" for b in blobs).encode())
    found: list[bytes] = []
    pos = 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        size = int(out[pos:end].split(b" ")[2])
        found.append(out[end + 1 : end + 1 + size])
        pos = end + 1 + size + 1
    return found


def give_back(repo: Repo, raw: dict[bytes, tuple[str, str]], stored: dict[bytes, tuple[str, str]]) -> list[bytes]:
    """After a checkout of a tree whose files are `stored` (path -> mode, blob as git keeps it): put the raw bytes
    `raw` (path -> mode, blob of the bytes on disk) back where a conversion made the checkout write other bytes.
    A file is rewritten only when it holds exactly what the checkout of its stored blob writes (not something
    written since). Returns the paths rewritten."""
    paths = [p for p, _mode in _regular(repo, [p for p in raw if p in stored and b"\n" not in p])
             if raw[p][0] in _REGULAR]  # fmt: skip
    if not paths:
        return []
    top = os.fsencode(repo.top)
    written = []
    for path, data in zip(paths, _batch(repo, [raw[p][1] for p in paths]), strict=True):
        full = os.path.join(top, path)
        with open(full, "rb") as f:
            now = f.read()
        # (one call per converted file: git 2.39's `cat-file --batch --filters` reports the unfiltered size)
        if now == data or now != run(repo.top, ["cat-file", "--filters", b"--path=" + path,
                                                 repo.object_id(stored[path][1])]):  # fmt: skip
            continue
        tmp = os.path.join(os.path.dirname(full), b".stackmgr-raw." + str(os.getpid()).encode()
                           + os.urandom(4).hex().encode() + b".tmp")  # fmt: skip
        # created, never opened through what stands there (a symlink a patch put in the tree)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with open(os.open(tmp, flags, 0o600), "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), (0o777 if raw[path][0] == "100755" else 0o666) & ~_umask())
        os.replace(tmp, full)
        written.append(path)
    return written


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
