"""`stackmgr bisect SERIES [-t TREE] [--metric M --threshold X] [--result-dir DIR] [--from-json FILE] -- CMD…`:
the first patch of a series whose prefix makes CMD fail (exit code not 0), or makes metric M worse than X by its
direction (what CMD writes under the result directories, as `run` collects it).

The tree must be preserved first, as for `apply`. The series is applied, then each tested prefix is reached with
`push`/`pop` and captured by `run` (a draft link to the prefix's top patch, named
`bisect-SERIES-<UTC yyyymmddThhmmss>-K`, unique to the bisect); the whole series is tested first, then the
prefixes are halved as `git bisect` does, the base taken as good (it is tested when the first patch is blamed:
by its exit code, or by the metric of what it writes; that run is recorded as a baseline of the series, `-base`,
its gates computed as every run's are). At the
end the tree is put back as it was (HEAD and branch too, and the index byte for byte: what was staged stays
staged, intent-to-add stays so; what the command left there is carried along, as `push` and `pop` carry
changes), however the bisect ended: a test that judges nothing (`test_says_nothing`: exit 125, or ended by a
signal) stops it with no patch blamed (exit 3), and SIGINT, SIGTERM or SIGHUP reaching stackmgr stops it too
(exit 128+N) once the step under way is done. The state before is kept on disk while it runs (bisect_state.py):
after a kill, `check` fails, and `recover` or the next bisect of the tree puts it back. CMD runs where `run`
runs it (`capture.where_command_runs`): in the tree, or `--cwd`."""

from __future__ import annotations

import sys

from stackmgr.commands import bisect_state, navigate
from stackmgr.commands.alternate import Signals, Stopped, one_tree_plan, run_prefix
from stackmgr.commands.apply import apply_series, preflight
from stackmgr.commands.bisect_judge import Bisected, NoMetric, Tested, judge_repeats, unknown_direction
from stackmgr.commands.repeat import grouped
from stackmgr.commands.run import RunOutcome, RunRequest, run
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence import capture
from stackmgr.evidence.metrics import Metric
from stackmgr.git import refs
from stackmgr.safety import tree_move
from stackmgr.store.applied import load_applied
from stackmgr.store.config import Store


