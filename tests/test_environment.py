"""`stackmgr run` records the environment that makes two numbers comparable: the GPU (model, count, driver, CUDA,
clocks, power limit, modes, temperature before and after, utilization/memory/power sampled while the command
ran), the software of the Python the command uses (from installed metadata, never imported), the CPU; `compare`
keeps results measured on different drivers or library versions apart and says what differs. The GPU tools here
are fakes on PATH: one that answers, one that hangs, none at all."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from stackmgr.evidence import capture, environment
from stackmgr.evidence.records import Link
from tests.conftest import Lab, link_records

FAKE_SMI = """\
#!/bin/sh
here=$(dirname "$0")
case "$*" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0001)" ;;
  *--query-gpu=index,name*)
    if [ -f "$here/warm" ]; then t=58; sm=1980; else t=31; sm=345; touch "$here/warm"; fi
    echo "0, NVIDIA H100 80GB HBM3, ${FAKE_DRIVER:-580.159.04}, 700.00, $sm, 2619, 1980, 2619, Enabled, \
Disabled, Enabled, $t, 0, 1, 81559, 69.50" ;;
  *--query-gpu=utilization.gpu*) echo "87, 40000, 650.25, 55" ;;
  "") echo "| NVIDIA-SMI 580.159.04    Driver Version: ${FAKE_DRIVER:-580.159.04}    CUDA Version: 13.0 |" ;;
  *) exit 9 ;;
esac
"""

FAKE_PYTHON = """\
#!/bin/sh
echo "$@" > "$(dirname "$0")/asked"
echo '{"python": "3.12.3", "executable": "/opt/py/bin/python3", "torch": "2.11.0+cu130", "vllm": "0.11.0"}'
"""

RESULT = '{"backend": "vllm", "tokenizer_id": "Qwen/Qwen3.6", "model_id": "Qwen/Qwen3.6", "num_prompts": 50, ' \
         '"output_throughput": 100.0}'  # fmt: skip


def fake_bin(tmp_path: Path, tools: dict[str, str]) -> Path:
    """A directory of executable fakes, with `sh` and `printf` beside them (the commands the tests run)."""
    where = tmp_path / "fakebin"
    where.mkdir(exist_ok=True)
    for name, body in tools.items():
        (where / name).write_text(body)
        (where / name).chmod(0o755)
    for real in ("sh", "sleep", "dirname", "touch", "cat", "mkdir", "git"):
        found = next((Path(d) / real for d in ("/bin", "/usr/bin") if (Path(d) / real).exists()), None)
        if found is not None and not (where / real).exists():
            (where / real).symlink_to(found)
    return where


@pytest.fixture
def gpu_lab(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> Lab:
    """A fix applied as series S; NVML is not used (the fakes stand for nvidia-smi), samples come quickly."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    monkeypatch.setattr(environment, "nvml", lambda: None)
    monkeypatch.setattr(environment, "SAMPLE_EVERY", 0.05)
    return lab


def record_of(lab: Lab) -> dict[str, object]:
    return link_records(lab, "fix")[-1]


