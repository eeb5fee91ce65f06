"""`graveyard.html`: rejected and do-not-revive lanes with their lessons, filtered client-side by a search box."""

from __future__ import annotations

from stackmgr.evidence.records import Link
from stackmgr.evidence.report.assets import GRAVEYARD_JS
from stackmgr.evidence.report.markup import Markup, e, when


class GraveyardPage(Markup):
    def graveyard_page(self) -> str:
        here = "graveyard.html"
        lanes: dict[str, list[Link]] = {}
        for link in self.graves():
            lanes.setdefault(link.patch, []).append(link)
        order = sorted(lanes, key=lambda n: max(k.created for k in lanes[n]), reverse=True)
        out = []
        for name in order:
            info = self.patches[name]
            entries = []
            for link in reversed(lanes[name]):
                metrics = ", ".join(self.metric_inline(link, m) for m in self.lead_metrics(link.metrics)[:3])
                entries.append(
                    f'<div class="grave"><div class="card-head"><span class="date">{e(when(link.created))}</span> '
                    f"{self.link_ref(here, link)} {self.badge_status(link.verdict, link.do_not_revive)} "
                    f"{self.badge_link(link)}</div>"
                    + (f'<div class="lesson"><span class="label">lesson</span>{e(link.lesson)}</div>' if link.lesson
                       else '<p class="muted">no lesson recorded</p>')
                    + (f'<div class="gm">{metrics} {self.gate_chips(link)}</div>' if metrics or link.gates else "")
                    + "</div>"
                )  # fmt: skip
            where = ", ".join(f"{e(s)} #{n}" for s, n in info.series) or "in no series"
            out.append(f'<article class="lane"><h2>{self.patch_link(here, name)} <span class="tree">'
                       f'{e(info.tree or "?")}</span> <small>{where}</small></h2>'
                       + (f'<p class="lead">{e(info.subject)}</p>' if info.subject else "") + "".join(entries)
                       + "</article>")  # fmt: skip
        body = ('<h1>Graveyard</h1><p class="muted">Rejected and do-not-revive lanes, with what they taught. '
                "A lane marked <i>do not revive</i> makes <code>series add</code> and <code>apply</code> refuse "
                "the same change (by name or patch-id) without <code>--override</code>.</p>"
                '<div class="search"><input id="q" type="search" placeholder="search lessons, patches, metrics…" '
                'aria-label="search the graveyard" autocomplete="off"> <span id="count" class="muted">'
                f"{len(order)} of {len(order)}</span></div>"
                + ("".join(out) if out else '<p class="muted" id="empty">Nothing buried yet.</p>')
                + '<p class="muted" id="none" hidden>No lane matches.</p>')  # fmt: skip
        return self.frame(here, "Graveyard", "graveyard", body, GRAVEYARD_JS)
