"""`artifacts/<slug>.html`: which links cite a result file, whether it still verifies, a preview of its text: the
head and the tail of a long log (a crash log says what went wrong at its end), its error lines marked and listed."""

from __future__ import annotations

import re

from stackmgr.evidence.report.markup import Markup, artifact_name, e, run_said, size_label, when
from stackmgr.evidence.report.model import ArtifactInfo

HEAD_LINES = 100
TAIL_LINES = 200
JUMPS = 20  # error lines listed at the top: the first few and the last ones
ERROR_LINE = re.compile(r"Traceback \(most recent call last\)|\b\w*Error\b|\bERROR\b|\berror:|\bFAILED\b|"
                        r"\bCUDA error\b|\bKilled\b|Segmentation fault|core dumped")  # fmt: skip


class ArtifactPage(Markup):
    def artifact_page(self, art: ArtifactInfo) -> str:
        here = art.page
        recorded = {a.sha256 for _link, a in art.cites}
        if art.outside:  # named by a record, never read (docs/SECURITY.md)
            verdict = '<span class="badge st-rejected">outside the store</span>'
        elif art.current is None:
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
        first = min(art.cites, key=lambda c: c[0].created) if art.cites else None
        named = artifact_name(first[1]) if first is not None else art.path
        if named != art.path:
            facts.insert(0, ("kept as", f'<span class="mono">{e(art.path)}</span>'))
        if first is not None and first[0].run:
            facts.insert(0, ("written by", e(run_said(first[0]))))
        dl = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in facts)
        rows = []
        for link, a in sorted(art.cites, key=lambda c: c[0].created, reverse=True):
            ok = art.current == a.sha256
            rows.append(
                f"<tr><td>{e(when(link.created))}</td><td>{self.link_ref(here, link)}</td>"
                f"<td>{self.patch_link(here, link.patch)}</td><td>{self.badge_status(link.verdict)}</td>"
                f"<td>{self.badge_link(link)}</td>"
                f'<td class="mono" title="{e(a.sha256)}">{e(a.sha256[:12])}</td>'
                f'<td>{"<span class=ok>sha ok</span>" if ok else "<span class=bad>differs</span>"}</td></tr>'
            )  # fmt: skip
        head = "".join(f"<th>{h}</th>" for h in ("date", "link", "patch", "verdict", "state", "recorded", "now"))
        body = [f'<div class="crumbs"><a href="../results.html#artifacts">results</a> / artifact</div>'
                f'<h1 class="path"><span class="mono">{e(named)}</span> {verdict}</h1>'
                f'<dl class="facts">{dl}</dl><h2>Cited by <small>{len(art.cites)}</small></h2>'
                f'<div class="scroll"><table class="list"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
                "</tbody></table></div>"]  # fmt: skip
        body.append("<h2>Preview</h2>")
        if art.text:
            if art.current not in recorded:
                body.append('<p class="note bad">The file changed after it was linked: this is its content now, '
                            "not what was measured.</p>")  # fmt: skip
            top, omitted, end = excerpt(art)
            errors = [(n, line) for n, line in top + end if ERROR_LINE.search(line)]
            if errors:
                body.append(self.error_jumps(errors))
            rows_html = self.preview_rows(top)
            if omitted:
                rows_html += (f'<tr class="omit"><td class="ln">⋮</td><td class="code">… {omitted:,} lines omitted …'
                              "</td></tr>")  # fmt: skip
            rows_html += self.preview_rows(end)
            body.append(f'<section class="file"><div class="fname"><span class="mono">{e(art.path)}</span></div>'
                        f'<div class="scroll"><table class="diff preview"><tbody>{rows_html}</tbody></table></div>'
                        "</section>")  # fmt: skip
            if omitted:
                total = len(top) + omitted + len(end)
                body.append(f'<p class="muted">the first {len(top):,} and the last {len(end):,} of {total:,} lines '
                            "shown</p>")  # fmt: skip
        else:
            body.append(f'<p class="muted">{e(art.preview or "empty file")}</p>')
        return self.frame(here, art.path, "results", "".join(body))

    def preview_rows(self, lines: list[tuple[int, str]]) -> str:
        """Numbered rows, each with its anchor; error lines marked, and the frames of a Python traceback too."""
        out = []
        in_traceback = False
        for n, line in lines:
            in_traceback = in_traceback and line[:1] in (" ", "\t")
            kind = ' class="err"' if ERROR_LINE.search(line) else (' class="tb"' if in_traceback else "")
            out.append(f'<tr id="L{n}"{kind}><td class="ln">{n}</td><td class="code">{e(line)}</td></tr>')
            in_traceback = in_traceback or line.lstrip().startswith("Traceback (most recent call last)")
        return "".join(out)

    def error_jumps(self, errors: list[tuple[int, str]]) -> str:
        """Links to the error lines shown: all of them, or the first few and the last ones."""
        first = JUMPS // 4
        shown = errors if len(errors) <= JUMPS else errors[:first] + errors[first - JUMPS :]
        items = []
        for i, (n, line) in enumerate(shown):
            if i == first and len(errors) > JUMPS:
                items.append(f'<li class="muted">… {len(errors) - JUMPS} more …</li>')
            items.append(f'<li><a href="#L{n}">line {n}</a> <span class="mono">{e(line.strip()[:160])}</span></li>')
        return (f'<p class="note bad">{len(errors)} error line{"s" if len(errors) != 1 else ""} shown below:</p>'
                f'<ul class="jumps">{"".join(items)}</ul>')


def excerpt(art: ArtifactInfo) -> tuple[list[tuple[int, str]], int, list[tuple[int, str]]]:
    """(head lines, how many lines are left out, tail lines), each line with its 1-based number."""
    lines = art.text.removesuffix("\n").split("\n")
    if art.truncated:
        tail = art.tail.removesuffix("\n").split("\n")[-TAIL_LINES:] if art.tail else []
        total = art.lines
    elif len(lines) <= HEAD_LINES + TAIL_LINES:
        return list(enumerate(lines, 1)), 0, []
    else:
        tail, total = lines[-TAIL_LINES:], len(lines)
    head = lines[:HEAD_LINES]
    first_tail = total - len(tail) + 1
    return list(enumerate(head, 1)), total - len(head) - len(tail), list(enumerate(tail, first_tail))
