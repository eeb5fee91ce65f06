"""Start programs and collect their output as bytes, with `os.posix_spawnp` and `poll`.

`subprocess` would do the same, but importing it (with `locale`, `re`, `enum`, `threading`, `signal`) costs
about as much as the whole `git status` that `check` is measured against. This covers exactly what stackmgr
needs: argv, environment, optional stdin bytes, stdout and stderr captured, exit code.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # `signal` would import enum
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

_CHUNK = 1 << 16
_PIPE_SAFE = 1 << 14  # what `send` may write at once: well inside Linux's (64 KiB) and macOS's (16 KiB) pipes


class Process:
    """A started child. `communicate()` feeds stdin, drains stdout/stderr without deadlock, and reaps it."""

    def __init__(self, argv: list[str | bytes], env: dict[str, str], *, stdin: bool = False) -> None:
        self.argv = argv
        self.index = env.get("GIT_INDEX_FILE")  # the index it works on (named when a write of it fails)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, in_w = os.pipe() if stdin else (os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC), -1)
        actions = [(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)]
        try:
            # Python ignores SIGPIPE; the child gets the default back, as subprocess does.
            self.pid = os.posix_spawnp(
                argv[0], argv, env, file_actions=actions, setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ)
            )
        except BaseException:
            for fd in (out_r, err_r, in_w):
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        self._out, self._err, self._in = out_r, err_r, in_w
        self.returncode: int | None = None
        self.stderr = b""

    def communicate(self, data: bytes | None = None) -> tuple[bytes, bytes]:
        """Feed `data`, collect all output, reap the child. A second call returns nothing more."""
        if self._out < 0:  # called again, or after `stream`: its stderr
            self.wait()
            return b"", self.stderr
        import select  # an extension module (a shared object to load): after the spawn, while git works

        chunks: dict[int, list[bytes]] = {self._out: [], self._err: []}
        poller = select.poll()
        for fd in chunks:
            poller.register(fd, select.POLLIN)
        pending = memoryview(data or b"")
        if self._in >= 0:
            if pending:
                poller.register(self._in, select.POLLOUT)
            else:
                os.close(self._in)
                self._in = -1
        open_fds = set(chunks) | ({self._in} if self._in >= 0 else set())
        while open_fds:
            for fd, _event in poller.poll():
                if fd == self._in:
                    pending = self._feed(pending)
                    if not pending:
                        poller.unregister(fd)
                        os.close(fd)
                        open_fds.discard(fd)
                        self._in = -1
                    continue
                block = os.read(fd, _CHUNK)
                if block:
                    chunks[fd].append(block)
                else:
                    poller.unregister(fd)
                    os.close(fd)
                    open_fds.discard(fd)
        out, err = b"".join(chunks[self._out]), b"".join(chunks[self._err])
        self._out = self._err = -1
        self.wait()
        return out, err

    def stream(self) -> Iterator[bytes]:
        """stdout a block at a time, as the child writes it (stderr gathered meanwhile into `self.stderr`), then
        reaps it: `wait()` gives its exit code. A consumer that stops early must still call `communicate()`."""
        import select

        poller = select.poll()
        open_fds = {self._out, self._err}
        for fd in open_fds:
            poller.register(fd, select.POLLIN)
        errors: list[bytes] = []
        while open_fds:
            for fd, _event in poller.poll():
                block = os.read(fd, _CHUNK)
                if not block:
                    poller.unregister(fd)
                    os.close(fd)
                    open_fds.discard(fd)
                elif fd == self._out:
                    yield block
                else:
                    errors.append(block)
        self._out = self._err = -1
        self.stderr = b"".join(errors)
        self.wait()

    def send(self, data: bytes) -> None:
        """Give the child all of its (small) input now and close its stdin, so it works while another child is
        being read; `communicate()` then collects the output. Only for input that fits a pipe's buffer."""
        assert self._in >= 0 and len(data) <= _PIPE_SAFE
        pending = memoryview(data)
        while pending:
            pending = self._feed(pending)
        os.close(self._in)
        self._in = -1

    def _feed(self, pending: memoryview) -> memoryview:
        try:
            return pending[os.write(self._in, pending[:_CHUNK]) :]
        except BrokenPipeError:  # the child stopped reading; its exit code tells why
            return memoryview(b"")

    def wait(self) -> int:
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode
