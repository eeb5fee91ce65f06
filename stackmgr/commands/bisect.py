"""`stackmgr bisect SERIES [-t TREE] [--metric M --threshold X] -- CMD…`: the first patch of a series whose
prefix makes CMD fail (exit code not 0), or makes metric M worse than X by its direction (what CMD writes under
the result directories, as `run` collects it).

The tree must be preserved first, as for `apply`. The series is applied, then each tested prefix is reached with
`push`/`pop` and captured by `run` (a draft link to the prefix's top patch, named
`bisect-SERIES-<UTC yyyymmddThhmmss>-K`, unique to the bisect); the whole series is tested first, then the
prefixes are halved as `git bisect` does, the base taken as good (it is tested when the first patch is blamed:
by its exit code, or by the metric of what it writes, collected as `run` collects it, no record written). At the
end the tree is put back as it was (HEAD and branch too, and the index byte for byte: what was staged stays
staged, intent-to-add stays so; what the command left there is carried along, as `push` and `pop` carry
changes), however the bisect ended."""

from __future__ import annotations

from stackmgr.commands import navigate
from stackmgr.commands.apply import apply_series, plan_series, preflight
from stackmgr.commands.run import RunRequest, probe, run
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence.metrics import Metric
from stackmgr.git import refs
from stackmgr.git.scratch import tree_with_entries
from stackmgr.journal.operation import operation
from stackmgr.safety import tree_move
from stackmgr.safety.snapshot import take_snapshot
from stackmgr.store.applied import applied_result, clear_applied, load_applied, record_applied
from stackmgr.store.config import Store


class Tested:
    def __init__(self, count: int, patch: str, failed: bool, link: str, detail: str) -> None:
        self.count = count  # patches applied
        self.patch = patch  # the top one
        self.failed = failed
        self.link = link
        self.detail = detail  # exit code, or the metric's value


class Bisected:
    def __init__(self, first_bad: str | None, tested: list[Tested], base_fails: bool, *, base_tested: bool = False,
                 blamed_first: bool = False) -> None:  # fmt: skip
        self.first_bad = first_bad  # None: the whole series passes
        self.tested = tested
        self.base_fails = base_fails
        self.base_tested = base_tested  # the base was run (when the first patch is blamed) and judged
        self.blamed_first = blamed_first


def bisect(store: Store, series: str, argv: list[str], *, tree: str | None = None, metric: str | None = None,
           threshold: float | None = None, override: str | None = None) -> Bisected:  # fmt: skip
    if not argv:
        raise UsageProblem("no command to test with", f"`stackmgr bisect {series} -- CMD ARGS…`")
    if (metric is None) != (threshold is None):
        raise UsageProblem("--metric and --threshold go together", "give both, or neither (CMD's exit code decides)")
    plans = plan_series(store, series, tree, ())
    if len(plans) != 1:
        raise UsageProblem(f"series {series} has patches of several trees ({', '.join(p.tree for p in plans)})",
                           "bisect one: -t TREE")  # fmt: skip
    plan = plans[0]
    names = [p.name for p in plan.patches]
    snap = preflight(store, plan.tree, plan.base)
    before = (snap.tree_id(), snap.head, refs.symbolic_head(snap.repo), load_applied(store).get(plan.tree),
              tree_move.real_index(snap.repo))  # fmt: skip
    snap.release()
    tested: list[Tested] = []
    prefix = _run_prefix(store, series)

    def test(k: int) -> bool:
        _go_to(store, plan.tree, names, k)
        outcome = run(store, RunRequest(argv, trees=(plan.tree,), link=names[k - 1], name=f"{prefix}-{k}"))
        if outcome.exit_code == 130 or outcome.exit_code == 125 or outcome.exit_code == 128 + 9:
            raise _Stopped(outcome.exit_code, names[k - 1])
        failed, detail = _judge(outcome.exit_code, outcome.links[0].metrics if outcome.links else [], metric,
                                threshold)  # fmt: skip
        tested.append(Tested(k, names[k - 1], failed, outcome.links[0].id if outcome.links else "", detail))
        return failed

    try:
        apply_series(store, series, only_tree=plan.tree, override=override)  # a do-not-revive lane stops it here
        if not test(len(names)):
            return Bisected(None, tested, False)
        good, bad = 0, len(names)
        while bad - good > 1:
            mid = (good + bad) // 2
            if test(mid):
                bad = mid
            else:
                good = mid
        base_fails = base_tested = False
        if bad == 1:  # blamed on the first patch: does the base itself pass?
            _go_to(store, plan.tree, names, 0)
            code, measured = probe(store, argv, plan.tree)
            try:
                base_fails, _detail = _judge(code, measured, metric, threshold)
                base_tested = True
            except StackmgrError:  # the base wrote no metric M: it says nothing either way
                pass
        return Bisected(names[bad - 1], tested, base_fails, base_tested=base_tested, blamed_first=bad == 1)
    except _Stopped as stop:
        why = {130: "interrupted", 125: "could not be tested (exit 125, git bisect's skip)"}.get(
            stop.code, "was killed (exit 137: out of memory, a timeout?)")  # fmt: skip
        stopped = StackmgrError(f"bisect stopped: the test of {stop.patch} {why}; no patch is blamed",
                                "the tree is back as it was; run the bisect again")  # fmt: skip
        stopped.exit_code = 130 if stop.code == 130 else 3
        raise stopped from None
    finally:
        _put_back(store, plan.tree, *before)


