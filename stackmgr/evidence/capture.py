"""What `stackmgr run` captures around the user's own command (not git: the one module besides `demo` that
starts programs with `subprocess`): the command run with its output shown and written to a log as it comes,
its exit code and times, and the context that shapes a result: the environment variables of the runtimes,
the host, the accelerators the vendors' tools list. What of it could hold a credential goes through
`redaction` first: a record is pushed to the team."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Collection, Iterable

from stackmgr.evidence import redaction

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.evidence.environment import Watch
    from stackmgr.store.config import Store

ENV_PREFIXES = ("VLLM_", "CUDA_", "HIP_", "ZE_", "ONEAPI_", "TORCH_", "PYTORCH_", "NCCL_")
MIN_SECRET = 6  # a shorter secret value is not looked for in the log: it would be found by chance
ACCELERATOR_TOOLS = (("nvidia-smi", "-L"), ("xpu-smi", "discovery"), ("rocm-smi", "--showproductname"))


FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Ran:
    def __init__(self, exit_code: int, start: str, duration: float, interrupted: bool,
                 signal_name: str = "") -> None:  # fmt: skip
        self.began = time.time() - duration  # seconds since the epoch
        self.exit_code = exit_code
        self.start = start  # RFC 3339 UTC
        self.duration = duration  # seconds
        self.interrupted = interrupted
        self.signal = signal_name  # the first signal stackmgr got while the command ran ("SIGTERM"), or ""
        self.received = ""  # that signal's name when it reached stackmgr itself (not only the command)
        self.log_error: OSError | None = None  # the log could not be written (a full disk): the output was shown
        self.environment: Watch | None = None  # what evidence/environment.py saw around it (set by `run`)


class NotStarted(Exception):
    """The command could not be started (nothing ran): why."""


def tee(argv: list[str], log_path: str, out: int = 1, cwd: str | None = None) -> Ran:
    """Run `argv` with stdout and stderr going both to file descriptor `out` and to `log_path`, unbuffered (a
    stackmgr killed with -9 leaves the log up to the last byte). SIGINT, SIGTERM and SIGHUP that reach stackmgr
    while it runs only set a flag and are passed on to the command, so no byte it writes afterwards (its partial
    results) is lost; we wait for it and report what it exited with. Without a terminal the command runs in a
    process group of its own, so a signal to stackmgr's group (`timeout`, `kill -TERM -PGID`) reaches it once,
    from stackmgr; on a terminal it stays in the foreground group (it may read the terminal), so Ctrl-C and a
    hangup reach it from the terminal and only SIGTERM is passed on; in a group of its own, a signal is passed on
    to the whole group (a shell script's children too, as a terminal does). It runs in `cwd` (see
    `where_command_runs`)."""
    began = time.time()
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(began)) + f".{int(began % 1 * 1e6):06d}Z"
    seen: list[int] = []
    own_group = not _isatty(0)
    forwarded = FORWARDED if own_group else (signal.SIGTERM,)
    child: subprocess.Popen[bytes] | None = None
    early: list[int] = []  # caught before the command existed

    def caught(signum: int, _frame: object) -> None:
        seen.append(signum)
        if child is None:
            early.append(signum)
        elif signum in forwarded and child.returncode is None:
            try:
                _pass_on(child, signum, own_group)
            except OSError:
                pass

    previous = {s: signal.signal(s, caught) for s in FORWARDED}
    log_error: OSError | None = None
    try:
        with open(log_path, "wb", buffering=0) as log:
            try:
                child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=None,
                                         process_group=0 if own_group else None, cwd=cwd)  # fmt: skip
            except OSError as exc:
                raise NotStarted(f"cannot start {argv[0]}: {exc.strerror}") from None
            for signum in [s for s in early if s in forwarded][:1]:  # passed on now that the command exists
                _pass_on(child, signum, own_group)
            assert child.stdout is not None
            fd = child.stdout.fileno()
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
        for s, handler in previous.items():
            signal.signal(s, handler)
    exit_code = code if code >= 0 else 128 + (-code)  # killed by a signal: as a shell reports it
    first = seen[0] if seen else (-code if code in (-signal.SIGINT, -signal.SIGTERM, -signal.SIGHUP) else 0)
    ran = Ran(exit_code, start, time.time() - began, bool(first), signal.Signals(first).name if first else "")
    ran.log_error = log_error
    ran.received = signal.Signals(seen[0]).name if seen else ""
    return ran


def _pass_on(child: subprocess.Popen[bytes], signum: int, own_group: bool) -> None:
    if own_group:
        try:
            os.killpg(child.pid, signum)
            return
        except OSError:
            pass
    child.send_signal(signum)


def where_command_runs(store: Store, trees: list[str], cwd: str | None) -> tuple[str, str]:
    """Where `run` and `bisect` run CMD, and what to say about it: `--cwd DIR` when given; else the current
    directory when it is inside a measured tree; else the top of the measured tree when there is one (wherever
    stackmgr was started: from the store, a tree-relative gate still sees its tree); else, several trees and
    standing in none, the current directory. The note ("" when CMD runs where the user stands) says where it
    runs. A relative `--result-dir` or `--from-json` is read from that same directory."""
    here = os.getcwd()
    if cwd is not None:
        where = os.path.abspath(cwd)
        if not os.path.isdir(where):
            from stackmgr.errors import UsageProblem

            raise UsageProblem(f"--cwd {text(cwd)} is not a directory", "name the directory CMD should run in")
    else:
        tops = [store.tree(t).path for t in trees]
        inside = [t for t in tops if _within(here, t)]
        where = here if inside or len(tops) != 1 else os.path.abspath(tops[0])
    if _same_dir(where, here):
        return where, ""
    return where, f"the command runs in {text(where)}{'' if cwd is not None else ' (the measured tree)'}, " \
                  f"not in {text(here)} where stackmgr was started; `--cwd DIR` to choose"  # fmt: skip


def _within(path: str, top: str) -> bool:
    path, top = os.path.realpath(path), os.path.realpath(top)
    return path == top or path.startswith(top + os.sep)


def _same_dir(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def startable(argv: list[str], cwd: str | None = None) -> str | None:
    """Why `argv` cannot be started in `cwd` (not found, not executable), or None."""
    program = argv[0]
    if os.sep in program:
        program = os.path.join(cwd, program) if cwd is not None else program
        if not os.path.exists(program):
            return f"{program} does not exist"
        if os.path.isdir(program):
            return f"{program} is a directory"
        return None if os.access(program, os.X_OK) else f"{program} is not executable (permission denied)"
    if shutil.which(program):  # a file on PATH that we may execute
        return None
    found = shutil.which(program, mode=os.F_OK)
    return f"{found} is not executable (permission denied)" if found else f"{program} is not on PATH"


def text(value: str) -> str:
    """A name or value as a record can hold it: bytes that are not UTF-8 (a file name, an argument) written as
    backslash escapes."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def env_settings(shared: object, local: object) -> tuple[list[str], frozenset[str], frozenset[str]]:
    """From the `[run]` tables of the shared config and of this machine's `stackmgr.local.toml`: the variables
    to record beyond the runtimes' prefixes (`env` of either), those recorded by value although they look
    secret (`env_by_value`, read from this machine's config alone: a pulled config cannot publish a secret),
    and those only the shared config names: recorded as `<set>`, never by value, since a pulled line could
    name any secret under an innocent name (`DB_CREDS`); naming one in the local `env` too records its value."""

    def names(table: object, key: str) -> list[str]:
        listed = table.get(key, []) if isinstance(table, dict) else []
        return [n for n in listed if isinstance(n, str)] if isinstance(listed, list) else []

    by_value = frozenset(names(local, "env_by_value"))
    mine = set(names(local, "env")) | by_value
    shared_only = frozenset(n for n in names(shared, "env") if n not in mine and not n.startswith(ENV_PREFIXES))
    return [*names(shared, "env"), *names(local, "env"), *sorted(by_value)], by_value, shared_only


