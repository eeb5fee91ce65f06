"""Measured states taken in turn: the loop `ab` and `ablate` share. Each state (`State`) is a set of the tree's
series patches; round after round each state is reached (built from the base as push and pop build it,
navigate.move_to, carrying what is on top) and CMD run there as `run` runs it, named `PREFIX-LABEL<SEP>ROUND` in
run group `PREFIX-LABEL`, so that drift over time falls on every state alike.

The tree must be preserved first, as for `apply` and `bisect`; its state before is kept on disk while the runs go
on (commands/bisect_state.py: a killed walk is reported by `check` and put back by `recover`), and put back
exactly (tree id, HEAD, branch, index, applied state) however they end. With more than two states each is built
once before the first run, so that one that cannot be built stops the walk before anything ran (`ab`'s first
state is its only doubtful one). A run that fails (exit not 0) or is
interrupted, or a signal reaching stackmgr, stops the walk: the records so far stay (exit 3; 128+N for signal N).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from stackmgr.commands import bisect_state, navigate
from stackmgr.commands.apply import preflight
from stackmgr.commands.repeat import grouped, stopped_why
from stackmgr.commands.run import RunOutcome, RunRequest, run
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence import capture
from stackmgr.git import refs
from stackmgr.safety import tree_move
from stackmgr.store.applied import load_applied
from stackmgr.store.config import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.store.plan import TreePlan


class Signals:
    """SIGINT, SIGTERM and SIGHUP reaching stackmgr during a bisect only set a flag (each step then stops the
    bisect, which puts the tree back, and exits 128+N); restored when the bisect ends."""

    def __init__(self) -> None:
        import signal

        self.seen: list[int] = []
        wanted = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        self.previous = {s: signal.signal(s, lambda signum, _frame: self.seen.append(signum)) for s in wanted}

    def stop_if_received(self, patch: str, received: str = "") -> None:
        import signal

        signum = self.seen[0] if self.seen else (signal.Signals[received].value if received else 0)
        if signum:
            raise Stopped(f"was interrupted: stackmgr got {signal.Signals(signum).name}", patch, signum)

    def restore(self) -> None:
        import signal

        for s, handler in self.previous.items():
            signal.signal(s, handler)


def run_prefix(store: Store, what: str) -> str:
    """`WHAT-<UTC yyyymmddThhmmss>` (`bisect-SERIES`, `ab-PATCH`): the names of this walk's runs are `PREFIX-K`,
    never an earlier walk's (one in the same second gets `-2`, `-3`…)."""
    import time

    from stackmgr.evidence.reading import load_briefs

    stamp = f"{what}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    names = [k.run_name for k in load_briefs(store) if k.run_name]  # a label may hold dashes: without-my-patch.1
    prefix, n = stamp, 1
    while any(name.startswith(prefix + "-") for name in names):
        n += 1
        prefix = f"{stamp}-{n}"
    return prefix


class Stopped(Exception):
    """A test that says nothing of the patch (`test_says_nothing`), or a signal that reached stackmgr (`signum`)."""

    def __init__(self, why: str, patch: str, signum: int = 0) -> None:
        self.why = why
        self.patch = patch
        self.signum = signum


def one_tree_plan(store: Store, series: str, tree: str | None, verb: str) -> TreePlan:
    """The series' plan for the one tree a walk (`bisect`, `ablate`) measures: refused when it has patches of
    several trees and none is named."""
    from stackmgr.store.plan import plan_series

    plans = plan_series(store, series, tree, ())
    if len(plans) != 1:
        raise UsageProblem(f"series {series} has patches of several trees ({', '.join(p.tree for p in plans)})",
                           f"{verb} one: -t TREE")  # fmt: skip
    return plans[0]


class State:
    """One measured state: the series' patches applied (bottom first), the patch its runs are linked to (None:
    the series' base, a baseline), and its runs' outcomes in round order."""

    def __init__(self, label: str, patches: list[str], link: str | None, sep: str = "") -> None:
        self.label = label  # "A", "B"; ablate's "0", "1", … or "-p2"
        self.patches = patches
        self.link = link
        self.sep = sep  # between the label and the round in a run's name: A1, 0.1
        self.outcomes: list[RunOutcome] = []

    @property
    def count(self) -> int:
        return len(self.patches)

    @property
    def top(self) -> str | None:
        return self.patches[-1] if self.patches else None

    @property
    def links(self) -> list[str]:
        return [k.id for o in self.outcomes for k in o.links]


