"""`stackmgr compare LINK|PATCH…`: results side by side, grouped by run configuration, deltas by direction."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from stackmgr.evidence.compare import run_config
from stackmgr.evidence.reading import load_links
from stackmgr.store.config import load_store
from tests.conftest import Lab, link_id, one_line_error, stackmgr_process


def _bench(lab: Lab, name: str, rate: float, tput: float, ttft: float, model: str = "Qwen/Qwen3.6") -> str:
    """A `vllm bench serve --save-result` file (its keys in the order vllm writes them) under results/."""
    doc = {"date": "20260623-024028", "backend": "vllm", "model_id": model, "tokenizer_id": model,
           "num_prompts": 50, "request_rate": rate, "burstiness": 1.0, "max_concurrency": 8, "duration": 61.2,
           "completed": 50, "mean_ttft_ms": ttft, "output_throughput": tput,
           "ttfts": [ttft * 0.0009, ttft * 0.0011]}  # fmt: skip
    path = lab.store / "results" / name
    path.write_text(json.dumps(doc))
    return f"results/{name}"


@pytest.fixture
def runs(ev: Lab) -> dict[str, str]:
    """replay-fix and replay-probe measured at 1 and 4 requests/s; replay-probe twice at 1 req/s."""
    ids = {"fix@1": link_id(ev, "replay-fix", "--from-json", _bench(ev, "fix-1.json", 1.0, 100.0, 50.0))}
    ids["fix@4"] = link_id(ev, "replay-fix", "--from-json", _bench(ev, "fix-4.json", 4.0, 300.0, 80.0))
    ids["probe@1a"] = link_id(ev, "replay-probe", "--from-json", _bench(ev, "probe-1a.json", 1.0, 110.0, 45.0))
    ids["probe@1b"] = link_id(ev, "replay-probe", "--from-json", _bench(ev, "probe-1b.json", 1, 112.0, 43.0))
    ids["probe@4"] = link_id(ev, "replay-probe", "--from-json", _bench(ev, "probe-4.json", 4.0, 290.0, 85.0))
    return ids


def _compare(lab: Lab, *args: str) -> dict[str, Any]:
    result = lab.sm("--json", "compare", *args)
    assert result.code == 0, result.err
    return dict(json.loads(result.out))


def test_runs_at_two_request_rates_are_two_groups_never_ranked_together(ev: Lab, runs: dict[str, str]) -> None:
    result = ev.sm("compare", "replay-fix", "replay-probe")
    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        "model Qwen/Qwen3.6 · request rate 1 · max concurrency 8 · prompts 50",
        f"  replay-fix (reference): {runs['fix@1']}",
        f"  replay-probe: {runs['probe@1a']}, {runs['probe@1b']}",
        "  metric                unit   replay-fix  replay-probe",
        "  output_throughput  ↑  tok/s  100 (n=1)   111 (n=2)  +11.0%  too few runs",
        "  mean_ttft_ms       ↓  ms     50 (n=1)    44 (n=2)  -12.0%  too few runs",
        "",
        "model Qwen/Qwen3.6 · request rate 4 · max concurrency 8 · prompts 50",
        f"  replay-fix (reference): {runs['fix@4']}",
        f"  replay-probe: {runs['probe@4']}",
        "  metric                unit   replay-fix       replay-probe",
        "  output_throughput  ↑  tok/s  300 (n=1)        290 (n=1)  -3.3%  too few runs",
        "  mean_ttft_ms       ↓  ms     80 (2 requests)  85 (2 requests)  +6.2%  too few runs",
    ]
    groups = _compare(ev, "replay-fix", "replay-probe")["groups"]
    assert [g["config"] for g in groups] == [
        {"model_id": "Qwen/Qwen3.6", "request_rate": "1", "max_concurrency": "8", "num_prompts": "50"},
        {"model_id": "Qwen/Qwen3.6", "request_rate": "4", "max_concurrency": "8", "num_prompts": "50"},
    ], "1.0 and 1 are the same rate"
    assert [[(r["patch"], r["links"]) for r in g["results"]] for g in groups] == [
        [("replay-fix", [runs["fix@1"]]), ("replay-probe", [runs["probe@1a"], runs["probe@1b"]])],
        [("replay-fix", [runs["fix@4"]]), ("replay-probe", [runs["probe@4"]])],
    ]


def test_repeats_of_one_patch_and_configuration_are_mean_and_stdev(ev: Lab, runs: dict[str, str]) -> None:
    group, _ = _compare(ev, "replay-probe")["groups"]
    assert group["results"] == [{"patch": "replay-probe", "links": [runs["probe@1a"], runs["probe@1b"]], "n": 2,
                                 "reference": True, "label": "replay-probe", "marked": None}]  # fmt: skip
    tput = next(m for m in group["metrics"] if m["name"] == "output_throughput")
    assert tput["values"] == [{"patch": "replay-probe", "mean": 111.0, "stdev": math.sqrt(2), "n": 2,
                               "delta": None, "delta_pct": None, "change": None, "median": 111.0, "samples": "runs",
                               "n_samples": 2, "effect": None, "ci_low": None, "ci_high": None, "p": None,
                               "verdict": None}]  # fmt: skip


def test_deltas_are_better_or_worse_by_each_metrics_direction(ev: Lab, runs: dict[str, str]) -> None:
    (group,) = _compare(ev, runs["fix@4"], runs["probe@4"])["groups"]
    by_name = {m["name"]: (m["direction"], m["values"][1]) for m in group["metrics"]}
    assert by_name["mean_ttft_ms"] == ("lower", {"patch": "replay-probe", "mean": 85.0, "stdev": None, "n": 1,
                                                 "delta": 5.0, "delta_pct": 6.25, "change": "worse", "median": 85.0,
                                                 "samples": "requests", "n_samples": 2, "effect": pytest.approx(0.0625),
                                                 "ci_low": None, "ci_high": None, "p": 1.0 / 3 * 2,
                                                 "verdict": "too few runs"})  # fmt: skip
    assert by_name["output_throughput"][1]["change"] == "worse"
    (group,) = _compare(ev, runs["probe@4"], runs["fix@4"])["groups"]  # the other way round
    back = {m["name"]: m["values"][1] for m in group["metrics"]}
    assert (back["mean_ttft_ms"]["delta"], back["mean_ttft_ms"]["change"]) == (-5.0, "better"), \
        "a latency that went down is better"
    assert (back["output_throughput"]["delta"], back["output_throughput"]["change"]) == (10.0, "better")


def test_a_patch_means_its_current_links_not_the_amended_ones(ev: Lab, runs: dict[str, str]) -> None:
    redo = link_id(ev, "replay-probe", "--from-json", _bench(ev, "probe-1c.json", 1.0, 120.0, 40.0),
                   "--amends", runs["probe@1b"])  # fmt: skip
    groups = _compare(ev, runs["fix@1"], "replay-probe.patch")["groups"]
    assert [[r["links"] for r in g["results"]] for g in groups] == [
        [[runs["fix@1"]], [runs["probe@1a"], redo]], [[runs["probe@4"]]]]  # fmt: skip
    assert groups[1]["results"][0]["reference"] is True, "alone in its configuration: its own reference"
    twice = _compare(ev, runs["fix@1"], "replay-fix", runs["fix@1"])["groups"]
    assert [[r["links"] for r in g["results"]] for g in twice] == [[[runs["fix@1"]]], [[runs["fix@4"]]]]


def test_json_keys_and_the_headline_listed_first(ev: Lab, runs: dict[str, str]) -> None:
    doc = _compare(ev, runs["fix@1"], runs["probe@1a"])
    assert list(doc) == ["schema", "headline", "groups"] and doc["schema"] == 1
    assert doc["headline"] == "output_throughput", "by default the throughput a serving change moves"
    assert json.loads(ev.sm("compare", runs["fix@1"], runs["probe@1a"], "--json").out) == doc
    (group,) = doc["groups"]
    assert list(group) == ["config", "results", "left_out", "metrics"] and group["left_out"] == []
    assert [m["name"] for m in group["metrics"]] == ["output_throughput", "mean_ttft_ms"], "the headline first"
    assert list(group["metrics"][1]) == ["name", "unit", "direction", "values"]
    assert group["metrics"][1]["values"][0] == {"patch": "replay-fix", "mean": 50.0, "stdev": None, "n": 1,
                                                "delta": None, "delta_pct": None, "change": None, "median": 50.0,
                                                "samples": "requests", "n_samples": 2, "effect": None,
                                                "ci_low": None, "ci_high": None, "p": None,
                                                "verdict": None}  # fmt: skip
    config = ev.store / "stackmgr.toml"
    config.write_text(config.read_text() + '\n[evidence]\nheadline = "mean_ttft_ms"\n')
    doc = _compare(ev, runs["fix@1"], runs["probe@1a"])
    assert doc["headline"] == "mean_ttft_ms"
    assert [m["name"] for m in doc["groups"][0]["metrics"]] == ["mean_ttft_ms", "output_throughput"]


def test_results_without_vllm_json_and_of_another_model_are_groups_of_their_own(ev: Lab, runs: dict[str, str]) -> None:
    log = link_id(ev, "gemm-tile", "results/probe.log", "--metric", "output_throughput=95tok/s")
    other = link_id(ev, "gemm-tile", "--from-json", _bench(ev, "llama.json", 1.0, 200.0, 30.0, model="Llama-3"))
    doc = _compare(ev, runs["fix@1"], log, other)
    assert [(g["config"]["model_id"], [r["links"] for r in g["results"]]) for g in doc["groups"]] == [
        ("Qwen/Qwen3.6", [[runs["fix@1"]]]), (None, [[log]]), ("Llama-3", [[other]])]  # fmt: skip
    assert all(v["change"] is None for g in doc["groups"] for m in g["metrics"] for v in m["values"])
    shown = ev.sm("compare", log).out.splitlines()
    assert shown[0] == "run configuration not recorded (no vllm bench JSON artifact)"


def test_run_config_reads_the_link_run_table_first_then_its_json_artifact(ev: Lab, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps({"model_id": "m", "request_rate": "inf", "max_concurrency": None,
                                   "num_prompts": 1000, "output_throughput": 1.5}))  # fmt: skip
    lid = link_id(ev, "replay-fix", "results/probe.log", "--from-json", str(outside))
    store = load_store(str(ev.store))
    (link,) = load_links(store, "replay-fix")
    assert link.id == lid and link.artifacts[1].origin == str(outside), "copied into the store, its origin kept"
    assert run_config(store, link) == {"model_id": "m", "request_rate": "inf", "num_prompts": "1000"}
    link.run = {"config": {"model_id": "from-run", "request_rate": 2.5, "host": "gpu-7"}}
    assert run_config(store, link) == {"model_id": "from-run", "request_rate": "2.5"}
    link.run = {"config": {}}
    assert run_config(store, link)["model_id"] == "m", "an empty run table: the artifact says"
    outside.unlink()
    assert run_config(store, link)["model_id"] == "m", "the copy travels: the original gone, the copy says"
    (ev.store / link.artifacts[1].path).unlink()
    assert run_config(store, link) == {}, "a missing artifact: not recorded (the link reads as broken)"


@pytest.mark.parametrize(("args", "err"), [
    (("nothing-here",), "stackmgr: no link or patch named 'nothing-here'; give link ids (`stackmgr links`) or "
                        "patch names (`stackmgr series`)\n"),
    (("lnk-000000000000",), "stackmgr: no link or patch named 'lnk-000000000000'; give link ids (`stackmgr links`) "
                            "or patch names (`stackmgr series`)\n"),
    (("../x",), "stackmgr: no link or patch named '../x'; give link ids (`stackmgr links`) or patch names "
                "(`stackmgr series`)\n"),
    (("gemm-tile",), "stackmgr: patch gemm-tile has no links yet; record one with `stackmgr link gemm-tile "
                     "ARTIFACT…`\n"),
])  # fmt: skip
def test_an_unknown_link_or_patch_is_a_usage_error_in_one_line(ev: Lab, args: tuple[str, ...], err: str) -> None:
    link_id(ev, "replay-fix", "--from-json", _bench(ev, "fix-1.json", 1.0, 100.0, 50.0))
    result = ev.sm("compare", "replay-fix", *args)
    one_line_error(result, 2)
    assert result.err == err and result.out == ""
    assert ev.sm("compare").code == 2


@pytest.mark.regression("edge case: repeats near the float limit")
def test_repeats_near_the_float_limit_give_finite_json(ev: Lab) -> None:
    a = link_id(ev, "replay-fix", "results/probe.log", "--metric", "x=1.7e308")
    b = link_id(ev, "replay-fix", "results/probe.log", "--metric", "x=1.6e308")
    c = link_id(ev, "replay-probe", "results/probe.log", "--metric", "x=-1.7e308")
    (group,) = _compare(ev, "replay-fix", c)["groups"]
    assert [r["links"] for r in group["results"]] == [[a, b], [c]]
    ref, other = group["metrics"][0]["values"]
    assert (ref["mean"], ref["n"]) == (pytest.approx(1.65e308), 2) and math.isfinite(ref["stdev"])
    assert (other["delta"], other["delta_pct"], other["median"], other["verdict"]) == (None, None, -1.7e308,
                                                                                     "too few runs")  # fmt: skip
    assert other["effect"] == pytest.approx(-2.03, abs=0.01), "the differences scaled: finite"
    assert ev.sm("compare", "replay-fix", c).out.splitlines()[-1].endswith("-1.7e+308 (n=1)  -203.0%  too few runs")


def _run(lab: Lab, bench: str, code: str) -> str:
    """`stackmgr run --link replay-probe --from-json BENCH -- python -c CODE`, the command writing BENCH (as
    vllm bench does, touched) before CODE: the draft's id."""
    touch = f"import os; os.utime({str(lab.store / bench)!r}); "
    done = stackmgr_process(lab.store, "run", "--link", "replay-probe", "--from-json", bench, "--",
                            sys.executable, "-c", touch + code)  # fmt: skip
    (draft,) = [line for line in done.stderr.splitlines() if line.startswith("stackmgr: recorded ")]
    return draft.split()[2]


