"""Metrics and gates of a link record: parsed from the command line, pulled from `vllm bench serve` JSON or a log
by regex (a match within one line, the log read a block at a time, in bounded time: evidence/patterns.py), and
re-derived later by `verify` from the source each one records (JSON read up to MAX_PARSED, its nesting bounded:
store/bounded.py)."""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence import patterns
from stackmgr.evidence.patterns import BadPattern, Hit, LinePattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.store.config import Store

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
# What a result says of how it was run (evidence/compare.py reads them) and vllm bench's counts of the run itself:
# never a metric.
CONFIG_NAMES = frozenset({"model_id", "model", "tokenizer_id", "request_rate", "max_concurrency", "num_prompts",
                          "burstiness", "seed", "duration", "completed", "failed", "total_input_tokens",
                          "total_output_tokens"})  # fmt: skip
MAX_EXTRA = 200  # numbers of a result beyond vllm bench's known keys kept as metrics
_LATENCY = re.compile(r"(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms")
_NUMBER = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*((?:[A-Za-z%µ/][^\s]*)?)$")
_LOWER_UNITS = {"s", "ms", "us", "µs", "ns", "sec", "seconds", "min", "h"}
_LOWER_WORDS = ("_ms", "latency", "ttft", "tpot", "itl", "e2el")
_HIGHER_UNITS = {"sps", "qps", "rps", "tps", "fps", "it/s"}
_HIGHER_WORDS = ("throughput", "goodput", "per_s", "acceptance", "speedup", "tok_s", "tokens_per")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,99}")
BLOCK = 1 << 20  # a log is scanned this much at a time
LONGEST_LINE = 4 << 20  # a line with no newline in this many bytes is scanned in pieces
MAX_PARSED = 64 << 20  # a JSON result bigger than this is not parsed (kept, hashed, never read whole)
LONGEST_NUMBER = 100  # characters of a regex's number group: a longer one is not a number


@dataclass
class Metric:
    name: str
    value: float
    unit: str = ""
    direction: str = "higher"  # which way is better: "higher", "lower", "" unknown (read it by `direction_of`)
    source: dict[str, str] = field(default_factory=dict)  # {"artifact", "pointer"} or {"artifact", "regex"}


@dataclass
class Gate:
    name: str
    status: str
    detail: str = ""


def direction_for(name: str, unit: str) -> str:
    """Which way a metric is better by the known table: times and latencies lower (a time unit; `_ms`, latency,
    ttft, tpot, itl, e2el in the name), rates higher (a unit per second; throughput, goodput, `per_s`, acceptance,
    speedup in the name); "" for any other: its direction is unknown (`[metrics.NAME] direction` says it)."""
    lowered, unit = name.lower(), unit.lower()
    if unit in _LOWER_UNITS or any(k in lowered for k in _LOWER_WORDS):
        return "lower"
    if unit.endswith(("/s", "/sec")) or unit in _HIGHER_UNITS or any(k in lowered for k in _HIGHER_WORDS):
        return "higher"
    return ""


def verdict_words(name: str, unit: str) -> tuple[str, str]:
    """What `judge` calls a change for the better and for the worse: `faster`/`slower` for a speed (a time or a
    rate by the known table, `direction_for`), `better`/`worse` for another metric whose direction the lab
    declared (a quality score is never `slower`)."""
    return ("faster", "slower") if direction_for(name, unit) else ("better", "worse")


def direction_of(store: Store | None, metric: Metric) -> str:
    """Which way `metric` is better, as every view judges it: "higher", "lower", or "" (unknown: shown without
    better or worse). The config's `[metrics.NAME] direction` (store/lab_config.py) over what the record says."""
    if store is None:
        return directed(metric, {})
    from stackmgr.store.lab_config import directions

    return directed(metric, directions(store))


def configured_directions(store: Store) -> dict[str, str]:
    """`[metrics.NAME] direction` of the config (store/lab_config.py), for a reader of many records; {} when the
    config's `[metrics]` is malformed (a teammate's pull): records are then read by their own directions, and
    `run`, which reads the config, says what is wrong."""
    from stackmgr.store.lab_config import directions

    try:
        return directions(store)
    except StackmgrError:
        return {}


def directed(metric: Metric, configured: dict[str, str]) -> str:
    """`direction_of` with the config's directions already read (`store/lab_config.directions`): a reader of many
    records reads them once."""
    return configured.get(metric.name) or (metric.direction if metric.direction in ("higher", "lower") else "")


def lead(metrics: list[Metric], headline: str | None) -> Metric | None:
    """The metric a one-line view shows: the configured headline (`[evidence] headline`) when the link has it,
    else its first, as recorded."""
    return next((m for m in metrics if m.name == headline), metrics[0] if metrics else None)


