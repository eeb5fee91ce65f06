"""`stackmgr run --repeat N -- CMD`: N runs of one measured state, each recorded as `run` records it, in one run
group (docs/FORMATS.md, the run table's `group` and `repeat`); `ab` builds on `grouped` and `medians` too.

The runs stop at the first one that fails (exit code not 0) or is interrupted: the records so far stay, and the
exit code is the last run's."""

from __future__ import annotations

import sys

from stackmgr.commands.run import RunOutcome, RunRequest, run, say
from stackmgr.errors import UsageProblem
from stackmgr.evidence.metrics import Metric
from stackmgr.output import plural
from stackmgr.store.config import Store


def grouped(group: str, k: int) -> dict[str, object]:
    """The run table's `group` and `repeat` of the k-th run (from 1) of a group."""
    return {"group": group, "repeat": k}


def new_group(prefix: str) -> str:
    """A group name no earlier run has: `PREFIX-<UTC yyyymmddThhmmss>-<6 hex>` (a record's id is the hash of its
    content, so the first record's id cannot name the group it belongs to)."""
    import secrets
    import time

    return f"{prefix}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"


def stopped_why(outcome: RunOutcome) -> str | None:
    """Why a repeated run ends the runs (failed, interrupted), or None when the next may run."""
    if outcome.received:
        return f"stackmgr got {outcome.received}"
    interrupted = any(link.run.get("interrupted") for link in outcome.links)
    if interrupted:
        return "it was interrupted"
    if outcome.exit_code != 0:
        return f"it failed (exit {outcome.exit_code})"
    return None


class Repeated:
    def __init__(self, group: str, outcomes: list[RunOutcome], asked: int, stopped: str | None) -> None:
        self.group = group
        self.outcomes = outcomes
        self.asked = asked
        self.stopped = stopped  # why the runs stopped before `asked`, or None

    @property
    def exit_code(self) -> int:
        return self.outcomes[-1].exit_code if self.outcomes else 0


def check_repeat(value: str | None) -> int:
    """`--repeat N`: a whole number from 1 (1 when not given)."""
    if value is None:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise UsageProblem(f"--repeat {value} is not a number of runs", "give a whole number from 1, e.g. --repeat 5")
    return int(value)


def run_repeated(store: Store, req: RunRequest, times: int, *, on_each: bool = True) -> Repeated:
    """`req` run `times` times as one group (named `NAME-1`…`NAME-N` with --name, the group then NAME), each run
    said as `run` says it when `on_each`; stops at the first run that fails or is interrupted."""
    name = req.name
    if name and req.unique:  # every name free before the first runs
        from stackmgr.evidence.reading import load_briefs

        names = {f"{name}-{k}" for k in range(1, times + 1)}
        taken = sorted({k.run_name for k in load_briefs(store) if k.run_name in names})
        if taken:
            raise UsageProblem(f"a run named {taken[0]} is recorded already",
                               "pick another --name: a run's name stands for one result")  # fmt: skip
    group = name or new_group("repeat")
    outcomes: list[RunOutcome] = []
    stopped = None
    for k in range(1, times + 1):
        one = RunRequest(req.argv, trees=req.trees, link=req.link, series=req.series,
                         name=f"{name}-{k}" if name else None, result_dirs=req.result_dirs, from_json=req.from_json,
                         unique=req.unique, cwd=req.cwd, say_where=req.say_where and k == 1,
                         grouped=grouped(group, k))  # fmt: skip
        outcome = run(store, one)
        outcomes.append(outcome)
        if on_each:
            say(outcome)
        why = stopped_why(outcome)
        if why is not None and k < times:
            stopped = f"stopped after run {k} of {times}: {why}; the {k} record(s) so far stay"
            break
    return Repeated(group, outcomes, times, stopped)


def not_valid(outcome: RunOutcome) -> str:
    """How a run's result is marked when it is no valid measurement (evidence/link_state.py `run_mark`: `FAILED
    (exit 3)`, `INVALID (gate quality: fail)`, `TAINTED`), "" when it is one: what `compare` leaves out."""
    from stackmgr.evidence.link_state import run_mark

    return run_mark(outcome.links[0]) if outcome.links else ""


def values_by_metric(outcomes: list[RunOutcome]) -> dict[str, tuple[str, list[float]]]:
    """{metric name: (its direction, its value in each valid run that has it, in order)}, in the order first met:
    a run `not_valid` is left out, as `compare` leaves it out."""
    found: dict[str, tuple[str, list[float]]] = {}
    for outcome in outcomes:
        metrics: list[Metric] = outcome.links[0].metrics if outcome.links and not not_valid(outcome) else []
        for m in metrics:
            found.setdefault(m.name, (m.direction, []))[1].append(m.value)
    return found


def medians_line(store: Store, outcomes: list[RunOutcome]) -> str | None:
    """`HEADLINE: median X (n=N)` over the runs (evidence/stats), or None when no run has the metric."""
    from stackmgr.evidence.stats import judge

    found = values_by_metric(outcomes)
    left_out = left_out_line(outcomes)
    headline = store.headline()
    name = headline if headline in found else next(iter(found), None)
    if name is None:
        return left_out or None
    values = found[name][1]
    j = judge(values, values)
    return f"{name}: median {j.median_a:.6g} (n={j.n_a})" + (f"; {left_out}" if left_out else "")


def left_out_line(outcomes: list[RunOutcome]) -> str:
    """`2 runs not valid, left out: INVALID (gate quality: fail)`, or "" when every run is valid."""
    marks = [m for o in outcomes if (m := not_valid(o))]
    if not marks:
        return ""
    return f"{plural(len(marks), 'run')} not valid, left out: {'; '.join(dict.fromkeys(marks))}"


def say_repeated(store: Store, done: Repeated) -> None:
    if done.stopped:
        sys.stderr.write(f"stackmgr: {done.stopped}\n")
    line = medians_line(store, done.outcomes)
    sys.stderr.write(f"stackmgr: run group {done.group}: {plural(len(done.outcomes), 'run')}"
                     f"{f'; {line}' if line else ''}\n")  # fmt: skip
