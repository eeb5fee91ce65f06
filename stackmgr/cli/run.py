"""`stackmgr run … -- CMD…`: run a benchmark, show its output, and record it as a draft link. No click: its own
overhead counts in every run (the click side is in app.py)."""

from __future__ import annotations

from stackmgr import output
from stackmgr.cli.argspec import Values, text, texts
from stackmgr.store.config import open_store


def run(store: str | None, as_json: bool, command: tuple[str, ...], values: Values) -> int:
    from stackmgr.commands.run import RunRequest, run, say

    argv = list(command[1:] if command[:1] == ("--",) else command)
    request = RunRequest(argv, trees=texts(values, "trees"), link=text(values, "link"), series=text(values, "series"),
                         name=text(values, "name"), result_dirs=texts(values, "result_dirs"),
                         from_json=texts(values, "from_json"), cwd=text(values, "cwd"))  # fmt: skip
    if text(values, "repeat") is not None:
        return _repeated(store, as_json, request, text(values, "repeat"))
    outcome = run(open_store(store), request)
    if as_json:
        output.emit_json({"schema": 1, "exit_code": outcome.exit_code, "tainted": outcome.tainted,
                          "links": [k.id for k in outcome.links], "warnings": outcome.warnings})  # fmt: skip
    say(outcome)
    return outcome.exit_code


def _repeated(store: str | None, as_json: bool, request: object, times: str | None) -> int:
    """`run --repeat N`: commands/repeat.py; `--json` lists every run's links, in order, with the group."""
    from stackmgr.commands.repeat import check_repeat, run_repeated, say_repeated
    from stackmgr.commands.run import RunRequest

    assert isinstance(request, RunRequest)
    n = check_repeat(times)
    opened = open_store(store)
    done = run_repeated(opened, request, n)
    if as_json:
        output.emit_json({"schema": 1, "exit_code": done.exit_code, "group": done.group, "stopped": done.stopped,
                          "runs": [{"exit_code": o.exit_code, "tainted": o.tainted, "links": [k.id for k in o.links],
                                    "warnings": o.warnings} for o in done.outcomes]})  # fmt: skip
    say_repeated(opened, done)
    return done.exit_code
