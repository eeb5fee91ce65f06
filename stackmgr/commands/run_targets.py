"""What a run measures and what its result is linked to: the trees (the default tree, every one with a current
series here) and, per measured tree, the patch (`--link PATCH`, the last patch of `--series S`, else the top of
the tree's applied series)."""

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


def trees_measured(store: Store) -> list[str]:
    """The trees a run measures: the default tree (store/tree_paths.py), every one with a current series here."""
    from stackmgr.store.tree_paths import trees_to_act_on

    applied = load_applied(store)
    current = [n for n, c in sorted(store.trees.items()) if n in applied and os.path.isdir(c.path)]
    return trees_to_act_on(store, (), prefer=(current,), several=True)


def link_targets(store: Store, req: RunRequest, trees: list[str], evidence: Evidence) -> list[tuple[str, str]]:
    """(patch, tree) the result is linked to: --link PATCH; the last patch of --series S of each measured tree;
    else the top of each measured tree's applied series."""
    evidence_index = evidence.index
    if req.link:
        from stackmgr.store.names import patch_file

        link = patch_file(store, req.link)
        rec = evidence_index.record(link + ".patch")
        if rec is None or rec["tree"] is None:
            raise UsageProblem(f"no patch named {link}", "see `stackmgr series` or `ls patches/`")
        return [(link, str(rec["tree"]))]
    if req.series:
        last: dict[str, str] = {}
        for name in SeriesFile.load(store, req.series).patch_names():
            rec = evidence_index.record(name + ".patch")
            if rec is not None and rec["tree"] in trees:
                last[str(rec["tree"])] = name
        if not last:
            raise UsageProblem(f"series {req.series} has no patch of the measured trees ({', '.join(trees)})",
                               "name the trees with -t, or the patch with --link")  # fmt: skip
        return [(p, t) for t, p in sorted(last.items())]
    from stackmgr.store.position import applied_position

    tops = [(w.applied.link_patch or str(w.top), t) for t in trees  # a measured state: the patch its link names
            if (w := applied_position(store, t)) is not None and (w.top or w.applied.link_patch)]  # fmt: skip
    if not tops:
        raise UsageProblem("nothing to link the result to: no measured tree has a patch applied",
                           "name it: `--link PATCH` or `--series S`")  # fmt: skip
    return tops
