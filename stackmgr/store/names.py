"""Names of trees, patches and series, and the paths they become (docs/FORMATS.md#names)."""

from __future__ import annotations

import os
import stat

from stackmgr.errors import UsageProblem
from stackmgr.store.inside import OutsideStore, is_link_inside

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.store.config import Store

_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_NAME_CHARS = "".join(sorted(_ALNUM)) + "._+-"


def valid_name(name: str) -> bool:
    """[A-Za-z0-9][A-Za-z0-9._+-]{0,199}, no '..', not ending in .lock (no `re`: this runs in `check`)."""
    return (
        0 < len(name) <= 200
        and name[0] in _ALNUM
        and not name.lstrip(_NAME_CHARS)  # every character allowed (str.lstrip runs in C: 20,000 links)
        and ".." not in name
        and not name.endswith(".lock")
    )


def check_name(kind: str, name: str) -> str:
    """Return `name` if it is a valid tree/patch/series name, else raise a one-line usage error."""
    if not valid_name(name):
        shown = name.encode("unicode_escape").decode("ascii")[:80]
        raise UsageProblem(
            f"invalid {kind} name '{shown}'",
            "use letters, digits and . _ + - (first a letter or digit, at most 200, no '..', not ending in .lock)",
        )
    return name


def patch_name(name: str) -> str:
    """Accept a patch given as NAME or NAME.patch; return NAME."""
    base = name[: -len(".patch")] if name.endswith(".patch") else name
    return check_name("patch", base)


def patch_file(store: Store, name: str) -> str:
    """The rule for a patch of this store by name, one for every command that takes one (docs/FORMATS.md#names):
    NAME or NAME.patch, a valid name, the file `patches/NAME.patch`, a regular file there (or a symbolic link to
    one beside it: quilt's alias), never a link out of patches/ nor anything but a file. Returns NAME; else one
    line: no such patch (exit 2), or the link or special file refused (exit 3)."""
    base = patch_name(name)
    refuse_linked_dirs(store.root, ("patches",))
    st, why = patch_stat(store.patches_dir, base + ".patch")
    if st is not None:
        return base
    if why == MISSING:
        raise no_patch(store, base, f"no patch named {base} (no patches/{base}.patch)")
    if why == LINK_TO_NOTHING:
        raise no_patch(store, base, f"no patch named {base} (patches/{base}.patch is a link to nothing)")
    if why == LINK_OUT:
        raise OutsideStore(f"patches/{base}.patch is {LINK_OUT}; stackmgr does not follow it",
                           "replace it with the patch file itself (or remove it)")  # fmt: skip
    if why == NOT_A_FILE:
        raise OutsideStore(f"patches/{base}.patch is {NOT_A_FILE}", "replace it with the patch file itself")
    raise OutsideStore(f"cannot read patches/{base}.patch: {why}")


def no_patch(store: Store, base: str, message: str) -> UsageProblem:
    """The refusal of a patch name nothing in patches/ answers (exit 2): `message`, then the closest patch names
    `patch_file` would accept (store/suggest.py), else where to look."""
    from stackmgr.store.suggest import did_you_mean

    return UsageProblem(message, did_you_mean(base, patch_names(store), "see `stackmgr series` or `ls patches/`"))


def patch_names(store: Store) -> list[str]:
    """Every patch of the store `patch_file` accepts, by name, sorted: for did-you-mean and shell completion. One
    listing and one lstat a file; [] when patches/ cannot be listed (nothing is read through a linked patches/)."""
    try:
        refuse_linked_dirs(store.root, ("patches",))
        files = os.listdir(store.patches_dir)
    except (OSError, OutsideStore):
        return []
    names = [f[: -len(".patch")] for f in files if f.endswith(".patch") and valid_name(f[: -len(".patch")])]
    return sorted(n for n in names if patch_stat(store.patches_dir, n + ".patch")[0] is not None)


MISSING, LINK_OUT, LINK_TO_NOTHING = "missing", "a symbolic link out of patches/", "a link to nothing"
NOT_A_FILE = "not a regular file"


def patch_stat(patches_dir: str, filename: str) -> tuple[os.stat_result | None, str]:
    """The stat data of patch file `filename` (below `patches_dir`) when it is one by `patch_file`'s rule, else
    (None, why). A kept version (`.versions/NAME/…`, written by stackmgr) is never a link. Cheap: one lstat, and
    a realpath only for a link (the patch index asks this of every patch file)."""
    path = os.path.join(patches_dir, filename)
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            if "/" in filename or os.path.dirname(os.path.realpath(path)) != os.path.realpath(patches_dir):
                return None, LINK_OUT
            try:
                st = os.stat(path)
            except OSError:
                return None, LINK_TO_NOTHING
    except FileNotFoundError:
        return None, MISSING
    except OSError as exc:
        return None, exc.strerror or "unreadable"
    return (st, "") if stat.S_ISREG(st.st_mode) else (None, NOT_A_FILE)


def inside(directory: str, name: str) -> str:
    """The path `directory/name` (a directory of the store, a name by the name rule), refusing one that resolves
    outside `directory` (a symbolic link's escape), and a `directory` that is itself a link (docs/SECURITY.md)."""
    path = os.path.join(directory, name)
    try:
        linked = stat.S_ISLNK(os.lstat(directory).st_mode)
    except OSError:
        linked = False
    if linked:
        shown = os.path.basename(directory)
        raise OutsideStore(
            f"{shown} in the store is a symbolic link; stackmgr does not follow links there",
            f"make it a directory again (`git log -- {shown}` in the store says who linked it)",
        )
    real_dir = os.path.realpath(directory)
    real = os.path.realpath(path)
    if os.path.commonpath([real_dir, real]) != real_dir or real == real_dir:
        raise UsageProblem(f"'{name}' resolves outside {directory}", "remove the symlink or pick another name")
    return path


VERSIONS = ".versions"  # patches/.versions/NAME/HEX.patch: what `save --update` and `rebase` replaced
STORE_DIRS = ("patches", "patches/" + VERSIONS, "series", "links", "artifacts")  # never symbolic links


def refuse_linked_dirs(root: str, dirs: tuple[str, ...] = STORE_DIRS) -> None:
    """A symbolic link where the store keeps one of its directories is refused, in one line naming it: nothing is
    read or written through it (`patches -> ~/.bashrc.d`). One lstat each, once per command."""
    for rel in dirs:
        try:
            linked = stat.S_ISLNK(os.lstat(os.path.join(root, rel)).st_mode)
        except OSError:
            continue
        if linked:
            raise OutsideStore(
                f"{rel} in the store is a symbolic link; stackmgr does not follow links there",
                f"make it a directory again (`git log -- {rel}` in the store says who linked it)",
            )


def refuse_link_inside(root: str, path: str) -> str:
    """`path` (below the store's `root`) when no component of it below `root`, itself included, is a symbolic
    link; else the one line naming the first that is. For a folder of the store to list, read or remove."""
    return _no_link(root, path)


def refuse_link_above(root: str, path: str) -> str:
    """`refuse_link_inside` of the folders on the way to `path`, not the file itself: for a file stackmgr replaces
    by a rename, which never follows a link at its name."""
    _no_link(root, os.path.dirname(os.path.abspath(path)))
    return path


def _no_link(root: str, path: str) -> str:
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    link = is_link_inside(root, rel.replace(os.sep, "/")) if rel != os.curdir else None
    if link is not None:
        raise OutsideStore(f"{link} in the store is a symbolic link; stackmgr does not follow links there",
                           "replace it with the file or directory itself (or remove it)")  # fmt: skip
    return path
