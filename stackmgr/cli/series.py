"""`stackmgr series …`: list, show and edit series files."""

from __future__ import annotations

import os
from typing import Any

import click

from stackmgr import output
from stackmgr.cli.context import store_and_json
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.journal.operation import operation
from stackmgr.store.config import Store, open_store
from stackmgr.store.names import patch_name


class _SeriesGroup(click.Group):
    """`stackmgr series NAME` shows a series; `stackmgr series new|add|remove|move …` edit one."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        # Resolved after the group's own options, so `series --json NAME` works like `series NAME --json`.
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            return "show", self.commands["show"], args
        return super().resolve_command(ctx, args)


def _ctx_store(ctx: click.Context) -> tuple[Store, bool]:
    """The store, and whether JSON was asked for (`--json series`, `series --json`, `series NAME --json`)."""
    store_dir, as_json = store_and_json(ctx)
    return open_store(store_dir), as_json


@click.group("series", cls=_SeriesGroup, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def series_group(ctx: click.Context, as_json: bool) -> None:
    """List series, show one (`series NAME`), or edit one."""
    if ctx.invoked_subcommand is not None:
        return
    from stackmgr.store.series import SeriesFile, list_series

    store, want_json = _ctx_store(ctx)
    rows: list[dict[str, Any]] = []
    for name in list_series(store):
        try:
            series = SeriesFile.load(store, name)
        except StackmgrError as exc:  # one broken file must not hide the others
            rows.append({"name": name, "patches": None, "missing": None, "error": str(exc)})
            continue
        rows.append({"name": name, "patches": len(series.entries), "missing": len(series.missing_patches()),
                     "error": None})  # fmt: skip
    if want_json:
        output.emit_json({"schema": 1, "series": rows})
        return
    if not rows:
        output.out("no series yet; create one with `stackmgr series new NAME` "
                   "or `stackmgr save NAME --series S`")  # fmt: skip
    for row in rows:
        if row["error"]:
            output.out(f"{row['name']:<40} {output.paint(row['error'], 'red')}")
            continue
        n = row["patches"]
        missing = output.paint(f", {row['missing']} missing", "red") if row["missing"] else ""
        output.out(f"{row['name']:<40} {n} patch{'es' if n != 1 else ''}{missing}")


@series_group.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show a series: each patch with its tree, +/- and whether its file exists."""
    from stackmgr.safety.preserved import PatchIndex
    from stackmgr.store.series import SeriesFile

    store, want_json = _ctx_store(ctx)
    series = SeriesFile.load(store, name)
    index = PatchIndex.load(store)
    rows: list[dict[str, Any]] = []
    for n, entry in enumerate(series.entries, start=1):
        is_file = os.path.isfile(os.path.join(store.patches_dir, entry.patch))
        rec = index.record(entry.patch) if is_file else None
        files, plus, minus = (rec.get("stat") or (0, 0, 0)) if rec else (0, 0, 0)
        rows.append({
            "position": n, "patch": entry.name, "file": entry.patch, "exists": rec is not None,
            "tree": rec["tree"] if rec else None, "subject": rec["subject"] if rec else None,
            "files": files, "insertions": plus, "deletions": minus, "guards": entry.guards,
            "error": rec["error"] if rec else None,
            "size": os.path.getsize(os.path.join(store.patches_dir, entry.patch)) if rec else None,
        })  # fmt: skip
    index.save()
    if want_json:
        output.emit_json({"schema": 1, "series": name, "patches": rows})
        return
    output.out(f"series {name}: {len(rows)} patch{'es' if len(rows) != 1 else ''}")
    for row in rows:
        if not row["exists"]:
            output.out(f"  {row['position']:>3}. {row['patch']:<44} {output.paint('MISSING', 'red')}")
            continue
        guards = " " + " ".join("#" + g for g in row["guards"]) if row["guards"] else ""
        problem = output.paint(f"  ({row['error']})", "red") if row["error"] else ""
        output.out(f"  {row['position']:>3}. {row['patch']:<44} {row['tree'] or '?':<18} "
                   f"+{row['insertions']} -{row['deletions']}{guards}{problem}")  # fmt: skip


@series_group.command("new")
@click.argument("name")
@click.pass_context
def new(ctx: click.Context, name: str) -> None:
    """Create an empty series."""
    from stackmgr.store.series import SeriesFile, series_path

    store, _ = _ctx_store(ctx)
    with operation(store, f"series new {name}"):
        if os.path.lexists(series_path(store, name)):  # checked before parsing: a broken file exists too
            raise UsageProblem(f"series {name} already exists", f"see `stackmgr series {name}`")
        SeriesFile.load_or_new(store, name).write()
    output.out(f"created series {name}")


