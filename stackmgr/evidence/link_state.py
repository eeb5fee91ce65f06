"""A link's state: the one answer `show`, `links`, `compare`, a promotion, the HTML report and the lessons page
give about a result (docs/FORMATS.md#link-record).

A result's state has three parts, each one rule:

- failed: its run failed, by its `[run]` exit code (other than 0) or, for a result with none recorded, by its
  `exit` gate (`fail` or `error`, as `--gate exit=fail:exit 3` records it);
- tainted: a measured tree changed while it ran (`stackmgr run` found it);
- invalid: a gate it records, but `exit`, did not pass (evidence/gates.py `gate_failure`: a result is valid
  only when every gate passes);
- freshness: what its evidence is worth today (evidence/states.py: fresh, equivalent, stale, broken, orphaned,
  edited), taken from there, never re-derived.

A result is usable as a measurement (`usable`) when it did not fail, was not tainted and its evidence is whole
(not broken, not edited); it is a measurement of its patch (`measures`) when it is usable and measured the patch
(its changes were in the measured tree: a run with the patch popped and linked to it is a baseline, not its
result). `left_out_why` says why one is not, in a few words. Views name a result by `word`: `failed`, `tainted`,
`baseline`, else its freshness; a listing marks it by `mark` (`FAILED (exit 3)`, `TAINTED`, `WITHOUT THE PATCH`,
`BASELINE OF S` for a series' baseline)
and ranks a marked result after the patch's own. The numbers a view quotes as a patch's (the index's best metric,
the lessons page's latest numbers) are those of `quoted_results`, and only those.

`measured_state` is the identity of what a result measured (per tree, the snapshot id its record keeps): two
results are repeats of one measurement only when it is equal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackmgr.evidence.gates import gate_failure
from stackmgr.evidence.metrics import Gate
from stackmgr.evidence.records import Link
from stackmgr.evidence.rows import Brief

if TYPE_CHECKING:
    from stackmgr.evidence.states import Evidence

HOLDS = ("fresh", "equivalent")  # freshness under which a result still speaks for the patch as it is
WHOLE_NOT = ("broken", "edited")  # freshness under which a record's numbers cannot be trusted at all
WITHOUT = "WITHOUT THE PATCH"  # how a listing marks a result measured without its patch (a baseline)


@dataclass(frozen=True)
class LinkState:
    """What one result is worth: see the module's docstring."""

    freshness: str  # evidence/states.py: fresh, equivalent, stale, broken, orphaned, edited
    failed: str  # "" or why in a few words: "exit 3", "exit gate error"
    tainted: bool
    measures_patch: bool  # the patch's changes were in its tree's measured state (else a baseline)
    invalid: str = ""  # "" or the gate that did not pass (evidence/gates.py `gate_failure`): "gate quality: fail"
    baseline_of: str = ""  # the series whose base it measured (Link.baseline_series): marked `BASELINE OF S`

    @property
    def valid(self) -> bool:
        """Its run neither failed nor was tainted, and every gate it records passed."""
        return not self.failed and not self.tainted and not self.invalid

    @property
    def usable(self) -> bool:
        """A measurement: valid, and its evidence whole (not broken, not edited)."""
        return self.valid and self.freshness not in WHOLE_NOT

    @property
    def measures(self) -> bool:
        """A measurement of its patch: usable, and the patch's changes were in the measured tree (no baseline).
        The rule `compare`, `links`, the report and the lessons page apply to quote or rank a patch's numbers."""
        return self.usable and self.measures_patch

    @property
    def holds(self) -> bool:
        """A usable result whose evidence still holds for the patch as it is now (fresh or equivalent)."""
        return self.usable and self.freshness in HOLDS

    @property
    def word(self) -> str:
        """The one word a view shows for it: failed, tainted, baseline (measured without the patch), else its
        freshness."""
        if self.failed or self.tainted or self.invalid:
            return "failed" if self.failed else "tainted" if self.tainted else "invalid"
        return self.freshness if self.measures_patch else "baseline"

    @property
    def run_problem(self) -> str:
        """`FAILED (exit 3)`, `TAINTED`, `FAILED (exit 3), TAINTED` or "": how a listing marks an invalid run."""
        return _mark(self.failed, self.tainted, invalid=self.invalid)

    @property
    def mark(self) -> str:
        """How a listing marks a result that is no measurement of its patch by its run: `run_problem`, and
        `WITHOUT THE PATCH` for a baseline; "" for the patch's own result."""
        return _mark(self.failed, self.tainted, self.measures_patch, self.invalid, self.baseline_of)

    def left_out_why(self, named: bool = False) -> str | None:
        """Why the result is no measurement of its patch to average or compare (`exit 3`, `tainted`, `broken: …`,
        `measured without the patch`), or None. `named`: the user named it by itself, so a baseline is asked for."""
        why = [self.failed] if self.failed else []
        why += ["tainted"] if self.tainted else []
        why += [f"invalid: {self.invalid}"] if self.invalid else []
        if self.freshness == "broken":
            why.append("broken: an artifact changed or is missing (`stackmgr verify`)")
        elif self.freshness == "edited":
            why.append("edited: the record changed after it was written")
        if not self.measures_patch and not named:
            why.append("measured without the patch")
        return ", ".join(why) or None


