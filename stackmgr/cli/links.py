"""`stackmgr link`, `show`, `links`, `verify`: evidence for patches, and what it is worth today."""

from __future__ import annotations

import os
from typing import Any

import click

from stackmgr import output
from stackmgr.cli.context import store_and_json
from stackmgr.store.config import open_store


def _mark(status: str) -> str:
    return {"pass": "✓", "fail": "✗", "not-run": "–", "error": "!"}.get(status, "?")


def _value(value: float) -> str:
    return f"{value:.6g}"


@click.command("link")
@click.argument("patch")
@click.argument("artifacts", nargs=-1)
@click.option("--metric", "metric_specs", multiple=True, metavar="NAME=VALUE[UNIT]|NAME=/REGEX/",
              help="A metric, or a regex (group 1: the number) to pull it from a log.")  # fmt: skip
@click.option("--from-json", "from_json", multiple=True, metavar="FILE",
              help="Take the metrics of a `vllm bench serve --save-result` JSON file.")  # fmt: skip
@click.option("--gate", "gate_specs", multiple=True, metavar="NAME=STATUS[:DETAIL]",
              help="A quality gate: pass, fail, not-run or error.")  # fmt: skip
@click.option("--verdict", default="experimental", show_default=True,
              type=click.Choice(["promoted", "rejected", "experimental", "inconclusive", "superseded"]))  # fmt: skip
@click.option("--lesson", default="", help="What was learned (kept with rejected lanes).")
@click.option("--do-not-revive", is_flag=True, help="Warn loudly whenever this change comes back.")
@click.option("--amends", default="", metavar="LINK", help="This record corrects an earlier one.")
@click.option("--baseline", default="", metavar="LINK", help="Compare this record's metrics with that link's.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def link_cmd(ctx: click.Context, patch: str, artifacts: tuple[str, ...], metric_specs: tuple[str, ...],
             from_json: tuple[str, ...], gate_specs: tuple[str, ...], verdict: str, lesson: str,
             do_not_revive: bool, amends: str, baseline: str, as_json: bool) -> None:  # fmt: skip
    """Record which ARTIFACTS (logs, notes, benchmark JSON) justify or refute PATCH."""
    from stackmgr.evidence.states import create_link
    from stackmgr.store.names import patch_name

    store_dir, global_json = store_and_json(ctx)
    store = open_store(store_dir)
    link = create_link(store, patch_name(patch), list(artifacts), metric_specs=list(metric_specs),
                       gate_specs=list(gate_specs), from_json=list(from_json), verdict=verdict, lesson=lesson,
                       do_not_revive=do_not_revive, amends=amends, baseline=baseline)  # fmt: skip
    rel = os.path.relpath(link.file, store.root)
    if as_json or global_json:
        output.emit_json({"schema": 1, "id": link.id, "file": rel, "patch": link.patch})
        return
    shown = ", ".join(f"{m.name} {_value(m.value)}{m.unit}" for m in link.metrics[:3])
    output.out(f"linked {link.id} to {link.patch}: {len(link.artifacts)} artifact(s)"
               + (f", {shown}" if shown else "") + f"; {link.verdict}; {rel}")  # fmt: skip


def link_json(ev: Any, link: Any, state: str, baseline: Any) -> dict[str, Any]:
    """One link as `show --json` and `links --json` give it (docs/FORMATS.md#json-output)."""
    base = {m.name: m.value for m in baseline.metrics} if baseline is not None else {}
    return {
        "id": link.id, "state": state, "created": link.created, "author": link.author, "patch": link.patch,
        "tree": link.tree, "amends": link.amends or None, "baseline": link.baseline or None,
        "metrics": [{"name": m.name, "value": m.value, "unit": m.unit, "direction": m.direction,
                     "source": m.source or None,
                     "delta": (m.value - base[m.name]) if m.name in base else None} for m in link.metrics],
        "gates": [{"name": g.name, "status": g.status, "detail": g.detail} for g in link.gates],
        "verdict": {"status": link.verdict, "lesson": link.lesson, "do_not_revive": link.do_not_revive},
        "artifacts": [{"path": a.path, "sha256": a.sha256, "size": a.size, "ok": ev.hashes.sha256(a.path) == a.sha256}
                      for a in link.artifacts],
        "stack": [{"tree": s.tree, "base": s.base, "series": s.series, "residue": s.residue,
                   "patches": [{"name": n, "sha256": h} for n, h in s.patches]} for s in link.stack],
    }  # fmt: skip


