"""The console-script entry point: error mapping (docs/FORMATS.md#exit-codes) and a start-up fast path.

`check` runs in shell prompts and `save` many times a day, so their plain forms (and those of `status`, `apply`,
`import` and `rebase`, held to git's own times, and `run`, whose own overhead counts in every benchmark) are
dispatched here without importing click (about 30 ms, more than the git work of a typical `check`); anything
else, `--help` included, goes through the full CLI. Both paths parse the same option declarations (argspec.py)
into the same arguments (CheckArgs, SaveArgs, ApplyArgs, or the values themselves) and run the same click-free
bodies (check.py, status.py, save.py, apply.py, import_.py, rebase.py, run.py).
"""

from __future__ import annotations

import gc
import os
import sys

from stackmgr import output
from stackmgr.errors import StackmgrError


def _fast(argv: list[str]) -> int | None:
    """Run a plain `check`, `status`, `save`, `apply`, `import`, `rebase` or `run` without importing click; None
    when argv needs the full CLI."""
    from stackmgr.cli.argspec import flag, parse_fast, text

    parsed = parse_fast(argv)
    if parsed is None:
        return None
    command, values, positionals = parsed
    store, as_json = text(values, "store"), flag(values, "as_json")  # `--json` before or after the command
    if command == "check":
        from stackmgr.cli import check

        _ended.append(None)  # read-only, no thread, every file closed: nothing for the interpreter to tidy
        return check.run(check.CheckArgs.from_values(store, as_json, tuple(positionals), values))
    if command == "status":
        from stackmgr.cli import status

        return status.run(store, tuple(positionals), as_json=as_json)
    if command == "import":
        if not positionals:
            return None  # let click say FILES are missing
        from stackmgr.cli import import_

        return import_.run(store, as_json, tuple(positionals), values)
    if command == "rebase":
        if len(positionals) > 1:
            return None
        from stackmgr.cli import rebase

        return rebase.run(store, as_json, positionals[0] if positionals else None, values)
    if command == "run":
        from stackmgr.cli import run

        return run.run(store, as_json, tuple(positionals), values)
    if command == "apply":
        if len(positionals) != 1:
            return None  # let click say what is missing or extra
        from stackmgr.cli import apply

        return apply.run(apply.ApplyArgs.from_values(store, as_json, positionals[0], values))
    if not positionals:
        return None  # `save` without a name: let click say so
    from stackmgr.cli import save

    return save.run(save.SaveArgs.from_values(store, as_json, positionals[0], tuple(positionals[1:]), values))


def _unpreserved_report(store: str, trees: tuple[str, ...]) -> list[str] | None:
    from stackmgr.cli.check import unpreserved_report  # only when the command would discard something

    return unpreserved_report(store, trees)


def _guard(argv: list[str]) -> int | None:
    """`[--store DIR] guard -- GIT ARGS`, as the shell-init function calls it, without click: it runs before
    every guarded git command. None when argv is anything else."""
    store = None
    rest = argv
    if rest[:1] == ["--store"] and len(rest) > 2:
        store, rest = rest[1], rest[2:]
    if rest[:1] != ["guard"] or rest[1:2] != ["--"]:
        return None
    from stackmgr.commands.shell_init import guard_refusal

    refusal = guard_refusal(store, rest[2:], os.getcwd(), _unpreserved_report)
    for line in refusal or ():
        sys.stderr.write(line + "\n")
    return 1 if refusal else 0


_ended: list[None] = []  # a command after which the process may end without the interpreter's tear-down


def main(argv: list[str] | None = None) -> int:
    """Run the command `argv` (the process's own arguments when None) and return its exit code. As the process's
    own command (argv None), a `check` ends the process itself: `os._exit` once its output is flushed skips the
    interpreter's tear-down of every module, about 3 ms of a prompt's 40."""
    code = _main(argv)
    if argv is None and _ended:
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:  # None: started with that descriptor closed (`check >&-`)
                    stream.flush()
            except (OSError, ValueError):  # a closed pipe (`check -v | head`): what was not read is not the caller's
                pass
        os._exit(code)
    return code