def environment(extra: Iterable[str] = (), by_value: Collection[str] = (),
                masked: Collection[str] = ()) -> dict[str, str]:  # fmt: skip
    """The variables that shape a run: the runtimes' prefixes, and those the config names; a secret's value,
    and that of a variable only the shared config names (`masked`), recorded as `<set>`."""
    wanted = set(extra)
    return {text(k): redaction.SET if k in masked else text(redaction.recorded_value(k, v, by_value))
            for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES) or k in wanted}  # fmt: skip


def secrets_in_log(log: str, argv: list[str], by_value: Collection[str]) -> list[str]:
    """Which secrets kept out of the record the command's output holds all the same (a server that prints its
    arguments, a script that echoes its environment): the names of this environment's secret-looking
    variables, and "the command line" for a word hidden from it; the log read a block at a time."""
    wanted: dict[bytes, str] = {}
    for name, value in sorted(os.environ.items()):
        if len(value) >= MIN_SECRET and redaction.recorded_value(name, value, by_value) == redaction.SET:
            wanted.setdefault(os.fsencode(value), name)
    hidden: list[str] = []
    redaction.command_line(argv, hidden)
    for value in (v for v in hidden if len(v) >= MIN_SECRET):
        wanted.setdefault(os.fsencode(value), "the command line")
    if not wanted:
        return []
    overlap = max(map(len, wanted)) - 1  # a value split between two blocks is still found
    found: set[str] = set()
    try:
        with open(log, "rb") as f:
            tail = b""
            while block := f.read(1 << 20):
                data = tail + block
                found.update(name for value, name in wanted.items() if value in data)
                tail = data[len(data) - overlap :] if overlap else b""
    except OSError:
        return []
    return sorted(found)