def bisect(store: Store, series: str, argv: list[str], *, tree: str | None = None, metric: str | None = None,
           threshold: float | None = None, override: str | None = None, cwd: str | None = None,
           result_dirs: tuple[str, ...] = (), from_json: tuple[str, ...] = (), repeat: int = 1,
           min_effect: float = 0.01, regression: bool = False) -> Bisected:  # fmt: skip
    if not argv:
        raise UsageProblem("no command to test with", f"`stackmgr bisect {series} -- CMD ARGS…`")
    if regression:
        if metric is None or threshold is not None or repeat < 4:
            raise UsageProblem("--regression judges each prefix against the one below by a metric, with repeats",
                               "give --metric M and --repeat N (4 at least: the fewest the rank test can decide on), "
                               "no --threshold")  # fmt: skip
        from stackmgr.commands.bisect_judge import regression as by_steps

        return by_steps(store, series, argv, metric=metric, repeat=repeat, min_effect=min_effect, tree=tree,
                        cwd=cwd, result_dirs=result_dirs, from_json=from_json, override=override)  # fmt: skip
    if threshold is not None and metric is None:
        raise UsageProblem("--threshold needs --metric M", "give both, or neither (CMD's exit code decides)")
    if metric is not None and threshold is None and repeat < 4:
        raise UsageProblem("--metric alone judges each prefix against the base, which needs repeats",
                           "add --repeat N (4 at least: the fewest the rank test can decide on), or give --threshold X")
    against_base = metric is not None and threshold is None  # significantly worse than the base (bisect_judge)
    plan = one_tree_plan(store, series, tree, "bisect")
    names = [p.name for p in plan.patches]
    for note in bisect_state.settle_killed_bisects(store, plan.tree):  # a killed bisect's tree first goes back
        sys.stderr.write(f"stackmgr: note: {note}\n")
    where, moved = capture.where_command_runs(store, [plan.tree], cwd)
    snap = preflight(store, plan.tree, plan.base)
    before = bisect_state.Before(series, plan.tree, snap.tree_id(), snap.head, refs.symbolic_head(snap.repo),
                                 load_applied(store).get(plan.tree), tree_move.real_index(snap.repo))  # fmt: skip
    snap.release()
    if moved:
        sys.stderr.write(f"stackmgr: note: {moved}\n")
    tested: list[Tested] = []
    prefix = run_prefix(store, f"bisect-{series}")
    signals = Signals()

    base_runs: list[RunOutcome] = []

    def measure(k: int) -> list[RunOutcome]:
        """The prefix of k patches run `repeat` times; k = 0, the base, is recorded as a baseline of the series."""
        said, label = (names[k - 1], str(k)) if k else ("the base", "base")
        _go_to(store, plan.tree, names, k)
        outcomes = []
        for i in range(1, repeat + 1):
            signals.stop_if_received(said)
            outcome = run(store, RunRequest(argv, trees=(plan.tree,), link=names[k - 1] if k else None,
                                            name=f"{prefix}-{label}" + (f".{i}" if repeat > 1 else ""), cwd=where,
                                            say_where=False, result_dirs=result_dirs, from_json=from_json,
                                            grouped=grouped(f"{prefix}-{label}", i) if repeat > 1 else None))
            signals.stop_if_received(said, outcome.received)
            why = test_says_nothing(outcome.exit_code)
            if why is not None:
                raise Stopped(why, said)
            outcomes.append(outcome)
        return outcomes

    def test(k: int) -> Tested:
        """The prefix of k patches measured and judged."""
        outcomes = measure(k)
        if repeat == 1:
            outcome = outcomes[0]
            failed, detail = _judge(outcome.exit_code, outcome.links[0].metrics if outcome.links else [], metric,
                                    threshold)  # fmt: skip
            link = outcome.links[0].id if outcome.links else ""
        else:
            failed, detail = judge_repeats(outcomes, metric, threshold, base_runs, min_effect)
            link = f"{prefix}-{k if k else 'base'}"  # the run group: `stackmgr compare` takes it
        return Tested(k, names[k - 1] if k else "", failed, link, detail)

    def test_prefix(k: int) -> bool:
        tested.append(test(k))
        return tested[-1].failed

    lock = bisect_state.hold(store, before)
    try:
        # A do-not-revive lane stops it here; what the tree holds on top is in `before`, put back at the end.
        apply_series(store, series, only_tree=plan.tree, override=override, keep_on_top=False)
        if against_base:  # the reference every prefix is judged against, measured first
            base_runs[:] = measure(0)
        if not test_prefix(len(names)):
            return Bisected(None, tested, False)
        good, bad = 0, len(names)
        while bad - good > 1:
            mid = (good + bad) // 2
            if test_prefix(mid):
                bad = mid
            else:
                good = mid
        base: Tested | None = None
        if against_base:  # the base is the reference: it passes by definition
            base = Tested(0, "", False, f"{prefix}-base", f"the reference ({repeat} runs)")
        elif bad == 1:  # blamed on the first patch: does the base itself pass?
            try:
                base = test(0)
            except NoMetric:  # the base wrote no metric M: it says nothing either way
                pass
        found = Bisected(names[bad - 1], tested, bool(base and base.failed), base_tested=base is not None,
                         blamed_first=bad == 1)  # fmt: skip
        found.base = base
        return found
    except Stopped as stop:
        stopped = StackmgrError(f"bisect stopped: the test of {stop.patch} {stop.why}; no patch is blamed",
                                "the tree is back as it was; run the bisect again")  # fmt: skip
        stopped.exit_code = 128 + stop.signum if stop.signum else 3
        raise stopped from None
    finally:
        bisect_state.give_back(store, plan.tree, before, lock, signals.restore)


def test_says_nothing(exit_code: int) -> str | None:
    """Why a test's exit code says nothing of the patch it tested, or None when it judges it: exit 125 (`git
    bisect`'s "cannot test this"), or a test ended by a signal (128+N: SIGINT, SIGTERM, SIGHUP from a `timeout` or
    a job limit, SIGKILL from the OOM killer). Such a test stops the bisect, no patch blamed, the tree put back;
    it is not skipped: the next test would meet the same limit."""
    import signal

    if exit_code == 125:
        return "could not be tested (exit 125, git bisect's skip)"
    named = {signal.SIGINT: "was interrupted (SIGINT)", signal.SIGTERM: "was interrupted (SIGTERM: a timeout, a job "
             "limit?)", signal.SIGHUP: "was interrupted (SIGHUP)", signal.SIGKILL: "was killed (SIGKILL: out of "
             "memory, a timeout?)"}  # fmt: skip
    return next((why for s, why in named.items() if exit_code == 128 + s), None)


def _judge(code: int, metrics: list[Metric], metric: str | None, threshold: float | None) -> tuple[bool, str]:
    if metric is None or threshold is None:
        return code != 0, f"exit {code}"
    found = next((m for m in metrics if m.name == metric), None)
    if found is None:
        raise NoMetric(f"the command wrote no metric {metric} (exit {code})",
                            "check --metric, and that its results land in a --result-dir or declared results")
    if found.direction not in ("higher", "lower"):
        raise unknown_direction(metric, f"--threshold {threshold:g}")
    value, lower = found.value, found.direction == "lower"  # one run judged, not a median: the line says so
    failed = value > threshold if lower else value < threshold
    op = (">" if failed else "<=") if lower else ("<" if failed else ">=")
    return failed, f"{metric} {value:g} (1 run) {op} {threshold:g}"


def _go_to(store: Store, tree: str, names: list[str], k: int) -> None:
    """The tree at the series' first `k` patches (push or pop, carrying what the command left)."""
    count = len(load_applied(store)[tree].names)
    if k > count:
        navigate.push(store, tree, names[k - 1], False)
    elif k < count:
        navigate.pop(store, tree, names[k - 1] if k else None, k == 0)
