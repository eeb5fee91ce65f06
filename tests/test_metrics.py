"""Metrics of a link: values and units from the command line, from `vllm bench serve` JSON and from a regex over a
log; the direction of each; `verify` re-deriving them."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from tests.conftest import Lab, link_records, one_line_error
from tests.conftest import link_id as _link
from tests.conftest import show_json as _show


def _strict_json(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


# --- values, units and directions -------------------------------------------------------------------------------------


@pytest.mark.regression("edge case: metric values and units")
@pytest.mark.parametrize(
    ("spec", "value", "unit", "direction"),
    [
        ("x=1e-9", 1e-9, "", ""),  # direction unknown
        ("x=-0", -0.0, "", ""),  # direction unknown
        ("x=+.5", 0.5, "", ""),  # direction unknown
        ("output_throughput=107.77 tok/s", 107.77, "tok/s", "higher"),
        ("output_throughput=107.77tok/s", 107.77, "tok/s", "higher"),
        ("acc=99.5%", 99.5, "%", ""),  # direction unknown
        ("lat=12ms", 12.0, "ms", "lower"),
        ("x=123456789012345678901234567890", 1.2345678901234568e29, "", ""),  # direction unknown
        ("x=5e-324", 5e-324, "", ""),  # direction unknown
        ("power=310W@lower", 310.0, "W", "lower"),
    ],
)
def test_metric_values_and_units_round_trip(ev: Lab, spec: str, value: float, unit: str, direction: str) -> None:
    _link(ev, "replay-fix", "results/probe.log", "--metric", spec)
    (record,) = link_records(ev, "replay-fix")
    (metric,) = record["metric"]
    assert metric["value"] == value and math.copysign(1.0, metric["value"]) == math.copysign(1.0, value)
    assert metric.get("unit", "") == unit and metric.get("direction", "") == direction
    (shown,) = _show(ev, "replay-fix")["links"][0]["metrics"]
    assert (shown["value"], shown["unit"]) == (value, unit)


@pytest.mark.regression("junk after the number was taken as the unit")
@pytest.mark.parametrize("spec", ["x=1,234", "x=107.77.5", "x=0x10", "x=1_000", "x=12 34"])
def test_junk_after_the_number_is_not_a_unit(ev: Lab, spec: str) -> None:
    """metrics.py:_NUMBER takes any trailing text as the unit: 1,234 is recorded as value 1 with unit ',234' instead of
    being refused."""
    one_line_error(ev.sm("link", "replay-fix", "results/probe.log", "--metric", spec), 2)


@pytest.mark.regression("units starting with s (samples/s) became lower-is-better")
@pytest.mark.parametrize("spec", ["tput=5samples/s", "tput=5 steps/s", "tput=5 seq/s", "x=3 sps"])
def test_per_second_units_are_higher_is_better(ev: Lab, spec: str) -> None:
    """metrics.py:direction_for matches ' s' anywhere in 'NAME UNIT': any unit starting with s (samples/s, steps/s,
    seq/s) becomes lower-is-better."""
    _link(ev, "replay-fix", "results/probe.log", "--metric", spec)
    assert link_records(ev, "replay-fix")[0]["metric"][0]["direction"] == "higher"


@pytest.mark.regression("1e999 was accepted as inf and show --json printed Infinity")
def test_an_infinite_metric_is_refused_or_shown_as_valid_json(ev: Lab) -> None:
    """metrics.py:parse_metric accepts 1e999 as inf; show --json then prints `Infinity`, which is not JSON
    (output.emit_json has allow_nan on)."""
    result = ev.sm("link", "replay-fix", "results/probe.log", "--metric", "x=1e999")
    if result.code == 2:
        return
    _strict_json(ev.sm("show", "replay-fix", "--json").out)


@pytest.mark.regression("a metric named twice was kept twice")
def test_a_metric_named_twice_is_refused(ev: Lab) -> None:
    """states._metrics keeps duplicate metric names; baseline deltas and `links --metric` then pick one
    arbitrarily."""
    result = ev.sm("link", "replay-fix", "results/bench.json", "--from-json", "results/bench.json",
                   "--metric", "output_throughput=1tok/s")  # fmt: skip
    one_line_error(result, 2)


# --- bench JSON and JSON pointers -------------------------------------------------------------------------------------


@pytest.mark.regression("edge case: --from-json of a file that is not a bench result")
@pytest.mark.parametrize(
    "content",
    [b"[1, 2]", b'"inf"', b"null", b"42", b"", b"\xff\xfe{}", b'{"output_throughput": "inf", "ok": true}',
     b'{"output_throughput": true, "mean_ttft_ms": false}', b'{"a": {"nested": {"output_throughput": 1.0}}}'],
    ids=["list", "string", "null", "number", "empty", "not-utf8", "string-value", "booleans", "nested"],
)  # fmt: skip
def test_from_json_that_is_not_a_bench_result_is_refused_in_one_line(ev: Lab, content: bytes) -> None:
    (ev.store / "results" / "odd.json").write_bytes(content)
    one_line_error(ev.sm("link", "replay-fix", "--from-json", "results/odd.json"), 3)
    assert not list((ev.store / "links").rglob("*.toml"))


@pytest.mark.regression("NaN from bench JSON broke show --json and verify")
def test_a_nan_metric_from_json_is_refused_or_verifies(ev: Lab) -> None:
    """metrics.py:from_vllm_json takes NaN from the JSON; show --json emits NaN (not JSON) and verify reports the metric
    as drifted forever (nan != nan)."""
    (ev.store / "results" / "nan.json").write_text('{"output_throughput": NaN, "mean_ttft_ms": 4.0}')
    result = ev.sm("link", "replay-fix", "--from-json", "results/nan.json")
    if result.code == 3:
        return
    assert ev.sm("verify").code == 0
    _strict_json(ev.sm("show", "replay-fix", "--json").out)


@pytest.mark.regression("a huge integer in bench JSON raised OverflowError")
def test_a_huge_integer_in_bench_json_is_one_clear_line(ev: Lab) -> None:
    """metrics.py:from_vllm_json float(huge int) raises OverflowError: 'internal error' instead of one clear line."""
    (ev.store / "results" / "huge.json").write_text('{"output_throughput": 1' + "0" * 400 + "}")
    one_line_error(ev.sm("link", "replay-fix", "--from-json", "results/huge.json"), 3)


@pytest.mark.regression("edge case: JSON pointer escapes")
def test_json_pointer_escapes_are_decoded_in_rfc6901_order() -> None:
    from stackmgr.evidence.metrics import Metric, rederive

    doc = json.dumps({"a/b": {"c~d": 5, "~1": 7}}).encode()
    assert rederive(Metric("m", 0, source={"artifact": "x", "pointer": "/a~1b/c~0d"}), doc) == 5.0
    assert rederive(Metric("m", 0, source={"artifact": "x", "pointer": "/a~1b/~01"}), doc) == 7.0
    assert rederive(Metric("m", 0, source={"artifact": "x", "pointer": "/missing"}), doc) is None
    assert rederive(Metric("m", 0, source={"artifact": "x", "pointer": "/a~1b"}), doc) is None


# --- regex metrics ----------------------------------------------------------------------------------------------------


@pytest.mark.regression("edge case: a regex metric with a unit group")
def test_regex_with_two_groups_takes_the_unit_from_the_second(ev: Lab) -> None:
    # The contract is group 1 = number, group 2 = unit: a unit in group 1 is refused in one line.
    wrong = ev.sm("link", "replay-fix", "results/probe.log", "--metric", r"t=/throughput \((\S+)\): ([0-9.]+)/")
    one_line_error(wrong, 3)
    (ev.store / "results" / "u.log").write_text("tput 107.77 tok/s\n")
    _link(ev, "replay-probe", "results/u.log", "--metric", r"t=/tput ([0-9.]+) (\S+)/")
    (metric,) = link_records(ev, "replay-probe")[0]["metric"]
    assert (metric["value"], metric["unit"]) == (107.77, "tok/s")


@pytest.mark.regression("edge case: a regex metric from a non-UTF-8 log")
def test_regex_metric_from_a_non_utf8_artifact_and_verify(ev: Lab) -> None:
    (ev.store / "results" / "bin.log").write_bytes(b"\xff\xfe garbage \x80\nthroughput: 55.5 tok/s\n\xc3(")
    _link(ev, "replay-fix", "results/bin.log", "--metric", r"t=/throughput: ([0-9.]+)/")
    (metric,) = link_records(ev, "replay-fix")[0]["metric"]
    assert metric["value"] == 55.5
    assert ev.sm("verify").code == 0


@pytest.mark.regression("a regex group that did not take part in the match raised AttributeError")
def test_a_regex_whose_group_did_not_participate_is_one_clear_line(ev: Lab) -> None:
    """metrics.py:from_regex calls m.group(1).strip() when group 1 did not take part in the match (None):
    AttributeError, 'internal error'."""
    (ev.store / "results" / "n.log").write_text("tput=none\n")
    result = ev.sm("link", "replay-fix", "results/n.log", "--metric", r"t=/tput=(?:([0-9.]+)|none)/")
    one_line_error(result, 3)


@pytest.mark.regression("one log holding a non-number aborted verify instead of being listed")
def test_verify_lists_a_metric_whose_log_now_holds_a_non_number(ev: Lab) -> None:
    """states.verify_all lets from_regex's StackmgrError escape: one changed log aborts verify with exit 3 and no
    listing, instead of exit 1 listing every problem."""
    lid = _link(ev, "replay-fix", "results/probe.log", "--metric", r"t=/throughput \(tok\/s\): (\S+)/")
    (ev.store / "results" / "probe.log").write_text("Output token throughput (tok/s): n/a\n")
    result = ev.sm("--json", "verify")
    assert result.code == 1, result.err
    assert lid in result.out
