"""Unresolved git merge conflicts in store files (docs/FORMATS.md#store-layout): a `git pull` that conflicted
leaves `<<<<<<< `, `=======` and `>>>>>>> ` lines in a series, patch, record or config. Every reader asks here
first, so the answer is "unresolved merge conflict in FILE (lines …)" rather than a parse error about a marker.
No `re`: series files are read on `check`'s path."""

from __future__ import annotations

from stackmgr.errors import StackmgrError


def conflict_lines(data: bytes) -> list[tuple[int, int]]:
    """(first, last) line numbers of each `<<<<<<< ` … `>>>>>>> ` block at the start of lines; [] when none. A
    diff's own lines start with a space, `+` or `-`, so a marker at column 0 is git's, never content."""
    if b"<<<<<<<" not in data:
        return []
    blocks, start = [], 0
    for n, line in enumerate(data.split(b"\n"), start=1):
        line = line.removesuffix(b"\r")
        if line.startswith(b"<<<<<<<") and (len(line) == 7 or line[7:8] == b" "):
            start = n
        elif start and line.startswith(b">>>>>>>") and (len(line) == 7 or line[7:8] == b" "):
            blocks.append((start, n))
            start = 0
    return blocks


NO_DRIVER = ("this clone has no series merge driver, so every two appends to a series conflict: "
             "`stackmgr git-setup` sets it up (once per clone)")


def missing_merge_driver(root: str) -> str | None:
    """Why two appends to one series will conflict in the store's git repository, in one line; None when they will
    not (the driver is set up) or the store is in no repository. git does not clone config: a clone without
    `stackmgr git-setup`, or a store `init` made before `git init`, lacks it. One git call, only when a `.git`
    is found at or above the store."""
    import os

    here = os.path.abspath(root)
    while not os.path.lexists(os.path.join(here, ".git")):
        if os.path.dirname(here) == here:
            return None
        here = os.path.dirname(here)
    from stackmgr.git.store_repo import DRIVER, merge_driver_registered
    from stackmgr.store.inside import read_inside

    try:
        registered = merge_driver_registered(root)
        attributes = read_inside(root, ".gitattributes", 1 << 20)
    except FileNotFoundError:
        attributes = b""
    except (StackmgrError, OSError):
        return None
    named = f"series/* merge={DRIVER}".encode() in attributes.splitlines()
    return NO_DRIVER if registered is False or (registered and not named) else None


def refuse_conflicted(data: bytes, shown: str, root: str | None = None) -> None:
    """Raise the one-line error for a store file with merge conflict markers (exit 3). With the store's `root`,
    a conflicted series says when this clone lacks the merge driver that would have joined the appends."""
    blocks = conflict_lines(data)
    if blocks:
        where = ", ".join(f"{a}–{b}" for a, b in blocks[:3]) + (" …" if len(blocks) > 3 else "")
        if shown.endswith(".patch"):  # two `save --update`s of one patch: a patch is kept whole, not merged
            hint = (f"keep one version (`git checkout --ours {shown}` or `--theirs`, then `git add` it), or both: "
                    "keep one, then `stackmgr save NEW` the other's change from a tree where it is applied")
        elif shown.startswith("series/"):
            hint = ("edit it to the order the series should have, each patch once, then `git add` it and commit; "
                    "`stackmgr lint` lists every conflicted file")  # fmt: skip
            why = missing_merge_driver(root) if root is not None else None
            if why is not None:
                hint = f"{why}; then {hint}"
        else:
            hint = ("resolve it in the store (keep one side or both), `git add` it and commit; `stackmgr lint` "
                    "lists every conflicted file")
        raise StackmgrError(f"unresolved merge conflict in {shown} (lines {where})", hint)


def conflicted_files(root: str) -> list[tuple[str, list[tuple[int, int]]]]:
    """Every store file with merge conflict markers (the configs, series, patches, link records), for `lint`,
    which must list them even when the config itself is conflicted."""
    import os

    found = []
    candidates = ["stackmgr.toml", "stackmgr.local.toml", "pyproject.toml"]
    for sub, suffix in (("series", ""), ("patches", ".patch"), ("links", ".toml")):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, sub)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            candidates += [os.path.relpath(os.path.join(dirpath, f), root) for f in sorted(filenames)
                           if f.endswith(suffix) and not f.startswith(".")]  # fmt: skip
    from stackmgr.errors import StackmgrError
    from stackmgr.store.inside import read_inside

    for rel in candidates:
        try:
            data = read_inside(root, rel, 64 << 20)  # no symlink followed, no FIFO or device read
        except (OSError, StackmgrError):
            continue
        blocks = conflict_lines(data)
        if blocks:
            found.append((rel, blocks))
    return found
