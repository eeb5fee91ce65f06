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


def tree_names(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of a tree name."""
    from stackmgr.store.config import open_store

    try:
        store = open_store(ctx.find_root().params.get("store"))
    except Exception:
        return []
    return [n for n in [*store.trees, *store.unplaced] if n.startswith(incomplete)]


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
                if opt.dest == "tree":
                    extra["shell_complete"] = tree_names
                func = click.option(*opt.flags, opt.dest, help=opt.help, **extra)(func)
            else:
                func = click.option(*opt.flags, opt.dest, is_flag=True, help=opt.help)(func)
        return func

    return apply
