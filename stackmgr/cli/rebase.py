"""`stackmgr rebase SERIES --onto REV | --continue | --abort`: carry a series to a new upstream base."""

from __future__ import annotations

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.store.config import open_store


@click.command("rebase")
@click.argument("series", required=False)
@click.option("--onto", metavar="REV", help="The new base commit (a commit of the series' tree).")
@click.option("-t", "--tree", metavar="TREE", help="Which tree's patches to carry, when the series mixes trees.")
@click.option("--exec", "exec_cmd", metavar="CMD", help="Run CMD (a shell command) in the worktree after each patch.")
@click.option("--continue", "go_on", is_flag=True, help="Go on after resolving a conflict in the worktree.")
@click.option("--abort", is_flag=True, help="Give up: remove the worktree; nothing was changed.")
@click.option("--own-copy", is_flag=True,
              help="A patch other series also list is written as this series' own copy (NAME--SERIES).")
@json_option()
@pass_context
def rebase_cmd(ctx: Context, series: str | None, onto: str | None, tree: str | None, exec_cmd: str | None,
               go_on: bool, abort: bool, own_copy: bool) -> None:  # fmt: skip
    """Carry a series to a new upstream base in a scratch worktree, classifying every patch: unchanged, context
    drift, merged (3-way), conflict resolved, already upstream. Your working tree is not touched; the patches
    and the series are rewritten only once all of them are carried (`stackmgr undo` reverts that)."""
    from stackmgr.commands import rebase
    from stackmgr.commands.rebase_state import abort as abort_rebase
    from stackmgr.commands.rebase_state import old_series_applied
    from stackmgr.errors import UsageProblem

    store = open_store(ctx.store)
    if sum((onto is not None, go_on, abort)) != 1:
        raise UsageProblem("give --onto REV, --continue or --abort", "e.g. `stackmgr rebase S --onto origin/main`")
    if onto is not None and series is None:
        raise UsageProblem("which series?", "`stackmgr rebase SERIES --onto REV`")
    if onto is None and (tree is not None or exec_cmd is not None or own_copy):
        raise UsageProblem("-t, --exec and --own-copy go with --onto",
                           "--continue goes on with what was given then")  # fmt: skip
    if abort:
        output.out(f"rebase of series {abort_rebase(store, series)} aborted; nothing was changed")
        return
    with output.activity("rebasing"):
        if go_on:
            result = rebase.resume(store, series)
        else:
            result = rebase.start(store, str(series), str(onto), tree, exec_cmd, own_copy)
    if ctx.json:
        output.emit_json(result.to_json())
    else:
        for step in result.state["steps"]:
            if step["outcome"]:
                output.out(f"{step['outcome']:<18} {step['name']}")
        s = result.state
        if result.done:
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
                               f"`stackmgr reset {s['tree']} --to {s['onto'][:12]}` moves it there")  # fmt: skip
                else:
                    output.out(f"tree {s['tree']} still holds the old series; `stackmgr apply {s['series']}` moves it")
    if not result.done:
        output.err(f"stackmgr: {result.stop}")
        raise SystemExit(3)
