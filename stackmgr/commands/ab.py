"""`stackmgr ab PATCH [-n N] [--leave-out] -- CMD…`: CMD run on the tree without PATCH (A: the current series' prefix
just below it; with `--leave-out`, the applied stack with PATCH left out) and with it (B: the prefix up to it; with
`--leave-out`, the applied stack), alternating A B A B… N times each so that drift cancels, each run recorded as
`run` records it (named `ab-PATCH-<UTC yyyymmddThhmmss>-A1`, `-B1`…, in run groups `…-A` and `…-B`), then every
metric of B against A judged by evidence/stats.judge. A leave-out A is built as push and pop build a prefix
(navigate.move_to) and linked to PATCH, measured without it; a patch above PATCH that needs it stops `ab` before
anything ran. Where the series has a valid baseline (evidence/reference.baseline_runs, none of these runs), each
side's headline is judged against it too: the drift since the baseline was measured shows.

PATCH must be a patch of a tree's current series. The runs are taken as commands/alternate.py takes them (the tree
preserved first and put back exactly however they end; a run that fails or is interrupted stops it, exit 3)."""

from __future__ import annotations

from stackmgr.commands import navigate
from stackmgr.commands.alternate import State, Walk, alternate
from stackmgr.commands.repeat import values_by_metric
from stackmgr.commands.run import RunOutcome
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence.metrics import verdict_words
from stackmgr.evidence.stats import Judgement, judge
from stackmgr.store.applied import load_applied
from stackmgr.store.config import Store
from stackmgr.store.position import Position

Side = State  # A or B: what `ab` calls its two states

DEFAULT_RUNS = 5


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
    patch = patch[: -len(".patch")] if patch.endswith(".patch") else patch
    where = _tree_of(store, patch)
    tree = where.tree
    a, b = sides(where, patch, leave_out)

    def cannot_build(side: State, exc: StackmgrError) -> StackmgrError | None:
        if not leave_out or side.label == "B":
            return None
        return StackmgrError(f"ab --leave-out: the stack without {patch} cannot be built: {exc.message}",
                             f"a patch above {patch} needs it; measure its prefix instead (`stackmgr ab {patch}`)")

    walk = Walk(argv, runs, cwd, result_dirs, from_json)
    prefix = alternate(store, tree, where.series, where.applied.base, [a, b], walk, f"ab-{patch}", cannot_build)
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
