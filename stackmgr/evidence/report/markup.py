"""The pieces every page is made of: escaping, status and state badges, metric deltas, links between pages, and the
frame (head, navigation, footer) around each page's body."""

from __future__ import annotations

import html
import posixpath
import time
from statistics import median
from urllib.parse import quote

from stackmgr.evidence.compare import run_config, short
from stackmgr.evidence.link_state import measured_state, quoted_results
from stackmgr.evidence.metrics import Metric, change
from stackmgr.evidence.records import Artifact, Link
from stackmgr.evidence.report.assets import CSS, content_security_policy
from stackmgr.evidence.report.model import PatchInfo, ReportData
from stackmgr.evidence.states import effective
from stackmgr.output import plural

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.evidence.report.against import Against

STATE_MARK = {"fresh": "●", "equivalent": "◐", "stale": "○", "broken": "✗", "orphaned": "⌫", "edited": "✎",
              "failed": "✗", "tainted": "⚠", "baseline": "∅"}  # fmt: skip
STATE_HELP = {
    "failed": "the run failed (its exit code, or its exit gate): not a measurement of the patch",
    "tainted": "a measured tree changed while it ran: not a measurement of the patch",
    "baseline": "measured without the patch (its changes were not in the measured tree): not its result",
    "fresh": "patch and artifacts unchanged since measured",
    "equivalent": "patch bytes changed, same change (patch-id equal): re-exported",
    "stale": "the change itself changed since it was measured",
    "broken": "an artifact is missing or its bytes changed",
    "orphaned": "the patch is in no series",
    "edited": "the record itself changed after it was written (records are write-once)",
}
GATE_MARK = {"pass": "✓", "fail": "✗", "not-run": "–", "error": "!"}
ON = ' class="on"'


_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if c not in (0x09, 0x0A, 0x0D)}


def e(text: object) -> str:
    """Text from a record as HTML: escaped, and its control bytes (a terminal escape a pulled record carries)
    written as `\x1b`, as the terminal views show them."""
    return html.escape(str(text).translate(_CONTROLS), quote=True)


def when(created: str) -> str:
    return created[:16].replace("T", " ")


def num(value: float) -> str:
    return f"{value:.6g}"


def percent(diff: float, ref: float) -> str:
    """A change against a reference value: +9.5%, or the plain difference when the reference is 0."""
    return f"{diff / abs(ref) * 100:+.1f}%" if ref else f"{diff:+.4g}"


def artifact_name(a: Artifact) -> str:
    """An artifact as a reader knows it: "the run's log", the name of the file a run wrote (an artifact kept by
    content, under `artifacts/sha256/`, keeps it as its `origin`), else its path in the store."""
    if a.origin == "the command's output":
        return "the run's log"
    if a.origin and a.path.startswith("artifacts/sha256/"):
        return posixpath.basename(a.origin.rstrip("/")) or a.path
    return a.path


def run_said(link: Link) -> str:
    """`run NAME: `COMMAND`` of a link `stackmgr run` recorded (its command as recorded: secrets redacted), else
    an empty string."""
    return f"{run_name(link)}: `{run_command(link)}`" if link.run else ""


def run_name(link: Link) -> str:
    return "run " + str(link.run["name"]) if link.run.get("name") else "a run"


def run_command(link: Link) -> str:
    import shlex

    return shlex.join(map(str, link.run.get("command", [])))


def size_label(n: int | None) -> str:
    if n is None:
        return ""
    from stackmgr.output import human_size

    return human_size(n)


