"""What `stackmgr run` captures around the user's own command (not git: the one module besides `demo` that
starts programs with `subprocess`): the command run with its output shown and written to a log as it comes,
its exit code and times, and the context that shapes a result: the environment variables of the runtimes,
the host, the accelerators the vendors' tools list."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable

ENV_PREFIXES = ("VLLM_", "CUDA_", "HIP_", "ZE_", "ONEAPI_", "TORCH_", "PYTORCH_", "NCCL_")
ACCELERATOR_TOOLS = (("nvidia-smi", "-L"), ("xpu-smi", "discovery"), ("rocm-smi", "--showproductname"))


class Ran:
    def __init__(self, exit_code: int, start: str, duration: float, interrupted: bool) -> None:
        self.began = time.time() - duration  # seconds since the epoch
        self.exit_code = exit_code
        self.start = start  # RFC 3339 UTC
        self.duration = duration  # seconds
        self.interrupted = interrupted
        self.log_error: OSError | None = None  # the log could not be written (a full disk): the output was shown


def tee(argv: list[str], log_path: str, out: int = 1) -> Ran:
    """Run `argv` with stdout and stderr going both to file descriptor `out` and to `log_path`, as they come.
    Ctrl-C reaches the command (it is in our process group); here it only sets a flag, so no byte the command
    writes afterwards (its partial results) is lost; we wait for it and report what it exited with."""
    began = time.time()
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(began)) + f".{int(began % 1 * 1e6):06d}Z"
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: seen.append(signum))
    try:
        with open(log_path, "wb", buffering=0) as log:  # unbuffered: a full disk is seen at the chunk it hits
            try:
                child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=None)
            except OSError as exc:
                message = f"stackmgr run: cannot start {argv[0]}: {exc.strerror}\n".encode()
                log.write(message)
                os.write(2, message)
                return Ran(126 if isinstance(exc, PermissionError) else 127, start, time.time() - began, False)
            assert child.stdout is not None
            fd = child.stdout.fileno()
            log_error = None
            while chunk := os.read(fd, 1 << 16):  # EINTR is retried by Python (PEP 475)
                if log_error is None:
                    try:
                        log.write(chunk)
                    except OSError as exc:  # the command goes on, shown on the terminal; reported when it ends
                        log_error = exc
                try:
                    os.write(out, chunk)
                except OSError:  # the terminal went away: the log still gets everything
                    pass
            code = child.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
    exit_code = code if code >= 0 else 128 + (-code)  # killed by a signal: as a shell reports it
    ran = Ran(exit_code, start, time.time() - began, bool(seen) or code == -signal.SIGINT)
    ran.log_error = log_error
    return ran


def startable(argv: list[str]) -> str | None:
    """Why `argv` cannot be started here (not found, not executable), or None."""
    program = argv[0]
    if os.sep in program:
        if not os.path.exists(program):
            return f"{program} does not exist"
        return None if os.access(program, os.X_OK) else f"{program} is not executable"
    return None if shutil.which(program) else f"{program} is not on PATH"


def text(value: str) -> str:
    """A name or value as a record can hold it: bytes that are not UTF-8 (a file name, an argument) written as
    backslash escapes."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def environment(extra: Iterable[str] = ()) -> dict[str, str]:
    """The variables that shape a run: the runtimes' prefixes, and those the config names."""
    wanted = set(extra)
    return {text(k): text(v) for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES) or k in wanted}


def host() -> str:
    return socket.gethostname()


def accelerators() -> list[str]:
    """What `nvidia-smi -L`, `xpu-smi discovery` or `rocm-smi` list, one line each, where the tool is here."""
    seen: list[str] = []
    for tool, arg in ACCELERATOR_TOOLS:
        path = shutil.which(tool)
        if path is None:
            continue
        try:
            done = subprocess.run([path, arg], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        seen += [ln.strip() for ln in done.stdout.decode("utf-8", "replace").splitlines() if ln.strip()][:16]
    return seen
