"""A case's outcome on each side, the verdict, and the known differences (field/known.toml) that excuse one."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Side:
    """What one tool made of a case: a tree id, or a failure (`tree` None) with the reason."""

    tool: str
    tree: str | None
    note: str = ""
    stop: str | None = None  # a refusal: which patch it stopped at, when that is comparable across tools

    @property
    def failed(self) -> bool:
        return self.tree is None

    def show(self) -> str:
        return f"{self.tree[:12]}" if self.tree else f"failed ({self.note})" if self.note else "failed"


@dataclass
class Result:
    suite: str  # debian, export, am, rebase
    case: str  # e.g. debian/cowsay
    stackmgr: Side
    other: Side
    detail: list[str] = field(default_factory=list)  # per-patch lines (import outcome, rebase classification)
    known: str | None = None  # the reason, when known.toml lists this case

    @property
    def agree(self) -> bool:
        """The same tree, or both refused (at the same patch, when both say where)."""
        if self.stackmgr.tree != self.other.tree:
            return False
        a, b = self.stackmgr.stop, self.other.stop
        return a is None or b is None or a == b

    @property
    def verdict(self) -> str:
        if self.agree:
            return "agree"
        return "known difference" if self.known else "DISAGREE"


def load_known(path: Path) -> dict[str, str]:
    """case id → reason. Every entry needs both, so a difference is never excused without saying why."""
    if not path.exists():
        return {}
    data = tomllib.loads(path.read_text())
    known: dict[str, str] = {}
    for n, entry in enumerate(data.get("known", []), 1):
        case, reason = entry.get("case"), entry.get("reason")
        if not isinstance(case, str) or not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"{path}: [[known]] entry {n} needs a `case` and a non-empty `reason`")
        known[case] = reason.strip()
    return known


def known_reason(known: dict[str, str], result: Result) -> str | None:
    """The reason known.toml gives for this case: an entry names `SUITE/` and the case as printed, or the start
    of it up to a space or a colon (`debian/cowsay`, `rebase/tomli moved:` for every such case of tomli)."""
    key = f"{result.suite}/{result.case}"
    for case, reason in known.items():
        if key == case or (key.startswith(case) and (case[-1] in " :" or key[len(case)] in " :")):
            return reason
    return None


def summary(results: list[Result], suites: tuple[str, ...]) -> str:
    agree = sum(r.agree for r in results)
    known = sum(not r.agree and r.known is not None for r in results)
    parts = []
    for s in suites:
        mine = [r for r in results if r.suite == s]
        if mine:
            parts.append(f"{s} {sum(r.agree for r in mine)}/{len(mine)}")
    extra = f", {known} of them known" if known else ""
    return f"field: {agree} agree, {len(results) - agree} disagree{extra} ({', '.join(parts)})"


def exit_code(results: list[Result]) -> int:
    return 1 if any(not r.agree and r.known is None for r in results) else 0


def render(results: list[Result], verbose: bool) -> str:
    """One table per suite: case, stackmgr's result, the other tool's, the verdict; per-patch detail below."""
    out: list[str] = []
    for suite in dict.fromkeys(r.suite for r in results):
        mine = [r for r in results if r.suite == suite]
        other = mine[0].other.tool
        out += ["", f"### {suite}: stackmgr vs {other}", "",
                f"| case | stackmgr | {other} | verdict |", "|---|---|---|---|"]
        for r in mine:
            out.append(f"| {r.case} | {r.stackmgr.show()} | {r.other.show()} | {r.verdict} |")
        for r in mine:
            if r.detail and (verbose or not r.agree or suite == "rebase"):
                out.append(f"  {r.case}:")
                out += [f"    {line}" for line in r.detail]
            if r.known and not r.agree:
                out.append(f"  {r.case}: known: {r.known}")
            elif r.known:
                out.append(f"  {r.case}: listed in known.toml but agrees now; remove the entry")
    return "\n".join(out)
