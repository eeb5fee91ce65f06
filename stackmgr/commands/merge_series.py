"""`stackmgr merge-series BASE OURS THEIRS`: git's merge driver for series files (`git-setup` registers it).

Two engineers appending to one series is the common case: git's own 3-way merge (`git merge-file --diff3`) does
all the rest, and where it stops on a block that both sides only added to (nothing of the common version in
it), both additions are kept: the two blocks in a stable order (so either engineer's merge gives the same
file), a patch both added kept once (added by both with other options or guards, it is a conflict). Any
other conflict (one side removed or moved what the other changed) is left as git leaves it, markers and all,
for a person: stackmgr then says "unresolved merge conflict in series/S"."""

from __future__ import annotations

from stackmgr.git.store_repo import merge_file_diff3
from stackmgr.store.conflicts import conflict_lines
from stackmgr.store.fs import atomic_write


def merge_series(base: str, ours: str, theirs: str) -> bool:
    """Merge into `ours` (git's %A, which the driver must leave holding the result); True when clean."""
    texts = {}
    for side, path in (("base", base), ("ours", ours), ("theirs", theirs)):
        with open(path, "rb") as f:
            texts[side] = f.read()
        if texts[side] and not texts[side].endswith(b"\n"):  # a last line without its newline is still a line:
            texts[side] += b"\r\n" if b"\r\n" in texts[side] else b"\n"  # an append after it is no conflict
            with open(path, "wb") as f:  # git's own temporary copies (%O %A %B), the merge's input
                f.write(texts[side])
    conflicts, merged = merge_file_diff3(ours, base, theirs)
    if conflicts:
        merged, conflicts = _keep_both_appends(merged)
    if not conflicts and (_brings_back_a_removed_patch(texts, merged) or _listed_twice(texts, merged)):
        merged, conflicts = _whole_file_conflict(texts), 1  # one side removed or moved what the other changed
    atomic_write(ours, merged, durable=False)
    return conflicts == 0 and not conflict_lines(merged)  # never "merged" with a marker left in the file


def _brings_back_a_removed_patch(texts: dict[str, bytes], merged: bytes) -> bool:
    """Whether a patch one side removed from the series is in the merge (the other side moved it: git's line
    merge keeps the moved copy)."""
    entries = {side: {ln.strip() for ln in text.split(b"\n") if _entry(ln)} for side, text in texts.items()}
    removed = (entries["base"] - entries["ours"]) | (entries["base"] - entries["theirs"])
    return any(_entry(ln) and ln.strip() in removed for ln in merged.split(b"\n"))


def _listed_twice(texts: dict[str, bytes], merged: bytes) -> bool:
    """Whether the merge lists a patch twice that neither side does (one appended it, the other put it first)."""

    def names(text: bytes) -> list[bytes]:
        return [_patch(ln) for ln in text.split(b"\n") if _entry(ln)]

    sides = [names(texts["ours"]), names(texts["theirs"])]
    both = names(merged)
    return any(both.count(n) > 1 and all(side.count(n) <= 1 for side in sides) for n in set(both))


def _whole_file_conflict(texts: dict[str, bytes]) -> bytes:
    def block(text: bytes) -> bytes:
        return text if not text or text.endswith(b"\n") else text + b"\n"

    return (b"<<<<<<< ours\n" + block(texts["ours"]) + b"||||||| base\n" + block(texts["base"]) + b"=======\n"
            + block(texts["theirs"]) + b">>>>>>> theirs\n")  # fmt: skip


def _keep_both_appends(text: bytes) -> tuple[bytes, int]:
    """Resolve the conflict blocks whose common part is empty; (the text, how many blocks are left)."""
    out: list[bytes] = []
    left = 0
    lines = text.split(b"\n")
    bare = [ln.removesuffix(b"\r") for ln in lines]  # a CRLF series file: git's markers end in \r too
    n = 0
    while n < len(lines):
        if bare[n] != b"<<<<<<< ours":
            out.append(lines[n])
            n += 1
            continue
        parts: list[list[bytes]] = [[], [], []]
        at, start = 0, n
        n += 1
        while n < len(lines) and bare[n] != b">>>>>>> theirs":
            if bare[n] == b"||||||| base" and at == 0:
                at = 1
            elif bare[n] == b"=======" and at == 1:
                at = 2
            else:
                parts[at].append(lines[n])
            n += 1
        ours, common, theirs = parts
        if at != 2 or n >= len(lines) or common:  # not ours' and theirs' additions alone: a person decides
            out.extend(lines[start : n + 1])
            left += 1
        else:
            first, second = sorted([ours, theirs])
            named = {_patch(ln): ln.strip() for ln in first if _entry(ln)}
            shared = [_patch(ln) for ln in second if _entry(ln) and _patch(ln) in named]
            if any(_entry(ln) and named.get(_patch(ln), ln.strip()) != ln.strip() for ln in second) or \
                    shared != [n for n in named if n in set(shared)]:  # fmt: skip
                out.extend(lines[start : n + 1])  # a patch both added, with other options or in another order
                left += 1
            else:
                out.extend(first + [ln for ln in second if not (_entry(ln) and _patch(ln) in named)])
        n += 1
    return b"\n".join(out), left


def _patch(line: bytes) -> bytes:
    """The patch file a series line names (its first word; options and guards follow)."""
    return line.split()[0]


def _entry(line: bytes) -> bool:
    """A patch line (not a comment or a blank line), which the merge keeps once."""
    text = line.strip()
    return bool(text) and not text.startswith(b"#")
