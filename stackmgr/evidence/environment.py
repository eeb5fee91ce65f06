"""The environment that makes two results comparable, as `stackmgr run` records it (`[run] environment`):

- `gpu`: what the accelerators' tool says (evidence/telemetry.py) before the command starts — model, count,
  driver, CUDA version, power limit, persistence/MIG/ECC modes, max clocks — the temperature and clocks `before`
  and `after` it ran, and utilization, memory used and power sampled while it ran (`samples`, each a
  `{min, mean, max}`); with no tool, a `note` saying so; a tool that fails or hangs leaves a `note` and one
  warning, never a failed run;
- `software`: Python and the versions of torch, vllm, triton, flashinfer and transformers installed for the
  Python the command uses (its own argv[0] when that is a python, else the first `python3`/`python` on its
  PATH), read from their metadata by one `python -I -c` (isolated: nothing of the tree is imported), bounded;
- `cpu`: the model (/proc/cpuinfo) and the number of cores;
- `engine`: the engine fields of the run's result JSON (`backend`, `tokenizer_id`, …).

Read back from a record (pulled: untrusted, docs/SECURITY.md), it is data: `environment_key` takes only short
strings and numbers of the fields that decide comparability, `what_differs` and `summary` escape what they say.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Mapping
from typing import Any

from stackmgr.evidence import capture, redaction, telemetry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.evidence.records import Link

SAMPLE_EVERY = 0.5  # seconds between two samples of the GPUs while the command runs
LIBRARIES = (("torch", "torch"), ("vllm", "vllm"), ("triton", "triton"), ("flashinfer", "flashinfer-python"),
             ("flashinfer", "flashinfer"), ("transformers", "transformers"))  # (as recorded, distribution)  # fmt: skip
QUERY = ("import importlib.metadata as m, json, platform, sys\n"
         "d = {'python': platform.python_version(), 'executable': sys.executable}\n"
         f"for k, n in {LIBRARIES!r}:\n"
         "    try:\n        d.setdefault(k, m.version(n))\n    except Exception:\n        pass\n"
         "print(json.dumps(d))\n")  # fmt: skip
ENGINE_KEYS = ("backend", "endpoint_type", "label", "tokenizer_id", "burstiness")
# What must be equal for two results to be ranked together: (name said, table, field). Not temperatures or clocks.
KEY_FIELDS = (("gpu", "gpu", "model"), ("driver", "gpu", "driver"), ("CUDA", "gpu", "cuda"),
              ("power limit", "gpu", "power_limit_w"), ("torch", "software", "torch"),
              ("vllm", "software", "vllm"))  # fmt: skip
MAX_VALUE = 200  # characters of a value read back that count


def nvml() -> Any:
    """The `pynvml` module, initialized, when it is installed and finds the driver; else None."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


class Watch:
    """Started just before the command: the GPUs' state, and their sampling while it runs. `stop()` right after
    it ends reads their state after, and starts the query of the software, which `table` waits for: it runs
    while `run` records, never beside the measured command. `warnings`: one per tool that failed."""

    def __init__(self, argv: list[str], where: str) -> None:
        self.argv, self.where = argv, where
        self.warnings: list[str] = []
        self.software: dict[str, Any] = {}
        self._query: threading.Thread | None = None
        self.gpu: dict[str, Any] = {}
        self.sampler: telemetry.Sampler | None = None
        self.source = telemetry.reader(nvml())
        if self.source is None:
            self.gpu = {"note": f"no GPU tool found ({', '.join(telemetry.TOOLS)})"}
            return
        try:
            devices = self.source.devices()
        except Exception as exc:  # ToolFailed, or an answer of a shape not foreseen: noted, the run goes on
            self._failed(exc, "the GPUs' state is not recorded")
            return
        self.gpu = {"tool": self.source.tool, **_static(devices), "cuda": self.source.cuda() or None,
                    "before": _moment(devices)}  # fmt: skip
        self.sampler = telemetry.Sampler(self.source, SAMPLE_EVERY)
        self.sampler.start()

    def _failed(self, exc: Exception, what: str) -> None:
        assert self.source is not None
        why = str(exc) if isinstance(exc, capture.ToolFailed) else f"answered in a form not understood ({exc})"
        self.gpu = {**self.gpu, "tool": self.source.tool, "note": f"{self.source.tool} {why}"}
        if not self.warnings or not self.warnings[-1].startswith(self.source.tool):
            self.warnings.append(f"{self.source.tool} {why}: {what}")

    def stop(self) -> Watch:
        """The sampling stopped, the state after read, the software query started (once: later calls do
        nothing); returns the watch."""
        if self._query is not None:
            return self
        self._query = threading.Thread(target=self._software, name="stackmgr-software", daemon=True)
        self._query.start()
        if self.sampler is not None and self.source is not None:
            self.sampler.stop()
            self.gpu.update(self.sampler.table())
            if self.sampler.failed:
                self._failed(capture.ToolFailed(self.sampler.failed), "sampling stopped")
            else:
                try:
                    self.gpu["after"] = _moment(self.source.devices())
                except Exception as exc:  # ToolFailed, or an answer of a shape not foreseen: noted, the run goes on
                    self._failed(exc, "the state after the run is not recorded")
        if self.source is not None:
            self.source.close()
            self.source = None
        return self

    def _software(self) -> None:
        self.software = software(self.argv, self.where, self.warnings)


