"""The console-script entry point: error mapping (SPEC §5 exit codes) and a start-up fast path for `check`.

`check` runs in shell prompts, so its common forms are dispatched here without importing click (about 30 ms);
anything else, `--help` included, goes through the full CLI.
"""

from __future__ import annotations

import os
import sys

from stackmgr.errors import StackmgrError

_CHECK_FLAGS = {"-v": "verbose", "--verbose": "verbose", "-q": "quiet", "--quiet": "quiet", "--json": "json"}


def _fast_check(argv: list[str]) -> int | None:
    """Run `[--store DIR] [--json] check [-v|-q|--json] [TREE…]` directly; None when argv is anything else."""
    store: str | None = None
    flags: set[str] = set()
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "--store" and i + 1 < len(argv):
            store, i = argv[i + 1], i + 2
        elif argv[i].startswith("--store="):
            store, i = argv[i][8:], i + 1
        elif argv[i] == "--json":
            flags.add("json")
            i += 1
        else:
            return None
    if i >= len(argv) or argv[i] != "check":
        return None
    trees = []
    for arg in argv[i + 1 :]:
        if arg in _CHECK_FLAGS:
            flags.add(_CHECK_FLAGS[arg])
        elif arg.startswith("-"):
            return None
        else:
            trees.append(arg)
    from stackmgr import commands

    verbose = "verbose" in flags and "quiet" not in flags
    return commands.check(store, tuple(trees), verbose=verbose, as_json="json" in flags)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args or bool(os.environ.get("STACKMGR_DEBUG"))
    try:
        code = _fast_check(args)
        if code is not None:
            return code
        from stackmgr.cli import cli

        return cli.main(args=args, prog_name="stackmgr", standalone_mode=False) or 0
    except StackmgrError as exc:
        sys.stderr.write(f"stackmgr: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("stackmgr: interrupted\n")
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BrokenPipeError:
        return 0
    except Exception as exc:
        return _click_or_crash(exc, debug)


def _click_or_crash(exc: Exception, debug: bool) -> int:
    import click

    if isinstance(exc, click.exceptions.Abort):
        sys.stderr.write("stackmgr: interrupted\n")
        return 130
    if isinstance(exc, click.ClickException):
        where = f"; see `{exc.ctx.command_path} --help`" if isinstance(exc, click.UsageError) and exc.ctx else ""
        sys.stderr.write(f"stackmgr: {exc.format_message().rstrip('.')}{where}\n")
        return exc.exit_code
    if debug:
        import traceback

        traceback.print_exc()
    else:
        sys.stderr.write(f"stackmgr: internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)\n")
    return 3