def _run_prefix(store: Store, series: str) -> str:
    """`bisect-SERIES-<UTC yyyymmddThhmmss>`: the names of this bisect's runs are `PREFIX-K`, never an earlier
    bisect's (one in the same second gets `-2`, `-3`…)."""
    import time

    from stackmgr.evidence.reading import load_briefs

    stamp = f"bisect-{series}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    taken = {k.run_name.rsplit("-", 1)[0] for k in load_briefs(store) if k.run_name}
    prefix, n = stamp, 1
    while prefix in taken:
        n += 1
        prefix = f"{stamp}-{n}"
    return prefix


class _Stopped(Exception):
    """A test that says nothing of the patch: interrupted, skipped (125), or killed."""

    def __init__(self, code: int, patch: str) -> None:
        self.code = code
        self.patch = patch


def _judge(code: int, metrics: list[Metric], metric: str | None, threshold: float | None) -> tuple[bool, str]:
    if metric is None or threshold is None:
        return code != 0, f"exit {code}"
    found = next((m for m in metrics if m.name == metric), None)
    if found is None:
        raise StackmgrError(f"the command wrote no metric {metric} (exit {code})",
                            "check --metric, and that its results land in a --result-dir or declared results")
    value, lower = found.value, found.direction == "lower"
    return (value > threshold if lower else value < threshold), f"{metric} {value:g}"


def _go_to(store: Store, tree: str, names: list[str], k: int) -> None:
    """The tree at the series' first `k` patches (push or pop, carrying what the command left)."""
    count = len(load_applied(store)[tree].names)
    if k > count:
        navigate.push(store, tree, names[k - 1], False)
    elif k < count:
        navigate.pop(store, tree, names[k - 1] if k else None, k == 0)


def _put_back(store: Store, tree: str, tree_id: str, head: str, branch: str | None, applied: object,
              index: bytes | None) -> None:  # fmt: skip
    """The tree as it was before the bisect, with what the tests left on top carried along, and its index as it
    was (the bytes, in the same journaled step as the move)."""
    config = store.tree(tree)
    with operation(store, f"bisect: back to {tree}'s state before"):
        snap = take_snapshot(tree, config.path, store.max_untracked_bytes, find_special=False, freeze=True,
                             results=config.results, held=applied_result(store, tree))  # fmt: skip
        try:
            now = load_applied(store).get(tree)
            left = snap.index.changes_against(now.result_tree) if now is not None else []
            target = tree_with_entries(snap.repo, tree_id, {c.path: None if c.new_mode == "000000" else
                                                            (c.new_mode, c.new_blob) for c in left})  # fmt: skip
            if target != snap.tree_id() or snap.head != head or tree_move.real_index(snap.repo) != index:
                tree_move.move_tree(snap, target, index_tree=head, head=head, reason="stackmgr bisect: back",
                                    op=store.journal, index_bytes=index)  # fmt: skip
            if branch is not None:
                refs.attach_head(snap.repo, branch, "stackmgr bisect: back")
        finally:
            snap.release()
        from stackmgr.store.applied import Applied

        if isinstance(applied, Applied):
            record_applied(store, tree, applied)
        else:
            clear_applied(store, tree)
