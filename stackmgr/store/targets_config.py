"""`[targets]` of stackmgr.toml (docs/FORMATS.md#config): per series, the bounds a valid result of it should reach.
The shared config arrives by `git pull`: a target is read by a small grammar and never evaluated:

    replay = "output_throughput >= 150"                       METRIC OP NUMBER (OP one of >= > <= <, NUMBER finite)
    replay = "output_throughput >= baseline +20%"             METRIC OP baseline [+N% | -N%]: against the series'
                                                              baseline runs' median (evidence/targets.py)
    replay = ["output_throughput > 150", "mean_tpot_ms <= baseline -10%"]       several bounds
    [targets.replay]
    target = "output_throughput > 150"                        (or a list, as above)
    note = "not merely within 20% of the non-spec baseline"   why: said with the target on the lessons page

Nothing here runs on `check`'s path (no `re`): `status` imports it only when the config has targets."""

from __future__ import annotations

import math

from stackmgr.errors import StackmgrError
from stackmgr.store.config import Store

OPS = (">=", "<=", ">", "<")  # two-character ones first: `>=` is not `>` then `=150`
MAX_TARGET = 200  # characters of a target's text
MAX_NOTE = 500  # characters of a target's note
MAX_BOUNDS = 8  # bounds of one series
BASELINE = "baseline"


class Target:
    def __init__(self, series: str, text: str, metric: str, op: str, threshold: float,
                 relative: float | None = None, note: str = "") -> None:  # fmt: skip
        self.series = series
        self.text = text  # as written, normalized: "output_throughput >= 150", "… >= baseline +20%"
        self.metric = metric
        self.op = op
        self.threshold = threshold  # a relative bound's is set from the baseline when it is checked
        self.relative = relative  # the percent off the series' baseline median (`baseline +20%`: 20.0), or None
        self.note = note  # the config's `note`, as written (bounded)

    def met_by(self, value: float) -> bool:
        t = self.threshold
        return {">=": value >= t, ">": value > t, "<=": value <= t, "<": value < t}[self.op]

    def at(self, baseline_median: float) -> float:
        """A relative bound's threshold for a baseline median (`baseline +20%` of 100: 120)."""
        return baseline_median * (1 + (self.relative or 0.0) / 100)

    @property
    def higher(self) -> bool:
        """Whether a greater value comes closer (`>=`, `>`)."""
        return self.op[0] == ">"


def parse_target(series: str, text: object, note: str = "") -> Target:
    """The target of `series` as written in the config, or one line saying it is not METRIC OP NUMBER."""
    shown = str(text)[:80].encode("unicode_escape").decode("ascii")
    wrong = StackmgrError(f'target {series}: "{shown}" is not METRIC OP NUMBER or METRIC OP baseline +N% '
                          "(OP one of >= > <= <)",
                          'fix [targets] in stackmgr.toml, e.g. replay = "output_throughput >= 150"')  # fmt: skip
    if not isinstance(text, str) or len(text) > MAX_TARGET:
        raise wrong
    op = next((o for o in OPS if o in text), None)
    if op is None:
        raise wrong
    metric, _, number = (part.strip() for part in text.partition(op))
    if not _metric_name(metric) or any(o in number for o in "<>="):
        raise wrong
    if number.startswith(BASELINE):
        relative = _percent(number[len(BASELINE) :].strip())
        if relative is None:
            raise wrong
        said = f"{metric} {op} {BASELINE}" + (f" {relative:+g}%" if relative else "")
        return Target(series, said, metric, op, math.nan, relative, note)
    try:
        threshold = float(number)
    except ValueError:
        raise wrong from None
    if not math.isfinite(threshold):
        raise wrong
    return Target(series, f"{metric} {op} {number}", metric, op, threshold, None, note)


def series_targets(series: str, raw: object) -> list[Target | StackmgrError]:
    """The bounds of one `[targets]` entry: a string, a list of them, or a table with `target` and `note`."""
    note, stray = "", []
    if isinstance(raw, dict):
        if "target" not in raw:
            return [StackmgrError(f"target {series}: [targets.{series}] has no `target`",
                                  'give target = "METRIC OP NUMBER" and, optionally, note = "why"')]  # fmt: skip
        stray = [StackmgrError(f"target {series}: [targets.{series}] has unknown key {str(key)[:40]!r} (its "
                               "bounds are judged all the same)", 'only target = "…" and note = "…" are read')
                 for key in sorted(set(raw) - {"target", "note"}, key=str)[:1]]  # fmt: skip
        said_note: object = raw.get("note", "")
        raw = raw["target"]
        if not isinstance(said_note, str) or len(said_note) > MAX_NOTE:
            return [StackmgrError(f"target {series}: its note is not a string of at most {MAX_NOTE} characters",
                                  "fix [targets] in stackmgr.toml")]  # fmt: skip
        note = said_note
    texts = raw if isinstance(raw, list) else [raw]
    if not texts or len(texts) > MAX_BOUNDS:
        return [StackmgrError(f"target {series}: give 1 to {MAX_BOUNDS} bounds", "fix [targets] in stackmgr.toml")]
    found: list[Target | StackmgrError] = []
    for text in texts:
        try:
            found.append(parse_target(series, text, note))
        except StackmgrError as exc:
            found.append(exc)
    return found + stray  # a typo is said, after the bounds it switches none of off


def all_targets(store: Store) -> dict[str, list[Target | StackmgrError]]:
    """Every series' bounds, by series name, in the order written: parsed, or the error that says why one cannot
    be read (a view names it and goes on; a bad target never stops `status`)."""
    from stackmgr.store.names import valid_name

    raw = store.targets if isinstance(store.targets, dict) else {}
    return {series: series_targets(series, text) for series, text in sorted(raw.items()) if valid_name(series)}


def targets(store: Store) -> dict[str, Target | StackmgrError]:
    """Each series' first bound (all_targets has them all)."""
    return {series: found[0] for series, found in all_targets(store).items()}


def _percent(text: str) -> float | None:
    """`` (0), `+20%`, `-10%`, `+ 20 %`: the percent, finite and above -100; else None."""
    if not text:
        return 0.0
    if text[0] not in "+-" or not text.endswith("%"):
        return None
    try:
        value = float(text[1:-1].strip())
    except ValueError:
        return None
    value = -value if text[0] == "-" else value
    return value if math.isfinite(value) and -100 < value <= 10000 and text[1:2] not in "+-" else None


def _metric_name(name: str) -> bool:
    """`[A-Za-z_][A-Za-z0-9_.:-]{0,99}`, ASCII (docs/FORMATS.md#link-record)."""
    return (0 < len(name) <= 100 and name.isascii() and (name[0].isalpha() or name[0] == "_")
            and all(c.isalnum() or c in "_.:-" for c in name))  # fmt: skip
