"""The parts of the lessons page that make it the lab's own page (docs/FORMATS.md#lessons-page), each traceable to a
record or to the config:

- targets: each series' bounds (`[targets]`, store/targets_config.py) with their note, reached or not by a valid
  result (evidence/targets.py, `check_targets`: the one answer status, show and links give), the result named by
  its run, and the results past the bound that are not valid, each with why;
- topics: each described series (its leading `## ` lines, store/series.py) with its lanes and where each stands;
- open lanes: the latest lesson of each open experiment, and whether it has a valid result at all;
- baselines: each series' baseline runs by their run group (their role) and median, never by link ids alone;
- the trees: what `status` said of this machine's registered trees as the page was written (handed in as
  `LiveTree`s by the CLI, which may ask `status`): no clock, so the same store and trees give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from stackmgr.errors import StackmgrError
from stackmgr.evidence.link_state import quoted_results
from stackmgr.evidence.records import Artifact, Link
from stackmgr.evidence.report import commonmark as md
from stackmgr.evidence.report.attribution import Attribution
from stackmgr.evidence.report.model import PatchInfo
from stackmgr.evidence.states import effective
from stackmgr.evidence.targets import TargetCheck, baseline_words
from stackmgr.output import plural


@dataclass(frozen=True)
class LiveTree:
    """A registered tree as `status` saw it: `state` ok, missing, error or no path; its applied position as status
    says it (store/position.py, `summary`: "S: 4 of 5 applied, top P") and the patches applied; files changed on
    top of the applied patches (`drift`) and changes no saved patch holds (`unsaved`)."""

    name: str
    state: str
    problem: str = ""
    position: str = ""
    applied: tuple[str, ...] = ()
    drift: int = 0
    unsaved: int = 0


def run_words(link: Link) -> str:
    """A result as the lab names it: `run `spec-3` (`lnk-…`)`, its run group when it has one; `` `lnk-…` `` else."""
    name, group = link.run.get("name"), link.run.get("group")
    said = f"run {md.code(str(name))}" if isinstance(name, str) and name else ""
    if isinstance(group, str) and group and group != name:
        said += f" of run group {md.code(group)}"
    return f"{said} ({md.code(link.id)})" if said else md.code(link.id)


class LabSections(Attribution):
    """The lab page's own sections, rendered from the gathered data (report/model.py)."""

    def _signed(self, link: Link, cell: bool = False) -> str:  # the lessons page's (report/lessons_page.py)
        raise NotImplementedError

    def _artifact(self, a: Artifact, cell: bool = False) -> str:  # the lessons page's
        raise NotImplementedError

    # --- targets ----------------------------------------------------------------------------------------------

    def targets_section(self) -> list[str]:
        checks = self.target_checks
        if not checks:
            return []
        out = ["## Targets", "",
               "Each series' targets (`[targets]` of stackmgr.toml) and whether a valid result reached them: a run "
               "that passed, every gate it records passed, untainted, its evidence whole.", ""]  # fmt: skip
        for series in dict.fromkeys(c.series for c in checks):
            mine = [c for c in checks if c.series == series]
            out += [f"### {md.code(series)}", ""]
            note = next((c.target.note for c in mine if c.target is not None and c.target.note), "")
            if note:
                out += [f"> {line}".rstrip() for line in md.paragraph_lines(note)] + [""]
            out += [self._bound(c) for c in mine] + [""]
        return out

    def _bound(self, c: TargetCheck) -> str:
        if c.target is None:
            return f"- {md.text(c.line)}"
        head = f"- {md.code(c.target.text)}"
        if c.target.relative is not None and c.base:
            head += f" (that is {md.text(self._quantity(c.target.threshold, c.base_unit))}, from the {md.text(c.base)})"
        if c.problem:
            return f"{head}: {md.text(c.problem)}"
        said = "**reached**" if c.met else "**not reached**"
        if c.best is not None:
            link, m = c.best
            of = f", the median of {c.runs} runs" if c.runs > 1 else ""
            said += (f": {'by' if c.met else 'the best valid result is'} {md.text(self._quantity(m.value, m.unit))}"
                     f"{of}, {run_words(link)}{md.text(c.part)}")  # fmt: skip  # a prefix's result says so
        else:
            said += f": no valid result has {md.code(c.target.metric)}"
        if c.past:
            side = "above" if c.target.higher else "below"
            said += f"; {side} it but not valid: " + "; ".join(f"{run_words(k)}: {md.text(why)}" for k, why in c.past)
        return f"{head}: {said}"

    @staticmethod
    def _quantity(value: float, unit: str) -> str:
        from stackmgr.output import quantity

        return quantity(value, unit)

    # --- topics -----------------------------------------------------------------------------------------------

    def topics_section(self, failed: list[str], remembered: list[str], open_: list[str]) -> list[str]:
        """Each described series: its description, then each of its patches and where the page tells of it."""
        from stackmgr.store.series import SeriesFile

        out: list[str] = []
        for s in self.series:
            try:
                described = SeriesFile.load(self.store, s.name).description.strip()
            except StackmgrError:
                continue
            if not described:
                continue
            out += [f"### {md.code(s.name)}", "", *md.paragraph_lines(described), ""]
            for n, (name, _guards) in enumerate(s.entries, start=1):
                info = self.patches.get(name)
                where = ("Failed paths" if name in failed else "Patches worth remembering" if name in remembered
                         else "Open experiments" if name in open_ else "")  # fmt: skip
                status = self._status_words(info) if info is not None else "no patch file"
                out.append(f"{n}. {md.code(name)}: {md.text(status)}" + (f" (see {where})" if where else ""))
            out.append("")
        return ["## Topics", "", "Series whose patches share a topic (`stackmgr series describe`), in series "
                "order.", "", *out] if out else []  # fmt: skip

    def _status_words(self, info: PatchInfo) -> str:
        current = effective(info.links)
        verdict = current[-1].verdict if current else "unlinked"
        return verdict + (", do not revive" if info.dnr else "")

    def blamed(self, info: PatchInfo) -> list[str]:
        """What the patch itself did, measured (report/attribution.py), one line each."""
        found = [f"- {md.text(b.words)}" for b in self.blames(info)]
        return ["What it did, measured:", "", *found, ""] if found else []

    # --- open lanes -------------------------------------------------------------------------------------------

    def open_lanes(self, infos: list[PatchInfo]) -> list[str]:
        """Per open experiment: its latest verdict, lesson, and whether a valid result of it exists."""
        out: list[str] = []
        for info in infos:
            current = effective(info.links)
            latest = current[-1]
            out += [f"### {md.code(info.name)}", "", f"**{md.text(latest.verdict)}** · {self._signed(latest)}", ""]
            if latest.lesson:
                out += [f"> {line}".rstrip() for line in md.paragraph_lines(latest.lesson)] + [""]
            else:
                out += ["*No lesson recorded.*", ""]
            out += self.blamed(info)
            measured = [k for k in current if k.metrics]
            valid = quoted_results(current, self.judged)
            if valid:
                out += [f"{plural(len(valid), 'valid result')}, the latest {run_words(valid[-1])}.", ""]
            else:
                bad = [f"{run_words(k)}: {md.text(self.judged[k.id].left_out_why() or self.judged[k.id].word)}"
                       for k in measured]  # fmt: skip
                out += ["**No valid result yet**" + (": " + "; ".join(bad) if bad else "") + ".", ""]
            notes = [(k, a) for k in current for a in k.artifacts if a.label]  # by label, file and run
            if notes:
                out += ["Notes: " + ", ".join(self._artifact(a) + (f" (of {run_words(k)})" if k.run else "")
                                              for k, a in notes), ""]  # fmt: skip
        return out

    # --- baselines --------------------------------------------------------------------------------------------

    def baselines_section(self) -> list[str]:
        rows = []
        for name, runs in sorted(self.baseline_runs.items()):
            if not runs:
                continue
            metrics = [m.name for m in runs[-1].metrics]
            metric = self.store.headline() if self.store.headline() in metrics else (metrics[0] if metrics else "")
            said = baseline_words(name, runs, metric)
            rows.append(f"- {md.code(name)}: the {md.text(said)}" + (f", {md.code(metric)}" if metric else "") +
                        f"; the latest {run_words(runs[-1])}")  # fmt: skip
        head = ["## Baselines", "", "What each series' results are judged against: its latest valid baseline runs "
                "(`stackmgr run --series S` with none of its patches applied).", ""]  # fmt: skip
        return [*head, *rows, ""] if rows else []

    # --- the trees --------------------------------------------------------------------------------------------

    def trees_section(self, trees: list[LiveTree] | None) -> list[str]:
        if not trees:
            return []
        out = ["## The trees when this page was written", "",
               "What `stackmgr status` said of this machine's registered trees: the results above are the store's; "
               "a tree holds whatever is checked out in it now.", ""]  # fmt: skip
        for t in trees:
            out.append(f"- {md.code(t.name)}: {self._tree_words(t)}")
        return [*out, ""]

    def _tree_words(self, t: LiveTree) -> str:
        if t.state != "ok":
            return md.text(t.problem or t.state)
        said = [md.text(t.position) if t.position else "no series applied"]
        if t.drift or t.unsaved:
            parts = [f"{t.drift} file{'s' if t.drift != 1 else ''} changed on top of them"] if t.drift else []
            parts += [f"{t.unsaved} change{'s' if t.unsaved != 1 else ''} in no saved patch"] if t.unsaved else []
            said.append("dirty: " + ", ".join(parts))
        else:
            said.append("clean")
        if t.applied:
            others = [(n, self._status_words(self.patches[n]) if n in self.patches else "unknown") for n in t.applied]
            unpromoted = [f"{md.code(n)} ({md.text(w)})" for n, w in others if not w.startswith("promoted")]
            said.append("not a promoted set: " + ", ".join(unpromoted) if unpromoted else "a promoted set")
        return "; ".join(said)