def table(watch: Watch | None, data: Mapping[str, bytes]) -> dict[str, Any]:
    """What `run` records as its `[run] environment`, once the software query is done: the GPUs, the software,
    the CPU, and the engine fields of the result JSON."""
    if watch is None:
        return {}
    watch.stop()
    if watch._query is not None:
        watch._query.join(capture.TOOL_TIMEOUT + 1)
    found = {"gpu": _clean(watch.gpu), "software": dict(watch.software), "cpu": cpu()}
    engine_fields = engine(data)
    return {**found, "engine": engine_fields} if engine_fields else found


def _static(devices: list[telemetry.Device]) -> dict[str, Any]:
    fields = {"model": "name", "driver": "driver", "power_limit_w": "power_limit_w", "persistence": "persistence",
              "mig": "mig", "ecc": "ecc", "sm_clock_max_mhz": "sm_clock_max",
              "memory_clock_max_mhz": "mem_clock_max"}  # fmt: skip
    return {"count": len(devices), **{k: _one(devices, f) for k, f in fields.items()}}


def _moment(devices: list[telemetry.Device]) -> dict[str, Any]:
    temps = [d["temperature"] for d in devices if isinstance(d.get("temperature"), (int, float))]
    return _clean({"temperature_c": max(temps) if temps else None, "sm_clock_mhz": _one(devices, "sm_clock"),
                   "memory_clock_mhz": _one(devices, "mem_clock")})  # fmt: skip


def _one(devices: list[telemetry.Device], key: str) -> Any:
    """The devices' value of `key`: the one value they share, else the distinct values as text (`a, b`)."""
    values = list(dict.fromkeys(d[key] for d in devices if d.get(key) is not None))
    if len(values) == 1:
        return redaction.mask_text(capture.text(values[0])) if isinstance(values[0], str) else values[0]
    return redaction.mask_text(", ".join(capture.text(str(v)) for v in values)) if values else None


def _clean(table: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in table.items() if v not in (None, "", {}, [])}


def python_of(argv: list[str], where: str) -> str | None:
    """The Python the command uses: argv[0] when it is a python (`python3`, `python3.12`, a venv's), else the
    first `python3` or `python` on PATH."""
    first = argv[0]
    name = os.path.basename(first)
    if name.startswith("python") and all(c.isdigit() or c == "." for c in name[len("python") :]):
        if os.sep in first:
            path = os.path.join(where, first)
            return path if os.access(path, os.X_OK) else None
        return shutil.which(first)
    return shutil.which("python3") or shutil.which("python")


def software(argv: list[str], where: str, warnings: list[str]) -> dict[str, Any]:
    """Python's version and the libraries' versions from the command's Python's installed metadata."""
    import json

    python = python_of(argv, where)
    if python is None:
        return {"note": "no python3 or python on the command's PATH"}
    try:
        said = capture.tool_output([python, "-I", "-c", QUERY])
        doc = json.loads(said.strip().splitlines()[-1] if said.strip() else "")
    except (capture.ToolFailed, ValueError) as exc:
        why = str(exc) if isinstance(exc, capture.ToolFailed) else "answered with something that is not JSON"
        warnings.append(f"{capture.text(python)} -I -c … {why}: the library versions are not recorded")
        return {"note": f"{capture.text(python)} {why}"}
    wanted = ("python", "executable", *dict.fromkeys(k for k, _ in LIBRARIES))
    return {k: redaction.mask_text(doc[k][:MAX_VALUE]) for k in wanted
            if isinstance(doc, dict) and isinstance(doc.get(k), str) and doc[k]}  # fmt: skip


def cpu() -> dict[str, Any]:
    """The CPU's model name (/proc/cpuinfo's first `model name`, else `Model`) and its number of cores."""
    model = ""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            info = f.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        info = ""
    for wanted in ("model name", "Model"):
        model = next((line.partition(":")[2].strip() for line in info.splitlines()
                      if line.partition(":")[0].strip() == wanted), "")  # fmt: skip
        if model:
            break
    return _clean({"model": redaction.mask_text(model[:MAX_VALUE]), "cores": os.cpu_count()})


