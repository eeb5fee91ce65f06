"""`stackmgr save NAME [PATHS]`: the working-tree changes into patches/NAME.patch. No click: the fast path runs it."""

from __future__ import annotations

import os

from stackmgr import output
from stackmgr.cli.argspec import Values, flag, text
from stackmgr.store.config import open_store


class SaveArgs:
    __slots__ = ("allow_conflict_markers", "as_json", "base", "message", "name", "new_series", "override", "paths",
                 "series", "store", "tree", "update")  # fmt: skip

    def __init__(
        self, store: str | None, name: str, paths: tuple[str, ...], *, tree: str | None, message: str | None,
        series: str | None, base: str | None, update: bool, allow_conflict_markers: bool, as_json: bool,
        override: str | None = None, new_series: str | None = None,
    ) -> None:  # fmt: skip
        self.store = store
        self.name = name
        self.paths = paths
        self.tree = tree
        self.message = message
        self.series = series
        self.base = base
        self.update = update
        self.allow_conflict_markers = allow_conflict_markers
        self.as_json = as_json
        self.override = override
        self.new_series = new_series

    @classmethod
    def from_values(
        cls, store: str | None, as_json: bool, name: str, paths: tuple[str, ...], values: Values
    ) -> SaveArgs:
        return cls(
            store, name, paths, tree=text(values, "tree"), message=text(values, "message"),
            series=text(values, "series"), base=text(values, "base"), update=flag(values, "update"),
            allow_conflict_markers=flag(values, "allow_conflict_markers"), as_json=as_json,
            override=text(values, "override"), new_series=text(values, "new_series"),
        )  # fmt: skip


def run(args: SaveArgs) -> int:
    from stackmgr.commands.save import SaveRequest, save

    req = SaveRequest(args.name, args.tree, args.message, args.series, args.base, args.paths, args.update,
                      args.allow_conflict_markers, override=args.override, new_series=args.new_series)  # fmt: skip
    store = open_store(args.store)
    with output.activity(f"saving {args.name}: snapshot, diff, round-trip check"):
        result = save(store, req)
    for warning in result.warnings:
        output.err(f"stackmgr: note: {output.show_text(warning)}")
    if args.as_json:
        output.emit_json({"schema": 1, **{k: v for k, v in vars(result).items() if k not in ("warnings", "revival")}})
        return 0
    rel = os.path.relpath(result.path, store.root)
    what = {"saved": "saved", "updated": "updated", "unchanged": "unchanged, already saved as"}[result.outcome]
    tail = f"; in series {result.series}" if result.series else ""
    files = f"{result.files} file{'' if result.files == 1 else 's'}"
    output.out(f"{what} {rel}: {files}, +{result.insertions} -{result.deletions} "
               f"(tree {result.tree}, base {result.base[:12]}){tail}")  # fmt: skip
    return 0
