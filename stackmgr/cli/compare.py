"""`stackmgr compare LINK|PATCH…`: metrics of results side by side, per run configuration."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context
from stackmgr.cli.links import ARROW, TONE, config_line, one_line
from stackmgr.store.config import open_store

if TYPE_CHECKING:
    from stackmgr.commands.compare import Cell, Group


def _cell(cell: Cell | None) -> tuple[str, str]:
    """(text, the better/worse word at its end or "") of one value."""
    if cell is None:
        return "—", ""
    text = f"{cell.mean:.6g}" + (f" ± {cell.stdev:.3g} (n={cell.n})" if cell.stdev is not None else "")
    if cell.change is None:
        return text, ""
    if cell.change == "same" or cell.delta is None:
        return f"{text}  {cell.change}", cell.change
    pct = f" ({cell.delta_pct:+.1f}%)" if cell.delta_pct is not None else ""
    return f"{text}  {cell.delta:+.4g}{pct} {cell.change}", cell.change


def group_lines(group: Group) -> list[str]:
    """The header naming the configuration, which links each result is, the runs left out (failed or tainted:
    never averaged in) and one line per metric."""
    lines = [config_line(group.config)]
    lines += [f"  {one_line(r.title)}{' (reference)' if i == group.reference else ''}: "
              + ", ".join(one_line(link.id) for link in r.links) + (f"  {one_line(r.mark)}" if r.mark else "")
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
            shown = text[: len(text) - len(word)] + output.paint(word, TONE.get(word, "dim")) if word else text
            parts.append(shown + " " * (width - len(text)))
        lines.append(("  " + "  ".join(parts)).rstrip())
    return lines


@click.command("compare")
@click.argument("targets", nargs=-1, required=True, metavar="LINK|PATCH…")
@json_option()
@pass_context
def compare_cmd(ctx: Context, targets: tuple[str, ...]) -> None:
    """Metrics of results side by side: the first result is the reference, each other shows its delta, better
    or worse by the metric's direction. A PATCH means its current links: those with the same run configuration
    are repeats (mean ± stdev); a LINK (id or run name) is a column of its own. Results are grouped by run
    configuration (model, request rate, max concurrency, prompts) and never ranked across groups; repeats are
    of one measured state. Failed and tainted runs of a PATCH are left out, and listed as such; one named by
    itself is shown, marked, never the reference."""
    from stackmgr.commands.compare import Comparison

    comparison = Comparison(open_store(ctx.store), list(targets))
    if ctx.json:
        output.emit_json(comparison.to_json())
        return
    for i, group in enumerate(comparison.groups):
        if i:
            output.out()
        for line in group_lines(group):
            output.out(line)
