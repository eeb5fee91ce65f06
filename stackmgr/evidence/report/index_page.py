"""`index.html`: every series with its patches in order (tree, status, best fresh metric and that run's gates,
link states) and its waterfall (report/figures.py), then the patches in no series."""

from __future__ import annotations

from statistics import median

from stackmgr.evidence.metrics import lead
from stackmgr.evidence.report.figures import Figures
from stackmgr.evidence.report.markup import STATE_MARK, e
from stackmgr.evidence.report.model import PatchInfo
from stackmgr.output import plural, quantity


class IndexPage(Figures):
    def patch_row(self, here: str, info: PatchInfo | None, name: str, position: str, guards: list[str]) -> str:
        chips = "".join(f' <span class="guard">#{e(g)}</span>' for g in guards)
        if info is None:
            return (f'<tr class="missing"><td class="pos">{e(position)}</td><td><span class="mono">{e(name)}'
                    f'</span>{chips}<div class="subject bad">patch file missing</div></td>'
                    '<td></td><td></td><td></td><td></td><td></td><td></td></tr>')  # fmt: skip
        files, plus, minus = info.stat
        size = (
            (
                f'<span class="plus">+{plus}</span> <span class="minus">−{minus}</span>'
                f' <span class="muted">{files}&nbsp;file{"s" if files != 1 else ""}</span>'
            )
            if info.data
            else ""
        )
        subject = e(info.subject) if info.data is not None else '<span class="bad">patch file gone</span>'
        best = self.best_headline(info)  # the number and its gates are of one run
        latest = best[0] if best else next((k for k in reversed(info.links) if k.id in self.current), None)
        return (
            f'<tr class="row-{e(info.status)}"><td class="pos">{e(position)}</td>'
            f'<td>{self.patch_link(here, name)}{chips}<div class="subject">{subject}</div></td>'
            f'<td><span class="tree">{e(info.tree or "?")}</span></td><td class="nowrap">{size}</td>'
            f"<td>{self.badge_status(info.status, info.dnr)}</td><td>{self.headline(info)}</td>"
            f"<td>{self.gate_chips(latest) if latest else ''}</td><td>{self.state_badges(info)}</td></tr>"
        )

    def patch_table(self, rows: list[str]) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("#", "patch", "tree", "size", "status", "best metric", "gates",
                                                 "evidence"))  # fmt: skip
        return f'<div class="scroll"><table class="patches"><thead><tr>{head}</tr></thead><tbody>' + "".join(
            rows) + "</tbody></table></div>"  # fmt: skip

    def index_page(self) -> str:
        here = "index.html"
        statuses: dict[str, int] = {}
        for info in self.patches.values():
            statuses[info.status] = statuses.get(info.status, 0) + 1
        states: dict[str, int] = {}
        for link in self.links:
            word = self.judged[link.id].word  # a failed or tainted run, a baseline: not counted as fresh
            states[word] = states.get(word, 0) + 1
        tiles = [f'<div class="tile"><b>{len(self.patches)}</b> patches</div>',
                 f'<div class="tile"><b>{len(self.series)}</b> series</div>',
                 f'<div class="tile"><b>{len(self.links)}</b> links</div>']  # fmt: skip
        tiles += [f'<div class="tile">{self.badge_status(s)} <b>{statuses[s]}</b></div>'
                  for s in ("promoted", "rejected", "experimental", "unlinked") if s in statuses]  # fmt: skip
        tiles += [
            f'<div class="tile">{self.badge_state(s)} <b>{states[s]}</b></div>' for s in STATE_MARK if s in states
        ]
        body = [f'<h1>Series &amp; patches</h1><div class="tiles">{"".join(tiles)}</div>']
        if not self.series:
            body.append('<p class="muted">No series yet.</p>')
        toc = " ".join(f'<a class="chip" href="#series-{e(s.name)}">{e(s.name)}</a>' for s in self.series)
        if toc:
            body.append(f'<p class="toc">{toc}</p>')
        for s in self.series:
            trees = sorted({self.patches[n].tree for n, _g in s.entries if n in self.patches and self.patches[n].tree})
            meta = f"{len(s.entries)} patch{'es' if len(s.entries) != 1 else ''}"
            meta += f" · {', '.join(e(t) for t in trees)}" if trees else ""
            body.append(f'<section class="series" id="series-{e(s.name)}"><h2><span class="mono">{e(s.name)}</span>'
                        f' <small>{meta}</small></h2>')  # fmt: skip
            if s.error:
                body.append(f'<p class="error">{e(s.error)}</p>')
            if s.description:  # its topic, as the lessons page's Topics say it
                body.append(f'<div class="desc topic">{e(s.description[:4000])}</div>')
            if s.name in self.targets:  # does the series meet its target (evidence/targets.py)
                body.append(f'<p class="target">{e(self.targets[s.name])}</p>')
            if (base := self.baselines.get(s.name)) is not None:  # its latest valid baseline (evidence/baselines.py)
                m = lead(base.metrics, self.store.headline())
                said = f": {m.name} {quantity(m.value, m.unit)}" if m else ""
                runs = self.baseline_runs.get(s.name, [])
                values = [x.value for k in runs for x in k.metrics if m and x.name == m.name]
                if m and len(runs) > 1 and values:  # the runs alike to it (evidence/reference.baseline_runs)
                    said += (f"; baseline of {s.name}: {plural(len(runs), 'run')}, median {m.name} "
                             f"{quantity(median(values), m.unit)}")  # fmt: skip
                body.append(f'<p class="baseline">baseline {e(base.id)}{e(said)}</p>')
            rows = [self.patch_row(here, self.patches.get(n), n, str(i), g) for i, (n, g) in enumerate(s.entries, 1)]
            body.append(self.patch_table(rows) if rows else '<p class="muted">empty</p>')
            body.append(self.series_waterfall(s))  # its latest ablate walk, else each patch against the baseline
            body.append("</section>")
        loose = [p for p in self.patches.values() if not p.series]
        loose.sort(key=lambda p: (p.tree, p.name))
        body.append('<section class="series" id="no-series"><h2>Patches in no series '
                    f"<small>{len(loose)}</small></h2>")  # fmt: skip
        rows = [self.patch_row(here, p, p.name, "", []) for p in loose]
        body.append(self.patch_table(rows) if rows else '<p class="muted">none</p>')
        body.append("</section>")
        return self.frame(here, "Series & patches", "index", "".join(body))