@pytest.mark.regression("compare averaged failed (exit non-zero) and tainted runs into the repeats' mean")
def test_failed_and_tainted_runs_are_left_out_of_the_means_and_said_so(ev: Lab, runs: dict[str, str]) -> None:
    failed = _run(ev, _bench(ev, "probe-crash.json", 1.0, 5.0, 900.0), "import sys; sys.exit(1)")
    tainted = _run(ev, _bench(ev, "probe-noisy.json", 1.0, 500.0, 1.0),
                   f"open({str(ev.tree / 'README')!r}, 'a').write('edited while it ran')")  # fmt: skip
    shown = ev.sm("compare", "replay-fix", "replay-probe")
    assert shown.out.splitlines()[:7] == [
        "model Qwen/Qwen3.6 · request rate 1 · max concurrency 8 · prompts 50",
        f"  replay-fix (reference): {runs['fix@1']}",
        f"  replay-probe: {runs['probe@1a']}, {runs['probe@1b']}",
        f"  left out: {failed} of replay-probe (exit 1), {tainted} of replay-probe (tainted)",
        "  metric                unit   replay-fix  replay-probe",
        "  output_throughput  ↑  tok/s  100 (n=1)   111 (n=2)  +11.0%  too few runs",
        "  mean_ttft_ms       ↓  ms     50 (n=1)    44 (n=2)  -12.0%  too few runs",
    ]
    group = _compare(ev, "replay-fix", "replay-probe")["groups"][0]
    assert [(r["patch"], r["links"], r["n"]) for r in group["results"]] == [
        ("replay-fix", [runs["fix@1"]], 1), ("replay-probe", [runs["probe@1a"], runs["probe@1b"]], 2)]
    assert group["left_out"] == [{"link": failed, "patch": "replay-probe", "why": "exit 1"},
                                 {"link": tainted, "patch": "replay-probe", "why": "tainted"}]  # fmt: skip
    tput = next(m for m in group["metrics"] if m["name"] == "output_throughput")
    assert [(v["mean"], v["n"]) for v in tput["values"]] == [(100.0, 1), (111.0, 2)]
    (alone,) = _compare(ev, failed)["groups"]  # named by id: shown, marked, never a reference
    assert [(r["links"], r["marked"], r["reference"]) for r in alone["results"]] == [([failed], "exit 1", False)]
    assert alone["left_out"] == [] and alone["metrics"][0]["values"][0]["change"] is None
    assert ev.sm("compare", failed).out.splitlines()[1] == f"  replay-probe: {failed}  FAILED (exit 1)"