class Markup(ReportData):
    """The gathered data, with the markup shared by the pages."""

    def badge_status(self, status: str, dnr: bool = False) -> str:
        out = f'<span class="badge st-{e(status)}">{e(status)}</span>'
        if dnr:
            out += ' <span class="badge dnr" title="warns whenever this change comes back">do not revive</span>'
        return out

    def badge_state(self, state: str, count: int = 0) -> str:
        label = f"{count} {state}" if count else state
        return (f'<span class="state s-{e(state)}" title="{e(STATE_HELP.get(state, ""))}">'
                f"{STATE_MARK.get(state, '?')} {e(label)}</span>")  # fmt: skip

    def badge_link(self, link: Link) -> str:
        """A result's state badge (evidence/link_state.py): its freshness, and `failed`/`tainted`/`without the
        patch` beside it for a run that is no measurement of the patch, so no page shows such a run as a clean
        result."""
        judged = self.judged[link.id]
        out = self.badge_state(judged.freshness)
        if judged.failed:
            out += (f' <span class="state s-failed" title="{e(STATE_HELP["failed"])}">{STATE_MARK["failed"]} '
                    f"failed ({e(judged.failed)})</span>")  # fmt: skip
        if judged.tainted:
            out += f" {self.badge_state('tainted')}"
        if not judged.measures_patch:
            out += (f' <span class="state s-baseline" title="{e(STATE_HELP["baseline"])}">{STATE_MARK["baseline"]} '
                    "without the patch</span>")  # fmt: skip
        return out

    def lead_metrics(self, metrics: list[Metric]) -> list[Metric]:
        """A result's metrics in the order every page shows them: the headline metric (`[evidence] headline`,
        `Store.headline`) first, the rest as recorded. The one headline rule of the report and the lessons page."""
        headline = self.store.headline()
        return sorted(metrics, key=lambda m: m.name != headline)

    def unlike_baseline(self, link: Link) -> str:
        """How the link's baseline's run configuration differs from its own (`request_rate 4 vs 1`), or "" when
        they are alike or either is unrecorded: deltas against it compare unlike runs."""
        base = self.by_id.get(link.baseline)
        if base is None:
            return ""
        ours, theirs = self.config_of(link), self.config_of(base)
        if not ours or not theirs:
            return ""
        return ", ".join(f"{k} {theirs.get(k, '—')} vs {ours.get(k, '—')}" for k in sorted(set(ours) | set(theirs))
                         if ours.get(k) != theirs.get(k))  # fmt: skip

    def gate_chips(self, link: Link) -> str:
        return " ".join(
            f'<span class="gate g-{e(g.status)}" title="{e(g.status + (": " + g.detail if g.detail else ""))}">'
            f"{e(g.name)} {GATE_MARK.get(g.status, '?')}</span>"
            for g in link.gates
        )

    def baseline_of(self, link: Link, name: str) -> tuple[Link, float] | None:
        """The link's baseline record and its value of metric `name`, when both are there."""
        base = self.by_id.get(link.baseline)
        if base is None:
            return None
        ref = next((m.value for m in base.metrics if m.name == name), None)
        return None if ref is None else (base, ref)

    def delta(self, link: Link, name: str, value: float, direction: str) -> str:
        found = self.baseline_of(link, name)
        if found is None:
            return ""
        base, ref = found
        diff = value - ref
        tone = {"better": "good", "worse": "bad"}.get(change(diff, direction), "flat")  # unknown direction: flat
        unlike = self.unlike_baseline(link)
        caveat = f" (another run configuration: {unlike})" if unlike else ""
        return (f'<span class="delta {tone}" title="vs {e(base.id)}: {e(num(ref))}{e(caveat)}">'
                f'{e(percent(diff, ref))} <span class="abs">({diff:+.4g})</span>'
                + (' <span class="muted">unlike runs</span>' if unlike else "")
                + ' <span class="muted">1 run</span></span>')  # fmt: skip

    def against_of(self, info: PatchInfo) -> Against | None:
        """The patch against its series' baseline runs (report/against.py), or None."""
        from stackmgr.evidence.report.against import against

        return against(info.links, [s for s, _ in info.series], self.baseline_runs, self.judged, self.config_of,
                       self.store.headline())  # fmt: skip

    def against(self, info: PatchInfo) -> str:
        """The patch against its series' baseline runs (report/against.py), or "": with repeats a side the
        median (n), effect [95% interval] and verdict (evidence.stats.judge); else the plain delta and `1 run`."""
        found = self.against_of(info)
        if found is None:
            return ""
        m, j = found.metric, found.judged
        unit = f" {e(m.unit)}" if m.unit else ""
        n = f" (n={found.runs})" if j is not None else ""
        if j is not None:
            lo, hi = j.ci_low, j.ci_high
            ci = f" [{lo * 100:+.1f}%, {hi * 100:+.1f}%]" if lo is not None and hi is not None else ""
            effect = f"{j.effect * 100:+.1f}%" if j.effect is not None else ""
            tone = {"faster": "good", "slower": "bad", "better": "good", "worse": "bad"}.get(j.verdict, "flat")
            said = f"{effect}{ci} {j.verdict}".strip()
        else:
            diff = m.value - found.base_median
            tone, said = "flat", f"{percent(diff, found.base_median)} ({diff:+.4g}) {plural(found.runs, 'run')}"
        return (f'<span class="metric against"><span class="mname">{e(m.name)}</span> <b>{e(num(m.value))}</b>{unit}'
                f'{n} <span class="delta {tone}" title="median of the baseline runs: {e(num(found.base_median))}">'
                f"{e(said)}</span> vs {e(found.label)}</span>")  # fmt: skip

    def metric_inline(self, link: Link, m: Metric) -> str:
        unit = f" {e(m.unit)}" if m.unit else ""
        return (f'<span class="mname">{e(m.name)}</span> <b>{e(num(m.value))}</b>{unit} '
                + self.delta(link, m.name, m.value, m.direction))  # fmt: skip

    def href(self, here: str, target: str, anchor: str = "") -> str:
        rel = posixpath.relpath(target, posixpath.dirname(here) or ".")
        return e(quote(rel, safe="/._-~") + (f"#{quote(anchor, safe='')}" if anchor else ""))

    def patch_link(self, here: str, name: str, anchor: str = "") -> str:
        info = self.patches.get(name)
        if info is None:
            return f'<span class="mono">{e(name)}</span>'
        return f'<a class="mono" href="{self.href(here, info.page, anchor)}">{e(name)}</a>'

    def link_ref(self, here: str, link: Link) -> str:
        info = self.patches[link.patch]
        return f'<a class="mono lid" href="{self.href(here, info.page, link.id)}">{e(link.id)}</a>'

    def best_headline(self, info: PatchInfo) -> tuple[Link, Metric] | None:
        """The best value (the newest, for a metric whose direction is unknown) of the headline metric among links
        whose evidence holds (fresh or equivalent) that measured the patch (no failed or tainted run, no baseline)
        and have that metric (else the first metric of the newest such link), measured with the run configuration of
        the newest of them (results of other configurations are never ranked against it): that link and metric.
        The runs of a run group (`run --repeat`, `ab`, `ablate`) on one measured state count as one result, their
        median (as targets count repeats): one lucky run of twenty is never the best."""
        good = quoted_results(effective(info.links), self.judged)  # evidence/link_state.py: the lessons page's too
        configured = self.store.headline()
        good = [k for k in good if any(m.name == configured for m in k.metrics)] or good  # never two metrics ranked
        if not good:
            return None
        wanted = self.config_of(good[-1])
        good = [k for k in good if self.config_of(k) == wanted]
        has = any(m.name == configured for k in good for m in k.metrics)
        name = configured if configured is not None and has else good[-1].metrics[0].name
        repeats: dict[object, list[tuple[Link, Metric]]] = {}  # a run group's runs count as one, by their median
        for link in good:
            group = link.run.get("group")
            key = (measured_state(link), group) if isinstance(group, str) and group else link.id
            for m in link.metrics:
                if m.name == name:
                    repeats.setdefault(key, []).append((link, m))
        best: tuple[Link, Metric] | None = None
        for runs in repeats.values():
            link, m = runs[-1]
            m = Metric(m.name, median(x.value for _, x in runs), m.unit, m.direction) if len(runs) > 1 else m
            top = best[1].value if best else None
            if top is None or m.direction not in ("higher", "lower") or (
                    m.value < top if m.direction == "lower" else m.value > top):  # unknown: the newest
                best = (link, m)
        return best

    def config_of(self, link: Link) -> dict[str, str]:
        """The link's run configuration (evidence.compare.run_config), read once per report."""
        if link.id not in self._configs:
            self._configs[link.id] = run_config(self.store, link)
        return self._configs[link.id]

    def headline(self, info: PatchInfo) -> str:
        if judged := self.against(info):  # against the series' baseline runs, judged where there are repeats
            return judged
        best = self.best_headline(info)
        if best is None:
            return '<span class="muted">—</span>'
        link, m = best
        unit = f" {e(m.unit)}" if m.unit else ""
        said = short(self.config_of(link))
        config = f' <span class="muted">{e(said)}</span>' if said else ""
        return (f'<span class="metric"><span class="mname">{e(m.name)}</span> <b>{e(num(m.value))}</b>{unit} '
                f"{self.delta(link, m.name, m.value, m.direction)}{config}</span>")  # fmt: skip

    def state_badges(self, info: PatchInfo) -> str:
        counts: dict[str, int] = {}
        residue = False
        for link in info.links:
            if link.id not in self.current:
                continue
            word = self.judged[link.id].word  # a failed or tainted run, a baseline: counted as such, never as fresh
            counts[word] = counts.get(word, 0) + 1
            residue = residue or any(s.residue for s in link.stack if s.tree == link.tree)
        out = [self.badge_state(s, counts[s]) for s in ("equivalent", "stale", "broken", "orphaned", "edited",
                                                        "failed", "tainted", "baseline") if s in counts]  # fmt: skip
        if residue:
            out.append('<span class="state s-residue" title="the tree had changes outside the stack when '
                       'measured">⚠ residue</span>')  # fmt: skip
        if counts.get("fresh"):
            out.insert(0, self.badge_state("fresh", counts["fresh"]))
        return " ".join(out)

    def frame(self, here: str, title: str, active: str, body: str, script: str = "") -> str:
        up = "../" * here.count("/")
        csp = content_security_policy(script)
        graves = len({k.patch for k in self.graves()})  # lanes, as the graveyard page counts them
        nav = [("index", "index.html", "Series &amp; patches"), ("results", "results.html", "Results"),
               ("graveyard", "graveyard.html", f"Graveyard <span class=\"count\">{graves}</span>")]  # fmt: skip
        items = "".join(f'<a href="{up}{href}"{ON if key == active else ""}>{label}</a>'
                        for key, href, label in nav)  # fmt: skip
        return (
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{e(title)} · stackmgr report</title><style>{CSS}</style></head>\n<body>"
            f'<header class="top"><a class="brand" href="{up}index.html">stackmgr<span>report</span></a>'
            f'<nav>{items}</nav><span class="store mono" title="store">{e(self.store.root)}</span></header>\n'
            f"<main>{body}</main>\n"
            f"<footer>generated {e(time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()))} by "
            '<span class="mono">stackmgr report</span> · '
            f"{plural(len(self.patches), 'patch', 'patches')} · {plural(len(self.links), 'link')}</footer>"
            + (f"<script>{script}</script>" if script else "")
            + "</body></html>\n"
        )
