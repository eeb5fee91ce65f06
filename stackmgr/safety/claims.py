"""Is the tree a series built the tree its patches describe? (docs/RELIABILITY.md, promise 5; catalogue rows
2, 4, 5, 8, 10, 13, 19, 21, 25, 39 of docs/RELIABILITY.md#catalogue-rows.)

`git apply` succeeding is not enough: a hunk whose header was edited lands on an identical block elsewhere, a
patch cut at a file boundary is still a valid patch, an overflowing line number or a bogus mode is read in some
lenient way. Every stackmgr patch names, in its `--full-index` lines, the exact blob and mode each file ends
with. So the result must change exactly the files the patches name, each to the mode and blob the last patch
touching it names (or not at all when the patches end where they started), and every patch must hold as many
files as its own diffstat says.
"""

from __future__ import annotations

import os
import re

from stackmgr.errors import StackmgrError
from stackmgr.git.repo import Repo, read_changes
from stackmgr.store import patchfile
from stackmgr.types import show_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from stackmgr.store.plan import PatchRef

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)
# A hunk header with a number of ten digits or more: only a patch with one needs its headers read one by one.
_LONG_NUMBER = re.compile(rb"\n@@ -(?:[0-9,]*[0-9]{10}|[0-9,]+ \+[0-9,]*[0-9]{10})")
Entry = tuple[str, str | None] | None  # (mode, blob or unknown), or None for "absent"
Claims = tuple[dict[bytes, Entry], dict[bytes, Entry], dict[bytes, str]]  # first, last, owner


def claims(patches: list[PatchRef], repo: Repo, store_root: str,
           each: list[list[patchfile.PostImage]] | None = None) -> Claims:  # fmt: skip
    """What the patches say, in order: each path's version before the first patch touching it, after the last,
    and which patch had the last word. Refuses what a stackmgr patch never contains. `each` gets every patch's
    own sections, in order."""
    store_prefix = _store_prefix(repo.top, store_root)
    first: dict[bytes, Entry] = {}
    last: dict[bytes, Entry] = {}
    owner: dict[bytes, str] = {}
    from stackmgr import output

    output.progress_total(len(patches))
    for p in patches:
        output.tick()
        try:
            images = _images(p)
        except StackmgrError as exc:
            raise StackmgrError(f"patch {p.name} cannot be trusted: {exc.message}; nothing was changed",
                                exc.hint) from None  # fmt: skip
        if each is not None:
            each.append(images)
        for im in images:
            if store_prefix is not None and (im.path + b"/").startswith(store_prefix):
                raise StackmgrError(f"patch {p.name} writes {show_path(im.path)}, inside the store's own state; "
                                    "nothing was changed", "remove that file from the patch")  # fmt: skip
            first.setdefault(im.path, None if im.old_mode == "000000" else (im.old_mode, im.old_blob))
            last[im.path] = None if im.mode == "000000" else (im.mode, im.blob)
            owner[im.path] = p.name
    return first, last, owner


def _images(p: PatchRef) -> list[patchfile.PostImage]:
    source = f"patches/{os.path.basename(p.path)}"
    diff = patchfile.diff_part(p.data)
    if not diff:
        raise StackmgrError(f"{source} holds no git diff (`diff --git` sections)", "save the change again")
    images = patchfile.post_images(diff, source)
    files = patchfile.stat_totals(p.data)[0]
    if files and files != len(images):  # a type change is two sections but one file, as in the diffstat
        raise StackmgrError(f"{source} is cut short: its summary says {files} files, it holds {len(images)}",
                            "restore the whole file (git checkout it in the store), or save it again")  # fmt: skip
    for hunk in _hunk_headers(diff) if diff.startswith(b"@@ ") or _LONG_NUMBER.search(diff) else ():
        if any(n is not None and int(n) >= 1 << 31 for n in hunk.groups()):
            raise StackmgrError(f"{source}: a hunk header's line numbers overflow ({hunk.group(0).decode()})",
                                "restore the patch file, or save the change again")  # fmt: skip
    return images


def _hunk_headers(diff: bytes) -> Iterator[re.Match[bytes]]:
    """Each hunk header line's match, found with bytes.find (a regex scanning every line of a 13 MiB series for
    `^@@` costs 50 ms; content lines never start with `@`)."""
    at = 0 if diff.startswith(b"@@ ") else diff.find(b"\n@@ ")
    while at >= 0:
        hunk = _HUNK.match(diff, at + 1 if diff[at : at + 1] == b"\n" else at)
        if hunk is not None:
            yield hunk
        at = diff.find(b"\n@@ ", at + 1)


def check_result(repo: Repo, base: str, result: str, claimed: Claims, tree: str, *, merged: bool = False) -> None:
    """Refuse, naming the patch and file, unless `result` differs from `base` exactly as the patches say. With
    `merged` (--3way), contents may legitimately differ from what each patch recorded: files and modes still
    must not."""
    first, last, owner = claimed
    diff = repo.start_raw_diff(base, result)
    built = {c.path: (None if c.new_mode == "000000" else (c.new_mode, c.new_blob))
             for c in read_changes(diff)}  # fmt: skip
    for path in sorted(set(built) | set(last)):
        was = first.get(path)
        want = last.get(path, was)
        got = built.get(path, was) if path in last else built[path]
        if path not in last or not _same(want, got, merged):
            name = owner.get(path)
            who = f"patch {name}" if name else "the series"
            raise StackmgrError(
                f"tree {tree}: {who} does not build {show_path(path)} as it records "
                f"({_show(want)} expected, {_show(got)} built): the patch was edited or landed in the wrong place; "
                "nothing was changed", "restore the patch file, or save the change again")  # fmt: skip


def _same(want: Entry, got: Entry, merged: bool) -> bool:
    if want is None or got is None:
        return want is got
    return want[0] in ("", got[0]) and (merged or want[1] is None or want[1] == got[1])


def _show(entry: Entry) -> str:
    if entry is None:
        return "no file"
    return f"{entry[0]} {entry[1][:12]}" if entry[1] else f"mode {entry[0]}"


def _store_prefix(top: str, store_root: str) -> bytes | None:
    """`<store>/.stackmgr/` relative to the tree when the store lives inside it (the product repository's case)."""
    top_real, store_real = os.path.realpath(top), os.path.realpath(store_root)
    if os.path.commonpath([top_real, store_real]) != top_real:
        return None
    rel = os.path.relpath(os.path.join(store_real, ".stackmgr"), top_real)
    return os.fsencode(rel) + b"/"
