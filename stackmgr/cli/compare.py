"""`stackmgr compare LINK|PATCH…`: metrics of results side by side, per run configuration."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.cli.links import ARROW, config_line, one_line
from stackmgr.store.config import open_store

if TYPE_CHECKING:
    from stackmgr.commands.compare import Cell, Group
    from stackmgr.evidence.records import Link


VERDICT_TONE = {"faster": "green", "slower": "red", "better": "green", "worse": "red"}


def _cell(cell: Cell | None) -> tuple[str, str]:
    """(text, the verdict at its end or ""): the median with n (or its requests), and against the reference the
    effect, its 95% interval, p and the verdict (`+10.0% [+9.0%, +11.0%] p=0.0079 faster`)."""
    if cell is None:
        return "—", ""
    size = f"{cell.n_samples} requests" if cell.samples == "requests" else f"n={cell.n}"
    text = f"{cell.median:.6g} ({size})"
    j = cell.judged
    if j is None:
        return text, ""
    parts = [text, f"{j.effect * 100:+.1f}%" if j.effect is not None else ""]
    if j.ci_low is not None and j.ci_high is not None:
        parts[-1] += f" [{j.ci_low * 100:+.1f}%, {j.ci_high * 100:+.1f}%]"
    if j.p is not None and j.verdict != "too few runs":
        parts[-1] += f" p={j.p:.2g}"
    return "  ".join(p.strip() for p in [*parts, j.verdict] if p.strip()), j.verdict


SHOWN_IDS = 6  # link ids of a column listed; the rest counted (a column of 100 runs stays one short line)


def links_said(links: list[Link]) -> str:
    """The links of a column: its run groups with how many of each (`run group ab-p-…-B (50 runs)`), then the
    other links by run name where they have one (`run single1`), else id; SHOWN_IDS of those at most."""
    groups: dict[str, list[Link]] = {}
    for link in links:
        group = link.run.get("group")
        groups.setdefault(group if isinstance(group, str) and group else "", []).append(link)
    said = [f"run group {one_line(g)} ({len(runs)} runs)" for g, runs in groups.items() if g and len(runs) > 1]
    single = [k for g, runs in groups.items() if not g or len(runs) == 1 for k in runs]
    names = [f"run {one_line(name)}" if isinstance(name := k.run.get("name"), str) and name else one_line(k.id)
             for k in single]  # fmt: skip
    more = f" and {len(names) - SHOWN_IDS} more" if len(names) > SHOWN_IDS else ""
    return ", ".join(said + names[:SHOWN_IDS]) + more


def group_lines(group: Group) -> list[str]:
    """The header naming the configuration, which links each result is, the runs left out (failed or tainted:
    never averaged in) and one line per metric."""
    lines = [config_line(group.config)]
    lines += [f"  measured in another environment than the first group: {'; '.join(group.environment_differs)} "
              "(`--across-env` ranks them together)"] if group.environment_differs else []  # fmt: skip
    lines += [f"  {one_line(r.title)}{' (reference)' if i == group.reference else ''}: "
              + links_said(r.links) + (f"  {one_line(r.mark)}" if r.mark else "")
              for i, r in enumerate(group.results)]  # fmt: skip
    if group.left_out:
        lines.append("  left out: " + ", ".join(f"{one_line(link.id)} of {one_line(link.patch)} ({one_line(why)})"
                                                for link, why in group.left_out))  # fmt: skip
    if not group.results:
        return lines
    table = [[("metric", ""), ("", ""), ("unit", "")] + [(one_line(r.label), "") for r in group.results]]
    for row in group.rows:
        table.append([(one_line(row.name), ""), (ARROW.get(row.direction, "?"), ""), (one_line(row.unit), "")]
                     + [_cell(c) for c in row.cells])  # fmt: skip
    widths = [max(len(line[i][0]) for line in table) for i in range(len(table[0]))]
    for line in table:
        parts = []
        for (text, word), width in zip(line, widths, strict=True):
            shown = text[: len(text) - len(word)] + output.paint(word, VERDICT_TONE.get(word, "dim")) if word else text
            parts.append(shown + " " * (width - len(text)))
        lines.append(("  " + "  ".join(parts)).rstrip())
    return lines


@click.command("compare")
@click.argument("targets", nargs=-1, required=True, metavar="LINK|PATCH…")
@click.option("--min-effect", "min_effect", type=click.FloatRange(min=0, max=1e6), default=1.0, show_default=True,
              metavar="PCT", help="The smallest change (percent of the reference's median) a verdict calls one.")
@click.option("--across-env", is_flag=True, help="Rank results measured in different environments together.")
@click.option("--baseline", "baseline", metavar="LINK|PATCH", default=None,
              help="The reference column: this result (or a patch's results) instead of the series' baseline.")
@click.option("--no-baseline", "no_baseline", is_flag=True,
              help="No series baseline: the first result named is the reference.")
@json_option()
@pass_context
def compare_cmd(ctx: Context, targets: tuple[str, ...], min_effect: float, across_env: bool, baseline: str | None,
                no_baseline: bool) -> None:  # fmt: skip
    """Metrics of results side by side: per metric the median of each result (n runs); the first result is the
    reference, each other shows its effect (Hodges–Lehmann, relative to the reference's median) with its 95%
    interval, the Mann–Whitney p and a verdict: faster / slower (better / worse for a declared metric that is no
    speed, a quality score; higher / lower where the metric's direction is
    unknown) only when p < 0.05, the interval excludes 0 and the effect is at least --min-effect; else
    `no significant change` (also for a significant change below the floor), or `too few runs` (4 a side at least,
    or 3 + 5, 2 + 8, 1 + 40). A single run a side that holds per-request
    samples (`vllm bench serve --save-detailed`) shows their distribution for its latency metrics, but a shift of
    a whole run looks the same: it says too few runs, never faster or slower. A run group (`run --repeat --name
    NAME`) is its runs, one column; of two groups named the second is judged against the first, an A/A or A/B
    of groups (one group alone: against its series' baseline). A PATCH means its
    current links: those with the same run configuration are repeats; a LINK (id or run name) is a column of its
    own. The reference is the latest valid baseline of the named patches' series with every baseline run alike to
    it (same base, same configuration), `baseline of S (n runs)`; else (--no-baseline, or none recorded) the first
    result named; --baseline names it. Results are grouped by run
    configuration (model, request rate, max concurrency, prompts) and never ranked across groups; repeats are
    of one measured state, and by environment (GPU, driver, CUDA, power limit, torch, vllm: the group says what
    differs) unless --across-env. Failed and tainted runs of a PATCH are left out, and listed as such; one named by
    itself is shown, marked, never the reference."""
    from stackmgr.commands.compare import Comparison

    comparison = Comparison(open_store(ctx.store), list(targets), min_effect / 100, across_env, baseline,
                            not no_baseline)  # fmt: skip
    if ctx.json:
        output.emit_json(comparison.to_json())
        return
    for i, group in enumerate(comparison.groups):
        if i:
            output.out()
        for line in group_lines(group):
            output.out(line)
