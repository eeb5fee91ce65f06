"""Atomic file writes and advisory locks with holder information (SPEC §6)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Iterator

from stackmgr.errors import StackmgrError


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data`: temp file in the same directory, fsync, rename, fsync the directory."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise _write_error(directory, exc) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise _write_error(directory, exc) from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


def _write_error(directory: str, exc: OSError) -> StackmgrError:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StackmgrError(f"cannot write in {directory}: {exc.strerror}", "check its permissions")
    if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return StackmgrError(f"cannot write in {directory}: {exc.strerror}", "free some space and retry")
    return StackmgrError(f"cannot write in {directory}: {exc.strerror}")


def remove_file(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    _fsync_dir(os.path.dirname(os.path.abspath(path)))


@contextlib.contextmanager
def locked(path: str, what: str, wait_seconds: float = 10.0) -> Iterator[None]:
    """Hold an exclusive flock on `path`; after `wait_seconds` fail naming the holder (pid, host, command)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            if time.monotonic() >= deadline:
                raise StackmgrError(
                    f"{what} is locked by {holder}", "wait for that command to finish, then retry"
                ) from None
            time.sleep(0.05)
            continue
        break
    try:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv[:4])}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {info['pid']} on {info['host']} ({info['command']})"
    except (ValueError, KeyError, OSError):
        return "another process"
