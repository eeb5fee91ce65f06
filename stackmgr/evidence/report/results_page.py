"""`results.html`: the newest links and their artifacts (RESULTS_ROWS of each), in one table each."""

from __future__ import annotations

from stackmgr.evidence.report.markup import Markup, artifact_name, e, run_said, size_label, when

RESULTS_ROWS = 1000  # links, and artifacts, listed: the page of a store of any size stays readable


class ResultsPage(Markup):
    def results_page(self) -> str:
        here = "results.html"
        rows = []
        for link in list(reversed(self.links))[:RESULTS_ROWS]:
            metrics = "".join(f'<div class="metric">{self.metric_inline(link, m)}</div>'
                              for m in self.lead_metrics(link.metrics)[:3])  # fmt: skip
            more = f' <span class="muted">+{len(link.metrics) - 3}</span>' if len(link.metrics) > 3 else ""
            rows.append(
                f'<tr class="{"" if link.id in self.current else "amended"}"><td class="nowrap">'
                f"{e(when(link.created))}</td><td>{self.link_ref(here, link)}</td>"
                f'<td>{self.patch_link(here, link.patch)}</td><td><span class="tree">{e(link.tree)}</span></td>'
                f"<td>{metrics}{more}</td>"
                f"<td>{self.gate_chips(link)}</td><td>{self.badge_status(link.verdict, link.do_not_revive)}</td>"
                f"<td>{self.badge_link(link)}</td></tr>"
            )  # fmt: skip
        head = "".join(f"<th>{h}</th>" for h in ("date", "link", "patch", "tree", "metrics", "gates", "verdict",
                                                 "state"))  # fmt: skip
        body = [f'<h1>Results</h1><h2 id="links">Links <small>{len(self.links)}</small></h2>']
        body.append(f'<div class="scroll"><table class="list"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
                    "</tbody></table></div>" if rows else '<p class="muted">No links yet.</p>')  # fmt: skip
        if len(self.links) > len(rows):
            body.append(f'<p class="muted">The newest {len(rows)} links; the {len(self.links) - len(rows)} older '
                        "ones are on their patches' pages (<code>stackmgr links</code> lists every one).</p>")
        arows = []
        newest = sorted(self.artifacts.values(), key=lambda a: max((c[0].created for c in a.cites), default=""),
                        reverse=True)[:RESULTS_ROWS]  # fmt: skip
        for art in sorted(newest, key=lambda a: a.path):
            recorded = {a.sha256 for _l, a in art.cites}
            ok = ('<span class="bad">missing</span>' if art.current is None else
                  '<span class="ok">verifies</span>' if art.current in recorded else
                  '<span class="bad">changed</span>')  # fmt: skip
            first, a = min(art.cites, key=lambda c: c[0].created) if art.cites else (None, None)
            name = artifact_name(a) if a is not None else art.path
            run = e(run_said(first)) if first is not None and first.run else ""
            arows.append(f'<tr><td><a class="mono" href="{self.href(here, art.page)}">{e(name)}</a></td>'
                         f"<td>{run}</td>"
                         f'<td class="mono muted">{e(art.path) if name != art.path else ""}</td>'
                         f'<td class="num">{len(art.cites)}</td><td>{ok}</td>'
                         f'<td class="muted">{e(size_label(art.size))}</td></tr>')  # fmt: skip
        body.append(f'<h2 id="artifacts">Artifacts <small>{len(self.artifacts)}</small></h2>')
        heads = "".join(f"<th>{h}</th>" for h in ("file", "written by", "kept as", "links", "now", "size"))
        body.append(f'<div class="scroll"><table class="list"><thead><tr>{heads}</tr></thead><tbody>{"".join(arows)}'
                    "</tbody></table></div>" if arows else '<p class="muted">No artifacts yet.</p>')  # fmt: skip
        if len(self.artifacts) > len(arows):
            body.append(f'<p class="muted">The {len(arows)} artifacts of the newest links; the '
                        f"{len(self.artifacts) - len(arows)} others are on their links' cards.</p>")
        return self.frame(here, "Results", "results", "".join(body))
