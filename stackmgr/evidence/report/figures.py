"""What the report's pictures draw (report/pictures.py), gathered from the store's results:

- a series' waterfall (`series_waterfall`): its latest `stackmgr ablate` walk of prefixes (runs in groups
  `ablate-S-<stamp>-K`, K the patches applied, docs/FORMATS.md), each patch's step its prefix against the one
  below as ablate judges it (evidence/stats.judge); lacking one, each patch's result against the series' baseline
  runs as the index judges it (report/against.py);
- a patch's metric across its results (`patch_picture`): the runs that measured it (`LinkState.measures`, every
  version), grouped by run group, each group judged against the series' baseline runs (judge, with at least
  against.REPEATS runs a side), the baseline's median and the series' target (`[targets]`) as lines.
"""

from __future__ import annotations

import math
import re
from statistics import median

from stackmgr.evidence.metrics import verdict_words
from stackmgr.evidence.records import Link
from stackmgr.evidence.report.against import REPEATS
from stackmgr.evidence.report.markup import Markup, e, num
from stackmgr.evidence.report.model import PatchInfo, SeriesInfo
from stackmgr.evidence.report.pictures import Line, RunGroup, Step, runs_svg, waterfall_svg
from stackmgr.evidence.states import effective
from stackmgr.evidence.stats import Judgement, judge

STAMP = r"(\d{8}T\d{6}(?:-\d+)?)-(\d+)"  # `ablate-S-<stamp>[-N]-K` (commands/alternate.run_prefix)
TARGET_COLOR = "#a84300"


def judged_words(j: Judgement) -> str:
    """`+20.0% [+19.5%, +20.5%] faster`, as the report says a judgement (Markup.against)."""
    effect = f"{j.effect * 100:+.1f}%" if j.effect is not None else ""
    ci = f" [{j.ci_low * 100:+.1f}%, {j.ci_high * 100:+.1f}%]" if j.ci_low is not None and j.ci_high is not None else ""
    return f"{effect}{ci} {j.verdict}".strip()


def interval(j: Judgement, start: float) -> tuple[float | None, float | None]:
    """The judged shift's interval as values: `start` moved by the relative ends (None when not judged)."""
    if j.ci_low is None or j.ci_high is None or not j.median_a:
        return None, None
    scale = abs(j.median_a)
    return start + j.ci_low * scale, start + j.ci_high * scale


