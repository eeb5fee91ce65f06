"""What every click command shares: the one `Context` (--store, --json), the one `--json` option, and click
options built from argspec's declarations.

The group builds the Context once; every command reads it through `pass_context`. `--json` may be given at any
level (`stackmgr --json CMD`, `GROUP --json SUB`, `CMD --json`): each is `json_option`, whose callback sets the
one Context's `json`, so no command sees a flag of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from stackmgr.cli import argspec

F = TypeVar("F", bound=Callable[..., Any])

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.store.config import Store


class Context:
    """The command line around a command: `--store DIR` (None: $STACKMGR_STORE, then walk up) and `--json`."""

    def __init__(self, store: str | None = None, as_json: bool = False) -> None:
        self.store = store
        self.json = as_json


pass_context = click.make_pass_decorator(Context)


def _ask_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(Context).json = True


def json_option(opt: argspec.Opt = argspec.JSON) -> Callable[[F], F]:
    """`--json` (argspec.JSON) at this level: sets Context.json."""
    return click.option(*opt.flags, is_flag=True, expose_value=False, callback=_ask_json, help=opt.help)


def results_options(command: F) -> F:
    """`--result-dir DIR` and `--from-json FILE`, as `run` takes them: for the commands that run CMD as `run`
    does (`ab`, `bisect`); they reach the command as `result_dirs` and `from_json`."""
    command = click.option("--from-json", "from_json", multiple=True, metavar="FILE",
                           help="A result JSON to take metrics from, as `run --from-json` (repeatable).")(command)
    return click.option("--result-dir", "result_dirs", multiple=True, metavar="DIR",
                        help="Where CMD writes its results, as `run --result-dir` (repeatable; default: the tree's "
                             "declared results directories).")(command)  # fmt: skip


def _ask_store(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(Context).store = value


def store_everywhere(command: click.Command, skip: tuple[str, ...] = ()) -> None:
    """`--store DIR` (argspec.STORE) on `command` and every subcommand of it, as the fast path takes it after
    the command too: each sets Context.store, the last one given wins."""
    if command.name in skip:
        return
    opt = argspec.STORE
    if not any(p.name == opt.dest for p in command.params):
        command.params.append(click.Option(opt.flags, metavar=opt.metavar, expose_value=False, callback=_ask_store,
                                           help=opt.help))  # fmt: skip
    if not any(p.name == "json" for p in command.params):  # a command whose output is text: its errors as JSON
        command.params.append(click.Option(argspec.JSON.flags, is_flag=True, expose_value=False, callback=_ask_json,
                                           help="Errors as one JSON line on stderr (this command's output is "
                                                "text).", hidden=False))  # fmt: skip
    for sub in command.commands.values() if isinstance(command, click.Group) else ():
        store_everywhere(sub, skip)


# Shell completion of the store's names (docs/COMPLETION.md): each offers the names its command's lookup accepts,
# from the store that command would open (--store, $STACKMGR_STORE, walking up). Completion runs on every Tab: it
# never raises (a broken store, none found: nothing offered), never prints, and reads files only, no git.


def _offered(ctx: click.Context, incomplete: str, names_of: Callable[[Store], list[str]]) -> list[str]:
    import contextlib
    import io

    from stackmgr.store.config import open_store

    given = ctx.find_object(Context)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            store = open_store((given.store if given else None) or ctx.find_root().params.get("store"))
            return [name for name in names_of(store) if name.startswith(incomplete)]
    except Exception:
        return []


def tree_names(ctx: click.Context, _param: object, incomplete: str) -> list[str]:
    """Shell completion of a tree name (those of this store, with a path here or not)."""
    return _offered(ctx, incomplete, lambda store: sorted([*store.trees, *store.unplaced]))


def patch_names(ctx: click.Context, _param: object, incomplete: str) -> list[str]:
    """Shell completion of a patch name (store/names.patch_names: those `patch_file` accepts)."""
    from stackmgr.store import names

    return _offered(ctx, incomplete, names.patch_names)


def series_names(ctx: click.Context, _param: object, incomplete: str) -> list[str]:
    """Shell completion of a series name (store/series.series_names)."""
    from stackmgr.store import series

    return _offered(ctx, incomplete, series.series_names)


def ref_names(ctx: click.Context, _param: object, incomplete: str) -> list[str]:
    """Shell completion of a result: its link id or its run's name (evidence/ref_names.ref_names)."""
    from stackmgr.evidence import ref_names as refs

    return _offered(ctx, incomplete, refs.ref_names)


COMPLETES = {"TREE": tree_names, "PATCH": patch_names, "S": series_names, "LINK": ref_names}  # by metavar


def options(specs: tuple[argspec.Opt, ...]) -> Callable[[F], F]:
    """Click options from the declarations the start-up fast path parses too (one source of truth)."""

    def apply(func: F) -> F:
        for opt in reversed(specs):
            if opt.dest == argspec.JSON.dest:
                func = json_option(opt)(func)
            elif opt.takes_value:
                extra: dict[str, Any] = {"metavar": opt.metavar} if opt.metavar else {}
                if opt.multiple:
                    extra["multiple"] = True
                if opt.metavar in COMPLETES and opt.dest != "new_series":
                    extra["shell_complete"] = COMPLETES[opt.metavar]
                func = click.option(*opt.flags, opt.dest, help=opt.help, **extra)(func)
            else:
                func = click.option(*opt.flags, opt.dest, is_flag=True, help=opt.help)(func)
        return func

    return apply
