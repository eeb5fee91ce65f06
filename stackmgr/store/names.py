"""Names of trees, patches and series, and the paths they become (docs/FORMATS.md#names)."""

from __future__ import annotations

import os

from stackmgr.errors import UsageProblem

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


def inside(directory: str, name: str) -> str:
    """The path `directory/name`, refusing any that resolves outside `directory` (symlink escapes)."""
    path = os.path.join(directory, name)
    real_dir = os.path.realpath(directory)
    real = os.path.realpath(path)
    if os.path.commonpath([real_dir, real]) != real_dir or real == real_dir:
        raise UsageProblem(f"'{name}' resolves outside {directory}", "remove the symlink or pick another name")
    return path


VERSIONS = ".versions"  # patches/.versions/NAME/HEX.patch: what `save --update` and `rebase` replaced
