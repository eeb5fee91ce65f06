"""The reliability suite (docs/RELIABILITY.md): `python -m pytest tests/reliability`.

Every test of a row of the bad-input catalogue (docs/RELIABILITY.md#catalogue-rows) is marked
`@pytest.mark.catalogue(N)`; every crash test records the crash points it injected with the `crash_points`
fixture. The summary line counts both, so CI shows what was covered: tests/reliability/catalogue.py, a plugin
rather than hooks here, so that the count is right under pytest-xdist too. Below: helpers the suite shares.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

# --- helpers ---------------------------------------------------------------------------------------------------


def fingerprint(*roots: Path) -> dict[str, tuple[int, bytes]]:
    """Every file, symlink and directory under `roots` (their .git included): mode and bytes (link target for
    links). Two equal fingerprints mean nothing was written, created or removed there."""
    out: dict[str, tuple[int, bytes]] = {}
    for root in roots:
        for dirpath, dirs, names in os.walk(root):
            for name in dirs + names:
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    data = os.readlink(path).encode()
                elif stat.S_ISREG(st.st_mode):
                    with open(path, "rb") as f:
                        data = f.read()
                else:
                    data = b""
                out[path] = (st.st_mode, data)
    return out


def changed_paths(before: dict[str, tuple[int, bytes]], after: dict[str, tuple[int, bytes]],
                  ignore: tuple[str, ...] = ()) -> list[str]:  # fmt: skip
    """Paths created, removed or changed between two fingerprints, except those containing an `ignore` part
    (stackmgr's rebuildable caches and git's own private-index files)."""
    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k) != after.get(k) and not any(part in k for part in ignore)
                  and not _empty_ref_dir(k, before.get(k), after.get(k)))  # fmt: skip


def _empty_ref_dir(path: str, *sides: tuple[int, bytes] | None) -> bool:
    """A directory under .git/refs/ that git created for a ref and left empty when the ref was deleted."""
    return "/.git/refs/" in path and all(side is None or stat.S_ISDIR(side[0]) for side in sides)


# What a refused command may still touch: rebuildable caches, stackmgr's private indexes and git objects (content-
# addressed, so written, never changed: a snapshot's trees). Never user data.
REBUILDABLE = ("/.stackmgr/cache/", "/.git/stackmgr/", "/.stackmgr/lock", "/.git/objects/")


def assert_one_line_error(err: str, *needles: str) -> None:
    """A refusal: exactly one `stackmgr: …` line (under it only the files it names, one per line, indented:
    errors.listed), no traceback, mentioning each needle."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if lines[:1] and lines[0].startswith("{"):  # under --json: the same error as one JSON line
        assert len(lines) == 1, f"expected one JSON line on stderr, got:\n{err}"
        error = json.loads(lines[0])["error"]
        said = " ".join([error["message"], error["hint"] or "", *error["details"]])
        for needle in needles:
            assert needle in said, f"{needle!r} not in {said!r}"
        return
    assert len(lines) >= 1 and all(ln.startswith("  ") for ln in lines[1:]), f"expected one line on stderr, got:\n{err}"
    assert lines[0].startswith("stackmgr: "), err
    assert "Traceback" not in err, err
    for needle in needles:
        assert needle in err, f"{needle!r} not in {err!r}"
