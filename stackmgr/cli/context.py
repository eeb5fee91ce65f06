"""What every subcommand reads from the command line around it: the store and whether JSON was asked for."""

from __future__ import annotations

import click


def store_and_json(ctx: click.Context) -> tuple[str | None, bool]:
    """(--store DIR or None, whether --json was given at any level: `--json cmd`, `group --json`, `cmd --json`)."""
    as_json = False
    level: click.Context | None = ctx
    while level is not None:
        as_json = as_json or bool(level.params.get("as_json"))
        level = level.parent
    store = ctx.find_root().params.get("store")
    return (store if isinstance(store, str) else None), as_json
