"""Atomic file writes and advisory locks with holder information (docs/FORMATS.md#locks).

Imported on `check`'s path: only os-level modules here; `tempfile` is imported when a write happens.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import marshal
import os
import sys
import time
from stat import S_ISLNK, S_ISREG

from stackmgr.errors import StackmgrError, disk_error, is_disk_errno

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Protocol

    class Journal(Protocol):
        """What records a replaced file (`journal.operation.Operation`): told before and after the rename."""

        def file_replacing(self, path: str) -> None: ...

        def file_replaced(self, path: str) -> None: ...

        def files_replacing(self, paths: list[str]) -> None: ...

        def files_replaced(self, paths: list[str]) -> None: ...


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, mode: int = 0o644, *, durable: bool = True, journal: Journal | None = None,
                 root: str | None = None) -> None:  # fmt: skip
    """Replace `path` with `data`: temp file in the same directory, fsync, rename, fsync the directory. Without
    `durable` no fsync: still all-or-nothing for readers and for a killed process, not across a power cut.
    A `journal` records the replacement (the old file kept first). `root`: see `refuse_links_below`."""
    tmp = write_temp(path, data, mode, durable=durable, root=root)
    publish(tmp, path, durable=durable, journal=journal, root=root)


def write_temp(path: str, data: bytes, mode: int = 0o644, *, durable: bool = True, root: str | None = None) -> str:
    """Write `data`, synced, to a new temp file beside `path` (to be published or removed by the caller)."""
    if root is not None:
        refuse_links_below(root, os.path.dirname(os.path.abspath(path)))
    return write_temp_from(path, (data,), mode, durable=durable)


def write_temp_from(path: str, chunks: Iterable[bytes], mode: int = 0o644, *, durable: bool = True) -> str:
    """`write_temp` of the bytes `chunks` gives, one at a time: a big file copied in little memory."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = _create_exclusive(directory, "." + os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
    except BaseException as exc:
        discard(tmp)
        if isinstance(exc, OSError):
            raise _write_error(directory, exc, path) from None
        raise
    return tmp


