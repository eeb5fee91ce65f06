"""`stackmgr ablate SERIES [-n N] [--leave-one-out] [--metric M] -- CMD…`: which patch of a stack did it. CMD is
measured N times on every prefix of the series (its base, then one patch more at a time), the prefixes taken in
turn round after round (commands/alternate.py) so drift falls on all alike; each patch's contribution is its
prefix against the one below (evidence/stats.judge: effect, 95% interval, p, verdict). With `--leave-one-out`,
the states are the whole stack and the stack without each patch; a patch's contribution is the whole stack
against the stack without it (what it does with every other patch there). Neither assumes the stack is monotone:
every step is measured, none inferred.

The series is applied to its tree first, as `bisect` applies it (a do-not-revive lane refused), and the tree is
put back as it was at the end. A state that cannot be built (a patch that needs the one left out) stops ablate
before any run. The base's runs are baselines of the series (`[run] baseline_of`); a prefix's runs are linked to
its top patch; a leave-one-out state's to the patch left out, measured without it.
"""

from __future__ import annotations

from stackmgr.commands.alternate import State, Walk, alternate, one_tree_plan
from stackmgr.commands.repeat import values_by_metric
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence.metrics import verdict_words
from stackmgr.evidence.stats import Judgement, judge
from stackmgr.store.config import Store


class Step:
    """A patch's contribution: `judged` its state against the state below it (or without it); None with `why` when
    a side has no valid run with the metric (`INVALID (gate quality: fail)`: as compare, never judged)."""

    def __init__(self, patch: str, below: State, state: State, judged: Judgement | None, why: str = "") -> None:
        self.patch, self.below, self.state, self.judged, self.why = patch, below, state, judged, why


class Ablation:
    def __init__(self, series: str, tree: str, leave_one_out: bool, states: list[State], prefix: str,
                 metric: str | None, direction: str, steps: list[Step]) -> None:  # fmt: skip
        self.series, self.tree, self.leave_one_out, self.states = series, tree, leave_one_out, states
        self.prefix, self.metric, self.direction, self.steps = prefix, metric, direction, steps

    def median(self, state: State) -> float | None:
        """The state's median of the metric over its valid runs, or None."""
        from statistics import median

        found = values_by_metric(state.outcomes).get(self.metric or "")
        return median(found[1]) if found and found[1] else None


def ablate(store: Store, series: str, argv: list[str], *, runs: int = 5, leave_one_out: bool = False,
           metric: str | None = None, min_effect: float = 0.01, tree: str | None = None, cwd: str | None = None,
           result_dirs: tuple[str, ...] = (), from_json: tuple[str, ...] = (), override: str | None = None,
           ) -> Ablation:  # fmt: skip
    from stackmgr.commands.apply import apply_series
    if not argv:
        raise UsageProblem("no command to run", f"`stackmgr ablate {series} -- CMD ARGS…`")
    walk = Walk(argv, runs, cwd, result_dirs, from_json)
    plan = one_tree_plan(store, series, tree, "ablate")
    names = [p.name for p in plan.patches]
    if not names:
        raise UsageProblem(f"series {series} has no patches of tree {plan.tree}", "nothing to ablate")
    states = _states(names, leave_one_out)

    def cannot_build(state: State, exc: StackmgrError) -> StackmgrError:
        return StackmgrError(f"ablate --leave-one-out: the stack {state.label.replace('-', ' ', 1)} cannot be built: "
                             f"{exc.message}", "a patch above it needs it; ablate the prefixes instead (without "
                             "--leave-one-out)") if leave_one_out else exc  # fmt: skip

    def start() -> None:  # the series applied as bisect applies it; what was on top is put back at the end
        apply_series(store, series, only_tree=plan.tree, override=override, keep_on_top=False)

    prefix = alternate(store, plan.tree, series, plan.base, states, walk, f"ablate-{series}", cannot_build,
                       start)  # fmt: skip
    name, direction = _metric(store, states, metric)
    steps = _steps(names, states, leave_one_out, name, min_effect)
    return Ablation(series, plan.tree, leave_one_out, states, prefix, name, direction, steps)


def _states(names: list[str], leave_one_out: bool) -> list[State]:
    """Every prefix (`0` the base … `n` the whole series), or the whole stack (`all`) and the stack without each
    patch (`without-NAME`), in the order they are taken each round."""
    if not leave_one_out:
        return [State(str(k), names[:k], names[k - 1] if k else None, sep=".") for k in range(len(names) + 1)]
    return [State("all", list(names), names[-1], sep="."),
            *(State(f"without-{n}", [m for m in names if m != n], n, sep=".") for n in names)]  # fmt: skip


def _metric(store: Store, states: list[State], asked: str | None) -> tuple[str | None, str]:
    """The metric judged: --metric, else the configured headline, else the first a valid run wrote (a state whose
    runs are all invalid, a gate failed, is left unjudged, never the whole ablation)."""
    found: dict[str, str] = {}
    for state in states:
        for metric, (direction, _values) in values_by_metric(state.outcomes).items():
            found.setdefault(metric, direction)
    if asked is not None:
        if asked not in found:
            raise StackmgrError(f"--metric {asked}: no valid run wrote it; the runs stay recorded",
                                f"the metrics they wrote: {', '.join(found) or 'none'}")  # fmt: skip
        return asked, found[asked]
    headline = store.headline()
    chosen = headline if headline is not None and headline in found else next(iter(found), None)
    return chosen, found[chosen] if chosen else ""


def _steps(names: list[str], states: list[State], leave_one_out: bool, metric: str | None,
           min_effect: float) -> list[Step]:  # fmt: skip
    """Each patch's contribution: its prefix against the one below, or the whole stack against it left out."""
    pairs = ([(n, states[k], states[k + 1]) for k, n in enumerate(names)] if not leave_one_out else
             [(n, states[k + 1], states[0]) for k, n in enumerate(names)])  # fmt: skip
    from stackmgr.commands.repeat import left_out_line

    steps = []
    for patch, below, state in pairs:
        a, b = (values_by_metric(s.outcomes).get(metric or "") for s in (below, state))
        if a and b:
            words = verdict_words(metric or "", "")
            steps.append(Step(patch, below, state, judge(a[1], b[1], direction=a[0], min_effect=min_effect,
                                                         words=words)))  # fmt: skip
            continue
        lacking = below if not a else state
        why = left_out_line(lacking.outcomes) or f"no run wrote {metric}"
        steps.append(Step(patch, below, state, None, f"state {lacking.label}: {why}"))
    return steps
