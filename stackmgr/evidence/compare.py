"""The run configuration of a result: what must be equal for two results to be ranked against each other.

A result's configuration is the model, request rate, concurrency limit and number of prompts it was measured
with, read from the link's `vllm bench serve --save-result` JSON artifact (the file holds them beside the
metrics). A link record that carries a run table of its own (`link.config`) is read first.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from stackmgr.errors import StackmgrError
from stackmgr.evidence.records import Link
from stackmgr.store.config import Store

# `vllm bench serve --save-result` keys that say how a run was driven, in the order a header names them.
CONFIG_KEYS = ("model_id", "request_rate", "max_concurrency", "num_prompts")
ALIASES = {"model_id": "model"}  # a result that writes `model` (not vllm bench's `model_id`) names its model so
# `vllm bench serve --save-detailed`'s per-request arrays (seconds) and the metrics (ms) whose distribution each is;
# tpot per request is derived: (latency − ttft) / (output_len − 1) where a request wrote more than one token.
REQUEST_SAMPLES = {"ttfts": ("mean_ttft_ms", "median_ttft_ms"), "itls": ("mean_itl_ms", "median_itl_ms"),
                   "latencies": ("mean_e2el_ms", "median_e2el_ms")}  # fmt: skip
TPOT_METRICS = ("mean_tpot_ms", "median_tpot_ms")


def result_config(doc: Mapping[str, object]) -> dict[str, object]:
    """CONFIG_KEYS of a result JSON (or a run table) that it holds, each key read under its alias when absent."""
    found = {}
    for key in CONFIG_KEYS:
        value = doc.get(key)
        if value is None and key in ALIASES:
            value = doc.get(ALIASES[key])
        if value is not None:
            found[key] = value
    return found


def run_config(store: Store, link: Link) -> dict[str, str]:
    """{key: value as text} of CONFIG_KEYS that the link's run recorded; {} when it recorded none (a result with
    no vllm bench JSON: a log, a hand-given --metric)."""
    recorded = link.run.get("config")  # what `stackmgr run` recorded
    if isinstance(recorded, Mapping):
        found = _known(recorded)
        if found:
            return found
    for path in _json_artifacts(link):
        doc = _read_json(store, path)
        if isinstance(doc, dict) and result_config(doc):
            return _known(doc)
    return {}


def request_samples(store: Store, link: Link) -> dict[str, list[float]]:
    """{metric: its per-request values in ms} from the first of the link's JSON artifacts that holds per-request
    arrays (REQUEST_SAMPLES, TPOT_METRICS); a request whose `errors` entry is not empty is left out, as is any
    value that is not a finite number; {} when none holds them."""
    for path in _json_artifacts(link):
        doc = _read_json(store, path)
        if isinstance(doc, dict) and (found := _samples(doc)):
            return found
    return {}


def _samples(doc: Mapping[str, object]) -> dict[str, list[float]]:
    errors = doc.get("errors")
    failed = {i for i, e in enumerate(errors) if e} if isinstance(errors, list) else set()
    found: dict[str, list[float]] = {}
    for key, metrics in REQUEST_SAMPLES.items():
        column = doc.get(key)
        if not isinstance(column, list):
            continue
        rows = [row if isinstance(row, list) else [row] for i, row in enumerate(column) if i not in failed]
        values = [v * 1000 for row in rows for v in row if _number(v)]
        if values:
            found.update(dict.fromkeys(metrics, values))
    ttfts, latencies, lens = doc.get("ttfts"), doc.get("latencies"), doc.get("output_lens")
    if isinstance(ttfts, list) and isinstance(latencies, list) and isinstance(lens, list):
        tpots = [(lat - t) / (k - 1) * 1000 for i, (t, lat, k) in enumerate(zip(ttfts, latencies, lens, strict=False))
                 if _number(t) and _number(lat) and _number(k) and k > 1 and i not in failed]
        if tpots:
            found.update(dict.fromkeys(TPOT_METRICS, tpots))
    return found


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _known(table: Mapping[str, object]) -> dict[str, str]:
    return {key: _text(value) for key, value in result_config(table).items()}


def _json_artifacts(link: Link) -> list[str]:
    """The artifacts a JSON pointer metric was read from, then any other `.json` artifact: a log is never read."""
    sources = [m.source["artifact"] for m in link.metrics if "pointer" in m.source and m.source.get("artifact")]
    named = [a.path for a in link.artifacts if (a.origin or a.path).lower().endswith(".json")]  # a copy by its origin
    return list(dict.fromkeys(sources + named))


def short(config: Mapping[str, str]) -> str:
    """A configuration in a few words, for a one-line view: `Qwen3-30B-A3B · rate 1 · conc 16 · 200 prompts`."""
    parts = [config["model_id"].rsplit("/", 1)[-1]] if config.get("model_id") else []
    parts += [f"rate {config['request_rate']}"] if config.get("request_rate") else []
    parts += [f"conc {config['max_concurrency']}"] if config.get("max_concurrency") else []
    parts += [f"{config['num_prompts']} prompts"] if config.get("num_prompts") else []
    return " · ".join(parts)


def _read_json(store: Store, path: str) -> object:
    """The parsed store file, or None when it is missing, outside the store or reached through a symbolic link
    (never read: docs/SECURITY.md), not a regular file, over MAX_PARSED, nested too deep or not JSON (its link
    reads as broken, or has no configuration)."""
    from stackmgr.evidence.artifacts import read_limited
    from stackmgr.evidence.metrics import MAX_PARSED
    from stackmgr.store.bounded import load_json

    data = read_limited(store.root, path, MAX_PARSED)
    if data is None:
        return None
    try:
        return load_json(data, path)
    except (ValueError, StackmgrError):
        return None


def _text(value: object) -> str:
    """A configuration value as a header shows it and as groups compare it: 1.0 and 1 are the same rate."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, sort_keys=True)
