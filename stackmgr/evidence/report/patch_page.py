"""`patches/<name>.html`: header; the headline metric, its verdict against the series' baseline and its picture
across the patch's runs (report/figures.py); description, diffstat, the diff, and beside it the evidence timeline
of links, each leading with the headline, the other metrics folded."""

from __future__ import annotations

import re
from urllib.parse import quote

from stackmgr.evidence.metrics import Metric
from stackmgr.evidence.records import Link
from stackmgr.evidence.report.attribution import Attribution
from stackmgr.evidence.report.diff import diff_row, parse_diff
from stackmgr.evidence.report.markup import artifact_name, e, num, run_said, size_label, when
from stackmgr.evidence.report.model import PatchInfo
from stackmgr.store.patchfile import diff_part

ARROWS = {"higher": "↑", "lower": "↓"}  # which way a metric is better; "?" unknown
DIFF_ROWS = 20000  # per patch page; the rest is in the raw copy
CARDS = 50  # newest links shown whole on a patch page; older ones one line each
OLDER_ROWS = 1000  # of those, at most; `show PATCH` lists the rest


class PatchPage(Attribution):
    def patch_page(self, info: PatchInfo) -> str:
        here = info.page
        up = "../" * here.count("/")
        facts = [("tree", f'<span class="tree">{e(info.tree or "?")}</span>')]
        if info.base:
            facts.append(("base", f'<span class="mono" title="{e(info.base)}">{e(info.base[:12])}</span>'))
        if info.series:
            facts.append(("series", ", ".join(
                f'<a href="{up}index.html#series-{e(s)}">{e(s)}</a> #{n}' for s, n in info.series)))  # fmt: skip
        if info.author:
            facts.append(
                ("author", e(info.author) + (f' <span class="muted">{e(info.date)}</span>' if info.date else ""))
            )
        if info.sha256:
            facts.append(("sha256", f'<span class="mono" title="{e(info.sha256)}">{e(info.sha256[:16])}…</span>'))
        if info.patch_id:
            facts.append(("patch-id", f'<span class="mono">{e(info.patch_id[:16])}…</span>'))
        if info.raw:
            facts.append(("raw", f'<a href="{self.href(here, info.raw)}">{e(info.name)}.patch</a>'))
        dl = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in facts)
        head = [f'<div class="crumbs"><a href="{up}index.html">index</a> / {e(info.tree or "?")}</div>',
                f'<h1><span class="mono">{e(info.name)}</span> {self.badge_status(info.status, info.dnr)}'
                "</h1>"]  # fmt: skip
        if info.subject:
            head.append(f'<p class="lead">{e(info.subject)}</p>')
        head.append(f'<dl class="facts">{dl}</dl>')
        vs = self.against(info)  # against its series' baseline runs (report/against.py)
        blamed = "".join(f'<p class="against">{e(b.words)}</p>' for b in self.blames(info))  # its own step
        picture = self.patch_picture(info)  # its headline metric across its results (report/figures.py)
        if vs or blamed or picture:
            head.append('<section class="headline"><h2>Headline</h2>'
                        + (f'<p class="against">{vs}</p>' if vs else "") + blamed + picture + "</section>")  # fmt: skip
        if info.error:
            head.append(f'<p class="error">{e(info.error)}</p>')
        if info.body:
            head.append(f'<div class="desc">{e(info.body)}</div>')
        if info.data is None:
            head.append('<p class="error">The patch file is gone: its links are kept and shown here.</p>')
        left = self.diff_html(info) if info.data is not None else '<p class="muted">no diff to show</p>'
        newest = list(reversed(info.links))
        cards = [self.link_card(here, link) for link in newest[:CARDS]] + self.older_rows(here, newest[CARDS:])
        right = (f'<h2>Evidence <small>{len(info.links)} link{"s" if len(info.links) != 1 else ""}</small></h2>'
                 + ("".join(cards) or '<p class="muted">No links yet: <code>stackmgr link PATCH ARTIFACT…</code>'
                    "</p>") + self.overrides_html(info))  # fmt: skip
        body = "".join(head) + f'<div class="split"><section class="diffcol">{left}</section>' \
            f'<aside class="evidence">{right}</aside></div>'  # fmt: skip
        return self.frame(here, info.name, "", body)

    def metric_row(self, link: Link, m: Metric) -> str:
        return (
            f'<tr><td class="mono">{e(m.name)}</td><td class="num"><b>{e(num(m.value))}</b></td>'
            f"<td>{e(m.unit)}</td><td>{self.delta(link, m.name, m.value, m.direction)}</td>"
            f'<td class="muted" title="which way is better (? unknown)">{ARROWS.get(m.direction, "?")}</td></tr>'
        )

    def more_metrics(self, link: Link, rest: list[Metric]) -> str:
        """The link's other metrics folded in a <details>; those equal to its baseline's value are named once, not
        listed as `+0.0% (+0)`."""
        if not rest:
            return ""
        same = [m for m in rest if (found := self.baseline_of(link, m.name)) is not None and found[1] == m.value]
        shown = [m for m in rest if m not in same]
        rows = "".join(self.metric_row(link, m) for m in shown)
        unchanged = (f'<p class="muted">unchanged from the baseline: {e(", ".join(m.name for m in same))}</p>'
                     if same else "")  # fmt: skip
        what = f"{len(shown)} more metric{'s' if len(shown) != 1 else ''}"
        what += f", {len(same)} unchanged" if same else ""
        table = f'<table class="metrics">{rows}</table>' if rows else ""
        return f'<details class="more"><summary>{what}</summary>{table}{unchanged}</details>'

    def overrides_html(self, info: PatchInfo) -> str:
        """The do-not-revive lanes this patch brought back anyway: why, who, when, with which command."""
        if not info.overrides:
            return ""
        items = "".join(f'<li><b>{e(o.reason)}</b> <span class="muted">{e(o.author)} · {e(when(o.at))} · '
                        f'<code>{e(o.command)}</code> · lane {e(", ".join(o.lanes))}</span></li>'
                        for o in reversed(info.overrides))  # fmt: skip
        return f'<h2 id="overrides">Do-not-revive overridden</h2><ul class="overrides">{items}</ul>'

    def diff_html(self, info: PatchInfo) -> str:
        assert info.data is not None
        files = parse_diff(diff_part(info.data))
        if not files:
            return '<h2>Diff</h2><p class="muted">the patch holds no diff</p>'
        mentions = self._mentions(info, [f.path for f in files])
        total_plus = sum(f.plus for f in files)
        total_minus = sum(f.minus for f in files)
        stat_rows = []
        widest = max((f.plus + f.minus for f in files), default=1) or 1
        for n, f in enumerate(files):
            bar_p = round(80 * f.plus / widest)
            bar_m = round(80 * f.minus / widest)
            counts = "binary" if f.binary and not (f.plus or f.minus) else f"+{f.plus} −{f.minus}"
            stat_rows.append(
                f'<tr><td><a class="mono" href="#f{n}">{e(f.path)}</a>'
                f'{_kind(f.kind)}</td>'
                f'<td class="nowrap num">{e(counts)}</td><td class="bars"><span class="bp" style="width:{bar_p}px">'
                f'</span><span class="bm" style="width:{bar_m}px"></span></td></tr>'
            )  # fmt: skip
        out = [f'<h2>Diff <small>{len(files)} file{"s" if len(files) != 1 else ""}, '
               f'<span class="plus">+{total_plus}</span> <span class="minus">−{total_minus}</span></small></h2>'
               f'<table class="diffstat">{"".join(stat_rows)}</table>']  # fmt: skip
        budget = DIFF_ROWS
        for n, f in enumerate(files):
            cited = mentions.get(f.path, [])
            cite = ""
            if cited:
                refs = ", ".join(f'<a class="mono" href="#{quote(lid, safe="")}">{e(lid)}</a>' for lid in cited)
                cite = f'<span class="cited" title="artifacts of these links name this file">named in {refs}</span>'
            out.append(f'<section class="file" id="f{n}"><div class="fname"><span class="mono">{e(f.path)}</span>'
                       f'{_kind(f.kind)} <span class="plus">+{f.plus}</span> '
                       f'<span class="minus">−{f.minus}</span>{cite}</div>')  # fmt: skip
            if budget <= 0:
                out.append(f'<p class="muted">not shown: the page stops after {DIFF_ROWS} lines; see the '
                           f'<a href="{self.href(info.page, info.raw)}">raw patch</a></p></section>')  # fmt: skip
                continue
            rows = f.rows[:budget]
            budget -= len(rows)
            out.append('<div class="scroll"><table class="diff"><tbody>')
            out.extend(diff_row(r) for r in rows)
            out.append("</tbody></table></div>")
            if len(rows) < len(f.rows):
                out.append(f'<p class="muted">{len(f.rows) - len(rows)} more lines not shown; see the '
                           f'<a href="{self.href(info.page, info.raw)}">raw patch</a></p>')  # fmt: skip
            out.append("</section>")
        return "".join(out)

    def _mentions(self, info: PatchInfo, paths: list[str]) -> dict[str, list[str]]:
        """Which of this patch's links cite an artifact whose text names a file of the diff."""
        found: dict[str, list[str]] = {}
        named = {path: re.compile(r"(?<![\w./-])" + re.escape(path) + r"(?![\w/-])") for path in paths}
        for link in info.links:
            texts = [self.artifacts[a.path].text for a in link.artifacts if a.path in self.artifacts]
            for path, pattern in named.items():
                if any(pattern.search(text) for text in texts if path in text):
                    found.setdefault(path, []).append(link.id)
        return found

    def older_rows(self, here: str, older: list[Link]) -> list[str]:
        """The links past the newest CARDS, one row each (the anchor other pages link to kept), the newest
        OLDER_ROWS of them: a patch of thousands of runs keeps a page of bounded size."""
        if not older:
            return []
        rows = []
        for link in older[:OLDER_ROWS]:
            lead = self.lead_metrics(link.metrics)[:1]
            metric = self.metric_inline(link, lead[0]) if lead else ""
            rows.append(f'<tr id="{e(link.id)}"><td class="nowrap">{e(when(link.created))}</td>'
                        f'<td><span class="mono">{e(link.id)}</span></td><td>{metric}</td>'
                        f"<td>{self.gate_chips(link)}</td><td>{self.badge_status(link.verdict, link.do_not_revive)}"
                        f"</td><td>{self.badge_link(link)}</td></tr>")  # fmt: skip
        left = len(older) - len(rows)
        rest = (f'<p class="muted">{left} older link{"s" if left != 1 else ""} not shown: '
                f"<code>stackmgr show {e(older[0].patch)}</code> lists every one</p>" if left else "")  # fmt: skip
        return [f'<details class="older"><summary>{len(older)} older link{"s" if len(older) != 1 else ""}, one '
                f'line each</summary><table class="list"><tbody>{"".join(rows)}</tbody></table>{rest}</details>']

    def link_card(self, here: str, link: Link) -> str:
        state = self.states[link.id]
        classes = f"card c-{e(state)}" + ("" if link.id in self.current else " amended")
        head = (f'<div class="card-head"><span class="date">{e(when(link.created))}</span> '
                f'<a class="mono lid" href="#{quote(link.id, safe="")}">{e(link.id)}</a> {self.badge_link(link)} '
                f"{self.badge_status(link.verdict, link.do_not_revive)}</div>")  # fmt: skip
        parts = [head]
        if link.id in self.amended_by:
            parts.append(f'<p class="note">amended by {self.link_ref(here, self.by_id[self.amended_by[link.id]])}'
                         "</p>")  # fmt: skip
        if link.metrics:
            base = self.by_id.get(link.baseline)
            first, *rest = self.lead_metrics(link.metrics)
            unlike = self.unlike_baseline(link)
            said = f" <small>another run configuration: {e(unlike)}</small>" if unlike else ""
            cap = f"<caption>Δ vs {self.link_ref(here, base)}{said}</caption>" if base is not None else ""
            parts.append(f'<table class="metrics lead">{cap}{self.metric_row(link, first)}</table>')
            parts.append(self.more_metrics(link, rest))
        elif link.baseline and link.baseline not in self.by_id:
            parts.append(f'<p class="note bad">baseline {e(link.baseline)} not found</p>')
        if link.gates:
            details = "".join(f'<span class="muted"> {e(g.name)}: {e(g.detail)}</span>' for g in link.gates if g.detail)
            parts.append(f'<div class="gates">{self.gate_chips(link)}{details}</div>')
        if link.lesson:
            parts.append(f'<div class="lesson"><span class="label">lesson</span>{e(link.lesson)}</div>')
        if link.artifacts:
            items = []
            for a in link.artifacts:
                art = self.artifacts[a.path]
                ok = art.current == a.sha256
                check = ('<span class="ok">sha ok</span>' if ok else
                         '<span class="bad">missing</span>' if art.current is None else
                         '<span class="bad">changed</span>')  # fmt: skip
                anchor = f'<span class="muted">#{e(a.anchor)}</span>' if a.anchor else ""
                items.append(f'<li><a class="mono" href="{self.href(here, art.page)}" title="{e(a.path)}">'
                             f"{e(artifact_name(a))}</a>{anchor} "
                             f'{check} <span class="muted">{e(size_label(a.size))}</span></li>')  # fmt: skip
            run = f'<div class="meta">written by {e(run_said(link))}</div>' if link.run else ""
            parts.append(f'{run}<ul class="arts">{"".join(items)}</ul>')
        stack = []
        for s in link.stack:
            names = ", ".join(self.patch_link(here, n) for n, _h in s.patches) or '<span class="muted">none</span>'
            residue = ' <span class="state s-residue">⚠ residue</span>' if s.residue else ""
            stack.append(f'<li><span class="tree">{e(s.tree)}</span> on <span class="mono">{e(s.base[:12])}</span>'
                         f'{(" series " + e(s.series)) if s.series else ""}{residue}<br>{names}</li>')  # fmt: skip
        if stack:
            parts.append(f'<details><summary>measured on</summary><ul class="stack">{"".join(stack)}</ul></details>')
        meta = [f"by {e(link.author)}"] if link.author else []
        if link.amends:
            target = self.by_id.get(link.amends)
            meta.append("amends " + (self.link_ref(here, target) if target else e(link.amends)))
        if meta:
            parts.append(f'<div class="meta">{" · ".join(meta)}</div>')
        return f'<article class="{classes}" id="{e(link.id)}">{"".join(parts)}</article>'


def _kind(kind: str) -> str:
    return f' <span class="kind">{e(kind)}</span>' if kind else ""