@pytest.mark.regression("compare merged links named by id of one patch into one column of repeats")
def test_links_named_by_id_are_columns_of_their_own(ev: Lab, runs: dict[str, str]) -> None:
    a, b = runs["probe@1a"], runs["probe@1b"]
    assert ev.sm("compare", a, b).out.splitlines() == [
        "model Qwen/Qwen3.6 · request rate 1 · max concurrency 8 · prompts 50",
        f"  replay-probe (reference): {a}",
        f"  replay-probe: {b}",
        f"  metric                unit   {a}  {b}",
        "  output_throughput  ↑  tok/s  110 (n=1)         112 (n=1)  +1.8%  too few runs",
        "  mean_ttft_ms       ↓  ms     45 (2 requests)   43 (2 requests)  -4.4%  too few runs",
    ]
    (group,) = _compare(ev, a, b)["groups"]
    assert group["results"] == [
        {"patch": "replay-probe", "links": [a], "n": 1, "reference": True, "label": a, "marked": None},
        {"patch": "replay-probe", "links": [b], "n": 1, "reference": False, "label": b, "marked": None}]  # fmt: skip
    (group,) = _compare(ev, runs["fix@1"], b)["groups"]  # patches apart: the patch's name says which
    assert [r["label"] for r in group["results"]] == ["replay-fix", "replay-probe"]
    group, _ = _compare(ev, a, "replay-probe")["groups"]  # the patch: its current links but the one named first
    assert [(r["links"], r["label"]) for r in group["results"]] == [([a], a), ([b], "replay-probe")]