def run_mark(link: Link | Brief) -> str:
    """How `show`, `links` and `compare` mark a run that failed or was tainted (`LinkState.run_problem`), without
    judging its evidence: `FAILED (exit 3)`, `TAINTED`, or ""."""
    return _mark(run_failure(link), bool(link.tainted), invalid=gate_failure(link.gates))


def link_mark(link: Link | Brief) -> str:
    """`LinkState.mark` without judging its evidence: how `show` and `links` mark a run that failed, was tainted
    or measured without the patch (`FAILED (exit 3)`, `TAINTED`, `WITHOUT THE PATCH`), or "". A listing ranks a
    marked result after the patch's own."""
    return _mark(run_failure(link), bool(link.tainted), bool(link.measures_patch), gate_failure(link.gates),
                 link.baseline_series)  # fmt: skip


def _mark(failed: str, tainted: bool, measures_patch: bool = True, invalid: str = "", baseline_of: str = "") -> str:
    said = [f"FAILED ({failed})"] if failed else []
    said += [f"INVALID ({invalid})"] if invalid else []
    without = [] if measures_patch else [f"BASELINE OF {baseline_of}" if baseline_of else WITHOUT]
    return ", ".join(said + (["TAINTED"] if tainted else []) + without)


def quoted_results(links: Sequence[Link], judged: Mapping[str, LinkState]) -> list[Link]:
    """The results whose numbers a view may quote as the patch's (the index's best metric, the lessons page's
    latest numbers), oldest first as given: those with metrics that measure the patch (`LinkState.measures`: no
    failed or tainted run, no broken or edited evidence, no baseline) and whose evidence holds for the patch as
    it is now (fresh or equivalent). `links`: the patch's current records; `judged`: their states by id."""
    return [k for k in links if k.metrics and judged[k.id].measures and judged[k.id].holds]


def run_failure(link: Link | Brief) -> str:
    """Why the result's run failed ("exit 3", "exit gate error"), or "": its `[run]` exit code when it recorded
    one, else its `exit` gate."""
    return failure_of(link.exit_code if isinstance(link, Brief) else link.run.get("exit_code"), link.gates)


def failure_of(exit_code: object, gates: list[Gate]) -> str:
    """`run_failure` of a record about to be written: its run's exit code (None when it has no run) and gates."""
    if isinstance(exit_code, int) and not isinstance(exit_code, bool):
        return f"exit {exit_code}" if exit_code != 0 else ""
    gate = next((g for g in gates if g.name == "exit"), None)
    if gate is None or gate.status not in ("fail", "error"):
        return ""
    return gate.detail if gate.detail.startswith("exit ") else f"exit gate {gate.status}"


def link_state(ev: Evidence, link: Link | Brief) -> LinkState:
    """The state of one result today (freshness from `ev`, evidence/states.py)."""
    return LinkState(ev.state(link), run_failure(link), bool(link.tainted), bool(link.measures_patch),
                     gate_failure(link.gates), link.baseline_series)  # fmt: skip


def interruption(run: dict[str, object]) -> str:
    """How `show` says a run was stopped, by the signal its record names: `interrupted (SIGTERM)`,
    `interrupted (Ctrl-C)` for SIGINT, `interrupted` when none was recorded; "" for a run not interrupted."""
    if not run.get("interrupted"):
        return ""
    signal = run.get("signal")
    if signal == "SIGINT":
        return "interrupted (Ctrl-C)"
    return f"interrupted ({signal})" if isinstance(signal, str) and signal else "interrupted"


def measured_state(link: Link) -> tuple[tuple[str, str], ...]:
    """What the result measured, as an identity: per measured tree, its snapshot id (the working tree's tree id),
    or for a record written before snapshot ids were kept, its HEAD, patch versions and residue."""
    return tuple((s.tree, s.snapshot or "|".join([s.base, *(f"{n}:{h}" for n, h in s.patches), s.residue_patch]))
                 for s in sorted(link.stack, key=lambda s: s.tree))  # fmt: skip
