"""`stackmgr link`, `show`, `links`, `verify`: evidence for patches, and what it is worth today."""

from __future__ import annotations

import os
from typing import Any

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context, patch_names, ref_names, series_names, tree_names
from stackmgr.store.config import open_store


def _mark(status: str) -> str:
    return {"pass": "✓", "fail": "✗", "not-run": "–", "error": "!"}.get(status, "?")


def _value(value: float) -> str:
    return f"{value:.6g}"  # the number alone, in a table with a column of units


@click.command("link")
@click.argument("patch", shell_complete=patch_names)
@click.argument("artifacts", nargs=-1)
@click.option("--metric", "metric_specs", multiple=True, metavar="NAME=VALUE[UNIT]|NAME=/REGEX/",
              help="A metric, or a regex (group 1: the number) to pull it from a log.")  # fmt: skip
@click.option("--from-json", "from_json", multiple=True, metavar="FILE",
              help="Take the metrics of a `vllm bench serve --save-result` JSON file.")  # fmt: skip
@click.option("--gate", "gate_specs", multiple=True, metavar="NAME=STATUS[:DETAIL]",
              help="A quality gate: pass, fail, not-run or error.")  # fmt: skip
@click.option("--verdict", default=None, type=click.Choice(["promoted", "rejected", "experimental", "inconclusive",
              "superseded"]), help="Default: experimental; with --amends, the amended record's.")  # fmt: skip
@click.option("--lesson", default="", help="What was learned (kept with rejected lanes).")
@click.option("--do-not-revive", is_flag=True, help="Warn loudly whenever this change comes back.")
@click.option("--label", default="", metavar="TEXT",
              help='What the ARTIFACTS given are, in the lab\'s words: "detailed chronological notes".')
@click.option("--amends", default="", metavar="LINK", shell_complete=ref_names,
              help="This record corrects an earlier one.")  # fmt: skip
@click.option("--baseline", default="", metavar="LINK", shell_complete=ref_names,
              help="Compare this record's metrics with that link's.")  # fmt: skip
@json_option()
@pass_context
def link_cmd(ctx: Context, patch: str, artifacts: tuple[str, ...], metric_specs: tuple[str, ...],
             from_json: tuple[str, ...], gate_specs: tuple[str, ...], verdict: str | None, lesson: str,
             do_not_revive: bool, amends: str, baseline: str, label: str) -> None:  # fmt: skip
    """Record which ARTIFACTS (logs, notes, benchmark JSON) justify or refute PATCH."""
    from stackmgr.evidence.linking import create_link
    from stackmgr.store.names import patch_name

    if label and (not artifacts or len(label) > 200 or not label.isprintable()):
        from stackmgr.errors import UsageProblem

        raise UsageProblem("--label names the ARTIFACTS given: printable text of at most 200 characters",
                           'e.g. `stackmgr link P notes.md --label "detailed chronological notes"`')  # fmt: skip
    store = open_store(ctx.store)
    link = create_link(store, patch_name(patch), list(artifacts), metric_specs=list(metric_specs),
                       gate_specs=list(gate_specs), from_json=list(from_json), verdict=verdict, lesson=lesson,
                       do_not_revive=do_not_revive, amends=amends, baseline=baseline, label=label)  # fmt: skip
    rel = os.path.relpath(link.file, store.root)
    if ctx.json:
        output.emit_json({"schema": 1, "id": link.id, "file": rel, "patch": link.patch})
        return
    shown = ", ".join(_metric_text(m) for m in link.metrics[:3])
    output.out(f"linked {link.id} to {link.patch}: {output.plural(len(link.artifacts), 'artifact')}"
               + (f", {shown}" if shown else "") + f"; {link.verdict}; {one_line(rel)}")  # fmt: skip


def one_line(text: str) -> str:
    """A record's string as one line of a view (output.show_text): a newline in it cannot forge another row."""
    return output.show_text(text)


