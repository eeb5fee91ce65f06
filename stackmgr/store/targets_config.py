"""`[targets]` of stackmgr.toml (docs/FORMATS.md#config): per series, a bound a valid result of it should reach,
`replay-correctness = "output_throughput >= 150"`. The shared config arrives by `git pull`: a target is read by
a small grammar, METRIC OP NUMBER (OP one of >= > <= <, NUMBER finite), and never evaluated. Nothing here runs
on `check`'s path (no `re`): `status` imports it only when the config has targets."""

from __future__ import annotations

import math

from stackmgr.errors import StackmgrError
from stackmgr.store.config import Store

OPS = (">=", "<=", ">", "<")  # two-character ones first: `>=` is not `>` then `=150`
MAX_TARGET = 200  # characters of a target's text


class Target:
    def __init__(self, series: str, text: str, metric: str, op: str, threshold: float) -> None:
        self.series = series
        self.text = text  # as written, normalized: "output_throughput >= 150"
        self.metric = metric
        self.op = op
        self.threshold = threshold

    def met_by(self, value: float) -> bool:
        t = self.threshold
        return {">=": value >= t, ">": value > t, "<=": value <= t, "<": value < t}[self.op]

    @property
    def higher(self) -> bool:
        """Whether a greater value comes closer (`>=`, `>`)."""
        return self.op[0] == ">"


def parse_target(series: str, text: object) -> Target:
    """The target of `series` as written in the config, or one line saying it is not METRIC OP NUMBER."""
    shown = str(text)[:80].encode("unicode_escape").decode("ascii")
    wrong = StackmgrError(f'target {series}: "{shown}" is not METRIC OP NUMBER (OP one of >= > <= <)',
                          'fix [targets] in stackmgr.toml, e.g. replay = "output_throughput >= 150"')  # fmt: skip
    if not isinstance(text, str) or len(text) > MAX_TARGET:
        raise wrong
    op = next((o for o in OPS if o in text), None)
    if op is None:
        raise wrong
    metric, _, number = (part.strip() for part in text.partition(op))
    try:
        threshold = float(number)
    except ValueError:
        raise wrong from None
    if not (_metric_name(metric) and math.isfinite(threshold)) or any(o in number for o in "<>="):
        raise wrong
    return Target(series, f"{metric} {op} {number}", metric, op, threshold)


def targets(store: Store) -> dict[str, Target | StackmgrError]:
    """Every series' target, by series name: parsed, or the error that says why it cannot be read (a view names
    it and goes on; a bad target never stops `status`)."""
    from stackmgr.store.names import valid_name

    raw = store.targets if isinstance(store.targets, dict) else {}
    found: dict[str, Target | StackmgrError] = {}
    for series, text in sorted(raw.items()):
        if not valid_name(series):
            continue  # no series can have that name: nothing to say it of
        try:
            found[series] = parse_target(series, text)
        except StackmgrError as exc:
            found[series] = exc
    return found


def _metric_name(name: str) -> bool:
    """`[A-Za-z_][A-Za-z0-9_.:-]{0,99}`, ASCII (docs/FORMATS.md#link-record)."""
    return (0 < len(name) <= 100 and name.isascii() and (name[0].isalpha() or name[0] == "_")
            and all(c.isalnum() or c in "_.:-" for c in name))  # fmt: skip
