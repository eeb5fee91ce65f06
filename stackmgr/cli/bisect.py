"""`stackmgr bisect SERIES -- CMD…`: the first patch of a series whose prefix makes CMD fail."""

from __future__ import annotations

import click

from stackmgr.cli.context import Context, pass_context, results_options, series_names
from stackmgr.store.config import open_store


@click.command("bisect", context_settings={"ignore_unknown_options": True})
@click.argument("series", shell_complete=series_names)
@click.option("-t", "--tree", metavar="TREE", help="The tree to bisect, when the series has several.")
@click.option("--metric", metavar="M", help="Judge by metric M of what CMD writes, not by its exit code.")
@click.option("--threshold", type=float, metavar="X", help="With --metric: worse than X (by its direction) fails.")
@click.option("--repeat", "repeat", type=click.IntRange(min=1), default=1, metavar="N",
              help="Run each tested prefix N times; --metric M alone then fails a prefix significantly worse than "
                   "the base (measured first, N times).")  # fmt: skip
@click.option("--regression", is_flag=True,
              help="With --metric M and --repeat N: blame the first patch significantly worse than the prefix below "
                   "it (every prefix measured, as ablate measures them).")  # fmt: skip
@click.option("--min-effect", "min_effect", type=click.FloatRange(min=0, max=1e6), default=1.0, show_default=True,
              metavar="PCT", help="With --repeat and --metric alone: the smallest change (percent) that fails.")
@click.option("--override", metavar="WHY", help="Bisect a series holding a do-not-revive lane; WHY is recorded.")
@click.option("--cwd", metavar="DIR", help="Run CMD in DIR; default: the tree (where you stand when inside it).")
@results_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_context
def bisect_cmd(ctx: Context, series: str, tree: str | None, metric: str | None, threshold: float | None,
               repeat: int, regression: bool, min_effect: float, override: str | None, cwd: str | None,
               result_dirs: tuple[str, ...], from_json: tuple[str, ...], command: tuple[str, ...]) -> None:  # fmt: skip
    """Find the first patch of SERIES whose prefix makes CMD (after `--`) fail: its exit code is not 0, or --metric M
    is worse than --threshold X. With --repeat N each tested prefix runs N times: by exit code any failed run fails
    it; with a threshold the median is judged; with --metric M alone the base is measured first and a prefix fails
    when it is significantly worse than the base, as `compare` judges (never on one noisy pair: a stack that goes up
    before it goes down is bisected right); with --regression every prefix is measured and the first patch
    significantly worse than the prefix below it is blamed. Each tested prefix is captured as `stackmgr run`
    captures a run; the tree is put back as it was at the end, and after a kill by `stackmgr recover`. CMD runs in
    the tree (in the directory you stand in when that is inside it; else at its top, said on stderr), or in --cwd
    DIR. A test that exits 125 or is ended by a signal (a timeout: 128+N) judges nothing: the bisect stops, no patch
    blamed (exit 3; 128+N when stackmgr itself got signal N). When the first patch is blamed the base is tested too,
    and recorded as the series' baseline. Exit 0 when a first bad patch is found, 1 when none fails."""
    from stackmgr import output
    from stackmgr.commands.bisect import bisect

    argv = list(command[1:] if command[:1] == ("--",) else command)
    found = bisect(open_store(ctx.store), series, argv, tree=tree, metric=metric, threshold=threshold,
                   override=override, cwd=cwd, result_dirs=result_dirs, from_json=from_json, repeat=repeat,
                   min_effect=min_effect / 100, regression=regression)  # fmt: skip
    if ctx.json:
        output.emit_json({"schema": 1, "series": series, "repeat": repeat, "first_bad": found.first_bad,
                          "base_fails": found.base_fails,
                          "base_tested": found.base_tested,
                          "base": {"failed": found.base.failed, "link": found.base.link, "detail": found.base.detail}
                          if found.base else None,
                          "tested": [{"patches": t.count, "top": t.patch, "failed": t.failed, "link": t.link,
                                      "detail": t.detail} for t in found.tested]})  # fmt: skip
    else:
        for t in found.tested:
            said = "FAILS" if t.failed else "passes"
            count = output.plural(t.count, "patch", "patches")
            output.out(f"  {count:>11}, top {t.patch}: {said} ({t.detail}); {t.link}")
        if found.base is not None:
            b = found.base
            said = b.detail if b.detail.startswith("the reference") else \
                f"{'FAILS' if b.failed else 'passes'} ({b.detail})"  # fmt: skip
            output.out(f"  {'0 patches':>11}, the base: {said}; {b.link} (baseline)")
        if found.first_bad is None and regression:
            output.out(f"{series}: no step is significantly worse than the prefix below with {repeat} runs each; one "
                       "measured worse without significance (above) may still be a regression: a larger --repeat "
                       "narrows the intervals")  # fmt: skip
        elif found.first_bad is None:
            output.out(f"{series}: every patch passes (the whole series was tested; a regression a later patch undoes "
                       "stays hidden: `bisect --regression` or `stackmgr ablate` measure every prefix)")
        elif found.base_fails:
            output.out(f"{series}: the base already fails, before {found.first_bad}: no patch of it is to blame")
        else:
            untested = " (the base itself was not tested)" if found.blamed_first and not found.base_tested else ""
            output.out(f"{series}: first bad patch: {found.first_bad}{untested}")
    raise SystemExit(0 if found.first_bad is not None and not found.base_fails else 1)
