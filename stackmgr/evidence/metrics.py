"""Metrics and gates of a link record: parsed from the command line, pulled from `vllm bench serve` JSON or a log
by regex, and re-derived later by `verify` from the source each one records."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from stackmgr.errors import StackmgrError, UsageProblem

GATE_STATUSES = ("pass", "fail", "not-run", "error")
VERDICTS = ("promoted", "rejected", "experimental", "inconclusive", "superseded")

# `vllm bench serve --save-result` keys (vllm/benchmarks/serve.py) and how to read them.
VLLM_KEYS: dict[str, tuple[str, str]] = {
    "output_throughput": ("tok/s", "higher"),
    "total_token_throughput": ("tok/s", "higher"),
    "request_throughput": ("req/s", "higher"),
    "request_goodput": ("req/s", "higher"),
    "spec_decode_acceptance_rate": ("%", "higher"),
    "spec_decode_acceptance_length": ("tokens", "higher"),
}
_LATENCY = re.compile(r"(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms")
_NUMBER = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*((?:[A-Za-z%µ/][^\s]*)?)$")
_LOWER_UNITS = {"s", "ms", "us", "µs", "ns", "sec", "seconds", "min", "h"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,99}")


@dataclass
class Metric:
    name: str
    value: float
    unit: str = ""
    direction: str = "higher"  # which way is better
    source: dict[str, str] = field(default_factory=dict)  # {"artifact", "pointer"} or {"artifact", "regex"}


@dataclass
class Gate:
    name: str
    status: str
    detail: str = ""


def direction_for(name: str, unit: str) -> str:
    """Times and latencies are better lower; rates (anything per second), counts and scores higher."""
    if unit.lower() in _LOWER_UNITS:
        return "lower"
    lowered = name.lower()
    return "lower" if any(k in lowered for k in ("_ms", "latency", "ttft", "tpot", "itl", "e2el")) else "higher"


def lead(metrics: list[Metric], headline: str | None) -> Metric | None:
    """The metric a one-line view shows: the configured headline (`[evidence] headline`) when the link has it,
    else its first, as recorded."""
    return next((m for m in metrics if m.name == headline), metrics[0] if metrics else None)


def change(delta: float, direction: str) -> str:
    """"better", "worse" or "same": what a difference from a reference value means for a metric."""
    if delta == 0:
        return "same"
    return "better" if (delta < 0) == (direction == "lower") else "worse"


def finite(value: str | float, what: str) -> float:
    """A metric value, refusing inf, nan and numbers too large for a float."""
    import math

    try:
        number = float(value)
    except (OverflowError, ValueError):
        number = math.inf
    if not math.isfinite(number):
        raise UsageProblem(f"{what}: {str(value)[:30]} is not a finite number", "give a plain number")
    return number


def _check_name(kind: str, name: str) -> str:
    if not _NAME.fullmatch(name):
        raise UsageProblem(f"invalid {kind} name '{name[:40]}'", "use letters, digits and _ . : -")
    return name


def parse_metric(spec: str) -> tuple[Metric | None, tuple[str, str] | None]:
    """`NAME=VALUE[UNIT][@higher|@lower]` → a metric; `NAME=/REGEX/` → (name, regex) to extract from a log."""
    name, eq, rest = spec.partition("=")
    if not eq or not rest:
        raise UsageProblem(f"--metric '{spec}' is not NAME=VALUE[UNIT]", "e.g. --metric output_throughput=107.77tok/s")
    _check_name("metric", name)
    if len(rest) >= 2 and rest.startswith("/") and rest.endswith("/"):
        pattern = rest[1:-1]
        try:
            if re.compile(pattern).groups < 1:
                raise UsageProblem(
                    f"--metric {name}: the regex needs a group around the number", "e.g. /tok\\/s: ([0-9.]+)/"
                )
        except re.error as exc:
            raise UsageProblem(f"--metric {name}: bad regex ({exc})", "check the pattern") from None
        return None, (name, pattern)
    direction = None
    for word in ("@higher", "@lower"):
        if rest.endswith(word):
            rest, direction = rest[: -len(word)], word[1:]
    m = None if re.match(r"[-+]?0[xXbBoO][0-9a-fA-F]", rest.strip()) else _NUMBER.match(rest.strip())
    if not m:
        raise UsageProblem(f"--metric {name}: '{rest}' is not a number with an optional unit", "e.g. 107.77tok/s")
    unit = m.group(2).strip()
    return Metric(name, finite(m.group(1), f"--metric {name}"), unit, direction or direction_for(name, unit)), None


def parse_gate(spec: str) -> Gate:
    name, eq, status = spec.partition("=")
    status, _, detail = status.partition(":")
    if not eq or status not in GATE_STATUSES:
        raise UsageProblem(f"--gate '{spec}' is not NAME=pass|fail|not-run|error", "e.g. --gate json=fail:3/8")
    return Gate(_check_name("gate", name), status, detail)


def from_vllm_json(data: bytes, artifact: str) -> list[Metric]:
    """The headline metrics of a `vllm bench serve --save-result` file, each with its JSON pointer."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise StackmgrError(
            f"{artifact}: not JSON ({exc})", "pass what `vllm bench serve --save-result` wrote"
        ) from None
    if not isinstance(doc, dict):
        raise StackmgrError(f"{artifact}: not a `vllm bench serve` result (no top-level object)")
    metrics = []
    for key, value in doc.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if key in VLLM_KEYS:
            unit, direction = VLLM_KEYS[key]
        elif _LATENCY.fullmatch(key):
            unit, direction = "ms", "lower"
        else:
            continue
        try:
            number = finite(value, f"{artifact}: {key}")
        except UsageProblem as exc:
            raise StackmgrError(exc.message, "fix the file or leave it out") from None
        metrics.append(Metric(key, number, unit, direction, {"artifact": artifact, "pointer": "/" + key}))
    if not metrics:
        raise StackmgrError(f"{artifact}: no `vllm bench serve` metrics in it", "check the file, or use --metric")
    return metrics


def from_regex(name: str, pattern: str, text: str, artifact: str) -> Metric | None:
    m = re.search(pattern, text, re.M)
    if not m:
        return None
    if m.group(1) is None:
        raise StackmgrError(f"--metric {name}: the regex matched without its number group", "make group 1 required")
    number = _NUMBER.match(m.group(1).strip())
    if not number:
        raise StackmgrError(f"--metric {name}: the regex matched '{m.group(1)[:30]}', not a number", "fix the group")
    unit = (m.group(2) if (m.re.groups >= 2 and m.group(2)) else number.group(2)).strip()
    try:
        value = finite(number.group(1), f"--metric {name}")
    except UsageProblem as exc:
        raise StackmgrError(exc.message, "fix the log or the regex") from None
    return Metric(name, value, unit, direction_for(name, unit), {"artifact": artifact, "regex": pattern})


def rederive(metric: Metric, data: bytes) -> float | None:
    """The value the metric's source gives today (None when it no longer gives one)."""
    if "pointer" in metric.source:
        try:
            node: Any = json.loads(data)
            for part in metric.source["pointer"].lstrip("/").split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            return float(node)
        except (ValueError, KeyError, TypeError, IndexError, OverflowError):
            return None
    if "regex" in metric.source:
        try:
            found = from_regex(metric.name, metric.source["regex"], data.decode("utf-8", "replace"), "")
        except (StackmgrError, re.error):
            return None
        return found.value if found else None
    return None