class Walk:
    """What the runs are: CMD, where it runs and where it writes, how many rounds."""

    def __init__(self, argv: list[str], rounds: int, cwd: str | None = None, result_dirs: tuple[str, ...] = (),
                 from_json: tuple[str, ...] = ()) -> None:  # fmt: skip
        if rounds < 1:
            raise UsageProblem(f"-n {rounds}: no runs", "give the number of runs a state, e.g. -n 5")
        self.argv, self.rounds, self.cwd = argv, rounds, cwd
        self.result_dirs, self.from_json = result_dirs, from_json


def alternate(store: Store, tree: str, series: str, base: str, states: list[State], walk: Walk, what: str,
              cannot_build: Callable[[State, StackmgrError], StackmgrError | None] = lambda _s, _e: None,
              start: Callable[[], None] = lambda: None) -> str:  # fmt: skip
    """Run `walk` on every state in turn, `walk.rounds` times; `what` names the walk (`ab-p2`, `ablate-S`) in its
    runs' names and its refusals. `cannot_build` may explain a state whose patches do not apply; `start` runs
    once the tree is held (bisect's apply of the series). Returns the runs' name prefix."""
    for note in bisect_state.settle_killed_bisects(store, tree):
        sys.stderr.write(f"stackmgr: note: {note}\n")
    run_in, moved = capture.where_command_runs(store, [tree], walk.cwd)
    snap = preflight(store, tree, base)  # unsaved work refused here: nothing ran
    before = bisect_state.Before(series, tree, snap.tree_id(), snap.head, refs.symbolic_head(snap.repo),
                                 load_applied(store).get(tree), tree_move.real_index(snap.repo))  # fmt: skip
    snap.release()
    if moved:
        sys.stderr.write(f"stackmgr: note: {moved}\n")
    prefix = run_prefix(store, what)
    signals = Signals()
    lock = bisect_state.hold(store, before)
    try:
        start()
        for state in states[::-1] if len(states) > 2 else ():  # each built once first: one that cannot be built
            _go_to(store, tree, state, what, cannot_build)      # stops the walk before anything ran
        for i in range(1, walk.rounds + 1):
            for state in states:
                label = f"{state.label}{state.sep}{i}"
                _go_to(store, tree, state, what, cannot_build)
                signals.stop_if_received(label)
                outcome = run(store, RunRequest(walk.argv, trees=(tree,), link=state.link, name=f"{prefix}-{label}",
                                                cwd=run_in, say_where=False, result_dirs=walk.result_dirs,
                                                from_json=walk.from_json,
                                                grouped=grouped(f"{prefix}-{state.label}", i)))  # fmt: skip
                state.outcomes.append(outcome)
                signals.stop_if_received(label, outcome.received)
                why = stopped_why(outcome)
                if why is not None:
                    raise Stopped(why, label)
    except Stopped as stop:
        done = sum(len(s.outcomes) for s in states)
        why = stop.why.removeprefix("it ")  # stopped_why's "it failed (exit 1)": the run named just before
        verb = what.split("-", 1)[0]
        stopped = StackmgrError(f"{verb} stopped: run {stop.patch} ({prefix}-{stop.patch}) {why}; the {done} "
                                "record(s) so far stay", "the tree is back as it was; run it again")  # fmt: skip
        stopped.exit_code = 128 + stop.signum if stop.signum else 3
        raise stopped from None
    finally:
        bisect_state.give_back(store, tree, before, lock, signals.restore)
    return prefix


def _go_to(store: Store, tree: str, state: State, what: str,
           cannot_build: Callable[[State, StackmgrError], StackmgrError | None]) -> None:  # fmt: skip
    """The tree at the state's patches; a state that cannot be built is explained by `cannot_build` when it
    can."""
    if load_applied(store)[tree].names == state.patches:
        return
    try:
        navigate.move_to(store, tree, state.patches, f"{what.split('-', 1)[0]} {state.label}")
    except StackmgrError as exc:
        explained = cannot_build(state, exc)
        if explained is None:
            raise
        raise explained from None
