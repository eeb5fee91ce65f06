"""`stackmgr apply SERIES`: HEAD detached at the series' base, its patches as working-tree changes. No click."""

from __future__ import annotations

from stackmgr import output
from stackmgr.cli.argspec import Values, flag, text, texts
from stackmgr.store.config import open_store


class ApplyArgs:
    __slots__ = ("as_json", "dry_run", "guards", "link", "only_tree", "override", "series", "store", "three_way")

    def __init__(
        self, store: str | None, series: str, *, only_tree: str | None, guards: tuple[str, ...], three_way: bool,
        dry_run: bool, override: str | None, as_json: bool, link: str | None = None,
    ) -> None:  # fmt: skip
        self.link = link
        self.store = store
        self.series = series
        self.only_tree = only_tree
        self.guards = guards
        self.three_way = three_way
        self.dry_run = dry_run
        self.override = override
        self.as_json = as_json

    @classmethod
    def from_values(cls, store: str | None, as_json: bool, series: str, values: Values) -> ApplyArgs:
        return cls(
            store, series, only_tree=text(values, "only_tree"), guards=texts(values, "guards"),
            three_way=flag(values, "three_way"), dry_run=flag(values, "dry_run"), override=text(values, "override"),
            as_json=as_json, link=text(values, "link"),
        )  # fmt: skip


def run(args: ApplyArgs) -> int:
    from stackmgr.commands.apply import apply_series

    if args.link is not None or not args.series:
        return run_link(args)
    store = open_store(args.store)
    series = args.series
    with output.activity(f"applying {series}"):
        outcomes = apply_series(
            store, series, only_tree=args.only_tree, guards=args.guards, three_way=args.three_way,
            dry_run=args.dry_run, override=args.override,
        )  # fmt: skip
    if args.as_json:
        output.emit_json({"schema": 1, "series": series, "dry_run": args.dry_run, "trees": [
            {"tree": o.tree, "base": o.base, "patches": o.patches, "result_tree": o.result, "changed": o.changed,
             "left": {"series": o.left[0], "patches": o.left[1]} if o.left else None,
             "branch": _short(o.branch) or None} for o in outcomes]})  # fmt: skip
        return 0
    verb = "would apply" if args.dry_run else "applied"
    for o in outcomes:
        if o.left:  # another series' patches leave the tree: said, as a swap is not what everyone expects
            what, names = o.left
            n = len(names)
            output.out(f"{o.tree}: {f'series {what}' if what else 'the measured state'} "
                       f"{'would leave' if args.dry_run else 'left'} the tree ({n} patch{'es' if n != 1 else ''}: "
                       f"{', '.join(names)}; {'they stay' if n != 1 else 'it stays'} saved in patches/)")  # fmt: skip
        n = len(o.patches)
        state = "working tree changes" if o.changed else "working tree already there"
        output.out(f"{o.tree}: {verb} {series} ({n} patch{'es' if n != 1 else ''}) on {o.base[:12]}; "
                   f"tree {o.result}; {state}")  # fmt: skip
    for o in outcomes:
        if o.detached and not args.dry_run:
            output.err(detach_line(o.tree, o.base, o.branch_before, o.head_before, o.branch))
    return 0


def detach_line(tree: str, base: str, branch_before: str | None, head_before: str, back_to: str | None) -> str:
    """As git says it: where HEAD is now, where it was, and the way back (`back_to`: the branch `reset` returns to)."""
    was = f"was on branch {_short(branch_before)}" if branch_before else f"was at {head_before[:12]}"
    back = f"; `stackmgr reset` returns to {_short(back_to)}" if back_to else ""
    if branch_before and head_before != base:  # the branch's tip is not the base `reset` goes to
        back = f"; `stackmgr reset --to {_short(branch_before)}` returns to it ({head_before[:12]})"
    return f"stackmgr: {tree}: HEAD detached at {base[:12]} ({was}){back}"


def _short(branch: str | None) -> str:
    """`main` for `refs/heads/main`."""
    return (branch or "").removeprefix("refs/heads/")


def run_link(args: ApplyArgs) -> int:
    """`apply --link LINK`: every tree the result was measured on, rebuilt and proved by its snapshot id."""
    from stackmgr.commands.apply_link import apply_link, describe
    from stackmgr.errors import UsageProblem

    if args.link is None or args.series:
        raise UsageProblem("give a SERIES or --link LINK, not both" if args.series else "give a SERIES to apply",
                           "`stackmgr apply SERIES` or `stackmgr apply --link LINK`")  # fmt: skip
    if args.guards or args.three_way:
        raise UsageProblem("--guard and --3way are for a series", "`stackmgr apply --link LINK` alone")
    store = open_store(args.store)
    with output.activity(f"rebuilding the state of {args.link}"):
        outcomes = apply_link(store, args.link, only_tree=args.only_tree, dry_run=args.dry_run,
                              override=args.override)  # fmt: skip
    if args.as_json:
        output.emit_json({"schema": 1, "link": args.link, "dry_run": args.dry_run, "trees": [
            {"tree": o.tree, "base": o.base, "patches": o.patches, "residue": o.residue or None,
             "snapshot": o.snapshot, "changed": o.changed} for o in outcomes]})  # fmt: skip
        return 0
    for o in outcomes:
        output.out(("would rebuild " if args.dry_run else "rebuilt " if o.changed else "kept ") + describe(o))
        if o.changed and not args.dry_run and (o.branch_before or o.head_before != o.base):
            output.err(detach_line(o.tree, o.base, o.branch_before, o.head_before, o.branch_before))
        if o.residue and not args.dry_run:
            output.err(f"stackmgr: note: {o.tree}: the residue is kept by content in the store (artifacts/), in no "
                       "patch; `check` counts it preserved while it is unchanged, byte for byte; `stackmgr save NAME` "
                       "keeps it as a patch")  # fmt: skip
    return 0
