"""`stackmgr ab PATCH [-n N] -- CMD…`: CMD without and with PATCH, alternating, each run recorded, then judged."""

from __future__ import annotations

from typing import Any

import click

from stackmgr.cli.context import Context, json_option, pass_context, results_options

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.commands.ab import Judged, Side


@click.command("ab", context_settings={"ignore_unknown_options": True})
@click.argument("patch")
@click.option("-n", "runs", type=click.IntRange(min=1), default=5, show_default=True, metavar="N",
              help="Runs a side: A B A B… N times each.")
@click.option("--min-effect", "min_effect", type=click.FloatRange(min=0, max=1e6), default=1.0, show_default=True,
              metavar="PCT", help="The smallest change (percent of A's median) a verdict calls one.")
@click.option("--leave-out", "leave_out", is_flag=True,
              help="A is the applied stack with PATCH left out (B the applied stack), not PATCH's prefix.")
@click.option("--cwd", metavar="DIR", help="Run CMD in DIR; default: the tree (where you stand when inside it).")
@results_options
@json_option()
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_context
def ab_cmd(ctx: Context, patch: str, runs: int, min_effect: float, leave_out: bool, cwd: str | None,
           result_dirs: tuple[str, ...], from_json: tuple[str, ...], command: tuple[str, ...]) -> None:  # fmt: skip
    """Run CMD (after `--`) on the tree without PATCH (A: its current series' patches below PATCH) and with it (B: up to
    PATCH), alternating A B A B… so that drift cancels, N times each. A run that is not valid (a gate failed, the
    tree changed while it ran) is recorded but left out of the judgement, and said. With --leave-out, A is the
    applied stack with PATCH left out and B the applied stack (what PATCH does to the whole stack). Each run is
    recorded as `stackmgr run` records it; then each metric of B is judged against A as `compare` judges it: medians,
    the effect with its 95% interval, p, and faster / slower / no significant change. The tree must be preserved
    first; it is put back exactly as it was however the runs end (after a kill, by `stackmgr recover`). Where the
    series has a valid baseline, each side's headline metric is judged against it too. A run that fails or is
    interrupted stops it (exit 3; 128+N when stackmgr got signal N); else exit 0."""
    from stackmgr import output
    from stackmgr.commands.ab import ab
    from stackmgr.store.config import open_store

    argv = list(command[1:] if command[:1] == ("--",) else command)
    if runs < 4:  # said before the first run, not after all of them
        output.err(f"stackmgr: warning: with -n {runs}, no step can be judged (the rank test needs 4 runs a side at "
                   "the least): the runs are recorded and their medians shown")  # fmt: skip
    done = ab(open_store(ctx.store), patch, argv, runs=runs, min_effect=min_effect / 100, cwd=cwd,
              result_dirs=result_dirs, from_json=from_json, leave_out=leave_out)
    if ctx.json:
        output.emit_json({"schema": 1, "patch": done.patch, "tree": done.tree, "series": done.series,
                          "runs": done.prefix, "leave_out": done.left_out, "a": _side(done.a), "b": _side(done.b),
                          "metrics": [_metric(j) for j in done.judged],
                          "baseline": {"links": done.baseline,
                                       **{s.label.lower(): _metric(j) for s, j in done.against_baseline}}
                          if done.baseline else None})  # fmt: skip
        return
    output.out(f"{done.patch} on tree {done.tree} ({done.series}): A = {_said(done.a)}, B = {_said(done.b)}; "
               f"runs {done.prefix}-A1…B{len(done.b.outcomes)}")  # fmt: skip
    from stackmgr.commands.repeat import left_out_line, not_valid

    if not done.judged and any(not_valid(o) for o in done.a.outcomes + done.b.outcomes):
        output.out("  no metric both sides have in a valid run: nothing to judge")
    elif not done.judged:
        output.out("  no metric both sides have: nothing to judge (the runs recorded no metrics? name where CMD "
                   "writes its results: --result-dir DIR or --from-json FILE, or declare the tree's results "
                   "directories)")
    largest = max((abs(j.judgement.effect) for j in done.judged if j.judgement.effect is not None), default=0.0)
    width = max((len(j.name) for j in done.judged), default=0)
    for j in done.judged:  # the largest effect a whole bar (output.effect_bar)
        bar = output.effect_bar(j.judgement.effect, j.judgement.verdict, largest, 16)
        output.out(f"  {j.name + ':':<{width + 1}} {_line(j)}" + (f"  {bar}" if bar else ""))
    for side in (done.a, done.b):  # judged without them, as compare judges
        if left := left_out_line(side.outcomes):
            output.out(f"  {side.label}: {left}")
    if done.baseline:
        output.out(f"  against the baseline of {done.series} ({output.plural(len(done.baseline), 'run')}):")
        for side, j in done.against_baseline:
            output.out(f"    {side.label}: {_line(j, 'baseline', side.label)}")


def _said(side: Side) -> str:
    from stackmgr import output

    if not side.top:
        return "the series' base"
    said = f"{output.plural(side.count, 'patch', 'patches')}, top {side.top}"
    return f"{said}, without {side.link}" if side.link not in side.patches and side.link else said


def _side(side: Side) -> dict[str, Any]:
    from stackmgr.commands.repeat import not_valid

    return {"patches": side.patches, "count": side.count, "top": side.top, "links": side.links,
            "not_valid": [o.links[0].id for o in side.outcomes if not_valid(o)]}  # fmt: skip


def _line(j: Judged, a: str = "A", b: str = "B") -> str:
    """`A 100 → B 110 (n=5+5)  +10.0% [+9.0%, +11.0%] p=0.0079  faster`."""
    r = j.judgement
    text = f"{a} {r.median_a:.6g} → {b} {r.median_b:.6g} (n={r.n_a}+{r.n_b})"
    if r.effect is not None:
        text += f"  {r.effect * 100:+.1f}%"
    if r.ci_low is not None and r.ci_high is not None:
        text += f" [{r.ci_low * 100:+.1f}%, {r.ci_high * 100:+.1f}%]"
    if r.p is not None and r.verdict != "too few runs":
        text += f" p={r.p:.2g}"
    return f"{text}  {r.verdict}"


def _metric(j: Judged) -> dict[str, Any]:
    r = j.judgement
    return {"name": j.name, "direction": j.direction, "n_a": r.n_a, "n_b": r.n_b, "median_a": r.median_a,
            "median_b": r.median_b, "effect": r.effect, "ci": [r.ci_low, r.ci_high], "p": r.p,
            "verdict": r.verdict}  # fmt: skip
