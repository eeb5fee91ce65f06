"""What a run measures and what its result is linked to: the trees (the default tree, every one with a current
series here) and, per measured tree, the patch (`--link PATCH`, the last patch of `--series S`, else the top of
the tree's applied series). A tree whose series is applied to 0 patches (`pop -a`, `reset` after `apply`) is the
series' base: the run is a baseline of that series, filed with its first patch of the tree, measured without it,
and says so (`[run] baseline_of`, docs/FORMATS.md#link-record); `--series S` there records that baseline too,
never a result of S's last patch, which was not there."""

from __future__ import annotations

import os

from stackmgr.errors import UsageProblem
from stackmgr.evidence.states import Evidence
from stackmgr.store.applied import load_applied
from stackmgr.store.config import Store
from stackmgr.store.series import SeriesFile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.commands.run import RunRequest
    from stackmgr.store.position import Position


def trees_measured(store: Store) -> list[str]:
    """The trees a run measures: the default tree (store/tree_paths.py), every one with a current series here."""
    from stackmgr.store.tree_paths import trees_to_act_on

    applied = load_applied(store)
    current = [n for n, c in sorted(store.trees.items()) if n in applied and os.path.isdir(c.path)]
    return trees_to_act_on(store, (), prefer=(current,), several=True)


def link_targets(store: Store, req: RunRequest, trees: list[str],
                 evidence: Evidence) -> list[tuple[str, str, str]]:  # fmt: skip
    """(patch, tree, baseline_of) the result is linked to: --link PATCH; the last patch of --series S of each
    measured tree; else the top of each measured tree's applied series. `baseline_of` is the series whose base was
    measured (its first patch of the tree named as the patch), "" for a result of the patch."""
    evidence_index = evidence.index
    if req.link:
        from stackmgr.store.names import patch_file

        link = patch_file(store, req.link)
        rec = evidence_index.record(link + ".patch")
        if rec is None or rec["tree"] is None:
            raise UsageProblem(f"no patch named {link}", "see `stackmgr series` or `ls patches/`")
        return [(link, str(rec["tree"]), "")]
    from stackmgr.store.position import applied_position

    where = {t: w for t in trees if (w := applied_position(store, t)) is not None}
    if req.series:
        bases = [(w.names[0], t, w.series) for t, w in where.items() if w.series == req.series and at_base(w)]
        if bases:
            return bases
        last: dict[str, str] = {}
        for name in SeriesFile.load(store, req.series).patch_names():
            rec = evidence_index.record(name + ".patch")
            if rec is not None and rec["tree"] in trees:
                last[str(rec["tree"])] = name
        if not last:
            raise UsageProblem(f"series {req.series} has no patch of the measured trees ({', '.join(trees)})",
                               "name the trees with -t, or the patch with --link")  # fmt: skip
        return [(p, t, "") for t, p in sorted(last.items())]
    tops = [(w.applied.link_patch or str(w.top), t, "") for t, w in where.items()  # a measured state: its link's patch
            if w.top or w.applied.link_patch]  # fmt: skip
    if not tops:  # no patch applied anywhere: the base of each tree's series is what was measured
        tops = [(w.names[0], t, w.series) for t, w in where.items() if at_base(w)]
    if not tops:
        raise UsageProblem("nothing to link the result to: no measured tree has a patch or a series applied",
                           "name it: `--link PATCH` or `--series S`")  # fmt: skip
    return tops


def at_base(where: Position) -> bool:
    """Whether a tree stands at its series' base: a series applied to 0 patches, which has a patch of the tree
    to file a baseline with."""
    return bool(where.series and not where.count and not where.applied.link_patch and where.names)
