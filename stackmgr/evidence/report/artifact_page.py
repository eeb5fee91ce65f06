"""`artifacts/<slug>.html`: which links cite a result file, whether it still verifies, a preview of its text."""

from __future__ import annotations

from stackmgr.evidence.report.markup import Markup, e, size_label, when
from stackmgr.evidence.report.model import ArtifactInfo

PREVIEW_LINES = 200


class ArtifactPage(Markup):
    def artifact_page(self, art: ArtifactInfo) -> str:
        here = art.page
        recorded = {a.sha256 for _link, a in art.cites}
        if art.current is None:
            verdict = '<span class="badge st-rejected">missing</span>'
        elif art.current in recorded and len(recorded) == 1:
            verdict = '<span class="badge st-promoted">verifies</span>'
        elif art.current in recorded:
            verdict = '<span class="badge st-experimental">verifies for some links</span>'
        else:
            verdict = '<span class="badge st-rejected">changed since linked</span>'
        size = f' <span class="muted">{e(size_label(art.size))}</span>' if art.size is not None else ""
        now = e(art.current[:16]) + "…" if art.current and not art.private else "—"
        facts = [("now", f'<span class="mono">{now}</span>{size}')]
        dl = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in facts)
        rows = []
        for link, a in sorted(art.cites, key=lambda c: c[0].created, reverse=True):
            ok = art.current == a.sha256
            rows.append(
                f"<tr><td>{e(when(link.created))}</td><td>{self.link_ref(here, link)}</td>"
                f"<td>{self.patch_link(here, link.patch)}</td><td>{self.badge_status(link.verdict)}</td>"
                f"<td>{self.badge_state(self.states[link.id])}</td>"
                f'<td class="mono" title="{e(a.sha256)}">{e(a.sha256[:12])}</td>'
                f'<td>{"<span class=ok>sha ok</span>" if ok else "<span class=bad>differs</span>"}</td></tr>'
            )  # fmt: skip
        head = "".join(f"<th>{h}</th>" for h in ("date", "link", "patch", "verdict", "state", "recorded", "now"))
        body = [f'<div class="crumbs"><a href="../results.html#artifacts">results</a> / artifact</div>'
                f'<h1 class="path"><span class="mono">{e(art.path)}</span> {verdict}</h1>'
                f'<dl class="facts">{dl}</dl><h2>Cited by <small>{len(art.cites)}</small></h2>'
                f'<div class="scroll"><table class="list"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
                "</tbody></table></div>"]  # fmt: skip
        body.append("<h2>Preview</h2>")
        if art.text:
            if art.current not in recorded:
                body.append('<p class="note bad">The file changed after it was linked: this is its content now, '
                            "not what was measured.</p>")  # fmt: skip
            lines = art.text.removesuffix("\n").split("\n")
            shown = lines[:PREVIEW_LINES]
            rows_html = "".join(f'<tr><td class="ln">{n}</td><td class="code">{e(line)}</td></tr>'
                                for n, line in enumerate(shown, 1))  # fmt: skip
            body.append(f'<section class="file"><div class="fname"><span class="mono">{e(art.path)}</span></div>'
                        f'<div class="scroll"><table class="diff preview"><tbody>{rows_html}</tbody></table></div>'
                        "</section>")  # fmt: skip
            if len(lines) > PREVIEW_LINES or art.truncated:
                body.append(f'<p class="muted">first {len(shown)} lines shown</p>')
        else:
            body.append(f'<p class="muted">{e(art.preview or "empty file")}</p>')
        return self.frame(here, art.path, "results", "".join(body))
