"""The accelerators' state as a vendor's tool reports it, and its samples while a command runs.

One reader per tool, the first found: NVML through `pynvml` (the `nvidia-ml-py` package) when it imports, else
`nvidia-smi --query-gpu=…` (one call per reading), else `rocm-smi --json`, else `xpu-smi` (the simple fields
parsed; what else they print is left out). Every call of a tool is bounded by `capture.TOOL_TIMEOUT` and a tool
that did not answer is not asked again (`capture.tool_output`). A reading is one dict per device: `name`,
`driver`, `power_limit_w`, `sm_clock`, `mem_clock`, `sm_clock_max`, `mem_clock_max`, `persistence`, `mig`,
`ecc`, `temperature`, `utilization`, `memory_used` (MiB), `power` (W), those the tool gives. The sampler keeps
min, sum and max only: a run of any length takes the same memory."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from typing import Any

from stackmgr.evidence import capture

Device = dict[str, Any]
TOOLS = ("nvidia-smi", "rocm-smi", "xpu-smi")
SMI_FIELDS = {"index": "", "name": "name", "driver_version": "driver", "power.limit": "power_limit_w",
              "clocks.sm": "sm_clock", "clocks.mem": "mem_clock", "clocks.max.sm": "sm_clock_max",
              "clocks.max.mem": "mem_clock_max", "persistence_mode": "persistence", "mig.mode.current": "mig",
              "ecc.mode.current": "ecc", "temperature.gpu": "temperature", "utilization.gpu": "utilization",
              "memory.used": "memory_used", "memory.total": "memory_total", "power.draw": "power"}  # fmt: skip
SMI_SAMPLE = {"utilization.gpu": "utilization", "memory.used": "memory_used", "power.draw": "power",
              "temperature.gpu": "temperature"}  # fmt: skip


def number(text: str) -> int | float | str | None:
    """A tool's value: an int, a float, the text, or None for `[N/A]`, `N/A`, `[Not Supported]`, ``."""
    text = text.strip()
    if not text or text.strip("[]").lower() in ("n/a", "not supported", "unknown", "none"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


class Reader:
    tool = ""

    def devices(self) -> list[Device]:
        """Every device's full reading (raises capture.ToolFailed)."""
        raise NotImplementedError

    def sample(self) -> list[Device]:
        """Every device's utilization, memory used, power and temperature (raises capture.ToolFailed)."""
        return self.devices()

    def cuda(self) -> str:
        return ""

    def close(self) -> None:
        pass


class Smi(Reader):
    tool = "nvidia-smi"

    def __init__(self, path: str) -> None:
        self.path = path

    def _query(self, fields: dict[str, str]) -> list[Device]:
        said = capture.tool_output([self.path, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
        found = []
        for line in said.splitlines()[:64]:
            values = [v.strip() for v in line.split(",")]
            if len(values) == len(fields):
                found.append({k: number(v) for k, v in zip(fields.values(), values, strict=True) if k})
        if not found:
            raise capture.ToolFailed("answered with nothing that reads as a GPU")
        return found

    def devices(self) -> list[Device]:
        return self._query(SMI_FIELDS)

    def sample(self) -> list[Device]:
        return self._query(SMI_SAMPLE)

    def cuda(self) -> str:
        """The CUDA version the driver supports, from the banner of plain `nvidia-smi` (no query field has it)."""
        if self.path in capture.HUNG:
            return ""
        try:
            said = capture.tool_output([self.path])
        except capture.ToolFailed:
            return ""
        _, found, rest = said.partition("CUDA Version:")
        return rest.split()[0].strip("|") if found and rest.split() else ""


class Nvml(Reader):
    tool = "nvml"

    def __init__(self, nvml: Any) -> None:
        self.nv = nvml

    def _get(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # NVMLError_NotSupported and the like: that field is left out
            return None

    def devices(self) -> list[Device]:
        nv = self.nv
        driver = self._get(nv.nvmlSystemGetDriverVersion)
        found = []
        for i in range(int(self._get(nv.nvmlDeviceGetCount) or 0)):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            limit, mig, ecc = (self._get(nv.nvmlDeviceGetEnforcedPowerLimit, h), self._get(nv.nvmlDeviceGetMigMode, h),
                               self._get(nv.nvmlDeviceGetEccMode, h))  # fmt: skip
            persistence = self._get(nv.nvmlDeviceGetPersistenceMode, h)
            device = {"name": _str(self._get(nv.nvmlDeviceGetName, h)), "driver": _str(driver),
                      "power_limit_w": limit / 1000 if limit is not None else None,
                      "sm_clock": self._get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                      "mem_clock": self._get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
                      "sm_clock_max": self._get(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
                      "mem_clock_max": self._get(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM),
                      "persistence": _mode(persistence), "mig": _mode(mig[0] if mig else None),
                      "ecc": _mode(ecc[0] if ecc else None), **self._sample(h)}  # fmt: skip
            found.append(device)
        if not found:
            raise capture.ToolFailed("NVML lists no GPU")
        return found

    def _sample(self, h: Any) -> Device:
        nv = self.nv
        util, mem = self._get(nv.nvmlDeviceGetUtilizationRates, h), self._get(nv.nvmlDeviceGetMemoryInfo, h)
        power = self._get(nv.nvmlDeviceGetPowerUsage, h)
        return {"temperature": self._get(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
                "utilization": getattr(util, "gpu", None), "memory_used": mem.used / 2**20 if mem else None,
                "power": power / 1000 if power is not None else None}  # fmt: skip

    def sample(self) -> list[Device]:
        n = int(self._get(self.nv.nvmlDeviceGetCount) or 0)
        return [self._sample(self.nv.nvmlDeviceGetHandleByIndex(i)) for i in range(n)]

    def cuda(self) -> str:
        v = self._get(self.nv.nvmlSystemGetCudaDriverVersion_v2) or self._get(self.nv.nvmlSystemGetCudaDriverVersion)
        return f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) and v > 0 else ""

    def close(self) -> None:
        self._get(self.nv.nvmlShutdown)


class Rocm(Reader):
    tool = "rocm-smi"
    ASK = ("--showproductname", "--showdriverversion", "--showtemp", "--showuse", "--showpower", "--showmaxpower")
    KEYS = (("name", ("card series", "card model")), ("temperature", ("temperature",)),
            ("utilization", ("gpu use",)), ("power_limit_w", ("max graphics package power",)),
            ("power", ("current socket graphics package power", "average graphics package power")))  # fmt: skip

    def __init__(self, path: str) -> None:
        self.path = path

    def devices(self) -> list[Device]:
        doc = _json(capture.tool_output([self.path, *self.ASK, "--json"]))
        driver = next((v for k, v in _table(doc.get("system")).items() if "driver version" in k.lower()), None)
        found = []
        for card, fields in sorted(doc.items()):
            if not card.lower().startswith("card") or not isinstance(fields, dict):
                continue
            device: Device = {"driver": _str(driver)}
            for key, words in self.KEYS:
                hit = next((v for k, v in fields.items() if any(w in k.lower() for w in words)), None)
                device[key] = number(str(hit)) if hit is not None else None
            found.append(device)
        if not found:
            raise capture.ToolFailed("lists no card")
        return found


class Xpu(Reader):
    tool = "xpu-smi"

    def __init__(self, path: str) -> None:
        self.path = path

    def devices(self) -> list[Device]:
        listed = _json(capture.tool_output([self.path, "discovery", "-j"])).get("device_list")
        found = [{"name": _str(d.get("device_name")), "id": d.get("device_id")}
                 for d in (listed if isinstance(listed, list) else []) if isinstance(d, dict)]  # fmt: skip
        if not found:
            raise capture.ToolFailed("lists no device")
        return found

    def sample(self) -> list[Device]:
        out = []
        for device in self.devices()[:16]:
            doc = _json(capture.tool_output([self.path, "stats", "-d", str(device.get("id", 0)), "-j"]))
            got: Device = {}
            for row in doc.get("device_level", []) if isinstance(doc.get("device_level"), list) else []:
                kind = str(row.get("metrics_type", "")) if isinstance(row, dict) else ""
                for word, key in (("GPU_UTILIZATION", "utilization"), ("MEMORY_USED", "memory_used"),
                                  ("POWER", "power"), ("GPU_CORE_TEMPERATURE", "temperature")):  # fmt: skip
                    if kind.endswith(word) and key not in got:
                        got[key] = number(str(row.get("value", "")))
            out.append(got)
        return out


def reader(nvml: Any) -> Reader | None:
    """The reader of the first tool found: NVML (`nvml` is the imported pynvml, or None), then the programs."""
    if nvml is not None:
        return Nvml(nvml)
    for tool, kind in zip(TOOLS, (Smi, Rocm, Xpu), strict=True):
        path = shutil.which(tool)
        if path is not None:
            return kind(path)
    return None


class Span:
    """min, mean and max of a series without keeping it."""

    def __init__(self) -> None:
        self.n, self.total, self.low, self.high = 0, 0.0, float("inf"), float("-inf")

    def add(self, value: float) -> None:
        self.n, self.total = self.n + 1, self.total + value
        self.low, self.high = min(self.low, value), max(self.high, value)

    def table(self) -> dict[str, float]:
        return {"min": round(self.low, 2), "mean": round(self.total / self.n, 2), "max": round(self.high, 2)} \
            if self.n else {}  # fmt: skip


class Sampler:
    """Samples the devices every `every` seconds on a thread of its own, from start() to stop(): per sample the
    mean utilization over the devices, their memory used and power summed. A sample that fails ends the
    sampling, and says why in `failed`."""

    def __init__(self, source: Reader, every: float) -> None:
        self.source, self.every = source, every
        self.samples = 0
        self.spans = {"utilization_pct": Span(), "memory_used_mib": Span(), "power_w": Span()}
        self.failed = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stackmgr-gpu-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while True:
            try:
                self._take(self.source.sample())
            except capture.ToolFailed as exc:
                self.failed = str(exc)
                return
            except Exception as exc:  # a tool's answer of a shape not foreseen: the sampling ends, the run goes on
                self.failed = f"answered in a form not understood ({type(exc).__name__})"
                return
            if self._stop.wait(self.every):
                return

    def _take(self, devices: list[Device]) -> None:
        values = {key: [float(d[key]) for d in devices if isinstance(d.get(key), (int, float))]
                  for key in ("utilization", "memory_used", "power")}  # fmt: skip
        if values["utilization"]:
            self.spans["utilization_pct"].add(sum(values["utilization"]) / len(values["utilization"]))
        if values["memory_used"]:
            self.spans["memory_used_mib"].add(sum(values["memory_used"]))
        if values["power"]:
            self.spans["power_w"].add(sum(values["power"]))
        self.samples += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(capture.TOOL_TIMEOUT + 1)

    def table(self) -> dict[str, Any]:
        return {"samples": self.samples, **{k: s.table() for k, s in self.spans.items() if s.n}}


def _str(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value) if value is not None else None


def _mode(value: object) -> str | None:
    return None if value is None else ("Enabled" if value == 1 else "Disabled" if value == 0 else str(value))


def _table(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _json(text: str) -> dict[str, Any]:
    import json

    try:
        doc = json.loads(text)
    except ValueError:
        raise capture.ToolFailed("answered with something that is not JSON") from None
    return _table(doc)
