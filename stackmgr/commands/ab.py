"""`stackmgr ab PATCH [-n N] [--leave-out] -- CMD…`: CMD run on the tree without PATCH (A: the current series' prefix
just below it; with `--leave-out`, the applied stack with PATCH left out) and with it (B: the prefix up to it; with
`--leave-out`, the applied stack), alternating A B A B… N times each so that drift cancels, each run recorded as
`run` records it (named `ab-PATCH-<UTC yyyymmddThhmmss>-A1`, `-B1`…, in run groups `…-A` and `…-B`), then every
metric of B against A judged by evidence/stats.judge. A leave-out A is built as push and pop build a prefix
(navigate.move_to) and linked to PATCH, measured without it; a patch above PATCH that needs it stops `ab` before
anything ran. Where the series has a valid baseline (evidence/reference.baseline_runs, none of these runs), each
side's headline is judged against it too: the drift since the baseline was measured shows.

The tree must be preserved first, as for `apply` and `bisect`; PATCH must be a patch of the tree's current series.
The tree moves with `push`/`pop` (commands/navigate.py), and is put back as it was (tree id, HEAD, branch, index,
applied state) however the runs end, as `bisect` puts it back: its state before is kept on disk while it runs
(commands/bisect_state.py), so a killed `ab` is reported by `check` and put back by `recover`. A run that fails
(exit not 0), is interrupted, or a signal reaching stackmgr stops it: the records so far stay (exit 3; 128+N for
signal N)."""

from __future__ import annotations

import sys

from stackmgr.commands import bisect_state, navigate
from stackmgr.commands.apply import preflight
from stackmgr.commands.bisect import Signals, Stopped, run_prefix
from stackmgr.commands.repeat import grouped, stopped_why, values_by_metric
from stackmgr.commands.run import RunOutcome, RunRequest, run
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence import capture
from stackmgr.evidence.metrics import verdict_words
from stackmgr.evidence.stats import Judgement, judge
from stackmgr.git import refs
from stackmgr.safety import tree_move
from stackmgr.store.applied import load_applied
from stackmgr.store.config import Store
from stackmgr.store.position import Position

DEFAULT_RUNS = 5


class Side:
    def __init__(self, label: str, patches: list[str], link: str | None) -> None:
        self.label = label  # "A" or "B"
        self.patches = patches  # the series' patches applied, bottom first
        self.link = link  # the patch its runs are linked to (None: the series' base, a baseline)
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


class Judged:
    def __init__(self, name: str, direction: str, judgement: Judgement) -> None:
        self.name = name
        self.direction = direction
        self.judgement = judgement


class AB:
    def __init__(self, patch: str, tree: str, series: str, a: Side, b: Side, prefix: str,
                 judged: list[Judged]) -> None:  # fmt: skip
        self.patch, self.tree, self.series, self.a, self.b = patch, tree, series, a, b
        self.prefix = prefix  # the runs' names: PREFIX-A1, PREFIX-B1, …
        self.judged = judged  # the headline metric first
        self.left_out = False  # A is the stack with PATCH left out (else its prefix)
        self.baseline: list[str] = []  # the series' baseline runs each side is judged against too
        self.against_baseline: list[tuple[Side, Judged]] = []  # the headline of A and of B against them


def sides(where: Position, patch: str, leave_out: bool) -> tuple[Side, Side]:
    """A (without PATCH) and B (with it): the prefixes below and up to PATCH, or with `leave_out` the applied
    stack without and with it."""
    if not leave_out:
        k = where.names.index(patch) + 1
        return Side("A", where.names[: k - 1], where.names[k - 2] if k > 1 else None), Side("B", where.names[:k], patch)
    if patch not in where.stack:
        raise UsageProblem(f"--leave-out: patch {patch} is not applied on tree {where.tree} ({where.summary()})",
                           f"`stackmgr push {patch}` first: --leave-out measures the applied stack without it")
    return Side("A", [n for n in where.stack if n != patch], patch), Side("B", list(where.stack), patch)


def _tree_of(store: Store, patch: str) -> Position:
    """The position of the tree whose current series lists `patch` (refused when none, or several, do)."""
    found = []
    for tree in sorted(load_applied(store)):
        if tree not in store.trees:
            continue
        try:
            where = navigate.position(store, tree, in_order=False)
        except StackmgrError:  # a tree holding a result's state (`apply --link`), or an unreadable series
            continue
        if patch in where.names:
            found.append(where)
    if not found:
        raise UsageProblem(f"patch {patch} is not in the current series of any tree",
                           "`stackmgr status` shows each tree's series; `stackmgr apply SERIES` makes one current")
    if len(found) > 1:
        raise UsageProblem(f"patch {patch} is in the current series of trees {', '.join(w.tree for w in found)}",
                           "apply its series to one tree")  # fmt: skip
    where = found[0]
    where.refuse_out_of_order("ab")
    return where


