"""`stackmgr push`, `pop`, `refresh`, `top` (quilt-style moves along a tree's current series), `rename`, `drop`.
The rules are in commands/navigate.py, commands/refresh.py and commands/rename.py."""

from __future__ import annotations

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context, patch_names, tree_names
from stackmgr.errors import UsageProblem
from stackmgr.store.config import open_store

TREE = click.option("-t", "--tree", metavar="TREE", shell_complete=tree_names,
                    help="The tree (default: the only tree with a current series).")  # fmt: skip


def _target(patch: str | None, every: bool, verb: str) -> None:
    if patch is not None and every:
        raise UsageProblem("give PATCH or -a, not both", f"`stackmgr {verb} -a` or `stackmgr {verb} PATCH`")


def _report(ctx: Context, moved: object, verb: str) -> None:
    from stackmgr.commands.navigate import Moved

    assert isinstance(moved, Moved)
    if moved.stale:
        names = ", ".join(moved.stale)
        output.err(f"stackmgr: {names}: made on an older version of a patch below it, applied by its context as "
                   "quilt would; `stackmgr refresh` with it on top records what it now builds (until then `check` "
                   "says those files are not preserved)")  # fmt: skip
    if moved.reapplied:
        output.err(f"stackmgr: re-applied at the store's new version: {', '.join(moved.reapplied)}")
    if moved.rebased:
        output.err(f"stackmgr: series {moved.series} was rebased since the tree applied it: HEAD moved to its new "
                   f"base {moved.rebased[:12]}")  # fmt: skip
    if moved.detached is not None:
        from stackmgr.cli.apply import detach_line

        left, head_before, head = moved.detached
        output.err(detach_line(moved.tree, head, left, head_before, left))
    if ctx.json:
        output.emit_json({"schema": 1, "tree": moved.tree, "series": moved.series, "before": moved.before,
                          "applied": moved.after, "total": moved.total, "top": moved.top,
                          "changed": moved.changed, "carried": moved.carried, "stale": moved.stale,
                          "reapplied": moved.reapplied, "rebased_onto": moved.rebased or None})  # fmt: skip
        return
    n = moved.carried
    carried = f"; {n} changed file{'s' if n != 1 else ''} carried along" if n else ""
    output.out(f"{moved.tree}: {moved.summary}{carried}")


MERGE = click.option("--merge", is_flag=True, help="Merge your changes on top into files the move changes (git's "
                     "three-way merge; refused, nothing changed, on a conflict; `stackmgr undo` puts them back).")


@click.command("push")
@click.argument("patch", required=False, shell_complete=patch_names)
@click.option("-a", "--all", "every", is_flag=True, help="Apply every remaining patch.")
@TREE
@click.option("--override", metavar="REASON", help="Push a do-not-revive lane anyway, saying why.")
@MERGE
@json_option()
@pass_context
def push_cmd(ctx: Context, patch: str | None, every: bool, tree: str | None, override: str | None,
             merge: bool) -> None:  # fmt: skip
    """Apply the next patch of the tree's current series (or up to PATCH, or all with -a), carrying changes on
    top along; refused, with nothing changed, when such a change touches a file the push changes (unless
    --merge merges it, as `git checkout -m` does)."""
    from stackmgr.commands.navigate import push

    _target(patch, every, "push")
    with output.activity("pushing"):
        moved = push(open_store(ctx.store), tree, patch, every, override, merge)
    _report(ctx, moved, "push")


@click.command("pop")
@click.argument("patch", required=False, shell_complete=patch_names)
@click.option("-a", "--all", "every", is_flag=True, help="Take every patch off (back to the series' base).")
@TREE
@MERGE
@json_option()
@pass_context
def pop_cmd(ctx: Context, patch: str | None, every: bool, tree: str | None, merge: bool) -> None:
    """Take the top patch off the tree (or the ones above PATCH, which stays on top; or all with -a), carrying
    changes on top along; refused, with nothing changed, when such a change touches a file the pop changes
    (unless --merge merges it, as `git checkout -m` does)."""
    from stackmgr.commands.navigate import pop

    _target(patch, every, "pop")
    with output.activity("popping"):
        moved = pop(open_store(ctx.store), tree, patch, every, merge)
    _report(ctx, moved, "pop")


@click.command("refresh")
@click.argument("paths", nargs=-1)
@TREE
@click.option("--force", is_flag=True,
              help="Rewrite the top patch even though the store holds another version than the tree applied "
                   "(a pulled refresh): that version is kept for interdiff.")  # fmt: skip
@json_option()
@pass_context
def refresh_cmd(ctx: Context, paths: tuple[str, ...], tree: str | None, force: bool) -> None:
    """Fold the tree's changes (or only those under PATHs) into the top patch of its current series, keeping its
    description; the previous version is kept for `stackmgr interdiff`. Without PATHs, a changed file that
    another patch holds is left out (named: taken in). Refused when the patch in the store is not the version
    the tree applied (a teammate's refresh, pulled), unless --force."""
    from stackmgr.commands.refresh import refresh

    with output.activity("refreshing"):
        result = refresh(open_store(ctx.store), tree, paths, force)
    for warning in result.warnings:
        output.err(f"stackmgr: note: {output.show_text(warning)}")
    if ctx.json:
        output.emit_json({"schema": 1, "patch": result.name, "tree": result.tree, "outcome": result.outcome,
                          "files": result.files, "insertions": result.insertions,
                          "deletions": result.deletions})  # fmt: skip
        return
    words = {"updated": "refreshed", "unchanged": "unchanged (the tree adds nothing to it)"}
    what = words.get(result.outcome, result.outcome)
    output.out(f"{result.tree}: patch {result.name} {what}: {result.files} file{'s' if result.files != 1 else ''}, "
               f"+{result.insertions} -{result.deletions}")  # fmt: skip


@click.command("top")
@TREE
@json_option()
@pass_context
def top_cmd(ctx: Context, tree: str | None) -> None:
    """Print the top applied patch of the tree's current series (exit 1 when none is applied)."""
    from stackmgr.commands.navigate import top

    where = top(open_store(ctx.store), tree)
    if ctx.json:
        output.emit_json({"schema": 1, "tree": where.tree, "series": where.series, "top": where.top,
                          "applied": where.count, "total": where.total,
                          "in_order": where.in_order, "position": where.summary()})  # fmt: skip
    elif where.top is not None:
        output.out(where.top)
    else:
        output.err(f"stackmgr: tree {where.tree}: {where.summary()}; no patch applied")
    if where.top is None:
        raise SystemExit(1)


@click.command("rename")
@click.argument("old", shell_complete=patch_names)
@click.argument("new")
@pass_context
def rename_cmd(ctx: Context, old: str, new: str) -> None:
    """Rename a patch: its file, kept versions and links move, every series line and the applied state follow."""
    from stackmgr.commands.rename import rename_patch

    changed = rename_patch(open_store(ctx.store), old, new)
    where = f"; series {', '.join(changed)} updated" if changed else ""
    output.out(f"renamed {old} to {new}{where}")


@click.command("drop")
@click.argument("patch", shell_complete=patch_names)
@click.option("--with-links", is_flag=True, help="Remove its link records too (default: kept as evidence).")
@pass_context
def drop_cmd(ctx: Context, patch: str, with_links: bool) -> None:
    """Remove a patch that no series lists; its bytes are kept under patches/.versions/, its links as evidence."""
    from stackmgr.commands.rename import drop_patch

    kept = drop_patch(open_store(ctx.store), patch, with_links)
    output.out(f"dropped {patch}; its bytes are kept in {kept} (`stackmgr undo` brings it back)")