def engine(data: Mapping[str, bytes]) -> dict[str, Any]:
    """ENGINE_KEYS of the newest JSON object the command wrote that holds any of them."""
    import json

    from stackmgr.evidence.collect import mtime

    for path in sorted((p for p in data if p.endswith(".json")), key=lambda p: -mtime(p)):
        try:
            doc = json.loads(data[path])
        except (ValueError, RecursionError):
            continue
        if isinstance(doc, dict):
            found = {k: redaction.mask_text(capture.text(str(doc[k])))[:MAX_VALUE] if isinstance(doc[k], str)
                     else doc[k] for k in ENGINE_KEYS
                     if isinstance(doc.get(k), (str, int, float)) and not isinstance(doc[k], bool)}  # fmt: skip
            if found:
                return found
    return {}


# --- read back: comparability ----------------------------------------------------------------------------------


def environment_key(link: Link) -> dict[str, str]:
    """What of a link's recorded environment decides whether it may be ranked against another (KEY_FIELDS):
    {name: value as text}, only the fields recorded as short strings or numbers; {} for a record without one."""
    env = link.run.get("environment") if isinstance(link.run, Mapping) else None
    if not isinstance(env, Mapping):
        return {}
    key = {}
    for name, part, field in KEY_FIELDS:
        table_ = env.get(part)
        value = table_.get(field) if isinstance(table_, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            continue
        if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
            value = int(value)
        key[name] = str(value)[:MAX_VALUE]
    return key


def what_differs(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    """`driver 580.159.04 vs 575.57.08`: each field both keys record with different values, escaped to one
    line; a field only one side recorded is no difference."""
    from stackmgr.output import show_text

    return [f"{name} {show_text(a[name])} vs {show_text(b[name])}" for name, _, _ in KEY_FIELDS
            if name in a and name in b and a[name] != b[name]]  # fmt: skip


class Groups:
    """Per run configuration, the environments its results were measured in: a result joins the first whose
    key it does not differ from (`what_differs`), else starts one. `across`: one per configuration."""

    def __init__(self, across: bool = False) -> None:
        self.across = across
        self.seen: dict[tuple[tuple[str, str], ...], list[dict[str, str]]] = {}

    def place(self, config: Mapping[str, str], link: Link) -> tuple[int, list[str]]:
        """The index of the link's environment among its configuration's, and what that one differs in from
        the configuration's first (empty for the first)."""
        if self.across:
            return 0, []
        key = environment_key(link)
        known = self.seen.setdefault(tuple(sorted(config.items())), [])
        for i, env in enumerate(known):
            if not what_differs(key, env):
                for name, value in key.items():
                    env.setdefault(name, value)
                return i, what_differs(env, known[0]) if i else []
        known.append(dict(key))
        return len(known) - 1, what_differs(key, known[0]) if len(known) > 1 else []


def summary(run: Mapping[str, Any]) -> list[str]:
    """`show`'s line of a recorded environment (none for a record without one): the GPUs, driver, CUDA, power
    limit, temperatures and samples, and the libraries; the values as recorded (the view escapes them)."""
    env = run.get("environment")
    if not isinstance(env, Mapping):
        return []
    gpu, soft = env.get("gpu"), env.get("software")
    gpu, soft = (gpu if isinstance(gpu, Mapping) else {}), (soft if isinstance(soft, Mapping) else {})

    def val(table_: Mapping[str, Any], key: str, fmt: str = "{}") -> str:
        v = table_.get(key)
        return fmt.format(v if isinstance(v, str) else f"{v:g}") if isinstance(v, (str, int, float)) else ""

    parts = [val(gpu, "count", "{}× ") + val(gpu, "model"), val(gpu, "driver", "driver {}"),
             val(gpu, "cuda", "CUDA {}"), val(gpu, "power_limit_w", "{} W")]  # fmt: skip
    before, after = gpu.get("before"), gpu.get("after")
    if isinstance(before, Mapping) and isinstance(after, Mapping) and val(before, "temperature_c"):
        parts.append(f"{val(before, 'temperature_c')}→{val(after, 'temperature_c') or '?'} °C")
    util = gpu.get("utilization_pct")
    if isinstance(util, Mapping) and val(util, "mean"):
        parts.append(f"utilization {val(util, 'mean')}% mean over {val(gpu, 'samples') or '?'} samples")
    parts.append(val(gpu, "note"))
    libs = [f"{k} {val(soft, k)}" for k in ("torch", "vllm", "triton", "flashinfer", "transformers") if val(soft, k)]
    said = ", ".join(p.strip() for p in parts if p.strip())
    said += ("; " if said and libs else "") + ", ".join(libs)
    said += f"; Python {val(soft, 'python')}" if val(soft, "python") else ""
    return [f"environment: {said}"] if said else []
