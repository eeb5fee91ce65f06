"""`stackmgr import` and `stackmgr rebase`: bringing patches in, and carrying a series to a new upstream."""

from __future__ import annotations

import click

from stackmgr import output
from stackmgr.cli.context import store_and_json
from stackmgr.store.config import open_store


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("-t", "--tree", metavar="TREE", help="The tree the patches are for (needed when several could be).")
@click.option("--series", metavar="S", help="Import the files as a stack, in order, appended to series S.")
@click.option("--name", metavar="N", help="The patch name (one file only); else from the file name or subject.")
@click.option("--base", metavar="REV", help="The commit the patches apply to; else the newest one they apply to.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def import_cmd(ctx: click.Context, files: tuple[str, ...], tree: str | None, series: str | None, name: str | None,
               base: str | None, as_json: bool) -> None:  # fmt: skip
    """Adopt patches: git format-patch files or an mbox, quilt patches (DEP-3 or free text), plain diff -u /
    diff -ruN output, or a quilt directory (its `series` gives the order). Each is applied in a scratch index and
    saved in stackmgr's format; files that are not patches, truncated or for another tree are refused one by
    one. Exit 0 when all were imported, 1 when some were refused, 3 when none could be."""
    from stackmgr.commands.import_ import import_patches

    store_dir, global_json = store_and_json(ctx)
    store = open_store(store_dir)
    with output.activity("importing"):
        report = import_patches(store, list(files), tree, series, name, base)
    if as_json or global_json:
        output.emit_json({"schema": 1, "series": report.series if report.imported else None,
                          "imported": [{"name": i.name, "source": i.source, "tree": i.tree, "base": i.base,
                                        "found_at": i.found_at, "outcome": i.outcome} for i in report.imported],
                          "refused": [{"source": r.source, "reason": r.reason} for r in report.refused]})  # fmt: skip
    else:
        for i in report.imported:
            files_n, plus, minus = i.stat
            verb = "imported" if i.outcome == "imported" else "already there:"
            output.out(f"{verb} {i.name} ({i.source}): tree {i.tree}, base {i.base[:12]} ({i.found_at}), "
                       f"{files_n} file{'s' if files_n != 1 else ''} +{plus} -{minus}")  # fmt: skip
        if report.imported and report.series:
            output.out(f"series {report.series}: {len(report.imported)} patch"
                       f"{'es' if len(report.imported) != 1 else ''} appended")  # fmt: skip
        for r in report.refused:
            output.err(f"stackmgr: refused {r.source}: {r.reason}")
    if report.refused:
        raise SystemExit(1 if report.imported else 3)


@click.command("rebase")
@click.argument("series", required=False)
@click.option("--onto", metavar="REV", help="The new base commit (a commit of the series' tree).")
@click.option("-t", "--tree", metavar="TREE", help="Which tree's patches to carry, when the series mixes trees.")
@click.option("--exec", "exec_cmd", metavar="CMD", help="Run CMD (a shell command) in the worktree after each patch.")
@click.option("--continue", "go_on", is_flag=True, help="Go on after resolving a conflict in the worktree.")
@click.option("--abort", is_flag=True, help="Give up: remove the worktree; nothing was changed.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def rebase_cmd(ctx: click.Context, series: str | None, onto: str | None, tree: str | None, exec_cmd: str | None,
               go_on: bool, abort: bool, as_json: bool) -> None:  # fmt: skip
    """Carry a series to a new upstream base in a scratch worktree, classifying every patch: unchanged, context
    drift, merged (3-way), conflict resolved, already upstream. Your working tree is not touched; the patches
    and the series are rewritten only once all of them are carried (`stackmgr undo` reverts that)."""
    from stackmgr.commands import rebase
    from stackmgr.errors import UsageProblem

    store_dir, global_json = store_and_json(ctx)
    store = open_store(store_dir)
    if sum((onto is not None, go_on, abort)) != 1:
        raise UsageProblem("give --onto REV, --continue or --abort", "e.g. `stackmgr rebase S --onto origin/main`")
    if onto is not None and series is None:
        raise UsageProblem("which series?", "`stackmgr rebase SERIES --onto REV`")
    if onto is None and (tree is not None or exec_cmd is not None):
        raise UsageProblem("-t and --exec go with --onto", "--continue goes on with the tree and --exec given then")
    if abort:
        output.out(f"rebase of series {rebase.abort(store, series)} aborted; nothing was changed")
        return
    with output.activity("rebasing"):
        result = rebase.resume(store, series) if go_on else rebase.start(store, str(series), str(onto), tree, exec_cmd)
    if as_json or global_json:
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
            from stackmgr.store.applied import load_applied

            applied = load_applied(store).get(s["tree"])
            if applied is not None and applied.series == s["series"]:
                output.out(f"tree {s['tree']} still holds the old series; `stackmgr apply {s['series']}` moves it")
    if not result.done:
        output.err(f"stackmgr: {result.stop}")
        raise SystemExit(3)
