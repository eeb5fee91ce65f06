"""`stackmgr compare`'s verdicts: medians, the effect with its 95% interval, the rank test's p and `faster` /
`slower` / `no significant change` / `too few runs` (evidence.stats.judge), never a verdict from one noisy pair."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import Lab, link_id


def _result(lab: Lab, name: str, tput: float, ttft: float, **extra: object) -> str:
    doc = {"model_id": "Qwen/Qwen3.6", "num_prompts": 50, "request_rate": 1.0, "max_concurrency": 8,
           "output_throughput": tput, "mean_ttft_ms": ttft, **extra}  # fmt: skip
    (lab.store / "results" / name).write_text(json.dumps(doc))
    return f"results/{name}"


def _runs(lab: Lab, patch: str, tputs: list[float], ttft: float = 50.0) -> list[str]:
    return [link_id(lab, patch, "--from-json", _result(lab, f"{patch}-{i}.json", t, ttft + i % 2))
            for i, t in enumerate(tputs)]  # fmt: skip


def _values(lab: Lab, *args: str) -> dict[str, list[dict[str, Any]]]:
    done = lab.sm("--json", "compare", *args)
    assert done.code == 0, done.err
    (group,) = json.loads(done.out)["groups"]
    return {m["name"]: m["values"] for m in group["metrics"]}


def test_five_runs_a_side_give_median_effect_interval_p_and_faster(ev: Lab) -> None:
    _runs(ev, "replay-fix", [100.0, 101.0, 99.5, 100.4, 99.8])
    _runs(ev, "replay-probe", [110.0, 111.2, 109.5, 110.7, 110.1])
    tput = _values(ev, "replay-fix", "replay-probe")["output_throughput"]
    ref, other = tput
    assert (ref["median"], ref["n"], ref["verdict"], ref["effect"]) == (100.0, 5, None, None)
    assert (other["median"], other["n"], other["samples"], other["verdict"]) == (110.1, 5, "runs", "faster")
    assert other["ci_low"] <= other["effect"] <= other["ci_high"] and other["ci_low"] > 0.05
    assert other["p"] == pytest.approx(2 / 252), "exact Mann–Whitney: complete separation of 5 and 5"
    shown = ev.sm("compare", "replay-fix", "replay-probe").out.splitlines()
    line = next(s for s in shown if s.lstrip().startswith("output_throughput"))
    assert line.split("tok/s")[1].split() == ["100", "(n=5)", "110.1", "(n=5)", "+10.2%", "[+9.1%,", "+11.2%]",
                                              "p=0.0079", "faster"], line  # fmt: skip
    ttft = _values(ev, "replay-fix", "replay-probe")["mean_ttft_ms"][1]
    assert ttft["verdict"] == "no significant change", "the same latencies both sides"
    assert "better" not in "\n".join(shown) and "worse" not in "\n".join(shown)
    slower = _values(ev, "replay-probe", "replay-fix")["output_throughput"][1]
    assert slower["verdict"] == "slower"


def test_one_run_a_side_is_too_few_runs_never_better(ev: Lab) -> None:
    (a,) = _runs(ev, "replay-fix", [100.0])
    (b,) = _runs(ev, "replay-probe", [111.0])
    other = _values(ev, a, b)["output_throughput"][1]
    assert (other["verdict"], other["ci_low"], other["ci_high"]) == ("too few runs", None, None)
    assert other["effect"] == pytest.approx(0.11)
    line = ev.sm("compare", a, b).out.splitlines()[-2]
    assert line.endswith("111 (n=1)  +11.0%  too few runs"), line


def test_min_effect_sets_the_floor_a_significant_change_must_clear(ev: Lab) -> None:
    _runs(ev, "replay-fix", [100.0, 100.1, 99.9, 100.05, 99.95])
    _runs(ev, "replay-probe", [102.0, 102.1, 101.9, 102.05, 101.95])
    assert _values(ev, "replay-fix", "replay-probe")["output_throughput"][1]["verdict"] == "faster"
    floor = _values(ev, "replay-fix", "replay-probe", "--min-effect", "5")["output_throughput"][1]
    assert floor["verdict"] == "no significant change" and floor["p"] < 0.05
    bad = ev.sm("compare", "replay-fix", "--min-effect", "-1")
    assert bad.code == 2 and bad.out == ""


def test_float_rounding_between_identical_runs_is_no_significant_change(ev: Lab) -> None:
    _runs(ev, "replay-fix", [1.65] * 4)
    _runs(ev, "replay-probe", [(1.1 + 2.2) / 2] * 4)
    other = _values(ev, "replay-fix", "replay-probe")["output_throughput"][1]
    assert (other["verdict"], other["effect"]) == ("no significant change", 0.0)
    shown = ev.sm("compare", "replay-fix", "replay-probe").out
    assert "e-15" not in shown and "e-16" not in shown, shown


def test_a_single_run_a_side_shows_its_per_request_distribution_but_claims_no_change(ev: Lab) -> None:
    """The requests of one run describe that run; a shift of the whole run (clocks, heat) moves them all alike, so
    one run a side never says faster or slower, however small p is (pseudo-replication)."""
    fast = [0.040 + 0.001 * (i % 7) for i in range(60)]
    slow = [t * 1.2 for t in fast]
    a = link_id(ev, "replay-fix", "--from-json", _result(ev, "a.json", 100.0, 45.0, ttfts=fast))  # recorded means
    b = link_id(ev, "replay-probe", "--from-json", _result(ev, "b.json", 100.0, 55.0, ttfts=slow))
    ttft = _values(ev, a, b)["mean_ttft_ms"][1]
    assert (ttft["samples"], ttft["n_samples"], ttft["verdict"]) == ("requests", 60, "too few runs")
    assert ttft["effect"] == pytest.approx(0.2, abs=0.03) and ttft["p"] < 1e-6
    values = _values(ev, a, b)["mean_ttft_ms"]  # the medians shown are the requests' (ms), not the recorded means
    assert values[0]["median"] == pytest.approx(43.0) and values[1]["median"] == pytest.approx(51.6)
    same = link_id(ev, "replay-probe", "--from-json", _result(ev, "c.json", 100.0, 43.0, ttfts=fast))
    alike = _values(ev, a, same)["mean_ttft_ms"][1]  # no difference in the requests: still no word from one run
    assert (alike["samples"], alike["verdict"]) == ("requests", "too few runs")
    assert _values(ev, a, b)["output_throughput"][1]["verdict"] == "too few runs", "no samples: runs"
    shown = ev.sm("compare", a, b).out
    assert "51.6 (60 requests)" in shown, shown


def test_which_per_request_array_serves_which_latency_metric(ev: Lab) -> None:
    """ttfts → *_ttft_ms, itls (every gap of every request) → *_itl_ms, latencies → *_e2el_ms, (latency − ttft) /
    (output_len − 1) → *_tpot_ms; seconds in the file, ms judged; a request with an error left out."""

    def detailed(name: str, k: float) -> str:
        n = 40
        return _result(ev, name, 100.0, 50.0 * k, mean_itl_ms=10.0 * k, median_e2el_ms=500.0 * k,
                       mean_tpot_ms=10.0 * k, p99_ttft_ms=90.0 * k,
                       ttfts=[k * (0.05 + 0.001 * (i % 5)) for i in range(n)],
                       itls=[[k * (0.01 + 0.0001 * j) for j in range(3)] for _ in range(n)],
                       latencies=[k * (0.5 + 0.01 * (i % 5)) for i in range(n)],
                       output_lens=[4] * n, errors=[""] * (n - 1) + ["timeout"])  # fmt: skip

    a = link_id(ev, "replay-fix", "--from-json", detailed("a.json", 1.0))
    b = link_id(ev, "replay-probe", "--from-json", detailed("b.json", 1.3))
    values = _values(ev, a, b)
    judged = {name: (v[1]["samples"], v[1]["n_samples"], v[1]["verdict"]) for name, v in values.items()}
    assert judged["mean_ttft_ms"] == ("requests", 39, "too few runs")
    assert judged["mean_itl_ms"] == ("requests", 39 * 3, "too few runs")
    assert judged["median_e2el_ms"] == ("requests", 39, "too few runs")
    assert judged["mean_tpot_ms"] == ("requests", 39, "too few runs")
    assert judged["p99_ttft_ms"] == ("runs", 1, "too few runs"), "a tail is not judged on the requests"
    assert values["mean_tpot_ms"][1]["effect"] == pytest.approx(0.3, abs=0.01)