def _metric_text(m: Any) -> str:
    return f"{one_line(m.name)} {output.quantity(m.value, m.unit)}"


ARROW = {"higher": "↑", "lower": "↓"}
TONE = {"better": "green", "worse": "red"}
LABELS = {"model_id": "model", "request_rate": "request rate", "max_concurrency": "max concurrency",
          "num_prompts": "prompts"}  # fmt: skip


def config_line(config: dict[str, str]) -> str:
    """The header of a run configuration's group (`compare`, `links --sort metric`)."""
    if not config:
        return "run configuration not recorded (no vllm bench JSON artifact)"
    return " · ".join(f"{label} {one_line(config.get(key, '—'))}" for key, label in LABELS.items())


def delta_text(value: float, ref: float, direction: str) -> str:
    """`+9.37 (+9.5%) better`: the difference from a reference value, and what it means by the direction."""
    from stackmgr.evidence.metrics import change

    diff = value - ref
    said = change(diff, direction)
    if said == "same":
        return output.paint(said, "dim")
    pct = f" ({diff / abs(ref) * 100:+.1f}%)" if ref else ""
    return f"{diff:+.4g}{pct}" + (f" {output.paint(said, TONE.get(said, 'dim'))}" if said else "")  # "": unknown


def metric_table(metrics: list[Any], base: dict[str, float], indent: str = "      ") -> list[str]:
    """One line per metric: name, value, unit, direction arrow, and the delta from the baseline's value."""
    rows = [(one_line(m.name), _value(m.value), one_line(m.unit), ARROW.get(m.direction, "?"),
             delta_text(m.value, base[m.name], m.direction) if m.name in base else "") for m in metrics]  # fmt: skip
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(3)]
    return [f"{indent}{n:<{widths[0]}}  {v:>{widths[1]}}  {u:<{widths[2]}}  {a}  {d}".rstrip()
            for n, v, u, a, d in rows]  # fmt: skip


FOLD_GROUP = 3  # runs of one run group, at the least, that `show` folds into one block


def _run_groups(links: list[Any], amended_by: dict[str, str]) -> dict[str, list[Any]]:
    """link id -> the current records of its run group (an amendment stands for the draft it completes), for the
    groups of FOLD_GROUP or more that `show` folds into one block."""
    groups: dict[str, list[Any]] = {}
    for link in links:
        group = link.run.get("group")
        if isinstance(group, str) and group and link.id not in amended_by:
            groups.setdefault(group, []).append(link)
    return {k.id: runs for runs in groups.values() if len(runs) >= FOLD_GROUP for k in runs}


def _group_block(view: Any, runs: list[Any]) -> list[str]:
    """A run group in a few lines: its runs, verdicts and states counted, those left out said (failed, invalid,
    tainted, broken: as compare leaves them out) apart from baseline runs (measured without the patch), and each
    metric's median and range over the runs that count (`show --json` has every run)."""
    from statistics import median

    from stackmgr.evidence.link_state import link_mark, link_state

    def counted(words: list[str]) -> str:
        found: dict[str, int] = {}
        for word in words:
            found[word] = found.get(word, 0) + 1
        return ", ".join(w if n == len(words) else f"{n} {w}" for w, n in found.items())

    first, last = runs[0], runs[-1]
    states = {k.id: link_state(view.ev, k) for k in runs}
    counting = [k for k in runs if states[k.id].usable]
    out = [f"{states[k.id].left_out_why()}" for k in runs if not states[k.id].usable]
    head = (f"  {one_line(first.created[:10])} run group {one_line(str(first.run['group']))}: {len(runs)} runs "
            f"({one_line(first.id)} … {one_line(last.id)}) · {counted([k.verdict for k in runs])} · "
            f"{counted([view.states[k.id] for k in runs])}")  # fmt: skip
    if baselines := [k for k in counting if not k.measures_patch]:
        head += f" · {output.plural(len(baselines), 'baseline run')} ({one_line(link_mark(baselines[0]))})"
    if out:
        head += " · " + output.paint(f"{len(out)} left out: {one_line(counted(out))}", "red")
    lines = [one_line(head)]
    for m in first.metrics if counting else []:
        values = [x.value for k in counting for x in k.metrics if x.name == m.name]
        if values:
            lines.append(f"      {one_line(m.name)}  {_value(median(values))} {one_line(m.unit)}  "
                         f"{ARROW.get(m.direction, '?')}  median of {len(values)} ({_value(min(values))} – "
                         f"{_value(max(values))})")  # fmt: skip
    if not counting:
        lines.append("      no run of it counts: no median")
    arts = [a for k in runs for a in k.artifacts]
    bad = sum(1 for a in arts if not view.artifact_ok(a.path, a.sha256))
    said = f", {bad} CHANGED OR MISSING" if bad else " (sha ok)"
    lines.append(f"      {output.plural(len(arts), 'artifact')}{said} · each run: `show --json`")
    return lines