def test_a_run_records_the_gpu_driver_power_limit_temperatures_and_samples(
    gpu_lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_ = fake_bin(tmp_path, {"nvidia-smi": FAKE_SMI})
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    done = gpu_lab.sm("run", "--", "sh", "-c", "sleep 0.2")
    assert done.code == 0, done.err
    run = record_of(gpu_lab)["run"]
    assert isinstance(run, dict)
    gpu = run["environment"]["gpu"]
    assert gpu["tool"] == "nvidia-smi" and gpu["model"] == "NVIDIA H100 80GB HBM3" and gpu["count"] == 1
    assert gpu["driver"] == "580.159.04" and gpu["cuda"] == "13.0" and gpu["power_limit_w"] == 700.0
    assert gpu["persistence"] == "Enabled" and gpu["mig"] == "Disabled" and gpu["ecc"] == "Enabled"
    assert gpu["sm_clock_max_mhz"] == 1980 and gpu["memory_clock_max_mhz"] == 2619
    assert gpu["before"] == {"temperature_c": 31, "sm_clock_mhz": 345, "memory_clock_mhz": 2619}
    assert gpu["after"]["temperature_c"] == 58 and gpu["after"]["sm_clock_mhz"] == 1980
    assert gpu["samples"] >= 1
    assert gpu["utilization_pct"] == {"min": 87.0, "mean": 87.0, "max": 87.0}
    assert gpu["power_w"]["max"] == 650.25 and gpu["memory_used_mib"]["mean"] == 40000.0
    assert run["accelerators"] == ["GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0001)"]
    cpu = run["environment"]["cpu"]
    assert cpu["cores"] == os.cpu_count()
    shown = gpu_lab.sm("show", "fix").out
    assert "environment: 1× NVIDIA H100 80GB HBM3, driver 580.159.04, CUDA 13.0, 700 W" in shown
    assert "warning: nvidia-smi" not in done.err


def test_a_gpu_tool_that_hangs_is_bounded_by_its_timeout(
    gpu_lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_ = fake_bin(tmp_path, {"nvidia-smi": "#!/bin/sh\nsleep 30\n"})
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(capture, "TOOL_TIMEOUT", 0.3)
    began = time.monotonic()
    done = gpu_lab.sm("run", "--", "sh", "-c", ":")
    assert done.code == 0, done.err
    assert time.monotonic() - began < 5  # one timeout, then the tool is not asked again
    gpu = record_of(gpu_lab)["run"]["environment"]["gpu"]  # type: ignore[index]
    assert gpu["tool"] == "nvidia-smi" and "did not answer within 0.3 s" in gpu["note"]
    assert done.err.count("warning: nvidia-smi") == 1


def test_without_a_gpu_tool_the_environment_says_so_and_nothing_fails(
    gpu_lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(fake_bin(tmp_path, {})))  # sh alone: no nvidia-smi, rocm-smi, xpu-smi, python
    done = gpu_lab.sm("run", "--", "sh", "-c", ":")
    assert done.code == 0, done.err
    env = record_of(gpu_lab)["run"]["environment"]  # type: ignore[index]
    assert env["gpu"] == {"note": "no GPU tool found (nvidia-smi, rocm-smi, xpu-smi)"}
    assert env["software"] == {"note": "no python3 or python on the command's PATH"}
    assert "GPU" not in done.err and "python" not in done.err  # nothing to warn about: a machine without them
    assert "environment: no GPU tool found" in gpu_lab.sm("show", "fix").out


def test_library_versions_come_from_the_python_on_the_commands_path(
    gpu_lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_ = fake_bin(tmp_path, {"python3": FAKE_PYTHON})
    monkeypatch.setenv("PATH", str(bin_))
    done = gpu_lab.sm("run", "--", "sh", "-c", ":")
    assert done.code == 0, done.err
    software = record_of(gpu_lab)["run"]["environment"]["software"]  # type: ignore[index]
    assert software == {"python": "3.12.3", "executable": "/opt/py/bin/python3", "torch": "2.11.0+cu130",
                        "vllm": "0.11.0"}  # fmt: skip
    assert (bin_ / "asked").read_text().startswith("-I -c ")  # isolated: the tree's own files are never imported
    assert "torch 2.11.0+cu130" in gpu_lab.sm("show", "fix").out


def test_the_result_jsons_engine_fields_are_recorded(
    gpu_lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(fake_bin(tmp_path, {})))
    out = tmp_path / "out"
    done = gpu_lab.sm("run", "--result-dir", str(out), "--", "sh", "-c",
                      f"mkdir -p {out} && echo '{RESULT}' > {out}/bench.json")  # fmt: skip
    assert done.code == 0, done.err
    env = record_of(gpu_lab)["run"]["environment"]  # type: ignore[index]
    assert env["engine"] == {"backend": "vllm", "tokenizer_id": "Qwen/Qwen3.6"}


def test_compare_keeps_results_on_two_drivers_apart_and_says_what_differs(
    gpu_lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_ = fake_bin(tmp_path, {"nvidia-smi": FAKE_SMI})
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    for name, driver in (("old", "575.57.08"), ("new", "580.159.04")):
        monkeypatch.setenv("FAKE_DRIVER", driver)
        out = tmp_path / name
        done = gpu_lab.sm("run", "--name", name, "--result-dir", str(out), "--", "sh", "-c",
                          f"mkdir -p {out} && echo '{RESULT}' > {out}/bench.json")  # fmt: skip
        assert done.code == 0, done.err
    shown = gpu_lab.sm("compare", "old", "new")
    assert shown.code == 0, shown.err
    assert "driver 580.159.04 vs 575.57.08" in shown.out
    groups = json.loads(gpu_lab.sm("compare", "old", "new", "--json").out)["groups"]
    assert [[r["label"] for r in g["results"]] for g in groups] == [["old"], ["new"]]
    assert groups[1]["environment_differs"] == ["driver 580.159.04 vs 575.57.08"]
    together = json.loads(gpu_lab.sm("compare", "old", "new", "--across-env", "--json").out)["groups"]
    assert [[r["label"] for r in g["results"]] for g in together] == [["old", "new"]]


def test_an_environment_read_back_from_a_pulled_record_is_data_only() -> None:
    def link(env: object) -> Link:
        return Link(id="lnk-1", created="", author="", patch="p", tree="t", sha256="", patch_id="",
                    run={"environment": env})  # fmt: skip

    assert environment.environment_key(link("not a table")) == {}
    assert environment.environment_key(link({"gpu": ["x"], "software": {"torch": {"$(rm -rf /)": 1}}})) == {}
    forged = link({"gpu": {"model": "H100\x1b[31m\nFAKE", "driver": 5}, "software": {"torch": "2.11"}})
    assert environment.environment_key(forged) == {"gpu": "H100\x1b[31m\nFAKE", "driver": "5", "torch": "2.11"}
    a, b = environment.environment_key(forged), {"gpu": "A100", "torch": "2.11"}
    assert environment.what_differs(a, b) == ["gpu H100\\x1b[31m\\nFAKE vs A100"]
    assert environment.what_differs(a, {"torch": "2.11"}) == []  # a field only one side recorded: no difference


def test_nvml_is_read_as_nvidia_smi_is_when_pynvml_imports() -> None:
    from types import SimpleNamespace

    from stackmgr.evidence import telemetry

    def not_supported(*_args: object) -> object:
        raise RuntimeError("NVMLError_NotSupported")

    fake = SimpleNamespace(
        NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1, NVML_TEMPERATURE_GPU=0, nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i, nvmlSystemGetDriverVersion=lambda: "580.159.04",
        nvmlSystemGetCudaDriverVersion_v2=lambda: 13000, nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3",
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700000, nvmlDeviceGetClockInfo=lambda h, c: (345, 2619)[c],
        nvmlDeviceGetMaxClockInfo=lambda h, c: (1980, 2619)[c], nvmlDeviceGetPersistenceMode=lambda h: 1,
        nvmlDeviceGetMigMode=not_supported, nvmlDeviceGetEccMode=lambda h: (1, 1),
        nvmlDeviceGetTemperature=lambda h, s: 31 + h, nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=90),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=2**30), nvmlDeviceGetPowerUsage=lambda h: 650000,
    )  # fmt: skip
    reader = telemetry.reader(fake)
    assert reader is not None and reader.tool == "nvml" and reader.cuda() == "13.0"
    first, second = reader.devices()
    assert first["name"] == "NVIDIA H100 80GB HBM3" and first["power_limit_w"] == 700.0 and first["mig"] is None
    assert first["persistence"] == "Enabled" and first["sm_clock"] == 345 and second["temperature"] == 32
    sampler = telemetry.Sampler(reader, 60)
    sampler._take(reader.sample())
    assert sampler.table() == {"samples": 1, "utilization_pct": {"min": 90.0, "mean": 90.0, "max": 90.0},
                               "memory_used_mib": {"min": 2048.0, "mean": 2048.0, "max": 2048.0},
                               "power_w": {"min": 1300.0, "mean": 1300.0, "max": 1300.0}}  # fmt: skip


FAKE_ROCM = """#!/bin/sh
echo '{"card0": {"Card Series": "AMD Instinct MI300X", "Temperature (Sensor edge) (C)": "35.0", "GPU use (%)": "12",
 "Max Graphics Package Power (W)": "750.0", "Current Socket Graphics Package Power (W)": "143.0"},
 "system": {"Driver version": "6.8.5"}}'
"""
FAKE_XPU = """#!/bin/sh
case "$1" in
  discovery) echo '{"device_list": [{"device_id": 0, "device_name": "Intel(R) Data Center GPU Max 1550"}]}' ;;
  stats) echo '{"device_level": [{"metrics_type": "XPUM_STATS_GPU_UTILIZATION", "value": 44},
                                 {"metrics_type": "XPUM_STATS_POWER", "value": 300}]}' ;;
esac
"""


@pytest.mark.parametrize(("tool", "body", "model", "power"), [
    ("rocm-smi", FAKE_ROCM, "AMD Instinct MI300X", 143.0),
    ("xpu-smi", FAKE_XPU, "Intel(R) Data Center GPU Max 1550", 300.0),
])  # fmt: skip
def test_rocm_and_xpu_tools_are_read_where_simple(tool: str, body: str, model: str, power: float, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("PATH", str(fake_bin(tmp_path, {tool: body})))
    monkeypatch.setattr(environment, "nvml", lambda: None)
    watch = environment.Watch(["sh"], str(tmp_path))
    gpu = environment.table(watch.stop(), {})["gpu"]
    assert gpu["tool"] == tool and gpu["model"] == model and gpu["count"] == 1
    assert gpu["samples"] >= 1 and gpu["power_w"]["max"] == power and watch.warnings == []


def test_the_report_judges_a_patch_against_its_baseline_only_within_one_environment(
    gpu_lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As compare groups them: the baseline on driver 580, the patch's runs on 580 and on 575; the index judges the
    580 runs and says how many were left out, and what differs."""
    bin_ = fake_bin(tmp_path, {"nvidia-smi": FAKE_SMI})
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")

    def runs(name: str, driver: str, tput: float) -> None:
        monkeypatch.setenv("FAKE_DRIVER", driver)
        out = tmp_path / name
        result = RESULT.replace("100.0", str(tput))
        done = gpu_lab.sm("run", "--name", name, "--repeat", "2", "--result-dir", str(out), "--", "sh", "-c",
                          f"mkdir -p {out} && echo '{result}' > {out}/bench.json")  # fmt: skip
        assert done.code == 0, done.err

    assert gpu_lab.sm("pop", "-a").code == 0
    runs("base", "580.159.04", 100.0)
    assert gpu_lab.sm("push", "-a").code == 0
    runs("same", "580.159.04", 110.0)
    runs("other", "575.57.08", 200.0)
    site = tmp_path / "site"
    assert gpu_lab.sm("report", "-o", str(site)).code == 0
    index = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", (site / "index.html").read_text()))
    assert ("output_throughput 110 tok/s (n=2) +10.0% too few runs vs baseline of S (2 runs); 2 results "
            "measured in another environment left out (driver 575.57.08 vs 580.159.04)") in index, index


def test_ab_judges_its_sides_against_the_baseline_only_of_its_own_environment(
    gpu_lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The baseline measured on driver 575; ab runs on 580: nothing judged against it (compare keeps them apart
    too); the first ab's A run, at the base on 580, is a baseline the next ab is judged against, alone."""
    bin_ = fake_bin(tmp_path, {"nvidia-smi": FAKE_SMI})
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "out"
    cmd = ["--result-dir", str(out), "--", "sh", "-c", f"mkdir -p {out} && echo '{RESULT}' > {out}/bench.json"]
    assert gpu_lab.sm("pop", "-a").code == 0
    monkeypatch.setenv("FAKE_DRIVER", "575.57.08")
    assert gpu_lab.sm("run", "--repeat", "2", "--name", "old", *cmd).code == 0
    assert gpu_lab.sm("push", "-a").code == 0
    monkeypatch.setenv("FAKE_DRIVER", "580.159.04")
    done = gpu_lab.sm("ab", "fix", "-n", "1", "--json", *cmd)
    assert done.code == 0, done.err
    assert json.loads(done.out)["baseline"] is None  # old's runs are of driver 575
    again = gpu_lab.sm("ab", "fix", "-n", "1", *cmd)  # the first ab's A run (the base, on 580) is a baseline now
    (line,) = [t for t in again.out.splitlines() if "against the baseline" in t]
    assert line == "  against the baseline of S (1 run):", again.out
