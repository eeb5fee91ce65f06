"""Values checked before git sees them (docs/SECURITY.md): object ids, revisions, ref names and paths that reach
git's command line, stdin or environment. Many come from store files a `git pull` delivers, so each is refused
unless it is what it claims to be, and none can be read by git as an option (a value starting with `-`, such as
`--index-output=PATH`, is never a revision here). The callers that parse store files check their values with the
file's name too (store/patchfile.py); this is the last line, where the argv is built.

Plain functions on `os` only: this module is on `check`'s start-up path.
"""

from __future__ import annotations

import os
import stat

from stackmgr.errors import StackmgrError

_HEX = "0123456789abcdef"
_CONTROL = frozenset(chr(c) for c in (*range(32), 127))
_NOT_IN_REFS = frozenset(" ~^:?*[\\") | _CONTROL  # git check-ref-format's forbidden characters
_formats: dict[str, int] = {}  # common git directory -> length of its object ids (40 for SHA-1, 64 for SHA-256)


class BadGitValue(StackmgrError):
    """A value that would reach git but is not what it must be (exit 3)."""


def is_object_id(value: object, length: int = 0) -> bool:
    """40 (SHA-1) or 64 (SHA-256) lowercase hex digits; exactly `length` of them when it is given."""
    return (isinstance(value, str) and (len(value) == length if length else len(value) in (40, 64))
            and not value.strip(_HEX))  # fmt: skip


def object_id(value: object, length: int = 0) -> str:
    """`value` when it is an object id (`is_object_id`), else BadGitValue naming it."""
    if not is_object_id(value, length):
        want = f"{length} hex digits" if length else "40 or 64 hex digits"
        raise BadGitValue(f"'{shown(value)}' is not a git object id ({want})",
                          "the store file it came from was not written by stackmgr: restore it from the store's "
                          "git history")  # fmt: skip
    assert isinstance(value, str)
    return value


def revision(value: object) -> str:
    """A revision for git's argv (an object id, a ref, `HEAD~2`, `X^{tree}`): never empty, never starting with
    `-` (git would read an option), no control character."""
    if not isinstance(value, str) or not value or value.startswith("-") or not _CONTROL.isdisjoint(value):
        raise BadGitValue(f"'{shown(value)}' is not a revision git can be given",
                          "name a commit by its id, a branch or a tag")  # fmt: skip
    return value


def ref_name(value: object, *, prefix: bool = False) -> str:
    """A full ref name under `refs/` by `git check-ref-format`'s rules (with `prefix`: such a name ending in `/`,
    as `for-each-ref` takes one)."""
    name = value[:-1] if prefix and isinstance(value, str) and value.endswith("/") else value
    if not (isinstance(name, str) and _good_ref(name)):
        raise BadGitValue(f"'{shown(value)}' is not a ref name git allows", "ref names come from stackmgr itself")
    assert isinstance(value, str)
    return value


def _good_ref(name: str) -> bool:
    parts = name.split("/")
    return (
        len(parts) >= 2 and parts[0] == "refs" and _NOT_IN_REFS.isdisjoint(name) and ".." not in name
        and "@{" not in name and not name.endswith(".")
        and all(p and not p.startswith(".") and not p.endswith(".lock") for p in parts)
    )  # fmt: skip


def path_bytes(path: bytes) -> bytes:
    """A path for a NUL-separated record (`--index-info -z`, `ls-tree -z … -- PATH`): no NUL in it."""
    if b"\0" in path:
        raise BadGitValue(f"'{shown(path)}' holds a NUL byte, which no file name can", "remove it from the patch")
    return path


def patch_file_for_git(path: str) -> str:
    """The absolute path of a patch file git is to read (`git apply FILE`, which follows a symbolic link): a
    regular file, or a link to one beside it (an alias in patches/); never a link elsewhere (a patch file a pull
    made a link to ~/.ssh/id_rsa) nor a FIFO or device."""
    path = os.path.abspath(path)
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            real = os.path.realpath(path)
            beside = os.path.dirname(real) == os.path.realpath(os.path.dirname(path))
            st = os.stat(real) if beside else st
    except OSError:
        return path  # git says it is missing, in its words
    if not stat.S_ISREG(st.st_mode):
        kind = "a symbolic link out of its folder" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise BadGitValue(f"{shown(path)} is {kind}; stackmgr gives git only patch files themselves",
                          "replace it with the patch file itself")  # fmt: skip
    return path


def env_value(value: str, what: str) -> str:
    """A value for a git environment variable (an author's name, a date): no control character."""
    if not _CONTROL.isdisjoint(value):
        raise BadGitValue(f"the {what} '{shown(value)}' holds control characters", "fix it in the patch's header")
    return value


def hash_length(common_dir: str) -> int:
    """The length of the object ids of the repository whose common git directory this is: 64 when its config
    says `extensions.objectFormat = sha256`, else 40 (read once per process, without git)."""
    known = _formats.get(common_dir)
    if known is None:
        known = 40
        try:
            with open(os.path.join(common_dir, "config"), "rb") as f:
                config = f.read(1 << 20)
        except OSError:
            config = b""
        for line in config.lower().splitlines():
            squeezed = line.replace(b" ", b"").replace(b"\t", b"")
            if squeezed.startswith(b"objectformat="):
                known = 64 if squeezed[13:].strip(b"\"'") == b"sha256" else 40
        _formats[common_dir] = known
    return known


def shown(value: object) -> str:
    """A value as an error names it: control characters escaped, cut to 80 characters."""
    text = os.fsdecode(value) if isinstance(value, bytes) else str(value)
    return text.encode("unicode_escape").decode("ascii")[:120]
