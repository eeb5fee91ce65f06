"""`stackmgr check`: exit 0 when every change is preserved, 1 otherwise. No click here: the fast path runs it."""

from __future__ import annotations

from stackmgr import output
from stackmgr.cli.argspec import Values, flag
from stackmgr.commands.check import Check, check, check_json
from stackmgr.store.config import open_store


class CheckArgs:
    __slots__ = ("as_json", "store", "trees", "verbose")

    def __init__(self, store: str | None, trees: tuple[str, ...], *, verbose: bool, as_json: bool) -> None:
        self.store = store
        self.trees = trees
        self.verbose = verbose
        self.as_json = as_json

    @classmethod
    def from_values(cls, store: str | None, as_json: bool, trees: tuple[str, ...], values: Values) -> CheckArgs:
        return cls(store, trees, verbose=flag(values, "verbose") and not flag(values, "quiet"), as_json=as_json)


def unpreserved_report(store: str, trees: tuple[str, ...]) -> list[str] | None:
    """What `check -v` prints (stdout and stderr) when something in `trees` is unpreserved, else None: the shell
    guard's refusal lists it."""
    import io
    import sys

    report = io.StringIO()
    shown = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = report  # what contextlib.redirect_stdout does, without its imports
    try:
        unsafe = run(CheckArgs(store, trees, verbose=True, as_json=False))
    finally:
        sys.stdout, sys.stderr = shown
    return report.getvalue().splitlines() if unsafe else None


def run(args: CheckArgs) -> int:
    """Quiet unless -v or --json; a tree that could not be looked at is named on stderr even when quiet."""
    result = check(open_store(args.store), args.trees)
    if result.pending is not None:
        output.err(f"stackmgr: {output.show_text(result.pending)}")
        return 1
    if not args.trees and result.reports and all(r.state == "no path" for r in result.reports):
        names = [r.name for r in result.reports]  # nothing of this machine's to lose, and nothing looked at: said
        output.err(f"stackmgr: nothing checked: no tree of this store has a path on this machine ({', '.join(names)}); "
                   f"say where yours is: `stackmgr tree set {names[0]} PATH`")  # fmt: skip
    code = 0 if result.preserved else 1
    try:
        _say(args, result)
    except BrokenPipeError:  # the reader stopped (`check -v | head`): the verdict stands, never a 0 it did not earn
        return code
    return code


def _say(args: CheckArgs, result: Check) -> None:
    for r in result.reports:
        if r.state == "error" and not args.as_json:
            output.err(output.show_text(f"stackmgr: {r.name}: {r.error}"))
    if args.as_json:
        output.emit_json({"schema": 1, "preserved": result.preserved,
                          "trees": [check_json(r) for r in result.reports]})  # fmt: skip
    elif args.verbose:
        for r in result.reports:
            if r.state == "missing":
                output.out(output.show_text(f"{r.name}: missing ({r.error})"))
            elif r.state == "no path":
                output.out(output.show_text(f"{r.name}: not checked, {r.error}"))
            elif r.state == "ok" and not r.blockers:
                output.out(f"{r.name}: all changes preserved")
            output.render_blockers(r.name, r.blockers)
