"""Which patch did it, as the pages say it of one patch: its own step in the latest `stackmgr ablate` walk of each
of its series (its prefix against the one below), and its latest `stackmgr ab` (with it against without), each
judged by evidence/stats.judge on the valid runs of those groups (docs/FORMATS.md: run names and groups). The
report's patch page leads with it, the lessons page's failed and open lanes carry it: a lane's lesson then stands
on the number that blamed it, not only on the words typed with the verdict."""

from __future__ import annotations

import re
from dataclasses import dataclass

from stackmgr.evidence.metrics import verdict_words
from stackmgr.evidence.records import Link
from stackmgr.evidence.report.figures import Figures, judged_words
from stackmgr.evidence.report.model import PatchInfo
from stackmgr.evidence.states import effective
from stackmgr.evidence.stats import Judgement, judge

AB_GROUP = r"ab-{patch}-(\d{{8}}T\d{{6}}(?:-\d+)?)-([AB])"  # `ab-PATCH-<stamp>-A` (commands/alternate.run_prefix)


@dataclass
class Blame:
    """One measurement of what a patch itself did: how (`ablate` or `ab`), the run groups, the judgement."""

    how: str  # "ablate walk ablate-S-<stamp>" or "ab ab-P-<stamp>"
    metric: str
    judged: Judgement

    @property
    def words(self) -> str:
        """`ablate walk ablate-S-…: output_throughput -39.9% [-41.0%, -38.8%] slower than the prefix below
        (n=5+5)`."""
        compared = self.judged.verdict in ("faster", "slower", "better", "worse", "higher", "lower")
        against = ("than" if compared else "against") + (" the prefix below" if self.how.startswith("ablate") else
                                                           " without it")  # fmt: skip
        return (f"{self.how}: {self.metric} {judged_words(self.judged)} {against} "
                f"(n={self.judged.n_a}+{self.judged.n_b})")  # fmt: skip


class Attribution(Figures):
    def blames(self, info: PatchInfo) -> list[Blame]:
        """The patch's own step in each of its series' latest ablate walk, then its latest ab."""
        found = []
        for series, _ in info.series:
            walk = self.ablate_walk(series)
            k = next((k for k, runs in walk.items() if k and runs and runs[-1].patch == info.name), None)
            if k is not None and k - 1 in walk:
                prefix = str(walk[k][-1].run.get("group", "")).rsplit("-", 1)[0]
                if (blame := self._blame(f"ablate walk {prefix}", walk[k - 1], walk[k])) is not None:
                    found.append(blame)
        sides = self._latest_ab(info.name)
        if sides is not None and (blame := self._blame(f"ab {sides[0]}", sides[1], sides[2])) is not None:
            found.append(blame)
        return found

    def _latest_ab(self, patch: str) -> tuple[str, list[Link], list[Link]] | None:
        pattern = re.compile(AB_GROUP.format(patch=re.escape(patch)))
        runs: dict[str, dict[str, list[Link]]] = {}
        for link in effective(self.links):
            group = link.run.get("group")
            if isinstance(group, str) and (m := pattern.fullmatch(group)):
                runs.setdefault(m[1], {}).setdefault(m[2], []).append(link)
        if not runs:
            return None
        stamp = max(runs)
        return f"ab-{patch}-{stamp}", runs[stamp].get("A", []), runs[stamp].get("B", [])

    def _blame(self, how: str, below: list[Link], above: list[Link]) -> Blame | None:
        """`above` against `below`, their valid runs only (as ablate and ab judge them), on the headline."""
        below = [k for k in below if self.judged[k.id].usable]
        above = [k for k in above if self.judged[k.id].usable]
        found = self._picture_metric(below + above)
        if found is None:
            return None
        name, unit, direction = found
        a, b = self._picture_values(below, name), self._picture_values(above, name)
        if not a or not b:
            return None
        return Blame(how, name, judge(a, b, direction=direction, words=verdict_words(name, unit)))
