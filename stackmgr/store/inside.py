"""Files of the store opened without leaving it (docs/SECURITY.md): every component below the store's root is
opened with O_NOFOLLOW relative to its parent's descriptor, so neither a symbolic link (anywhere on the way) nor
`..` nor an absolute path can lead a read or a write outside. The store's root itself is the user's choice (it
may be a symlink); what is below it arrives by `git pull` and is untrusted.

Plain functions on `os` only: this module is on `check`'s start-up path.
"""

from __future__ import annotations

import os
import stat

from stackmgr.errors import StackmgrError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
BLOCK = 1 << 20  # files are read a block at a time


class OutsideStore(StackmgrError):
    """A store path that is absolute, climbs with `..`, or goes through a symbolic link (exit 3)."""


def relative_parts(rel: str) -> list[str]:
    """The components of a store-relative path; refuses an absolute path, `..`, NUL and empty paths."""
    if not rel or rel.startswith("/") or "\0" in rel:  # a backslash is a file name's own character here
        raise OutsideStore(f"'{_shown(rel)}' is not a path inside the store", "store paths are relative, with /")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise OutsideStore(f"'{_shown(rel)}' leaves the store", "store paths stay below the store's directory")
    return parts


def open_inside(root: str, rel: str, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor of `root/rel`, no component below `root` followed if it is a symlink. For reading, only a
    regular file opens (a FIFO or device would block or never end). Raises OutsideStore naming the path, or
    FileNotFoundError / OSError as `os.open` does for a missing file."""
    parts = relative_parts(rel)
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for i, part in enumerate(parts[:-1]):
            try:
                nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError as exc:
                _refuse_link(fd, part, "/".join(parts[: i + 1]), exc)
                raise
            os.close(fd)
            fd = nxt
        last = parts[-1]
        reading = flags & (os.O_WRONLY | os.O_RDWR) == 0
        try:
            out = os.open(last, flags | _NOFOLLOW | _CLOEXEC | (_NONBLOCK if reading else 0), mode, dir_fd=fd)
        except OSError as exc:
            _refuse_link(fd, last, "/".join(parts), exc)
            raise
    finally:
        os.close(fd)
    if reading:
        st = os.fstat(out)
        if not stat.S_ISREG(st.st_mode):
            os.close(out)
            raise OutsideStore(f"{'/'.join(parts)} in the store is not a regular file", "remove it from the store")
        os.set_blocking(out, True)
    return out


def read_inside(root: str, rel: str, limit: int | None = None) -> bytes:
    """The bytes of `root/rel`, read a block at a time; more than `limit` bytes is refused."""
    fd = open_inside(root, rel)
    try:
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, BLOCK)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if limit is not None and total > limit:
                raise StackmgrError(f"{rel} in the store is over {limit} bytes", "it is not a file stackmgr wrote")
            chunks.append(chunk)
    finally:
        os.close(fd)


def is_link_inside(root: str, rel: str) -> str | None:
    """The first component of `root/rel` that is a symbolic link (store-relative), or None."""
    path = root
    parts = relative_parts(rel)
    for i, part in enumerate(parts):
        path = os.path.join(path, part)
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return "/".join(parts[: i + 1])
        except OSError:
            return None
    return None


def _refuse_link(dir_fd: int, name: str, shown: str, exc: OSError) -> None:
    """O_NOFOLLOW fails with ELOOP (O_DIRECTORY with ENOTDIR) on a symlink: say so in one line."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise OutsideStore(f"{_shown(shown)} in the store is a symbolic link; stackmgr does not follow links there",
                           "replace it with the file or directory itself") from exc


def _shown(text: str) -> str:
    return text.encode("unicode_escape").decode("ascii")[:120]