def _metric_text(m: Any, base: dict[str, float]) -> str:
    text = f"{m.name} {_value(m.value)}{(' ' + m.unit) if m.unit else ''}"
    if base.get(m.name):
        text += f" ({(m.value - base[m.name]) / abs(base[m.name]) * 100:+.1f}%)"
    return text


@click.command("show")
@click.argument("patch")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def show_cmd(ctx: click.Context, patch: str, as_json: bool) -> None:
    """One patch: header, description, diffstat, status, and every link with its state."""
    from stackmgr.evidence.records import load_links
    from stackmgr.evidence.states import Evidence, effective, patch_status
    from stackmgr.store.names import patch_name
    from stackmgr.store.patchfile import parse_header

    store_dir, global_json = store_and_json(ctx)
    store = open_store(store_dir)
    name = patch_name(patch)
    path = os.path.join(store.patches_dir, name + ".patch")
    if not os.path.isfile(path):
        from stackmgr.errors import UsageProblem

        raise UsageProblem(f"no patch named {name}", "see `stackmgr series` or `ls patches/`")
    with open(path, "rb") as f:
        data = f.read()
    header = parse_header(data, f"patches/{name}.patch")
    ev = Evidence.gather(store)
    links = load_links(store, name)
    # other patches' records are read only when a baseline points at them
    by_id = {link.id: link for link in (load_links(store) if any(lk.baseline for lk in links) else links)}
    states = {link.id: ev.state(link) for link in links}
    status = patch_status(links, states)
    rec = ev.index.record(name + ".patch") or {}
    dnr = any(link.do_not_revive for link in effective(links))
    if as_json or global_json:
        output.emit_json({"schema": 1, "patch": {
            "name": name, "tree": header.tree, "base": header.base, "sha256": rec.get("sha256"),
            "patch_id": ev.patch_id(name + ".patch"), "status": status, "do_not_revive": dnr,
            "subject": header.subject, "description": header.body, "stat": rec.get("stat")},
            "links": [link_json(ev, link, states[link.id], by_id.get(link.baseline)) for link in links]})  # fmt: skip
        ev.save()
        return
    badge = status.upper() + (" (do not revive)" if dnr else "")
    colour = {"rejected": "red", "promoted": "green"}.get(status, "yellow")
    output.out(f"{output.paint(name, 'bold')}   tree {header.tree}   base {header.base[:12]}   "
               f"status {output.paint(badge, colour)}")  # fmt: skip
    output.out(f"  {header.subject}")
    for line in header.body.splitlines():
        output.out(f"  {line}")
    stat_block = data[data.find(b"\n---\n") + 5 : data.find(b"\ndiff --git ")].decode("utf-8", "replace").rstrip()
    for line in stat_block.splitlines():
        output.out(f"  {line}")
    output.out(f"links ({len(links)}):" if links else "no links yet (`stackmgr link PATCH ARTIFACT…`)")
    for link in links:
        base = {m.name: m.value for m in by_id[link.baseline].metrics} if link.baseline in by_id else {}
        metrics_text = "; ".join(_metric_text(m, base) for m in link.metrics) or "no metrics"
        gates = " ".join(f"{g.name} {_mark(g.status)}" for g in link.gates)
        output.out(f"  {link.created[:10]} {link.id}  {metrics_text}" + (f" · {gates}" if gates else "")
                   + f" · {link.verdict} · {states[link.id]}")  # fmt: skip
        if link.lesson:
            output.out(f"      lesson: {link.lesson}")
        for a in link.artifacts:
            ok = ev.hashes.sha256(a.path) == a.sha256
            output.out(f"      {a.path} ({'sha ok' if ok else output.paint('CHANGED OR MISSING', 'red')})")
    ev.save()


