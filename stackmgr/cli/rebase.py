"""`stackmgr rebase SERIES --onto REV | --continue | --abort`: carry a series to a new upstream base. No click:
the plain form starts on entry.py's fast path; the click command (app.py) calls the same `run`."""

from __future__ import annotations

from stackmgr import output
from stackmgr.cli.argspec import Values, flag, text
from stackmgr.store.config import open_store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.commands.rebase import Outcome
    from stackmgr.store.config import Store


def run(store_dir: str | None, as_json: bool, series: str | None, values: Values) -> int:
    """Start, go on with or abort a rebase and print each patch's outcome; exit 3 when it stopped."""
    from stackmgr.commands import rebase
    from stackmgr.commands.rebase_state import abort as abort_rebase
    from stackmgr.errors import UsageProblem

    onto, tree, exec_cmd = text(values, "onto"), text(values, "tree"), text(values, "exec_cmd")
    go_on, abort, own_copy = flag(values, "go_on"), flag(values, "abort"), flag(values, "own_copy")
    store = open_store(store_dir)
    if sum((onto is not None, go_on, abort)) != 1:
        raise UsageProblem("give --onto REV, --continue or --abort", "e.g. `stackmgr rebase S --onto origin/main`")
    if onto is not None and series is None:
        raise UsageProblem("which series?", "`stackmgr rebase SERIES --onto REV`")
    if onto is None and (tree is not None or exec_cmd is not None or own_copy):
        raise UsageProblem("-t, --exec and --own-copy go with --onto",
                           "--continue goes on with what was given then")  # fmt: skip
    if abort:
        output.out(f"rebase of series {abort_rebase(store, series)} aborted; nothing was changed")
        return 0
    with output.activity("rebasing"):
        if go_on:
            result = rebase.resume(store, series)
        else:
            result = rebase.start(store, str(series), str(onto), tree, exec_cmd, own_copy)
    for note in result.notes:
        output.err(f"stackmgr: {output.show_text(note)}")
    if as_json:
        output.emit_json(result.to_json())
    else:
        _say(store, result)
    if not result.done:
        output.err(f"stackmgr: {output.show_text(result.stop)}")
        return 3
    return 0


def _say(store: Store, result: Outcome) -> None:
    from stackmgr.commands.rebase_state import old_series_applied

    s = result.state
    for step in s["steps"]:
        if step["outcome"]:
            output.out(f"{step['outcome']:<18} {step['name']}")
    if not result.done:
        return
    upstream = [st["name"] for st in s["steps"] if st["outcome"] == "already upstream"]
    output.out(f"series {s['series']} now applies to {s['onto'][:12]} (tree {s['tree']})")
    if upstream:
        output.out(f"already upstream, commented out in series/{s['series']}: {', '.join(upstream)} "
                   "(delete those lines, or keep them as a record)")  # fmt: skip
    carried = {st["file"] for st in s["steps"] if st["outcome"] != "already upstream"}
    for old, new in s.get("copies", {}).items():
        if old in carried:
            output.out(f"{old} is also in other series, which keep it: series {s['series']} now lists its "
                       f"own copy {new}")  # fmt: skip
    if old_series_applied(store, s):
        if len(upstream) == len(s["steps"]):  # nothing left to apply: the tree goes to the new base
            output.out(f"tree {s['tree']} still holds the old series; every patch is upstream now: "
                       f"`stackmgr apply {s['series']}` moves it to {s['onto'][:12]}")  # fmt: skip
        else:
            output.out(f"tree {s['tree']} still holds the old series; `stackmgr apply {s['series']}` moves it")