def _main(argv: list[str] | None) -> int:
    args = sys.argv[1:] if argv is None else argv
    args = [] if "_STACKMGR_COMPLETE" in os.environ else args  # a shell's completion request: click answers it
    if sys.stdout is None or sys.stderr is None:  # started with the descriptor closed (`check -v >&-`): nowhere to
        closed = open(os.devnull, "w")  # noqa: SIM115  # say it, and no reason to fail a verdict for it
        sys.stdout, sys.stderr = sys.stdout or closed, sys.stderr or closed
    debug = "--debug" in args or bool(os.environ.get("STACKMGR_DEBUG"))
    if args == ["--version"]:  # scripts and prompts ask this; no click needed
        from stackmgr import __version__

        sys.stdout.write(f"stackmgr, version {__version__}\n")
        return 0
    gc.set_threshold(100_000, 50, 100)  # a short-lived command: collect rarely (20,000 link records are 1M objects)
    streams = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, output.TerminalStream):  # whoever writes, no store string reaches a terminal raw
        sys.stdout, sys.stderr = output.TerminalStream(sys.stdout), output.TerminalStream(sys.stderr)
    try:
        return _run(args, debug)
    finally:
        sys.stdout, sys.stderr = streams


def _say(message: object) -> None:
    """The one error line: a message may carry a store string (a patch name, a Subject, a path), shown escaped and
    on one line, so it can neither act on the terminal nor forge a second line."""
    sys.stderr.write(f"stackmgr: {output.show_text(str(message))}\n")


# An error's kind in its JSON form, by exit code (docs/FORMATS.md#json-output); GitFailed, DiskError and internal
# errors have their own.
KINDS = {1: "not-preserved", 2: "usage", 3: "failed", 130: "interrupted"}


class _Said:
    """How the error of this command line is said: one text line, or, when `--json` was asked, one JSON line
    `{"schema": 1, "error": {"message", "hint", "exit_code", "kind", "details"}}` on stderr
    (docs/FORMATS.md#json-output). Either way the exit code."""

    def __init__(self, args: list[str]) -> None:
        self.args = args

    def error(
        self, message: str, hint: str | None, code: int, kind: str | None = None, line: str = "",
        details: tuple[str, ...] = (),
    ) -> int:  # fmt: skip
        from stackmgr.cli.argspec import json_asked

        if not json_asked(self.args):
            _say(line or (f"{message}; {hint}" if hint else message))
            return code
        import json

        error = {"message": message, "hint": hint, "exit_code": code, "kind": kind or KINDS.get(code, "failed"),
                 "details": list(details)}  # fmt: skip
        output.raw_stream(sys.stderr).write(json.dumps({"schema": 1, "error": error}, ensure_ascii=True) + "\n")
        return code

    def exc(self, exc: StackmgrError) -> int:
        from stackmgr.cli.argspec import json_asked

        kind = {"GitFailed": "git", "DiskError": "disk"}.get(type(exc).__name__)
        code = self.error(exc.message, exc.hint, exc.exit_code, kind, line=str(exc), details=tuple(exc.details))
        if not json_asked(self.args):  # a refusal's files, one per line under its one line (errors.listed)
            sys.stderr.writelines(f"  {output.show_text(line)}\n" for line in exc.details)
        return code


def _run(args: list[str], debug: bool) -> int:
    said = _Said(args)
    try:
        code = _guard(args)
        if code is None:
            code = _fast(args)
        if code is not None:
            return code
        from stackmgr.cli.app import cli

        return cli.main(args=args, prog_name="stackmgr", standalone_mode=False) or 0
    except StackmgrError as exc:
        return said.exc(exc)
    except KeyboardInterrupt:
        return said.error("interrupted", None, 130)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BrokenPipeError:
        return 0
    except OSError as exc:  # the safety net: a write that failed for the file system's sake, wherever it was
        from stackmgr.errors import disk_error

        mapped = disk_error(exc)
        if mapped is None:
            return _click_or_crash(exc, debug, said)
        return said.exc(mapped)
    except Exception as exc:
        return _click_or_crash(exc, debug, said)


def _click_or_crash(exc: Exception, debug: bool, said: _Said) -> int:
    import click

    if isinstance(exc, click.exceptions.Abort):
        return said.error("interrupted", None, 130)
    if isinstance(exc, click.ClickException):
        message = exc.format_message().rstrip(".")
        if isinstance(exc, click.UsageError) and exc.ctx:
            hint = f"see `{exc.ctx.command_path} --help`"
            line = f"{message} S{hint[1:]}" if message.endswith("?") else f"{message}; {hint}"  # after a did-you-mean
            return said.error(message, hint, exc.exit_code, "usage" if exc.exit_code == 2 else None, line)
        return said.error(message, None, exc.exit_code)
    if debug:
        import traceback

        traceback.print_exc()
        return 3
    return said.error(
        f"internal error: {type(exc).__name__}: {exc}",
        "rerun with --debug for details",
        3,
        "internal",
        line=f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)",
    )