@click.command("links")
@click.option("--tree", help="Only links of patches of this tree.")
@click.option("--series", help="Only links of patches in this series.")
@click.option("--verdict", help="Only links with this verdict.",
              type=click.Choice(["promoted", "rejected", "experimental", "inconclusive", "superseded"]))  # fmt: skip
@click.option("--stale", is_flag=True, help="Only links whose evidence no longer holds (stale, broken, orphaned).")
@click.option("--metric", help="Only links with this metric, and show it.")
@click.option("--sort", "sort_by", type=click.Choice(["date", "patch", "metric", "state"]), default="date")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def links_cmd(ctx: click.Context, tree: str | None, series: str | None, verdict: str | None, stale: bool,
              metric: str | None, sort_by: str, as_json: bool) -> None:  # fmt: skip
    """A table of links: date, link, patch, metric, gates, verdict, state."""
    from stackmgr.evidence.records import load_links
    from stackmgr.evidence.states import Evidence
    from stackmgr.store.series import SeriesFile

    if sort_by == "metric" and not metric:
        from stackmgr.errors import UsageProblem

        raise UsageProblem("--sort metric needs --metric NAME", "say which metric to sort by")
    store_dir, global_json = store_and_json(ctx)
    store = open_store(store_dir)
    ev = Evidence.gather(store)
    links = load_links(store)
    wanted = set(SeriesFile.load(store, series).patch_names()) if series else None
    rows = []
    for link in links:
        if (tree and link.tree != tree) or (wanted is not None and link.patch not in wanted):
            continue
        if (verdict and link.verdict != verdict) or (metric and metric not in {m.name for m in link.metrics}):
            continue
        state = ev.state(link)
        if stale and state in ("fresh", "equivalent"):
            continue
        rows.append((link, state))
    keys = {"date": lambda r: (r[0].created, r[0].id), "patch": lambda r: (r[0].patch, r[0].created),
            "state": lambda r: (r[1], r[0].created),
            "metric": lambda r: -next((m.value for m in r[0].metrics if m.name == metric), float("-inf"))}  # fmt: skip
    rows.sort(key=keys[sort_by])
    by_id = {link.id: link for link in links}
    if as_json or global_json:
        output.emit_json({"schema": 1, "links": [link_json(ev, link, state, by_id.get(link.baseline))
                                                 for link, state in rows]})  # fmt: skip
        ev.save()
        return
    if not rows:
        output.out("no links match")
    for link, state in rows:
        shown = [m for m in link.metrics if not metric or m.name == metric][:1]
        mtext = _metric_text(shown[0], {}) if shown else ""
        gates = " ".join(f"{g.name}{_mark(g.status)}" for g in link.gates)
        output.out(f"{link.created[:10]}  {link.id}  {link.patch:<40} {link.tree:<16} {mtext:<32} {gates:<14} "
                   f"{link.verdict:<12} {state}")  # fmt: skip
    ev.save()


@click.command("verify")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.pass_context
def verify_cmd(ctx: click.Context, as_json: bool) -> None:
    """Re-hash every artifact and re-derive every metric; exit 1 on any mismatch, listing it."""
    from stackmgr.evidence.states import verify_all

    store_dir, global_json = store_and_json(ctx)
    with output.activity("verifying links"):
        problems, checked = verify_all(open_store(store_dir))
    if as_json or global_json:
        listed = [{"link": lid, "patch": patch, "what": what} for lid, patch, what in problems]
        output.emit_json({"schema": 1, "ok": not problems, "checked": checked, "problems": listed})
    else:
        for lid, patch, what in problems:
            output.out(f"{lid} ({patch}): {what}")
        output.err(f"stackmgr: verified {checked} link(s): {len(problems)} problem(s)")
    raise SystemExit(1 if problems else 0)
