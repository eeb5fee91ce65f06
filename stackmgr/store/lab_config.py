"""What a lab declares about its numbers in the store's config (docs/FORMATS.md#config): `[metrics.NAME]
direction` (which way a metric is better) and `[gates.NAME]` (what a run must pass for its result to be valid),
from the shared stackmgr.toml and this machine's stackmgr.local.toml, this machine's entry replacing the shared
one of the same name. A gate's command runs only when this machine's config declares it: the shared config
travels by git and runs no code (docs/SECURITY.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from stackmgr.errors import StackmgrError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.store.config import Store

DIRECTIONS = ("higher", "lower")
MUST = ("match", "not-match")
DEFAULT_TIMEOUT_S = 300.0
MAX_TIMEOUT_S = 24 * 3600.0
KEYS = {"metric": {"metric", "min", "max"}, "log_regex": {"log_regex", "must"},
        "command": {"command", "timeout_s"}}  # fmt: skip


@dataclass(frozen=True)
class GateDecl:
    """One `[gates.NAME]` entry: `kind` is "metric", "log_regex" or "command"."""

    name: str
    kind: str
    metric: str = ""
    low: float | None = None
    high: float | None = None
    pattern: str = ""
    must: str = "match"
    command: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    local: bool = False  # declared by this machine's stackmgr.local.toml: its command may run


def _tables(store: Store) -> list[tuple[str, object]]:
    shared, local = store.lab
    return [(store.config_path, shared), (store.local_path, local)]


def _section(path: str, table: object, key: str) -> dict[str, object]:
    raw = table.get(key, {}) if isinstance(table, dict) else {}
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise StackmgrError(f"{_file(path)}: [{key}] must be a table of tables, e.g. [{key}.NAME]", "fix the config")
    for name in raw:
        if not _is_name(name):
            raise StackmgrError(f"{_file(path)}: [{key}.{_shown(name)}] is no name", "use letters, digits and _ . : -")
    return raw


def directions(store: Store) -> dict[str, str]:
    """Metric name -> "higher" or "lower", as `[metrics.NAME] direction` says (this machine's over the shared)."""
    found: dict[str, str] = {}
    for path, table in _tables(store):
        for name, entry in _section(path, table, "metrics").items():
            value = entry.get("direction") if isinstance(entry, dict) else None
            if value not in DIRECTIONS:
                raise StackmgrError(f"{_file(path)}: [metrics.{name}] direction must be \"higher\" or \"lower\"",
                                    "fix the config")  # fmt: skip
            assert isinstance(value, str)
            found[name] = value
    return found


def declared_gates(store: Store) -> list[GateDecl]:
    """The gates every run computes, by name (this machine's entry replacing the shared one); a StackmgrError
    naming the file and the entry for one that is not a gate."""
    found: dict[str, GateDecl] = {}
    for (path, table), local in zip(_tables(store), (False, True), strict=True):
        for name, entry in _section(path, table, "gates").items():
            assert isinstance(entry, dict)
            found[name] = _gate(_file(path), name, entry, local)
    return [found[n] for n in sorted(found)]


def _gate(path: str, name: str, entry: dict[str, object], local: bool) -> GateDecl:
    where = f"{path}: [gates.{name}]"
    if name == "exit":
        raise StackmgrError(f"{where}: `exit` is the gate every run records itself", "name the gate otherwise")
    kinds = [k for k in KEYS if k in entry]
    if len(kinds) != 1:
        raise StackmgrError(f"{where} needs one of metric = \"NAME\", log_regex = \"...\" or command = [...]",
                            "see docs/FORMATS.md#config")  # fmt: skip
    kind = kinds[0]
    unknown = sorted(set(entry) - KEYS[kind])
    if unknown:
        raise StackmgrError(f"{where}: {_shown(unknown[0])} is no key of a {kind} gate",
                            f"use {', '.join(sorted(KEYS[kind]))}")  # fmt: skip
    if kind == "metric":
        metric, low, high = entry["metric"], _number(where, entry, "min"), _number(where, entry, "max")
        if not isinstance(metric, str) or not _is_name(metric):
            raise StackmgrError(f"{where} metric must be a metric name", "e.g. metric = \"quality_cosine\"")
        if low is None and high is None:
            raise StackmgrError(f"{where} needs min = N or max = N", "e.g. min = 0.99")
        return GateDecl(name, kind, metric=metric, low=low, high=high, local=local)
    if kind == "log_regex":
        pattern, must = entry["log_regex"], entry.get("must", "match")
        if not isinstance(pattern, str) or not pattern or must not in MUST:
            raise StackmgrError(f"{where} needs log_regex = \"...\" and must = \"match\" or \"not-match\"",
                                "fix the config")  # fmt: skip
        assert isinstance(must, str)
        return GateDecl(name, kind, pattern=pattern, must=must, local=local)
    command = entry["command"]
    if not isinstance(command, list) or not command or not all(isinstance(a, str) and a for a in command):
        raise StackmgrError(f"{where} command must be a list of words", 'e.g. command = ["python3", "check.py"]')
    timeout = _number(where, entry, "timeout_s")
    if timeout is not None and not 0 < timeout <= MAX_TIMEOUT_S:
        raise StackmgrError(f"{where} timeout_s must be above 0 and at most {MAX_TIMEOUT_S:.0f}", "fix the config")
    return GateDecl(name, kind, command=tuple(command), timeout_s=timeout or DEFAULT_TIMEOUT_S, local=local)


def _number(where: str, entry: dict[str, object], key: str) -> float | None:
    import math

    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise StackmgrError(f"{where} {key} must be a number", "fix the config")
    return float(value)


def _is_name(name: str) -> bool:
    return (0 < len(name) <= 100 and name.isascii() and (name[0].isalpha() or name[0] == "_")
            and all(c.isalnum() or c in "_.:-" for c in name))  # fmt: skip


def _file(path: str) -> str:
    return os.path.basename(path)


def _shown(text: str) -> str:
    return text.encode("unicode_escape").decode("ascii")[:60]