@click.command("show")
@click.argument("patch", shell_complete=patch_names)
@json_option()
@pass_context
def show_cmd(ctx: Context, patch: str) -> None:
    """One patch: header, description, diffstat, status, and every link with its state."""
    from stackmgr.commands.links import PatchView, measured_lines
    from stackmgr.evidence.link_state import link_mark
    from stackmgr.evidence.targets import patch_targets

    view = PatchView(open_store(ctx.store), patch)
    checks = patch_targets(view.store, view.name, view.ev)  # its series' targets (evidence/targets.py)
    if ctx.json:
        output.emit_json({**view.to_json(), **({"targets": [c.to_json() for c in checks]} if checks else {})})
        view.save()
        return
    name, header, status, links = view.name, view.header, view.status, view.links
    badge = status.upper() + (" (do not revive)" if view.do_not_revive else "")
    colour = {"rejected": "red", "promoted": "green"}.get(status, "yellow")
    output.out(f"{output.paint(name, 'bold')}   tree {one_line(header.tree)}   base {one_line(header.base[:12])}"
               f"   status {output.paint(badge, colour)}")  # fmt: skip
    output.out(f"  {one_line(header.subject)}")
    for line in header.body.splitlines():
        output.out(f"  {line}")
    for line in view.stat.splitlines():
        output.out(f"  {line}")
    output.out(f"links ({len(links)}):" if links else "no links yet (`stackmgr link PATCH ARTIFACT…`)")
    folded = _run_groups(links, view.amended_by)
    for link in links:
        if (group := folded.get(link.id)) is not None:  # a run group: one block, where its first run ran
            if group[0] is link:
                for line in _group_block(view, group):
                    output.out(line)
            if not link.lesson and not link.amends:  # a verdict's record is shown too: its lesson, what it amends
                continue
        if link.id in view.amended_by:  # a draft completed, a result corrected: the record that replaces it says all
            output.out(output.paint(f"  {one_line(link.created[:10])} {one_line(link.id)}  amended by "
                                    f"{one_line(view.amended_by[link.id])}", "dim"))  # fmt: skip
            continue
        base = view.baseline_metrics(link)
        gates = " ".join(f"{one_line(g.name)} {_mark(g.status)}" for g in link.gates)
        vs = f" · vs baseline {one_line(link.baseline)}" if base else ""
        output.out(f"  {one_line(link.created[:10])} {one_line(link.id)}" + (f"  {gates}" if gates else "")
                   + f" · {one_line(link.verdict)} · {view.states[link.id]}" + (vs if link.metrics else "")
                   + ("" if link.metrics else " · no metrics")
                   + (" · " + output.paint(marked, "red") if (marked := link_mark(link)) else ""))  # fmt: skip
        for line in metric_table(link.metrics, base):
            output.out(line)
        for i, line in enumerate(link.lesson.splitlines()):  # a lesson of several lines keeps them, indented
            output.out(f"      {'lesson:' if i == 0 else '       '} {one_line(line)}")
        if link.amends:
            output.out(f"      amends {one_line(link.amends)}")
        for line in measured_lines(view.ev, link):
            output.out(f"      {one_line(line)}")
        for a in link.artifacts:
            ok = view.artifact_ok(a.path, a.sha256)
            origin = f", copied from {a.origin}" if a.origin.startswith("/") else (f", {a.origin}" if a.origin else "")
            said = "sha ok" if ok else output.paint("CHANGED OR MISSING", "red")
            output.out(f"      {one_line(a.path)} ({said}{one_line(origin)})")
    for check in checks:
        output.out(one_line(check.line))
    for o in view.overrides:
        output.out(f"do-not-revive overridden ({one_line(', '.join(o.lanes))}): {one_line(o.said())}")
    view.save()