def _create_exclusive(directory: str, prefix: str) -> tuple[int, str]:
    """A new file that did not exist (O_EXCL, never through a symlink); like mkstemp without `tempfile`. `prefix`
    is "." and the name of the file it is for (named in an error)."""
    for attempt in range(100):
        tmp = os.path.join(directory, f"{prefix}.{os.getpid()}.{time.monotonic_ns() % 1_000_000}{attempt}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise _write_error(directory, exc, os.path.join(directory, prefix[1:])) from None
    raise StackmgrError(f"cannot create a temporary file in {directory}", "remove stale *.tmp files there")


def publish(tmp: str, path: str, *, durable: bool = True, journal: Journal | None = None,
            root: str | None = None) -> None:  # fmt: skip
    """Rename a synced temp file over `path` and sync the directory, so the new name survives a crash. (A
    symbolic link at `path` itself is replaced, never followed; `root`: as for `atomic_write`.)"""
    directory = os.path.dirname(os.path.abspath(path))
    if root is not None:
        refuse_links_below(root, directory, discarding=tmp)
    if journal is not None:
        try:
            journal.file_replacing(path)
        except BaseException:
            discard(tmp)
            raise
    try:
        os.replace(tmp, path)
    except OSError as exc:
        discard(tmp)
        raise _write_error(directory, exc, path) from None
    if durable:
        _sync_dir(directory, path)
    if journal is not None:
        journal.file_replaced(path)


def _sync_dir(directory: str, path: str) -> None:
    """fsync_dir, its failure (EIO) reported naming the file just renamed there."""
    try:
        fsync_dir(directory)
    except OSError as exc:
        raise _write_error(directory, exc, path) from None


def atomic_write_all(files: list[tuple[str, bytes]], *, journal: Journal | None = None,
                     root: str | None = None) -> None:  # fmt: skip
    """`atomic_write` of several files, each synced; the journal told once before the first rename (so a kill
    at any point is rolled back) and once after the last, each directory synced once. Each temp file is renamed
    as soon as it is written: a kill leaves at most one behind, as `atomic_write` does."""
    if root is not None:
        for directory in sorted({os.path.dirname(os.path.abspath(path)) for path, _ in files}):
            refuse_links_below(root, directory)
    if journal is not None:
        journal.files_replacing([path for path, _ in files])
    for path, data in files:
        tmp = write_temp(path, data)
        try:
            os.replace(tmp, path)
        except OSError as exc:
            discard(tmp)
            raise _write_error(os.path.dirname(os.path.abspath(path)), exc, path) from None
    for directory in sorted({os.path.dirname(os.path.abspath(path)) for path, _ in files}):
        _sync_dir(directory, directory)
    if journal is not None:
        journal.files_replaced([path for path, _ in files])


class LinkInStore(StackmgrError):
    """A symbolic link where the store keeps a directory or a file of its own (exit 3): never followed."""


def refuse_links_below(root: str, directory: str, discarding: str = "") -> None:
    """Refuse (removing the temp file `discarding`), in one line naming it, a symbolic link among the components
    of `directory` below the store's `root` (which is the user's choice), or a `directory` outside `root`."""
    rel = os.path.relpath(os.path.abspath(directory), os.path.abspath(root))
    parts = [] if rel == os.curdir else rel.split(os.sep)
    place = root
    for n, part in enumerate(parts):
        place = os.path.join(place, part)
        try:
            linked = part == os.pardir or S_ISLNK(os.lstat(place).st_mode)
        except FileNotFoundError:
            return  # not there yet: the write fails, or a makedirs below a checked parent made it
        if linked:
            if discarding:
                discard(discarding)
            shown = "/".join(parts[: n + 1]).encode("unicode_escape").decode("ascii")[:120]
            what = "leaves the store" if part == os.pardir else "in the store is a symbolic link"
            raise LinkInStore(f"{shown} {what}; stackmgr does not write through it",
                              f"make it a directory again (`git log -- {shown}` in the store says who linked it)")


def discard(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _write_error(directory: str, exc: OSError, path: str | None = None) -> StackmgrError:
    """A failed write as one line: a full, read-only or failing file system named by its mount point (DiskError),
    else the directory and the reason."""
    full = disk_error(exc, path or directory)
    if full is not None:
        return full
    if exc.errno in (errno.EACCES, errno.EPERM):
        return StackmgrError(f"cannot write in {directory}: {exc.strerror}", "check its permissions")
    if exc.errno == errno.EFBIG:  # a file-size limit (RLIMIT_FSIZE), not a full file system
        return StackmgrError(f"cannot write in {directory}: {exc.strerror}", "free some space and retry")
    return StackmgrError(f"cannot write in {directory}: {exc.strerror}")


class locked:  # lower-case: used like a function, `with locked(path, "the store"):`
    """Hold an exclusive flock on `path`; after `wait_seconds` fail naming the holder (pid, host, command).

    flock dies with its process, so a killed stackmgr never leaves a stale lock behind.
    """

    def __init__(self, path: str, what: str, wait_seconds: float | None = None) -> None:
        self.path = path
        self.what = what
        if wait_seconds is None:  # STACKMGR_LOCK_WAIT: seconds a second stackmgr waits before naming the holder
            try:
                wait_seconds = float(os.environ.get("STACKMGR_LOCK_WAIT", "10"))
            except ValueError:
                wait_seconds = 10.0
        self.wait_seconds = wait_seconds
        self.fd = -1

    def __enter__(self) -> None:
        deadline = time.monotonic() + self.wait_seconds
        writable = True
        while True:
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            except OSError as exc:
                fd = _read_only_lock(self.path, exc)  # a read-only file system: a reader may still lock and look
                writable = False
                full = disk_error(exc, self.path) if fd < 0 else None
                if full is not None:
                    raise full from None
                if fd < 0:
                    raise StackmgrError(f"cannot lock {self.what} ({self.path}: {exc.strerror})",
                                    "check the permissions of that directory") from None  # fmt: skip
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                if time.monotonic() >= deadline:
                    raise StackmgrError(
                        f"{self.what} is locked by {holder}", "wait for that command to finish, then retry"
                    ) from None
                time.sleep(0.05)
        self.fd = fd
        if not writable:
            return
        info = f"{os.getpid()}\t{os.uname().nodename}\tstackmgr {' '.join(sys.argv[1:4])}"
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, info.encode("utf-8", "replace"), 0)
        except OSError as exc:  # the holder's name is for messages only: a full disk must not stop a reader
            if not is_disk_errno(exc.errno):
                os.close(fd)
                self.fd = -1
                raise StackmgrError(f"cannot lock {self.what} ({self.path}: {exc.strerror})") from None

    def __exit__(self, *exc: object) -> None:
        if self.fd < 0:
            return
        try:
            os.ftruncate(self.fd, 0)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = -1


def _read_only_lock(path: str, exc: OSError) -> int:
    """On a read-only file system an existing lock file can still be opened for reading and flocked (nobody can
    write there, but a reader must still wait for a writer's switch); -1 otherwise."""
    if exc.errno != errno.EROFS:
        return -1
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return -1


def _read_holder(fd: int) -> str:
    try:
        pid, host, command = os.pread(fd, 4096, 0).decode("utf-8", "replace").split("\t", 2)
        return f"pid {pid} on {host} ({command})"
    except (ValueError, OSError):
        return "another process"


SETTLED_NS = 2_000_000_000  # files younger than this when a question is put leave its answer uncached


def stat_key(paths: Sequence[str | bytes], asked_at: int, *, follow: bool = False) -> list[object] | None:
    """The key of an answer cached while none of `paths` changes: each one's inode, size, mtime and ctime in ns
    (ctime: utime() cannot forge it), None for one that is absent; `follow` looks through symlinks. Taken before
    the question is put, so a change during or after it shows next time. None (do not cache) when a file is
    younger than SETTLED_NS at `asked_at`, as a coarse timestamp could hide a same-size rewrite in the same
    tick, or cannot be looked at."""
    key: list[object] = []
    for path in paths:
        try:
            st = os.stat(path) if follow else os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            key.append(None)
            continue
        except OSError:
            return None
        if asked_at - max(st.st_mtime_ns, st.st_ctime_ns) < SETTLED_NS:
            return None
        key.append([st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns])
    return key


def read_cache(path: str) -> object:
    """A value written by `write_cache`, or None when absent or unreadable (caches are always rebuildable)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    collecting = gc.isenabled()
    gc.disable()  # millions of fresh tuples: collection passes would scan them again and again
    try:
        return marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    finally:
        if collecting:
            gc.enable()


def write_cache(path: str, value: object) -> None:
    """Best effort, atomic (rename), unsynced: a lost or unwritable cache only costs a re-read.

    marshal, not json: it loads an order of magnitude faster and needs no import on `check`'s path.
    """
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        blob = marshal.dumps(value)  # type: ignore[arg-type]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def sha256_hex(data: bytes) -> str:
    """sha256 of `data`. Small inputs use the interpreter's built-in module: importing hashlib starts OpenSSL
    (~3 ms, a tenth of a typical `save`); large ones use hashlib, whose OpenSSL code is much faster."""
    if len(data) < 1 << 20:
        try:
            from _sha256 import sha256 as builtin  # type: ignore[import-not-found]  # CPython 3.11

            return builtin(data).hexdigest()  # type: ignore[no-any-return]
        except ImportError:
            pass
    import hashlib

    return hashlib.sha256(data).hexdigest()


def read_or_none(path: str) -> bytes | None:
    """The bytes of a file, or None when it does not exist. A symbolic link is read only as an alias of a file
    beside it (not `fix.patch -> ~/.ssh/id_rsa`); it and anything but a regular file are refused in one line."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        real = os.path.realpath(path)
        if os.path.dirname(real) != os.path.realpath(os.path.dirname(path) or "."):
            raise LinkInStore(f"{path} is a symbolic link out of its directory; stackmgr does not follow it",
                              "replace it with the file itself (or remove it)") from None  # fmt: skip
        try:
            fd = os.open(real, flags)
        except FileNotFoundError:
            return None
    try:
        if not S_ISREG(os.fstat(fd).st_mode):
            raise StackmgrError(f"{path} is not a regular file", "replace it with the file itself")
        os.set_blocking(fd, True)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def process_alive(pid: int) -> bool:
    """Whether `pid` names a running process (this one included; another user's counts as running): a file named
    after a pid that is gone is a killed command's leftover."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True
