"""Domain errors. Each carries the one line the user sees and its exit code (docs/FORMATS.md#exit-codes)."""

from __future__ import annotations


class StackmgrError(Exception):
    """An operation failed with nothing changed (exit 3). `hint` says what to do next; `details` (the files a
    refusal names, built by `listed`) are shown one per line, indented, under the error's one line."""

    exit_code = 3

    def __init__(self, message: str, hint: str | None = None, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details or []

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


SHOWN_DETAILS = 10  # lines of a refusal's list; the rest are counted


def listed(items: list[str], limit: int = SHOWN_DETAILS) -> list[str]:
    """The lines of a refusal's list (`StackmgrError.details`), as `check -v` lists files: the first `limit`, then
    `… and K more`."""
    more = [f"… and {len(items) - limit} more"] if len(items) > limit else []
    return items[:limit] + more


class UsageProblem(StackmgrError):
    """The command line asks for something that cannot be (exit 2)."""

    exit_code = 2


class NotPreserved(StackmgrError):
    """A check said no: some change is not preserved in any patch (exit 1)."""

    exit_code = 1


class GitFailed(StackmgrError):
    """A git command failed; the message carries git's own last line."""

    def __init__(self, argv: list[str], returncode: int, stderr: bytes) -> None:
        lines = [ln for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        firm = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
        detail = (firm or lines or [f"exit {returncode}"])[0]
        shown = " ".join(a for a in argv if not a.startswith("-c") and "=" not in a)[:80]
        super().__init__(f"git failed ({shown}): {detail}")
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr


# errno values of a write that failed for the file system's sake, not stackmgr's: what the user must do about each.
# (Plain numbers from `errno`, imported lazily: this module is on `check`'s path.)
_NOTHING = "and retry; nothing was changed"
_DISK_PROBLEMS = {
    "ENOSPC": ("no space left on {mount}", f"free some space there {_NOTHING}"),
    "EDQUOT": ("disk quota exceeded on {mount}", f"free some space there (or raise the quota) {_NOTHING}"),
    "EROFS": ("{mount} is mounted read-only", f"remount it read-write (or work elsewhere) {_NOTHING}"),
    "EIO": ("I/O error on {mount}", "check that disk (`dmesg`), then retry; nothing was changed"),
}


def _disk_codes() -> dict[int, str]:
    import errno

    return {getattr(errno, name): name for name in _DISK_PROBLEMS if hasattr(errno, name)}


class DiskError(StackmgrError):
    """A write failed because of the file system: full (ENOSPC), over quota (EDQUOT), read-only (EROFS) or failing
    (EIO). Exit 3; the line names the file system (its mount point), the file being written and what to free."""

    def __init__(self, code: int, path: str | None) -> None:
        name = _disk_codes().get(code, "EIO")
        what, hint = _DISK_PROBLEMS[name]
        self.mount = mount_point(path) if path else None
        self.path = path
        self.errno = code
        if path is None:  # the write that failed named no file (the safety net in cli/entry.py)
            import os

            message = f"a write failed: {os.strerror(code)}"
        else:
            message = f"{what.format(mount=self.mount)} (writing {path})"
        super().__init__(message, hint.replace(" there", ""))
        if path is not None:
            self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}: {self.hint}"


def disk_error(exc: OSError, path: str | None = None) -> DiskError | None:
    """`exc` as a DiskError naming `path` (else the file the OSError names), or None when it is another failure."""
    if exc.errno not in _disk_codes():
        return None
    where = path or (exc.filename if isinstance(exc.filename, str) else None)
    if where is None and isinstance(exc.filename, bytes):
        import os

        where = os.fsdecode(exc.filename)
    return DiskError(exc.errno, where)


def is_disk_errno(code: int | None) -> bool:
    return code in _disk_codes()


def mount_point(path: str) -> str:
    """The mount point of the file system holding `path` (or its nearest existing parent): the longest mount
    point in /proc/self/mounts above it (bind mounts included), else where the device changes walking up."""
    import os

    place = os.path.abspath(path)
    while not os.path.exists(place) and os.path.dirname(place) != place:
        place = os.path.dirname(place)
    real = os.path.realpath(place)
    try:
        with open("/proc/self/mounts", "rb") as f:
            points = [line.split(b" ")[1] for line in f.read().splitlines() if line.count(b" ") >= 2]
    except OSError:
        points = []
    best = ""
    for raw in points:
        point = raw.decode("utf-8", "replace")
        for octal in ("\\040", "\\011", "\\012", "\\134"):  # how the kernel escapes space, tab, newline, backslash
            point = point.replace(octal, chr(int(octal[1:], 8)))
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) > len(best):
            best = point
    if best:
        return best
    try:
        dev = os.stat(real).st_dev
        while os.path.dirname(real) != real and os.stat(os.path.dirname(real)).st_dev == dev:
            real = os.path.dirname(real)
    except OSError:
        pass
    return real