@pytest.mark.regression("a baseline linked to a patch was averaged in as one of its repeats and shown as 'measured "
                        "this version of the patch'; a broken result was compared unmarked")  # fmt: skip
def test_a_baseline_linked_to_the_patch_and_a_broken_result_are_left_out_of_its_repeats(
    ev: Lab, runs: dict[str, str]
) -> None:  # fmt: skip
    assert ev.sm("reset", "vllm").code == 0  # the series' patches are saved; the tree at its base
    base = link_id(ev, "replay-probe", "--from-json", _bench(ev, "upstream-1.json", 1.0, 90.0, 60.0))
    shown = ev.sm("show", "replay-probe").out
    assert "measured without the patch: its changes were not in tree vllm's measured state" in shown
    _bench(ev, "probe-1b.json", 1, 999.0, 1.0)  # a result's file rewritten since it was linked: broken
    group = _compare(ev, "replay-probe")["groups"][0]
    assert group["results"] == [{"patch": "replay-probe", "links": [runs["probe@1a"]], "n": 1, "reference": True,
                                 "label": "replay-probe", "marked": None}]  # fmt: skip
    assert {k["link"]: k["why"] for k in group["left_out"]} == {
        runs["probe@1b"]: "broken: an artifact changed or is missing (`stackmgr verify`)",
        base: "measured without the patch"}  # fmt: skip
    named = _compare(ev, base, runs["probe@1a"])["groups"][0]
    assert [r["links"] for r in named["results"]] == [[base], [runs["probe@1a"]]], "named by id: a column"


@pytest.mark.regression("--baseline of a run at another request rate was taken silently, its deltas shown as gains")
def test_a_baseline_of_another_run_configuration_is_said(ev: Lab, runs: dict[str, str]) -> None:
    done = ev.sm("link", "replay-probe", "--amends", runs["probe@4"], "--baseline", runs["fix@1"])
    assert done.code == 0, done.err
    assert ("stackmgr: warning: --baseline " + runs["fix@1"] + " was measured with another run configuration "
            "(request_rate 1 vs 4): its deltas compare unlike runs") in done.err  # fmt: skip
    same = ev.sm("link", "replay-probe", "--amends", runs["probe@1a"], "--baseline", runs["fix@1"])
    assert same.code == 0 and "warning" not in same.err
