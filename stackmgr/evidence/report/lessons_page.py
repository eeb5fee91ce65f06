"""`stackmgr report --markdown FILE`: the lab's lessons page, Markdown for a docs site, from the data the HTML site
shows (docs/COMMANDS.md#recording-results):

- failed paths: each rejected or do-not-revive lane (the graveyard's links), newest first, with each lesson, the
  link's metrics (delta vs its baseline when it names one), gates, verdict date and author, and artifacts;
- patches worth remembering: the promoted ones, by name, with their best result by the headline metric (the one
  the index page shows) and the evidence behind it;
- open experiments: patches whose latest verdict is experimental or inconclusive, by name, with the numbers of
  their latest result whose numbers may be quoted as the patch's (evidence/link_state.py, `quoted_results`, the
  rule of the index's best metric too: a failed or tainted run's, a broken or stale result's, a baseline's never).

Both tables judge each patch against its series' baseline runs as the index does (report/against.py: median,
effect, 95% interval and verdict with repeats; the plain delta and the counts of runs without).

Metrics lead with the headline metric (`Markup.lead_metrics`); a delta against a baseline measured with another run
configuration says so. Each record is signed with its state (`failed`, `tainted`, `baseline`, else its freshness).

The page is the same bytes for the same store on any machine: no generation time, no store path; artifacts are
linked relative to FILE only when FILE is inside the store (so the links hold in any clone and on a site built from
it), else named as code. Everything from a record is escaped (`commonmark`).
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, replace

from stackmgr.evidence.compare import short
from stackmgr.evidence.link_state import quoted_results
from stackmgr.evidence.metrics import Gate, Metric
from stackmgr.evidence.records import Artifact, Link
from stackmgr.evidence.reference import reference_label
from stackmgr.evidence.report import commonmark as md
from stackmgr.evidence.report.lab_page import LabSections, LiveTree
from stackmgr.evidence.report.markup import artifact_name, num, percent, run_command, run_name, when
from stackmgr.evidence.report.model import PatchInfo
from stackmgr.evidence.states import effective
from stackmgr.evidence.targets import baseline_words

OPEN_VERDICTS = ("experimental", "inconclusive")
INLINE_METRICS = 3  # numbers per open experiment in its table row


@dataclass
class LessonCounts:
    failed: int
    remembered: int
    open: int


class LessonsPage(LabSections):
    _link_dir: str | None = None

    def lessons_markdown(self, link_dir: str | None, title: str = "Lessons", trees: list[LiveTree] | None = None,
                         ) -> tuple[str, LessonCounts]:  # fmt: skip
        """The page, and how many lanes each part holds. `link_dir`: the real directory artifact links are
        relative to (FILE's, when it is inside the store), or None to name artifacts without links; `trees`: the
        registered trees as `status` saw them (report/lab_page.py), for the page's last section."""
        self._link_dir = link_dir
        lanes: dict[str, list[Link]] = {}
        for grave in self.graves():
            lanes.setdefault(grave.patch, []).append(grave)
        failed = sorted(sorted(lanes), key=lambda n: max(k.created for k in lanes[n]), reverse=True)
        remembered = [info for info in self.patches.values() if info.status == "promoted"]
        open_ = [info for info in self.patches.values() if self._is_open(info)]
        targets = self.targets_section()
        topics = self.topics_section(failed, [i.name for i in remembered], [i.name for i in open_])
        heading = md.line(title) or "Lessons"
        heading = heading[:-1] + "\\#" if heading.endswith("#") else heading  # never a closing sequence
        out = [f"# {heading}", "",
               "What the lab's measurements taught: the lanes that failed and why, the patches worth remembering, "
               "and the experiments still without a verdict. Written by `stackmgr report --markdown` from the "
               "store's link records: change those (`stackmgr link`), not this page.", "",
               *([f"- [Targets](#targets): {len(self.target_checks)}"] if targets else []),
               *(["- [Topics](#topics)"] if topics else []),
               f"- [Failed paths](#failed-paths): {len(failed)}",
               f"- [Patches worth remembering](#patches-worth-remembering): {len(remembered)}",
               f"- [Open experiments](#open-experiments): {len(open_)}", "",
               *targets, *topics, "## Failed paths", ""]  # fmt: skip
        if not failed:
            out += ["Nothing rejected yet.", ""]
        for name in failed:
            out += self._lane(self.patches[name], list(reversed(lanes[name])))
        out += ["## Patches worth remembering", ""]
        out += self._remembered(remembered) if remembered else ["Nothing promoted yet.", ""]
        out += ["## Open experiments", ""]
        out += [*self._open(open_), *self.open_lanes(open_)] if open_ else \
            ["No experiment is waiting for a verdict.", ""]  # fmt: skip
        out += [*self.baselines_section(), *self.trees_section(trees)]
        page = md.visible("\n".join(out).rstrip("\n") + "\n")
        return page, LessonCounts(len(failed), len(remembered), len(open_))

    def _is_open(self, info: PatchInfo) -> bool:
        current = effective(info.links)
        return info.status == "experimental" and not info.dnr and bool(current) and \
            current[-1].verdict in OPEN_VERDICTS  # fmt: skip

    # --- failed paths ---------------------------------------------------------------------------------------

    def _lane(self, info: PatchInfo, graves: list[Link]) -> list[str]:
        where = ", ".join(f"{md.code(s)} #{n}" for s, n in info.series)
        facts = [f"tree {md.code(info.tree or '?')}", f"series {where}" if where else "in no series"]
        out = [f"### {md.code(info.name)}", "", " · ".join(facts), ""]
        if info.subject:
            out += [md.line(info.subject), ""]
        out += self.blamed(info)
        for link in graves:
            verdict = link.verdict + (", do not revive" if link.do_not_revive else "")
            out += [f"**{md.text(verdict)}** · {self._signed(link)}", ""]
            if link.lesson:
                out += [f"> {line}".rstrip() for line in md.paragraph_lines(link.lesson)] + [""]
            else:
                out += ["*No lesson recorded.*", ""]
            if link.metrics:
                out += [*self._metric_table(link), ""]
                unlike = self.unlike_baseline(link) if self.by_id.get(link.baseline) else ""
                if unlike:
                    out += [md.text(f"The baseline was measured with another run configuration ({unlike}): these "
                                    "deltas compare unlike runs."), ""]  # fmt: skip
            if link.gates:
                out += [f"Gates: {self._gates(link.gates)}", ""]
            if link.artifacts:
                run = f" (written by {md.text(run_name(link))}: {md.code(run_command(link))})" if link.run else ""
                out += ["Artifacts: " + ", ".join(self._artifact(a) for a in link.artifacts) + run, ""]
        return out

    def _metric_table(self, link: Link) -> list[str]:
        compared = bool(self.by_id.get(link.baseline))
        base = self.by_id.get(link.baseline)
        named = base.run.get("name") if base is not None else None  # a baseline by its run, not its id alone
        said = f"run {md.code(named, cell=True)}" if isinstance(named, str) and named else \
            md.code(link.baseline, cell=True)  # fmt: skip
        head = ["metric", "value"] + ([f"vs baseline {said}"] if compared else [])
        rows = []
        for m in self.lead_metrics(link.metrics):
            row = [md.code(m.name, cell=True), self._value(m)]
            if compared:
                row.append(self._delta(link, m) or "—")
            rows.append(row)
        return md.table(head, rows, right=(1, 2))

    # --- patches worth remembering ----------------------------------------------------------------------------

    def _remembered(self, infos: list[PatchInfo]) -> list[str]:
        rows = []
        for info in infos:
            promoted = next(k for k in reversed(effective(info.links))
                            if k.verdict == "promoted" and self.states[k.id] in ("fresh", "equivalent"))  # fmt: skip
            best = self.best_headline(info)
            result, delta, gates, evidence = "—", "—", "", ""
            if best is not None:
                link, m = best
                said = short(self.config_of(link))
                result = f"{md.code(m.name, cell=True)} {self._value(m)}" + (f" ({md.text(said)})" if said else "")
                delta = self._delta(link, m) or "—"
                gates = self._gates(link.gates)
                evidence = self._evidence(link)
            rows.append([md.code(info.name, cell=True), md.code(info.tree, cell=True), md.text(info.subject),
                         result, delta, self._against(info), gates, self._signed(promoted, cell=True),
                         evidence])  # fmt: skip
        head = ["patch", "tree", "what", "best result", "vs baseline", "vs the series' baseline", "gates",
                "promoted", "evidence"]  # fmt: skip
        blamed = [f"- {md.code(info.name)}: {md.text(b.words)}" for info in infos for b in self.blames(info)]
        return [*md.table(head, rows), "", *(["What each did, measured:", "", *blamed, ""] if blamed else [])]

    # --- open experiments -------------------------------------------------------------------------------------

    def _open(self, infos: list[PatchInfo]) -> list[str]:
        rows = []
        for info in infos:
            current = effective(info.links)
            quoted = quoted_results(current, self.judged)  # the index's best metric is of these too
            measured = quoted[-1] if quoted else None
            latest = measured or current[-1]  # a failed, tainted, broken run's numbers, a baseline's: never quoted
            metrics = self.lead_metrics(measured.metrics) if measured is not None else []
            shown = []
            for m in metrics[:INLINE_METRICS]:
                delta = self._delta(latest, m, short=True)
                shown.append(f"{md.code(m.name, cell=True)} {self._value(m)}" + (f" ({delta})" if delta else ""))
            if len(metrics) > INLINE_METRICS:
                shown.append(f"and {len(metrics) - INLINE_METRICS} more")
            evidence = self._evidence(latest) if measured else ""
            rows.append([md.code(info.name, cell=True), md.code(info.tree, cell=True), md.text(info.subject),
                         md.text(current[-1].verdict), "; ".join(shown) or "—", self._against(info),
                         self._gates(latest.gates),  # an invalid result's too: why it is not quoted
                         self._signed(latest, cell=True), evidence])  # fmt: skip
        head = ["patch", "tree", "what", "verdict", "latest numbers", "vs the series' baseline", "gates", "measured",
                "evidence"]  # fmt: skip
        return [*md.table(head, rows), ""]

    # --- pieces -----------------------------------------------------------------------------------------------

    def _signed(self, link: Link, cell: bool = False) -> str:
        """When, by whom (the name without the e-mail address), which record, and whether its evidence holds."""
        author = link.author.split(" <")[0].strip() or "unknown"
        return (f"{md.text(when(link.created))} UTC · {md.text(author)} · {md.code(link.id, cell=cell)} "
                f"({md.text(self.judged[link.id].word)})")  # fmt: skip

    def _value(self, m: Metric) -> str:
        return md.text(num(m.value) + (f" {m.unit}" if m.unit else ""))

    def _delta(self, link: Link, m: Metric, short: bool = False) -> str:
        """The change against the link's baseline: one run against one, so the plain delta and `1 run`, never
        better or worse (evidence.stats.judge needs repeats): `+9.5% (+9.37), 1 run`, `+9.5%, 1 run` when
        `short`."""
        found = self.baseline_of(link, m.name)
        if found is None:
            return ""
        diff = m.value - found[1]
        exact = "" if short else f" ({diff:+.4g})"
        unlike = ", against another run configuration" if self.unlike_baseline(link) else ""
        return md.text(f"{percent(diff, found[1])}{exact}, 1 run{unlike}")

    def _against(self, info: PatchInfo) -> str:
        """A table cell: the patch's results against its series' baseline runs as the index judges them
        (report/against.py): `` `output_throughput` 120.6 tok/s (n=4): +20.6% [+20.2%, +21.0%] faster, vs baseline
        of S (4 runs)``; with fewer than 2 runs a side the plain delta and the runs, never a verdict; "—" for none."""
        found = self.against_of(info)
        if found is None:
            return "—"
        m, j = found.metric, found.judged
        if j is None:
            diff = m.value - found.base_median
            said = f"{percent(diff, found.base_median)}, {found.runs} vs {found.base_runs} run(s), no verdict"
        else:
            ci = f" [{j.ci_low * 100:+.1f}%, {j.ci_high * 100:+.1f}%]" if j.ci_low is not None and \
                j.ci_high is not None else ""  # fmt: skip
            effect = f"{j.effect * 100:+.1f}%" if j.effect is not None else ""
            said = f"(n={found.runs}): {effect}{ci} {j.verdict}".strip()
        label = found.label.replace(
            reference_label(found.series, found.base_runs),  # by its run group, not a count
            "the " + baseline_words(found.series, self.baseline_runs[found.series], m.name),
        )
        return f"{md.code(m.name, cell=True)} {self._value(m)} {md.text(said)}, vs {md.text(label)}"

    def _gates(self, gates: list[Gate]) -> str:
        return ", ".join(f"{md.code(g.name, cell=True)} {md.text(g.status + (f' ({g.detail})' if g.detail else ''))}"
                         for g in gates)  # fmt: skip

    def _evidence(self, link: Link) -> str:
        """A table cell: the link's artifacts, and the run that wrote them."""
        run = f", written by {md.text(run_name(link))}" if link.run and link.artifacts else ""
        return ", ".join(self._artifact(a, cell=True) for a in link.artifacts) + run

    def _artifact(self, a: Artifact, cell: bool = False) -> str:
        info = self.artifacts.get(a.path)
        note = ""
        if info is not None and info.current is None:
            note = " (missing)"
        elif info is not None and info.current != a.sha256:
            note = " (changed since linked)"
        if a.label:  # what it is, in the lab's words (`link --label`), then its file
            return f"{md.text(a.label[:200])}: " + self._artifact(replace(a, label=""), cell)  # bounded: a pull's
        href = self._artifact_href(a.path)
        if a.origin and a.path.startswith("artifacts/sha256/"):  # kept by content: named by what it was
            label = artifact_name(a)
            return (md.link(label, href) if href else f"{md.text(label)} ({md.code(a.path, cell=cell)})") + note
        return (md.link(a.path, href) if href else md.code(a.path, cell=cell)) + note

    def _artifact_href(self, path: str) -> str | None:
        if self._link_dir is None or os.path.isabs(path):
            return None
        target = os.path.join(os.path.realpath(self.store.root), path)
        return posixpath.join(*os.path.relpath(target, self._link_dir).split(os.sep))