def change(delta: float, direction: str) -> str:
    """"better", "worse" or "same": what a difference from a reference value means for a metric; "" for a
    difference in a metric whose direction is unknown ("": `direction_of`)."""
    if delta == 0:
        return "same"
    if direction not in ("higher", "lower"):
        return ""
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
            groups = compile_regex(pattern).groups
        except BadPattern as exc:
            raise UsageProblem(f"--metric {name}: {exc.message}", exc.hint) from None
        if groups < 1:
            raise UsageProblem(f"--metric {name}: the regex needs a group around the number",
                               "e.g. /tok\\/s: ([0-9.]+)/")  # fmt: skip
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
    """The metrics of a result JSON given by name (`--from-json`), each with its JSON pointer (`vllm_metrics`)."""
    return vllm_metrics(parse_json(data, artifact), artifact, asked=True)


def parse_json(data: bytes, artifact: str) -> Any:
    """The parsed JSON of an artifact; a StackmgrError naming it when it is not JSON or nests too deep."""
    from stackmgr.store.bounded import load_json

    try:
        return load_json(data, artifact)
    except ValueError as exc:
        raise StackmgrError(
            f"{artifact}: not JSON ({exc})", "pass what `vllm bench serve --save-result` wrote"
        ) from None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)  # a bool is an int, never a metric