class Figures(Markup):
    def _picture_value(self, link: Link, name: str) -> float | None:
        m = next((m for m in link.metrics if m.name == name), None)
        return m.value if m is not None and math.isfinite(m.value) else None

    def _picture_values(self, links: list[Link], name: str) -> list[float]:
        return [x for k in links if (x := self._picture_value(k, name)) is not None]

    def _base_median(self, series: str, metric: str) -> float | None:
        values = self._picture_values(self.baseline_runs.get(series, []), metric)
        return median(values) if values else None

    def ablate_walk(self, series: str) -> dict[int, list[Link]]:
        """The latest ablate walk of prefixes of `series`: {K: its runs}, or {}."""
        pattern = re.compile(r"ablate-" + re.escape(series) + "-" + STAMP)
        walks: dict[str, dict[int, list[Link]]] = {}
        for link in effective(self.links):
            group = link.run.get("group")
            found = pattern.fullmatch(group) if isinstance(group, str) else None
            if found:  # every run of the walk: a state whose runs are all invalid is a step without a verdict
                walks.setdefault(found[1], {}).setdefault(int(found[2]), []).append(link)
        return walks[max(walks)] if walks else {}

    def _picture_metric(self, links: list[Link]) -> tuple[str, str, str] | None:
        """(name, unit, direction) of the headline (`[evidence] headline`) where the links have it, else of the
        first metric the first of them has."""
        headline = self.store.headline()
        every = [m for k in links for m in k.metrics]
        m = next((m for m in every if m.name == headline), None) or (every[0] if every else None)
        return (m.name, m.unit, m.direction) if m is not None else None

    def series_waterfall(self, s: SeriesInfo) -> str:
        walk = self.ablate_walk(s.name)
        if 0 in walk and len(walk) > 1:
            return self._ablate_waterfall(s.name, walk)
        return self._against_waterfall(s)

    def _ablate_waterfall(self, series: str, walk: dict[int, list[Link]]) -> str:
        found = self._picture_metric(walk[0])
        if found is None:
            return ""
        name, unit, direction = found
        usable = {k: [r for r in runs if self.judged[r.id].usable] for k, runs in walk.items()}
        values = {k: v for k, runs in usable.items() if (v := self._picture_values(runs, name))}
        if 0 not in values:
            return ""
        steps, level = [], median(values[0])
        for k in range(1, max(walk) + 1):
            patch = walk[k][-1].patch if k in walk else f"patch {k}"
            if k not in values or k - 1 not in values:
                lacking = walk.get(k if k not in values else k - 1, [])
                why = {w for r in lacking if (w := self.judged[r.id].left_out_why(named=True))}
                said = (
                    f"not judged: {len(lacking)} runs not valid ({'; '.join(sorted(why))})" if why else "no valid run"
                )
                steps.append(Step(patch, level, level, "", said))
                continue
            j = judge(values[k - 1], values[k], direction=direction, words=verdict_words(name, unit))
            start, end = median(values[k - 1]), median(values[k])
            low, high = interval(j, start)
            said = f"{num(end)}: {judged_words(j)} (n={len(values[k])})"
            steps.append(Step(patch, start, end, j.verdict, said, low, high))
            level = end
        runs = len(values[0])
        title = (f"Waterfall of {series}: {name} of each prefix (stackmgr ablate, {runs} runs a state): the base, "
                 f"then each patch's step against the prefix below, with its 95% interval")  # fmt: skip
        lines = self.target_lines(series, name, self._base_median(series, name))
        return self._figure(waterfall_svg(title, unit, f"base (n={runs})", median(values[0]), steps, lines), title)

    def _against_waterfall(self, s: SeriesInfo) -> str:
        steps, base, unit, metric = [], math.nan, "", ""
        for name, _guards in s.entries:
            info = self.patches.get(name)
            found = self.against_of(info) if info is not None else None
            if found is None or found.series != s.name or (metric and found.metric.name != metric):
                continue
            base, unit, metric = found.base_median, found.metric.unit, found.metric.name
            j = found.judged
            low, high = interval(j, base) if j is not None else (None, None)
            said = f"{num(found.metric.value)}: " + (
                f"{judged_words(j)} (n={found.runs})" if j is not None else f"{found.runs} run, no verdict"
            )
            steps.append(Step(name, base, found.metric.value, j.verdict if j else "", said, low, high))
        if not steps:
            return ""
        title = (f"{s.name}: {metric} of each patch against the series' baseline runs (no ablate walk recorded): "
                 "each bar from the baseline's median to the patch's, with its 95% interval")  # fmt: skip
        lines = self.target_lines(s.name, metric, base)
        return self._figure(waterfall_svg(title, unit, "baseline", base, steps, lines), title)

    def target_lines(self, series: str, metric: str, base: float | None) -> list[Line]:
        """Each bound of the series' targets (`[targets]`) on `metric`; a bound relative to the baseline only
        with the baseline runs' median `base` (`Target.at`)."""
        from stackmgr.store.targets_config import Target, all_targets

        lines = []
        for target in all_targets(self.store).get(series, []):
            if not isinstance(target, Target) or target.metric != metric or (target.relative is not None and not base):
                continue
            at = target.at(base or 0.0) if target.relative is not None else target.threshold
            lines.append(Line(at, f"target {target.op} {num(at)}", False, TARGET_COLOR))
        return lines

    def _figure(self, svg: str, caption: str) -> str:
        return f'<figure class="picture">{svg}<figcaption>{e(caption)}</figcaption></figure>' if svg else ""

    def patch_picture(self, info: PatchInfo) -> str:
        """The patch's headline metric across its results, or "" without one."""
        ours = [k for k in effective(info.links) if self.judged[k.id].measures_patch and k.metrics]
        mine = [k for k in ours if self.judged[k.id].measures]
        vs = self.against_of(info)
        found = (
            (vs.metric.name, vs.metric.unit, vs.metric.direction)
            if vs is not None
            else self._picture_metric(mine or ours)
        )
        if found is None:
            return ""
        name, unit, direction = found
        series = next((s for s, _ in info.series if self.baseline_runs.get(s)), info.series[0][0] if info.series
                      else "")  # fmt: skip
        base = self._picture_values(self.baseline_runs.get(series, []), name)
        groups: dict[str, list[Link]] = {}
        for k in sorted(ours, key=lambda k: (k.created, k.id)):  # a run left out: a group of its own, hollow
            if self._picture_value(k, name) is not None:
                group = k.run.get("group")
                key = group if isinstance(group, str) and group else k.id
                groups.setdefault(key if self.judged[k.id].measures else f"{key} (left out)", []).append(k)
        drawn = []
        for label, runs in groups.items():
            values = self._picture_values(runs, name)
            why = {w for k in runs if (w := self.judged[k.id].left_out_why())}
            g = RunGroup(label, runs[-1].sha256[:8] or "?", values, left_out="; ".join(sorted(why)))
            if not why and min(len(base), len(values)) >= REPEATS:
                j = judge(base, values, direction=direction, words=verdict_words(name, unit))
                g.verdict, g.said = j.verdict, f"{judged_words(j)} vs the baseline"
                g.low, g.high = interval(j, median(base))
            drawn.append(g)
        lines = [Line(median(base), f"baseline {num(median(base))} (n={len(base)})")] if base else []
        lines += self.target_lines(series, name, median(base) if base else None)
        left = len(groups) - len(drawn[-60:])
        why_out = {g.left_out for g in drawn if g.left_out}
        title = (
            f"{name} of {info.name} across its {len(mine)} valid results"
            + (f" and {len(ours) - len(mine)} left out ({'; '.join(sorted(why_out))})" if why_out else "")
            + ", in time order, grouped by patch "
            "version: dots are runs (hollow: left out, not valid), a tick the median, a whisker the 95% interval "
            "against the baseline"
            + (f" of {series}" if base else "")
            + (f"; the oldest {left} groups are left out" if left > 0 else "")
        )
        return self._figure(runs_svg(title, unit, drawn, lines), title)