@click.command("links")
@click.option("--tree", shell_complete=tree_names, help="Only links of patches of this tree.")
@click.option("--series", shell_complete=series_names, help="Only links of patches in this series.")
@click.option("--verdict", help="Only links with this verdict.",
              type=click.Choice(["promoted", "rejected", "experimental", "inconclusive", "superseded"]))  # fmt: skip
@click.option("--stale", is_flag=True,
              help="Only links whose evidence no longer holds (stale, broken, orphaned, edited).")  # fmt: skip
@click.option("--metric", help="Only links with this metric, and show it.")
@click.option("--sort", "sort_by", type=click.Choice(["date", "patch", "metric", "state"]), default="date",
              help="Order; by metric: per run configuration, best first by the metric's direction.")  # fmt: skip
@click.option("--all", "show_amended", is_flag=True,
              help="Also the records a later one amends, each marked with the record that replaces it.")  # fmt: skip
@json_option()
@pass_context
def links_cmd(ctx: Context, tree: str | None, series: str | None, verdict: str | None, stale: bool,
              metric: str | None, sort_by: str, show_amended: bool) -> None:  # fmt: skip
    """A table of current links: date, link, patch, metric, gates, verdict, state. Sorted by a metric, the
    links are grouped by run configuration (model, request rate, max concurrency, prompts), each group under a
    header, never ranked across groups. A record that a later one amends is left out unless --all (--json
    lists every record, with its amended_by)."""
    from stackmgr.commands.links import LinkTable

    if sort_by == "metric" and not metric:
        from stackmgr.errors import UsageProblem

        raise UsageProblem("--sort metric needs --metric NAME", "say which metric to sort by")
    table = LinkTable(open_store(ctx.store), tree, series, verdict, stale, metric, sort_by, whole=ctx.json,
                      show_amended=show_amended)  # fmt: skip
    from stackmgr.evidence.targets import targets_of

    checks = targets_of(table.store, [series] if series else None, table.ev)  # the series' targets
    if ctx.json:
        output.emit_json({**table.to_json(), **({"targets": [c.to_json() for c in checks]} if checks else {})})
        table.save()
        return
    if not table.rows:
        output.out("no links match")
    grouped, header = sort_by == "metric", None
    indent = "  " if grouped else ""
    columns = metric_columns(table.rows, metric, table.headline)
    named = any(_run_name(link) for link, _ in table.rows)  # a RUN column tells an ab's A runs from its B runs
    titles = ["DATE", "LINK", "PATCH", "TREE", *(["RUN"] if named else []), *columns, "GATES", "VERDICT", "STATE"]
    rows = [_link_row(link, state, columns, table, named) for link, state in table.rows]
    widths = [max(len(cell) for cell in column) for column in zip(titles, *rows, strict=True)]
    lines = [indent + _cells(titles, widths)] if rows else []
    for (link, _state), row in zip(table.rows, rows, strict=True):
        if grouped and (config := table.config(link)) != header:
            lines += [""] if header is not None else []
            lines.append(config_line(config))
            header = config
        lines.append(indent + _cells(row, widths))
    if lines:
        output.out("\n".join(lines))  # written at once: thousands of rows
    for check in checks:
        output.out(one_line(check.line))
    if table.hidden:
        output.err(f"stackmgr: {output.plural(table.hidden, 'amended record')} not listed "
                   "(`stackmgr links --all` lists them)")
    table.save()