def _numbers(doc: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(name, JSON pointer, value) of each number of a result: top-level ones but its configuration, then those one
    dict down as `OUTER.INNER`; only names a metric may have (`[A-Za-z_][A-Za-z0-9_.:-]*`)."""
    for key, value in doc.items():
        if _number(value) and key not in CONFIG_NAMES:
            yield key, "/" + key, value
        elif isinstance(value, dict):
            yield from ((f"{key}.{inner}", f"/{key}/{inner}", v) for inner, v in value.items() if _number(v))


def _unit(name: str) -> tuple[str, str]:
    """Unit and direction of a result's number: vllm bench's known keys as they are documented, else by the
    name (`_ms` milliseconds, `_s` seconds, better lower; anything else better higher, no unit)."""
    if name in VLLM_KEYS:
        return VLLM_KEYS[name]
    if _LATENCY.fullmatch(name) or name.endswith("_ms"):
        return "ms", "lower"
    if name.endswith("_s") and not name.endswith("_per_s"):
        return "s", "lower"
    return "", direction_for(name, "")


def vllm_metrics(doc: Any, artifact: str, asked: bool = False, skipped: list[str] | None = None) -> list[Metric]:
    """The metrics of a parsed result JSON: vllm bench serve's known keys first (in the file's order), then every
    other number of it (`_numbers`, at most MAX_EXTRA), when the file is a result: it holds a known key, names its
    `model` (or `model_id`), or was given by name (`asked`). A StackmgrError when it gives none. A number that is
    not finite (NaN, what Python's json writes for a failed mean) is a StackmgrError, or with a list for `skipped`
    left out and said there (`std_ttft_ms: nan (not a finite number)`, as is a key no metric may be named), the
    others kept."""
    if not isinstance(doc, dict):
        raise StackmgrError(f"{artifact}: not a `vllm bench serve` result (no top-level object)")
    known: list[Metric] = []
    extra: list[Metric] = []
    for key, pointer, value in _numbers(doc):
        if not _NAME.fullmatch(key):
            if skipped is not None:
                from stackmgr.output import show_text

                skipped.append(f"'{show_text(key[:40])}' (not a metric name)")
            continue
        is_known = key in VLLM_KEYS or bool(_LATENCY.fullmatch(key))
        if not is_known and len(extra) >= MAX_EXTRA:
            continue
        try:
            number = finite(value, f"{artifact}: {key}")
        except UsageProblem as exc:
            if skipped is None:
                raise StackmgrError(exc.message, "fix the file or leave it out") from None
            skipped.append(f"{key}: {str(value)[:30]} (not a finite number)")
            continue
        unit, direction = _unit(key)
        (known if is_known else extra).append(Metric(key, number, unit, direction,
                                                     {"artifact": artifact, "pointer": pointer}))  # fmt: skip
    a_result = known or asked or any(doc.get(k) is not None for k in ("model", "model_id"))
    metrics = known + (extra if a_result else [])
    if not metrics:
        raise StackmgrError(f"{artifact}: no `vllm bench serve` metrics in it", "check the file, or use --metric")
    return metrics


def compile_regex(pattern: str) -> LinePattern:
    """A metric's regex as it is matched: within one line, `^` and `$` at the line's ends, in bounded time
    (evidence/patterns.py); BadPattern when it cannot be."""
    return patterns.compile_pattern(pattern)


def text_blocks(source: bytes | BinaryIO) -> Iterator[str]:
    """`source` as text (UTF-8, bad bytes replaced) in blocks of whole lines, about BLOCK bytes each, joined by
    newlines, without the last one: a log of any size scanned in little memory. A line longer than LONGEST_LINE
    is read in pieces of about that size."""
    f = io.BytesIO(source) if isinstance(source, bytes) else source
    rest = b""
    while block := f.read(BLOCK):
        data = rest + block
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) < LONGEST_LINE:
                rest = data
                continue
            end = len(data)
        yield data[:end].decode("utf-8", "replace")
        rest = data[end + 1 :]
    if rest:
        yield rest.decode("utf-8", "replace")


def first_matches(compiled: dict[str, LinePattern], source: bytes | BinaryIO,
                  gave_up: dict[str, str] | None = None) -> dict[str, Hit]:  # fmt: skip
    """The first match of each pattern (`compile_regex`) within one line of `source`, a block at a time, in one
    pass; a pattern that never matches is left out, and so is one past its time budget (its name and why into
    `gave_up`)."""
    return patterns.first_matches(compiled, text_blocks(source), gave_up)


def from_regex(name: str, pattern: str, source: bytes | BinaryIO, artifact: str) -> Metric | None:
    """Metric `name` from the first match of `pattern` within one line of `source` (a file's bytes, or the file
    itself, read a block at a time): group 1 is the number, the unit group 2 or the number's suffix. A pattern
    that cannot be matched here, or runs out of time, is a StackmgrError."""
    try:
        compiled = compile_regex(pattern)
    except BadPattern as exc:
        raise StackmgrError(f"--metric {name}: {exc.message}", exc.hint) from None
    gave_up: dict[str, str] = {}
    hit = first_matches({name: compiled}, source, gave_up).get(name)
    if name in gave_up:
        raise StackmgrError(f"--metric {name}: {gave_up[name]}", "match a literal word of the line first")
    return None if hit is None else regex_metric(name, hit, artifact)


def regex_metric(name: str, m: Hit, artifact: str) -> Metric:
    """The metric a regex's match gives (see `from_regex`)."""
    if m.groups < 1:
        raise StackmgrError(f"--metric {name}: the regex has no group around the number", "e.g. tok\\/s: ([0-9.]+)")
    if m.group(1) is None:
        raise StackmgrError(f"--metric {name}: the regex matched without its number group", "make group 1 required")
    said = m.group(1) or ""
    number = _NUMBER.match(said.strip()) if len(said) <= LONGEST_NUMBER else None
    if not number:
        raise StackmgrError(f"--metric {name}: the regex matched '{said[:30]}', not a number", "fix the group")
    unit = ((m.group(2) if m.groups >= 2 else None) or number.group(2)).strip()
    try:
        value = finite(number.group(1), f"--metric {name}")
    except UsageProblem as exc:
        raise StackmgrError(exc.message, "fix the log or the regex") from None
    return Metric(name, value, unit, direction_for(name, unit), {"artifact": artifact, "regex": m.pattern})


def rederive(metric: Metric, data: bytes | BinaryIO) -> float | None:
    """The value the metric's source (its bytes, or the file) gives today (None when it no longer gives one); a
    StackmgrError when it cannot be found out here (a JSON file too big or nested too deep, a regex RE2 refuses
    or that runs out of time)."""
    source = metric.source.get("artifact", "")
    if "pointer" in metric.source:
        from stackmgr.store.bounded import load_json

        raw = data if isinstance(data, bytes) else _read_parsed(data, source)
        try:
            node: Any = load_json(raw, source)  # nested too deep: a StackmgrError naming it
            for part in metric.source["pointer"].lstrip("/").split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            return float(node)
        except (ValueError, KeyError, TypeError, IndexError, OverflowError):
            return None
    if "regex" in metric.source:
        found = from_regex(metric.name, metric.source["regex"], data, "")
        return found.value if found else None
    return None



def _read_parsed(f: BinaryIO, source: str) -> bytes:
    """The bytes of a file to parse; a StackmgrError, the file not read, when it holds over MAX_PARSED."""
    try:
        size = os.fstat(f.fileno()).st_size
    except (OSError, io.UnsupportedOperation):
        size = 0  # not a file: its length is found by reading it
    raw = f.read(MAX_PARSED + 1) if size <= MAX_PARSED else b""
    if size > MAX_PARSED or len(raw) > MAX_PARSED:
        raise StackmgrError(f"{source} is over {MAX_PARSED >> 20} MiB: not parsed")
    return raw