def host() -> str:
    return socket.gethostname()


def accelerators() -> list[str]:
    """What `nvidia-smi -L`, `xpu-smi discovery` or `rocm-smi` list, one line each, where the tool is here (one
    that did not answer earlier in this run is not asked again)."""
    seen: list[str] = []
    for tool, arg in ACCELERATOR_TOOLS:
        path = shutil.which(tool)
        if path is None or path in HUNG:
            continue
        try:
            said = tool_output([path, arg])
        except ToolFailed:
            continue
        lines = [ln.strip() for ln in said.splitlines() if ln.strip()][:16]
        seen += [redaction.mask_text(ln) for ln in lines]
    return seen


TOOL_TIMEOUT = 5.0  # seconds a vendor's tool (nvidia-smi, rocm-smi, python -c) may take to answer
HUNG: set[str] = set()  # the tools that did not answer in time: not asked again by this process
MAX_TOOL_OUTPUT = 1 << 20  # bytes of a tool's answer read; the rest is not


class ToolFailed(Exception):
    """A tool that is there did not answer (it timed out, could not start or exited non-zero): why, in words."""


def tool_output(argv: list[str], timeout: float | None = None, env: dict[str, str] | None = None) -> str:
    """The stdout of a vendor's tool (`nvidia-smi --query-gpu=…`, `python3 -I -c …`), as text. It runs in a
    session of its own, so a tool that outlives `timeout` is killed with whatever it started (a script's
    `sleep`), and is remembered in HUNG; raises ToolFailed saying why."""
    limit = TOOL_TIMEOUT if timeout is None else timeout
    try:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                 start_new_session=True, env=env)  # fmt: skip
    except OSError as exc:
        raise ToolFailed(f"cannot start: {exc.strerror}") from None
    try:
        out, _ = child.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
        child.kill()
        child.communicate()
        HUNG.add(argv[0])
        raise ToolFailed(f"did not answer within {limit:g} s") from None
    if child.returncode != 0:
        raise ToolFailed(f"exited {child.returncode}")
    return out[:MAX_TOOL_OUTPUT].decode("utf-8", "replace")
