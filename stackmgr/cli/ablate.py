"""`stackmgr ablate SERIES [-n N] [--leave-one-out] -- CMD`: each patch's contribution to a metric, as a waterfall."""

from __future__ import annotations

from typing import Any

import click

from stackmgr.cli.context import Context, json_option, pass_context, results_options, series_names

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.commands.ablate import Ablation, Step

BAR = 24  # characters of the largest contribution's bar


@click.command("ablate", context_settings={"ignore_unknown_options": True})
@click.argument("series", shell_complete=series_names)
@click.option("-n", "runs", type=click.IntRange(min=1), default=5, show_default=True, metavar="N",
              help="Runs of each state, taken in turn round after round.")
@click.option("--leave-one-out", "leave_one_out", is_flag=True,
              help="The whole stack against the stack without each patch, not each prefix against the one below.")
@click.option("--metric", metavar="M", help="The metric judged (default: the headline, else the first all share).")
@click.option("--min-effect", "min_effect", type=click.FloatRange(min=0, max=1e6), default=1.0, show_default=True,
              metavar="PCT", help="The smallest change (percent) a verdict calls one.")
@click.option("-t", "--tree", metavar="TREE", help="The tree to ablate, when the series has several.")
@click.option("--override", metavar="WHY", help="Ablate a series holding a do-not-revive lane; WHY is recorded.")
@click.option("--cwd", metavar="DIR", help="Run CMD in DIR; default: the tree (where you stand when inside it).")
@results_options
@json_option()
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_context
def ablate_cmd(ctx: Context, series: str, runs: int, leave_one_out: bool, metric: str | None, min_effect: float,
               tree: str | None, override: str | None, cwd: str | None, result_dirs: tuple[str, ...],
               from_json: tuple[str, ...], command: tuple[str, ...]) -> None:  # fmt: skip
    """Which patch of SERIES did it: CMD (after `--`) is run N times on every prefix of the series (its base,
    then one patch more at a time), the prefixes taken in turn round after round so drift falls on all alike;
    each patch's contribution is its prefix against the one below, judged as `compare` judges (median, effect
    with its 95% interval, p, faster / slower / no significant change), shown as a waterfall with bars. With
    --leave-one-out the whole stack is measured against the stack without each patch. Every step is measured:
    a stack whose patches go up and down is attributed right. Each run is recorded as `stackmgr run` records it
    (the base's as the series' baseline). The tree must be preserved first, and is put back exactly as it was
    however the runs end (after a kill, by `stackmgr recover`). A run that fails or is interrupted stops it
    (exit 3; 128+N when stackmgr got signal N); else exit 0."""
    from stackmgr import output
    from stackmgr.commands.ablate import ablate
    from stackmgr.store.config import open_store

    argv = list(command[1:] if command[:1] == ("--",) else command)
    if runs < 4:  # said before the first run, not after all of them
        output.err(f"stackmgr: warning: with -n {runs}, no step can be judged (the rank test needs 4 runs a side at "
                   "the least): the runs are recorded and their medians shown")  # fmt: skip
    done = ablate(open_store(ctx.store), series, argv, runs=runs, leave_one_out=leave_one_out, metric=metric,
                  min_effect=min_effect / 100, tree=tree, cwd=cwd, result_dirs=result_dirs, from_json=from_json,
                  override=override)  # fmt: skip
    if ctx.json:
        output.emit_json(_json(done))
        return
    for line in waterfall(done):
        output.out(line)


def waterfall(done: Ablation) -> list[str]:
    """The ablation as a terminal waterfall: a line per state and step, the effect as a bar (`+` to the right
    for a change for the better by the metric's direction, `-` for the worse, `·` for no significant change)."""
    mode = "each patch left out of the whole stack" if done.leave_one_out else "each prefix against the one below"
    runs = len(done.states[0].outcomes)
    head = [f"{done.series} on tree {done.tree}: {mode}; {len(done.states)} states × {runs} runs, runs "
            f"{done.prefix}-…"]
    if done.metric is None:
        return [*head, "  no valid run wrote a metric: nothing to judge (runs that failed a gate are left out; "
                       "else name where CMD writes its results: --result-dir DIR or --from-json FILE)"]  # fmt: skip
    largest = max((abs(s.judged.effect) for s in done.steps if s.judged and s.judged.effect is not None), default=0)
    width = max(len(s.patch) for s in done.steps) + 2
    first = done.states[0]
    lines = [*head, f"  {done.metric}"]
    start = "whole stack" if done.leave_one_out else "base"
    lines.append(f"  {start:<{width}} {_value(done.median(first))} (n={_n(done, first)})")
    for step in done.steps:
        said = f"- {step.patch}" if done.leave_one_out else f"+ {step.patch}"
        lines.append(f"  {said:<{width}} {_value(done.median(step.state if not done.leave_one_out else step.below))}"
                     f" (n={_n(done, step.below if done.leave_one_out else step.state)})  {_judged(step)}"
                     f"  {_bar(step, largest)}")  # fmt: skip
    return lines


def _n(done: Ablation, state: Any) -> int:
    from stackmgr.commands.repeat import values_by_metric

    found = values_by_metric(state.outcomes).get(done.metric or "")
    return len(found[1]) if found else 0


def _value(value: float | None) -> str:
    return f"{value:.6g}" if value is not None else "—"


def _judged(step: Step) -> str:
    j = step.judged
    if j is None:
        return f"not judged ({step.why})"
    text = f"{j.effect * 100:+.1f}%" if j.effect is not None else ""
    if j.ci_low is not None and j.ci_high is not None:
        text += f" [{j.ci_low * 100:+.1f}%, {j.ci_high * 100:+.1f}%]"
    if j.p is not None and j.verdict != "too few runs":
        text += f" p={j.p:.2g}"
    return f"{text}  {j.verdict}".strip()


def _bar(step: Step, largest: float) -> str:
    from stackmgr.output import effect_bar

    j = step.judged
    return effect_bar(j.effect, j.verdict, largest, BAR) if j is not None else ""


def _json(done: Ablation) -> dict[str, Any]:
    def state(s: Any) -> dict[str, Any]:
        return {"label": s.label, "patches": s.patches, "link": s.link, "links": s.links,
                "median": done.median(s)}  # fmt: skip

    def step(s: Step) -> dict[str, Any]:
        j = s.judged
        return {"patch": s.patch, "below": s.below.label, "state": s.state.label,
                **({"n_a": j.n_a, "n_b": j.n_b, "median_a": j.median_a, "median_b": j.median_b, "effect": j.effect,
                    "ci": [j.ci_low, j.ci_high], "p": j.p, "verdict": j.verdict} if j else
                   {"verdict": None, "why": s.why})}
    return {"schema": 1, "series": done.series, "tree": done.tree, "leave_one_out": done.leave_one_out,
            "runs": done.prefix, "metric": done.metric, "direction": done.direction,
            "states": [state(s) for s in done.states], "steps": [step(s) for s in done.steps]}  # fmt: skip