def ab(store: Store, patch: str, argv: list[str], *, runs: int = DEFAULT_RUNS, min_effect: float = 0.01,
       cwd: str | None = None, result_dirs: tuple[str, ...] = (), from_json: tuple[str, ...] = (),
       leave_out: bool = False) -> AB:  # fmt: skip
    if not argv:
        raise UsageProblem("no command to run", f"`stackmgr ab {patch} -- CMD ARGS…`")
    if runs < 1:
        raise UsageProblem(f"-n {runs}: no runs", "give the number of runs a side, e.g. -n 5")
    patch = patch[: -len(".patch")] if patch.endswith(".patch") else patch
    where = _tree_of(store, patch)
    tree = where.tree
    a, b = sides(where, patch, leave_out)
    for note in bisect_state.settle_killed_bisects(store, tree):
        sys.stderr.write(f"stackmgr: note: {note}\n")
    run_in, moved = capture.where_command_runs(store, [tree], cwd)
    snap = preflight(store, tree, where.applied.base)  # unsaved work refused here: nothing ran
    before = bisect_state.Before(where.series, tree, snap.tree_id(), snap.head, refs.symbolic_head(snap.repo),
                                 load_applied(store).get(tree), tree_move.real_index(snap.repo))  # fmt: skip
    snap.release()
    if moved:
        sys.stderr.write(f"stackmgr: note: {moved}\n")
    prefix = run_prefix(store, f"ab-{patch}")
    signals = Signals()
    lock = bisect_state.hold(store, before)
    try:
        for i in range(1, runs + 1):
            for side in (a, b):
                label = f"{side.label}{i}"
                _go_to(store, tree, side, patch, leave_out)
                signals.stop_if_received(label)
                outcome = run(store, RunRequest(argv, trees=(tree,), link=side.link, name=f"{prefix}-{label}",
                                                cwd=run_in, say_where=False, result_dirs=result_dirs,
                                                from_json=from_json,
                                                grouped=grouped(f"{prefix}-{side.label}", i)))  # fmt: skip
                side.outcomes.append(outcome)
                signals.stop_if_received(label, outcome.received)
                why = stopped_why(outcome)
                if why is not None:
                    raise Stopped(why, label)
    except Stopped as stop:
        done = len(a.outcomes) + len(b.outcomes)
        why = stop.why.removeprefix("it ")  # stopped_why's "it failed (exit 1)": the run named just before
        stopped = StackmgrError(f"ab stopped: run {stop.patch} ({prefix}-{stop.patch}) {why}; the {done} "
                                "record(s) so far stay", "the tree is back as it was; run it again")  # fmt: skip
        stopped.exit_code = 128 + stop.signum if stop.signum else 3
        raise stopped from None
    finally:
        bisect_state.give_back(store, tree, before, lock, signals.restore)
    result = AB(patch, tree, where.series, a, b, prefix, judged(store, a.outcomes, b.outcomes, min_effect))
    result.left_out = leave_out
    _against_baseline(store, result, min_effect)
    return result


def _against_baseline(store: Store, done: AB, min_effect: float) -> None:
    """The headline of each side judged against the series' baseline runs (none of this `ab`'s own) of the same
    run configuration and environment as its runs; none said when there are none."""
    from stackmgr.evidence.compare import run_config
    from stackmgr.evidence.environment import environment_key, what_differs
    from stackmgr.evidence.reference import baseline_runs
    from stackmgr.evidence.states import Evidence

    mine = next((o.links[0] for o in done.b.outcomes if o.links), None)
    if mine is None or not done.judged:
        return
    ours, env, config = set(done.a.links + done.b.links), environment_key(mine), run_config(store, mine)
    runs = [k for k in baseline_runs(store, done.series, Evidence.gather(store)) if k.id not in ours  # as compare
            and run_config(store, k) == config and not what_differs(environment_key(k), env)]  # groups them
    if not runs:
        return
    name = done.judged[0].name
    values = [m.value for k in runs for m in k.metrics if m.name == name]
    if not values:
        return
    done.baseline = [k.id for k in runs]
    for side in (done.a, done.b):
        found = values_by_metric(side.outcomes).get(name)
        if found:
            done.against_baseline.append((side, Judged(name, found[0], judge(values, found[1], direction=found[0],
                                                                                min_effect=min_effect,
                                                                                words=verdict_words(name, "")))))


def judged(store: Store, a: list[RunOutcome], b: list[RunOutcome], min_effect: float) -> list[Judged]:
    """Each metric both sides have, B judged against A (the headline first, then as first met)."""
    in_a, in_b = values_by_metric(a), values_by_metric(b)
    names = [n for n in in_a if n in in_b]
    headline = store.headline()
    names.sort(key=lambda n: n != headline)
    return [Judged(n, in_a[n][0], judge(in_a[n][1], in_b[n][1], direction=in_a[n][0], min_effect=min_effect,
                                        words=verdict_words(n, ""))) for n in names]  # fmt: skip


def _go_to(store: Store, tree: str, side: Side, patch: str, leave_out: bool) -> None:
    """The tree at the side's patches (built from the base as push and pop build it, carrying what the command
    left); with `leave_out`, a patch that does not apply without PATCH stops `ab`, saying so."""
    if load_applied(store)[tree].names == side.patches:
        return
    try:
        navigate.move_to(store, tree, side.patches, f"ab {patch} {side.label}")
    except StackmgrError as exc:
        if not leave_out or side.label == "B":
            raise
        raise StackmgrError(f"ab --leave-out: the stack without {patch} cannot be built: {exc.message}",
                            f"a patch above {patch} needs it; measure its prefix instead (`stackmgr ab {patch}`)"
                            ) from None