@series_group.command("add")
@click.argument("name")
@click.argument("patches", nargs=-1, required=True)
@click.option("--at", "position", type=click.IntRange(min=1), help="Insert at this position (1 = first).")
@click.option("--override", metavar="REASON", help="Add a do-not-revive lane anyway, saying why.")
@click.pass_context
def add(ctx: click.Context, name: str, patches: tuple[str, ...], position: int | None, override: str | None) -> None:
    """Append PATCHES to series NAME (created when missing)."""
    from stackmgr.store.series import SeriesFile

    store, _ = _ctx_store(ctx)
    with operation(store, f"series add {name}"):
        series = SeriesFile.load_or_new(store, name)
        at = (position - 1) if position else len(series.entries)
        files = []
        for patch in patches:
            filename = patch_name(patch) + ".patch"
            if not os.path.isfile(os.path.join(store.patches_dir, filename)):
                raise UsageProblem(f"no patch file patches/{filename}", "save it first or check the name")
            files.append(filename)
        for warning in _revival_warnings(store, files, override):
            output.err(f"stackmgr: {warning}")
        for offset, filename in enumerate(files):
            series.insert(filename, at + offset)
        series.write()
    output.out(f"series {name}: added {', '.join(patches)}")


def _revival_warnings(store: Store, files: list[str], override: str | None) -> list[str]:
    if not os.path.isdir(store.links_dir):
        return []
    from stackmgr.evidence.states import refuse_revival

    named = []
    for filename in files:
        with open(os.path.join(store.patches_dir, filename), "rb") as f:
            named.append((filename[: -len(".patch")], f.read()))
    return refuse_revival(store, named, override)


@series_group.command("remove")
@click.argument("name")
@click.argument("patches", nargs=-1, required=True)
@click.pass_context
def remove(ctx: click.Context, name: str, patches: tuple[str, ...]) -> None:
    """Remove PATCHES from series NAME (the patch files stay)."""
    from stackmgr.store.series import SeriesFile

    store, _ = _ctx_store(ctx)
    with operation(store, f"series remove {name}"):
        series = SeriesFile.load(store, name)
        for patch in patches:
            series.remove(patch)
        series.write()
    output.out(f"series {name}: removed {', '.join(patches)}")


@series_group.command("move")
@click.argument("name")
@click.argument("patch")
@click.argument("position", type=click.IntRange(min=1))
@click.pass_context
def move(ctx: click.Context, name: str, patch: str, position: int) -> None:
    """Move PATCH to POSITION (1 = first) in series NAME."""
    from stackmgr.store.series import SeriesFile

    store, _ = _ctx_store(ctx)
    with operation(store, f"series move {name}"):
        series = SeriesFile.load(store, name)
        series.move(patch, position - 1)
        series.write()
    output.out(f"series {name}: {patch} is now number {min(position, len(series.entries))}")


@click.command("export")
@click.argument("series")
@click.option("--quilt", "quilt_dir", metavar="DIR", help="Write DIR/<patches> and DIR/series for quilt.")
@click.option("--mbox", "mbox", metavar="FILE", help="Write one mbox for `git am --keep-cr FILE`.")
@click.option("--git", "branch", metavar="BRANCH", help="Make BRANCH in the tree: one commit per patch.")
@click.option("--guard", "guards", multiple=True, metavar="G", help="Activate MQ guard G (repeatable).")
@click.pass_context
def export_cmd(ctx: click.Context, series: str, quilt_dir: str | None, mbox: str | None, branch: str | None,
               guards: tuple[str, ...]) -> None:  # fmt: skip
    """Hand a single-tree series to quilt, to `git am`, or to a new branch (the tree itself is not touched)."""
    from stackmgr.commands.export import export_git, export_mbox, export_quilt

    chosen = [x for x in (quilt_dir, mbox, branch) if x is not None]
    if len(chosen) != 1:
        raise UsageProblem("give exactly one of --quilt DIR, --mbox FILE, --git BRANCH",
                           f"e.g. `stackmgr export {series} --mbox {series}.mbox`")  # fmt: skip
    store, _ = _ctx_store(ctx)
    if quilt_dir is not None:
        names = export_quilt(store, series, quilt_dir, guards)
        where = f"{quilt_dir} (QUILT_PATCHES={quilt_dir} quilt push -a)"
    elif mbox is not None:
        names = export_mbox(store, series, mbox, guards)
        where = f"{mbox} (git am --keep-cr {mbox})"
    else:
        assert branch is not None
        names = export_git(store, series, branch, guards)
        where = f"branch {branch}"
    output.out(f"exported {series} ({len(names)} patch{'es' if len(names) != 1 else ''}) to {where}")
