"""Fresh-eyes review of the evidence feature: link records (TOML writer/reader), metrics, states, show/links/verify.

Tests whose docstring starts "Regression (review)" pinned a bug found in review, since fixed; the others pin
behaviour worth keeping.
"""

from __future__ import annotations

import errno
import json
import math
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Lab
from tests.conftest import link_id as _link
from tests.conftest import show_json as _show


@pytest.fixture
def ev(evidence_lab: Lab) -> Lab:
    """Series `replay` (vllm): replay-fix, replay-probe; series `kernels` (second tree): gemm-tile; results/."""
    return evidence_lab


def _records(lab: Lab, patch: str) -> list[dict[str, Any]]:
    directory = lab.store / "links" / patch
    return [tomllib.loads(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.toml"))]


def _one_line_error(result: Any, code: int) -> None:
    assert result.code == code, result
    assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
    assert "internal error" not in result.err, result.err


def _strict_json(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


# --- TOML writer / reader ----------------------------------------------------------------------------------------

HOSTILE = [
    'quote " and \\ backslash \\" \\\\',
    "newline\nCR\r tab\t nul\x00 bell\x07 esc\x1b del\x7f unit-sep\x1f",
    "unicode é ß 中文 😀 \u2028 \u2029 \ufeff zero\u200bwidth",
    "'''triple single''' and \"\"\"triple double\"\"\" and [table] = x # not a comment",
    "\\u0041 looks like an escape, \\n too",
    "x" * 200_000,
]


@pytest.mark.parametrize("text", HOSTILE, ids=["quotes", "controls", "unicode", "toml-syntax", "fake-escapes", "long"])
def test_hostile_lesson_and_gate_detail_round_trip_byte_exactly(ev: Lab, text: str) -> None:
    _link(ev, "replay-fix", "results/probe.log", "--lesson", text, "--gate", f"json=fail:{text}")
    (record,) = _records(ev, "replay-fix")
    assert record["verdict"]["lesson"] == text
    assert record["gate"][0]["detail"] == text
    (link,) = _show(ev, "replay-fix")["links"]
    assert link["verdict"]["lesson"] == text and link["gates"][0]["detail"] == text


def test_render_and_read_every_string_field_round_trip(tmp_path: Path) -> None:
    from stackmgr.evidence.metrics import Gate, Metric
    from stackmgr.evidence.records import Artifact, Link, StackEntry, read_link, render

    nasty = "".join(HOSTILE[:5])
    link = Link(
        id="lnk-0", created="2026-01-01T00:00:00.000001Z", author=nasty, patch="p", tree=nasty, sha256=nasty,
        patch_id=nasty, stack=[StackEntry(nasty, nasty, [(nasty, nasty)], nasty, True)],
        artifacts=[Artifact("/abs/" + nasty.replace("..", ""), nasty, 0, nasty)],
        metrics=[Metric(nasty.replace("..", ""), -0.0, nasty, "lower", {"artifact": nasty, "regex": nasty})],
        gates=[Gate(nasty, "pass", nasty)], verdict="rejected", lesson=nasty, do_not_revive=True,
        amends=nasty, baseline=nasty,
    )  # fmt: skip
    (tmp_path / "p").mkdir()
    path = tmp_path / "p" / "x.toml"
    path.write_bytes(render(link))
    back = read_link(str(path))
    back.file = ""
    assert back == link
    assert math.copysign(1.0, back.metrics[0].value) == -1.0


@pytest.mark.parametrize(
    ("spec", "value", "unit", "direction"),
    [
        ("x=1e-9", 1e-9, "", "higher"),
        ("x=-0", -0.0, "", "higher"),
        ("x=+.5", 0.5, "", "higher"),
        ("output_throughput=107.77 tok/s", 107.77, "tok/s", "higher"),
        ("output_throughput=107.77tok/s", 107.77, "tok/s", "higher"),
        ("acc=99.5%", 99.5, "%", "higher"),
        ("lat=12ms", 12.0, "ms", "lower"),
        ("x=123456789012345678901234567890", 1.2345678901234568e29, "", "higher"),
        ("x=5e-324", 5e-324, "", "higher"),
        ("power=310W@lower", 310.0, "W", "lower"),
    ],
)
def test_metric_values_and_units_round_trip(ev: Lab, spec: str, value: float, unit: str, direction: str) -> None:
    _link(ev, "replay-fix", "results/probe.log", "--metric", spec)
    (record,) = _records(ev, "replay-fix")
    (metric,) = record["metric"]
    assert metric["value"] == value and math.copysign(1.0, metric["value"]) == math.copysign(1.0, value)
    assert metric.get("unit", "") == unit and metric["direction"] == direction
    (shown,) = _show(ev, "replay-fix")["links"][0]["metrics"]
    assert (shown["value"], shown["unit"]) == (value, unit)


def test_show_json_has_exactly_the_spec_keys(ev: Lab) -> None:
    _link(ev, "replay-fix", "results/probe.log", "--metric", "x=1tok/s", "--gate", "g=pass", "--lesson", "l")
    doc = _show(ev, "replay-fix")
    assert {"name", "tree", "sha256", "status"} <= set(doc["patch"])
    (link,) = doc["links"]
    assert {"id", "state", "metrics", "gates", "verdict", "artifacts"} <= set(link)
    assert {"name", "value", "unit"} <= set(link["metrics"][0])
    assert {"name", "status"} <= set(link["gates"][0])
    assert {"status", "lesson"} <= set(link["verdict"])
    assert {"path", "sha256", "ok"} <= set(link["artifacts"][0])
    assert doc["patch"]["name"] == "replay-fix" and doc["patch"]["tree"] == "vllm" and len(doc["patch"]["sha256"]) == 64


# --- bad input: exit codes and one line ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("--metric", "=5"), 2),
        (("--metric", "x="), 2),
        (("--metric", "x"), 2),
        (("--metric", "x=inf"), 2),
        (("--metric", "x=/[/"), 2),
        (("--metric", "x=/no group/"), 2),
        (("--gate", "=pass"), 2),
        (("--gate", "g=PASS"), 2),
        (("--verdict", "great"), 2),
        (("--baseline", "lnk-deadbeef0000"), 2),
        (("--from-json", "results/nope.json"), 2),
    ],
)
def test_bad_link_options_are_one_line_with_the_right_code(ev: Lab, args: tuple[str, ...], code: int) -> None:
    _one_line_error(ev.sm("link", "replay-fix", "results/probe.log", *args), code)
    assert not list((ev.store / "links").rglob("*.toml"))


@pytest.mark.parametrize(
    "content",
    [b"[1, 2]", b'"inf"', b"null", b"42", b"", b"\xff\xfe{}", b'{"output_throughput": "inf", "ok": true}',
     b'{"output_throughput": true, "mean_ttft_ms": false}', b'{"nested": {"output_throughput": 1.0}}'],
    ids=["list", "string", "null", "number", "empty", "not-utf8", "string-value", "booleans", "nested"],
)  # fmt: skip
def test_from_json_that_is_not_a_bench_result_is_refused_in_one_line(ev: Lab, content: bytes) -> None:
    (ev.store / "results" / "odd.json").write_bytes(content)
    _one_line_error(ev.sm("link", "replay-fix", "--from-json", "results/odd.json"), 3)
    assert not list((ev.store / "links").rglob("*.toml"))


# --- regex metrics ---------------------------------------------------------------------------------------------


def test_regex_with_two_groups_takes_the_unit_from_the_second(ev: Lab) -> None:
    # The contract is group 1 = number, group 2 = unit: a unit in group 1 is refused in one line.
    wrong = ev.sm("link", "replay-fix", "results/probe.log", "--metric", r"t=/throughput \((\S+)\): ([0-9.]+)/")
    _one_line_error(wrong, 3)
    (ev.store / "results" / "u.log").write_text("tput 107.77 tok/s\n")
    _link(ev, "replay-probe", "results/u.log", "--metric", r"t=/tput ([0-9.]+) (\S+)/")
    (metric,) = _records(ev, "replay-probe")[0]["metric"]
    assert (metric["value"], metric["unit"]) == (107.77, "tok/s")


def test_regex_metric_from_a_non_utf8_artifact_and_verify(ev: Lab) -> None:
    (ev.store / "results" / "bin.log").write_bytes(b"\xff\xfe garbage \x80\nthroughput: 55.5 tok/s\n\xc3(")
    _link(ev, "replay-fix", "results/bin.log", "--metric", r"t=/throughput: ([0-9.]+)/")
    (metric,) = _records(ev, "replay-fix")[0]["metric"]
    assert metric["value"] == 55.5
    assert ev.sm("verify").code == 0


def test_json_pointer_escapes_are_decoded_in_rfc6901_order() -> None:
    from stackmgr.evidence.metrics import Metric, rederive

    doc = json.dumps({"a/b": {"c~d": 5, "~1": 7}}).encode()
    assert rederive(Metric("m", 0, source={"artifact": "x", "pointer": "/a~1b/c~0d"}), doc) == 5.0
    assert rederive(Metric("m", 0, source={"artifact": "x", "pointer": "/a~1b/~01"}), doc) == 7.0
    assert rederive(Metric("m", 0, source={"artifact": "x", "pointer": "/missing"}), doc) is None
    assert rederive(Metric("m", 0, source={"artifact": "x", "pointer": "/a~1b"}), doc) is None


# --- verify, links, states -------------------------------------------------------------------------------------


def test_verify_with_a_moved_artifact_reports_it_missing_once(ev: Lab) -> None:
    lid = _link(ev, "replay-fix", "--from-json", "results/bench.json")
    os.rename(ev.store / "results" / "bench.json", ev.store / "results" / "moved.json")
    result = ev.sm("--json", "verify")
    assert result.code == 1
    problems = json.loads(result.out)["problems"]
    assert problems == [{"link": lid, "patch": "replay-fix", "what": "artifact results/bench.json is missing"}]
    assert _show(ev, "replay-fix")["links"][0]["state"] == "broken"


def test_links_sorted_by_a_metric_leave_out_links_without_it(ev: Lab) -> None:
    a = _link(ev, "replay-fix", "results/probe.log", "--metric", "tput=100tok/s")
    _link(ev, "gemm-tile", "results/probe.log", "--metric", "other=5")
    c = _link(ev, "replay-probe", "results/probe.log", "--metric", "tput=120tok/s")
    result = ev.sm("links", "--json", "--metric", "tput", "--sort", "metric")
    assert result.code == 0
    assert [row["id"] for row in json.loads(result.out)["links"]] == [c, a]
    assert ev.sm("links", "--metric", "tput", "--sort", "metric").code == 0


def test_states_when_the_patch_file_is_deleted_or_renamed(ev: Lab) -> None:
    fix = _link(ev, "replay-fix", "results/probe.log")
    probe = _link(ev, "replay-probe", "results/probe.log")
    # Renamed: the series now names the new file; the old name is in no series.
    os.rename(ev.store / "patches" / "replay-probe.patch", ev.store / "patches" / "probe-renamed.patch")
    (ev.store / "series" / "replay").write_text("replay-fix.patch\nprobe-renamed.patch\n")
    # Deleted while a series still names it: not fresh any more.
    os.remove(ev.store / "patches" / "replay-fix.patch")
    rows = {r["id"]: r["state"] for r in json.loads(ev.sm("links", "--json").out)["links"]}
    assert rows[probe] == "orphaned"
    assert rows[fix] not in ("fresh", "equivalent")


def test_a_broken_series_file_does_not_crash_links(ev: Lab) -> None:
    _link(ev, "replay-fix", "results/probe.log")
    (ev.store / "series" / "replay").write_text("  # indented comment\nreplay-fix.patch\n")
    result = ev.sm("links", "--json")
    assert result.code == 0, result.err


def test_amendments_of_amendments_use_the_last_record(ev: Lab) -> None:
    a = _link(ev, "replay-fix", "results/probe.log", "--verdict", "promoted")
    b = _link(ev, "replay-fix", "results/probe.log", "--amends", a, "--verdict", "rejected", "--lesson", "no")
    assert _show(ev, "replay-fix")["patch"]["status"] == "rejected"
    _link(ev, "replay-fix", "results/probe.log", "--amends", b, "--verdict", "promoted")
    doc = _show(ev, "replay-fix")
    assert doc["patch"]["status"] == "promoted" and len(doc["links"]) == 3


def test_a_baseline_of_another_patch_gives_deltas(ev: Lab) -> None:
    base = _link(ev, "gemm-tile", "results/probe.log", "--metric", "tput=100tok/s")
    _link(ev, "replay-fix", "results/probe.log", "--metric", "tput=110tok/s", "--baseline", base)
    (link,) = _show(ev, "replay-fix")["links"]
    assert link["baseline"] == base and link["metrics"][0]["delta"] == pytest.approx(10.0)
    assert "(+10.0%)" in ev.sm("show", "replay-fix").out


# --- writing: same microsecond, read-only store ----------------------------------------------------------------


def test_two_records_in_the_same_microsecond(ev: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    import stackmgr.evidence.states

    monkeypatch.setattr(stackmgr.evidence.states, "utc_now", lambda: "2026-06-13T10:00:00.000001Z")
    a = _link(ev, "replay-fix", "results/probe.log", "--lesson", "one")
    b = _link(ev, "replay-fix", "results/probe.log", "--lesson", "two")
    assert a != b and len(_records(ev, "replay-fix")) == 2
    # The very same record twice: refused in one line, the first one untouched.
    before = {p.name: p.read_bytes() for p in (ev.store / "links" / "replay-fix").iterdir()}
    _one_line_error(ev.sm("link", "replay-fix", "results/probe.log", "--lesson", "one"), 3)
    assert {p.name: p.read_bytes() for p in (ev.store / "links" / "replay-fix").iterdir()} == before


def test_a_read_only_links_directory_writes_nothing(ev: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    import stackmgr.store.fs

    _link(ev, "replay-fix", "results/probe.log")
    before = sorted(p.name for p in (ev.store / "links").rglob("*"))

    real_create, real_replace = stackmgr.store.fs._create_exclusive, os.replace

    def erofs_create(directory: str, prefix: str) -> tuple[int, str]:
        if prefix.endswith(".toml"):
            raise stackmgr.store.fs._write_error(directory, OSError(errno.EROFS, "Read-only file system"))
        return real_create(directory, prefix)

    monkeypatch.setattr(stackmgr.store.fs, "_create_exclusive", erofs_create)
    _one_line_error(ev.sm("link", "replay-fix", "results/probe.log", "--lesson", "x"), 3)
    assert sorted(p.name for p in (ev.store / "links").rglob("*")) == before
    monkeypatch.setattr(stackmgr.store.fs, "_create_exclusive", real_create)

    # The rename fails (the disk went read-only half-way): the temp file is removed, no record appears.
    def erofs_replace(src: Any, dst: Any) -> None:
        if str(dst).endswith(".toml"):
            raise OSError(errno.EROFS, "Read-only file system")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", erofs_replace)
    _one_line_error(ev.sm("link", "replay-fix", "results/probe.log", "--lesson", "y"), 3)
    assert sorted(p.name for p in (ev.store / "links").rglob("*")) == before


# --- bugs ------------------------------------------------------------------------------------------------------


def test_a_store_reached_through_a_symlink_writes_a_readable_record(ev: Lab, tmp_path: Path) -> None:
    """Regression (review): links.py/evidence.py: a store reached through a symlink records the artifact as '../../…'
    (relpath against the unresolved root), which read_link then refuses: every show/links/verify fails from then on.
    """
    alias = tmp_path / "store-alias"
    alias.symlink_to(ev.store)
    # cwd is the real store directory (as after `cd $(readlink -f …)`), --store is the alias.
    result = Lab(alias, ev.tree).sm("link", "replay-fix", "results/probe.log")
    assert result.code == 0, result.err
    assert ev.sm("links").code == 0, ev.sm("links").err


def test_an_infinite_metric_is_refused_or_shown_as_valid_json(ev: Lab) -> None:
    """Regression (review): metrics.py:parse_metric accepts 1e999 as inf; show --json then prints `Infinity`, which is
    not JSON (output.emit_json has allow_nan on).
    """
    result = ev.sm("link", "replay-fix", "results/probe.log", "--metric", "x=1e999")
    if result.code == 2:
        return
    _strict_json(ev.sm("show", "replay-fix", "--json").out)


def test_a_nan_metric_from_json_is_refused_or_verifies(ev: Lab) -> None:
    """Regression (review): metrics.py:from_vllm_json takes NaN from the JSON; show --json emits NaN (not JSON) and
    verify reports the metric as drifted forever (nan != nan).
    """
    (ev.store / "results" / "nan.json").write_text('{"output_throughput": NaN, "mean_ttft_ms": 4.0}')
    result = ev.sm("link", "replay-fix", "--from-json", "results/nan.json")
    if result.code == 3:
        return
    assert ev.sm("verify").code == 0
    _strict_json(ev.sm("show", "replay-fix", "--json").out)


def test_a_huge_integer_in_bench_json_is_one_clear_line(ev: Lab) -> None:
    """Regression (review): metrics.py:from_vllm_json float(huge int) raises OverflowError: 'internal error' instead of
    one clear line.
    """
    (ev.store / "results" / "huge.json").write_text('{"output_throughput": 1' + "0" * 400 + "}")
    _one_line_error(ev.sm("link", "replay-fix", "--from-json", "results/huge.json"), 3)


def test_a_regex_whose_group_did_not_participate(ev: Lab) -> None:
    """Regression (review): metrics.py:from_regex calls m.group(1).strip() when group 1 did not take part in the match
    (None): AttributeError, 'internal error'.
    """
    (ev.store / "results" / "n.log").write_text("tput=none\n")
    result = ev.sm("link", "replay-fix", "results/n.log", "--metric", r"t=/tput=(?:([0-9.]+)|none)/")
    _one_line_error(result, 3)


def test_verify_lists_a_metric_whose_log_now_holds_a_non_number(ev: Lab) -> None:
    """Regression (review): evidence.py:verify_all lets from_regex's StackmgrError escape: one changed log aborts
    verify with exit 3 and no listing, instead of exit 1 listing every problem.
    """
    lid = _link(ev, "replay-fix", "results/probe.log", "--metric", r"t=/throughput \(tok\/s\): (\S+)/")
    (ev.store / "results" / "probe.log").write_text("Output token throughput (tok/s): n/a\n")
    result = ev.sm("--json", "verify")
    assert result.code == 1, result.err
    assert lid in result.out


@pytest.mark.parametrize("spec", ["x=1,234", "x=107.77.5", "x=0x10", "x=1_000", "x=12 34"])
def test_junk_after_the_number_is_not_a_unit(ev: Lab, spec: str) -> None:
    """Regression (review): metrics.py:_NUMBER takes any trailing text as the unit: 1,234 is recorded as value 1 with
    unit ',234' instead of being refused.
    """
    _one_line_error(ev.sm("link", "replay-fix", "results/probe.log", "--metric", spec), 2)


@pytest.mark.parametrize("spec", ["tput=5samples/s", "tput=5 steps/s", "tput=5 seq/s", "x=3 sps"])
def test_per_second_units_are_higher_is_better(ev: Lab, spec: str) -> None:
    """Regression (review): metrics.py:direction_for matches ' s' anywhere in 'NAME UNIT': any unit starting with s
    (samples/s, steps/s, seq/s) becomes lower-is-better.
    """
    _link(ev, "replay-fix", "results/probe.log", "--metric", spec)
    assert _records(ev, "replay-fix")[0]["metric"][0]["direction"] == "higher"


def test_show_do_not_revive_follows_amendments(ev: Lab) -> None:
    """Regression (review): cli_links.py:show_cmd computes do_not_revive over all links, ignoring amendments;
    lessons_against (the guard) uses effective(): show and the guard disagree.
    """
    bad = _link(ev, "gemm-tile", "results/probe.log", "--verdict", "rejected", "--do-not-revive", "--lesson", "x")
    _link(ev, "gemm-tile", "results/probe.log", "--amends", bad, "--verdict", "experimental")
    assert ev.sm("series", "remove", "kernels", "gemm-tile").code == 0
    assert ev.sm("series", "add", "kernels", "gemm-tile").code == 0, "the guard says the lane may come back"
    assert _show(ev, "gemm-tile")["patch"]["do_not_revive"] is False


def test_amends_must_name_a_link_of_the_same_patch(ev: Lab) -> None:
    """Regression (review): evidence.py:create_link accepts --amends of another patch's link; that silently lifts the
    other patch's do-not-revive guard while its show still lists it.
    """
    bad = _link(ev, "gemm-tile", "results/probe.log", "--verdict", "rejected", "--do-not-revive", "--lesson", "x")
    _one_line_error(ev.sm("link", "replay-fix", "results/probe.log", "--amends", bad), 2)


def test_one_corrupt_record_does_not_hide_another_patchs_evidence(ev: Lab) -> None:
    """Regression (review): cli_links.py:show_cmd loads every record of every patch (for baselines): one unreadable
    record under another patch makes `show` of any patch fail.
    """
    _link(ev, "gemm-tile", "results/probe.log")
    (ev.store / "links" / "replay-fix").mkdir()
    (ev.store / "links" / "replay-fix" / "20260101T000000Z-lnk-bad.toml").write_text("not = [toml\n")
    assert ev.sm("show", "gemm-tile").code == 0


def test_a_non_utf8_artifact_name_is_linked_or_refused_clearly(ev: Lab) -> None:
    """Regression (review): links.py:render encodes str paths with surrogates (non-UTF-8 file names) as UTF-8:
    UnicodeEncodeError, 'internal error'.
    """
    raw = os.fsencode(str(ev.store / "results")) + b"/r\xff.log"
    with open(raw, "wb") as f:
        f.write(b"x\n")
    result = ev.sm("link", "replay-fix", os.fsdecode(raw))
    if result.code == 0:
        assert ev.sm("links").code == 0
    else:
        _one_line_error(result, 2)


def test_a_read_only_links_root_is_one_clear_line(ev: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (review): links.py:write_link: os.makedirs of links/<patch> is outside the OSError mapping: a read-
    only links/ gives 'internal error: PermissionError'.
    """
    real = os.makedirs
    links_root = str(ev.store / "links")

    def makedirs(path: str, *args: Any, **kwargs: Any) -> None:
        if str(path).startswith(links_root):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        real(path, *args, **kwargs)

    monkeypatch.setattr(os, "makedirs", makedirs)
    _one_line_error(ev.sm("link", "replay-fix", "results/probe.log"), 3)


def test_a_metric_named_twice_is_refused(ev: Lab) -> None:
    """Regression (review): evidence.py:_metrics keeps duplicate metric names; baseline deltas and `links --metric`
    then pick one arbitrarily.
    """
    result = ev.sm("link", "replay-fix", "results/bench.json", "--from-json", "results/bench.json",
                   "--metric", "output_throughput=1tok/s")  # fmt: skip
    _one_line_error(result, 2)


def test_links_with_an_unknown_verdict_is_a_usage_error(ev: Lab) -> None:
    """Regression (review): cli_links.py:links_cmd --verdict is a free string (link's is a Choice): a typo silently
    lists nothing instead of a usage error.
    """
    _link(ev, "replay-fix", "results/probe.log", "--verdict", "rejected")
    _one_line_error(ev.sm("links", "--verdict", "reject"), 2)


def test_a_broken_series_file_is_not_silently_orphaning(ev: Lab) -> None:
    """Regression (review): evidence.py:Evidence.gather skips a series file it cannot parse: every link of its patches
    silently turns 'orphaned' (and shows under --stale) with no warning.
    """
    _link(ev, "replay-fix", "results/probe.log")
    (ev.store / "series" / "replay").write_text("  # indented comment\nreplay-fix.patch\n")
    result = ev.sm("links", "--json")
    state = json.loads(result.out)["links"][0]["state"]
    assert state != "orphaned" or "series/replay" in result.err
