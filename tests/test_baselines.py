"""Baselines have a home: `run` on a tree whose series is applied to 0 patches records a baseline of that series
at its base (filed with the series' first patch, measured without it, `[run] baseline_of = "S"`), never a result
of a patch that was not there; `latest_baseline` finds the series' latest valid one."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from stackmgr.evidence.baselines import latest_baseline
from stackmgr.store.config import load_store
from tests.conftest import Lab

BENCH = """\
import json, os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
json.dump({"model_id": "m", "output_throughput": float(os.environ.get("TPUT", "100"))},
          open(os.path.join(out, "bench.json"), "w"))
sys.exit(int(os.environ.get("EXIT", "0")))
"""


@pytest.fixture
def popped(lab: Lab, tmp_path: Path) -> Path:
    """Series S of two patches (fix, probe), saved, then popped to its base; a bench script outside the tree."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    (lab.tree / "README").write_text("probe\n")
    assert lab.sm("save", "probe", "--series", "S", "-m", "probe").code == 0
    done = lab.sm("pop", "-a")
    assert done.code == 0, done.err
    script = tmp_path / "bench.py"
    script.write_text(BENCH)
    return script


def records(lab: Lab) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((lab.store / "links").glob("*/*.toml")):
        found.setdefault(path.parent.name, []).append(tomllib.loads(path.read_text()))
    return found


def bench_run(lab: Lab, script: Path, tmp_path: Path, *args: str, name: str, tput: str = "100",
              exit_code: str = "0", monkeypatch: pytest.MonkeyPatch) -> Any:  # fmt: skip
    out = tmp_path / f"out-{name}"
    monkeypatch.setenv("TPUT", tput)
    monkeypatch.setenv("EXIT", exit_code)
    return lab.sm("run", *args, "--name", name, "--result-dir", str(out), "--", sys.executable, str(script), str(out))


def test_a_run_at_the_series_base_records_its_baseline_and_says_so(
    lab: Lab, popped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = lab.worktree_id()
    done = bench_run(lab, popped, tmp_path, name="base1", monkeypatch=monkeypatch)
    assert done.code == 0, done.err
    (record,) = records(lab)["fix"]  # filed with the series' first patch, which was not there
    assert record["run"]["baseline_of"] == "S"
    assert record["stack"][0]["series"] == "S" and "patches" not in record["stack"][0]
    assert record["stack"][0]["snapshot"] == base
    assert f"recorded {record['id']} as the baseline of series S at its base" in done.err
    assert "compare and the report judge S's results against it" in done.err and "--amends" not in done.err
    listed = lab.sm("links", "--series", "S").out
    assert "BASELINE OF S" in listed and "WITHOUT THE PATCH" not in listed  # every reader sees no result of fix
    shown = json.loads(lab.sm("links", "--json").out)["links"]
    assert [k["mark"] for k in shown] == ["BASELINE OF S"]
    assert "measured without the patch: the base of series S, its baseline" in lab.sm("show", "fix").out


def test_run_series_at_the_base_records_the_baseline_not_the_last_patch(
    lab: Lab, popped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = bench_run(lab, popped, tmp_path, "--series", "S", name="base1", monkeypatch=monkeypatch)
    assert done.code == 0, done.err
    found = records(lab)
    assert "probe" not in found  # the last patch was not measured: nothing is linked to it
    (record,) = found["fix"]
    assert record["run"]["baseline_of"] == "S" and "patches" not in record["stack"][0]


def test_a_reset_after_apply_leaves_the_series_current_and_a_run_records_its_baseline(
        lab: Lab, popped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    assert lab.sm("apply", "S").code == 0
    assert lab.sm("reset").code == 0
    done = bench_run(lab, popped, tmp_path, name="base1", monkeypatch=monkeypatch)
    assert done.code == 0, done.err
    assert [r["run"]["baseline_of"] for r in records(lab)["fix"]] == ["S"]


def test_the_latest_valid_baseline_is_found(
    lab: Lab, popped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = load_store(str(lab.store))
    assert latest_baseline(store, "S") is None
    assert bench_run(lab, popped, tmp_path, name="base1", monkeypatch=monkeypatch).code == 0
    assert bench_run(lab, popped, tmp_path, name="base2", exit_code="3", monkeypatch=monkeypatch).code == 3
    assert lab.sm("push", "-a").code == 0
    assert bench_run(lab, popped, tmp_path, name="full", monkeypatch=monkeypatch).code == 0  # a result, no baseline
    found = latest_baseline(load_store(str(lab.store)), "S")
    assert found is not None and found.run["name"] == "base1"  # base2 failed: not a valid baseline
    assert lab.sm("pop", "-a").code == 0
    assert bench_run(lab, popped, tmp_path, name="base3", monkeypatch=monkeypatch).code == 0
    found = latest_baseline(load_store(str(lab.store)), "S")
    assert found is not None and found.run["name"] == "base3" and found.patch == "fix"
    assert latest_baseline(load_store(str(lab.store)), "other") is None
    assert lab.sm("report", "-o", str(tmp_path / "site")).code == 0
    assert f"baseline {found.id}: output_throughput 100 tok/s" in (tmp_path / "site" / "index.html").read_text()