HEADLINE_LATENCIES = ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "mean_e2el_ms")
MAX_METRIC_COLUMNS = 4  # beyond, the rest share a column `other`, each cell saying its metric's name


def metric_columns(rows: list[tuple[Any, str]], metric: str | None, headline: str | None) -> list[str]:
    """The metric columns of `links`: `--metric`'s alone; else the headline, a latency (the first of
    HEADLINE_LATENCIES a listed link has), then each metric a link shows for lack of the headline."""
    from stackmgr.commands.links import metric_of, shown_metric

    if metric:
        return [metric]
    shown = [m.name for link, _ in rows if (m := shown_metric(link, None, headline)) is not None]
    latency = next((n for n in HEADLINE_LATENCIES if any(metric_of(link, n) for link, _ in rows)), None)
    names = list(dict.fromkeys([n for n in (headline,) if n in shown] + ([latency] if latency else []) + shown))
    return names if len(names) <= MAX_METRIC_COLUMNS else [*names[: MAX_METRIC_COLUMNS - 1], "other"]


def _run_name(link: Any) -> str:
    """The run a listed record was written by (`run --name`, an ab's `ab-P-…-A3`), "" for none."""
    name = link.run_name if hasattr(link, "run_name") else link.run.get("name", "")
    return name if isinstance(name, str) else ""


def _link_row(link: Any, state: str, columns: list[str], table: Any, named: bool = False) -> list[str]:
    """The cells of a link's `links` row: `—` where it has nothing to say."""
    from stackmgr.commands.links import metric_of, shown_metric
    from stackmgr.evidence.link_state import link_mark

    values = []
    for name in columns:
        if name == "other":  # the link's own metric, when no column of its own shows it
            m = shown_metric(link, None, table.headline)
            values.append(_metric_text(m) if m is not None and m.name not in columns else "—")
            continue
        m = metric_of(link, name)
        values.append(output.quantity(m.value, m.unit) if m is not None else "—")
    gates = " ".join(f"{one_line(g.name)}{_mark(g.status)}" for g in link.gates) or "—"
    taint = f" {marked}" if (marked := link_mark(link)) else ""  # evidence/link_state.py
    replaced = f" amended by {one_line(table.amended_by[link.id])}" if link.id in table.amended_by else ""
    first = [one_line(x) for x in (link.created[:10], link.id, link.patch, link.tree)]
    first += [one_line(_run_name(link) or "—")] if named else []
    return [*first, *values, gates, one_line(link.verdict), f"{state}{taint}{replaced}"]


def _cells(row: list[str], widths: list[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()


@click.command("verify")
@json_option()
@pass_context
def verify_cmd(ctx: Context) -> None:
    """Re-hash every artifact and re-derive every metric; exit 1 on any mismatch, listing it."""
    from stackmgr.evidence.states import verify_all

    with output.activity("verifying links"):
        problems, checked = verify_all(open_store(ctx.store))
    if ctx.json:
        listed = [{"link": lid, "patch": patch, "what": what} for lid, patch, what in problems]
        output.emit_json({"schema": 1, "ok": not problems, "checked": checked, "problems": listed})
    else:
        for lid, patch, what in problems:
            output.out(f"{one_line(lid)} ({one_line(patch)}): {one_line(what)}")
        output.err(f"stackmgr: verified {output.plural(checked, 'link')}: {output.plural(len(problems), 'problem')}")
    raise SystemExit(1 if problems else 0)
