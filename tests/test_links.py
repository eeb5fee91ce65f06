"""Evidence: link records, their states computed on read, show/links/verify, and do-not-revive lanes."""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from stackmgr.store import fs
from tests.conftest import VLLM_JSON, Lab, link_records, one_line_error, stackmgr_process
from tests.conftest import link_id as _link
from tests.conftest import show_json as _show


def test_a_link_records_identity_stack_artifacts_metrics_gates_and_verdict(evidence_lab: Lab) -> None:
    lab = evidence_lab
    lid = _link(lab, "replay-fix", "results/probe.log", "--from-json", "results/bench.json",
                "--metric", "tput=/throughput \\(tok\\/s\\): ([0-9.]+)/", "--metric", "power=310W",
                "--gate", "json=fail:3/8", "--gate", "color=pass", "--verdict", "experimental")  # fmt: skip
    (record_file,) = (lab.store / "links" / "replay-fix").iterdir()
    assert record_file.name.endswith(f"-{lid}.toml")
    record = tomllib.loads(record_file.read_text())
    patch_bytes = (lab.store / "patches" / "replay-fix.patch").read_bytes()
    import hashlib

    assert record["patch"]["sha256"] == hashlib.sha256(patch_bytes).hexdigest()
    assert len(record["patch"]["patch_id"]) == 40 and record["patch"]["tree"] == "vllm"
    (vllm_stack,) = [s for s in record["stack"] if s["tree"] == "vllm"]
    assert vllm_stack["series"] == "replay" and vllm_stack["residue"] is False
    assert [p["name"] for p in vllm_stack["patches"]] == ["replay-fix", "replay-probe"]
    assert {a["path"] for a in record["artifact"]} == {"results/probe.log", "results/bench.json"}
    metrics = {m["name"]: m for m in record["metric"]}
    assert metrics["output_throughput"]["value"] == 107.77 and metrics["output_throughput"]["unit"] == "tok/s"
    assert metrics["output_throughput"]["source"] == {"artifact": "results/bench.json", "pointer": "/output_throughput"}
    assert metrics["p99_tpot_ms"]["direction"] == "lower" and metrics["spec_decode_acceptance_length"]["value"] == 2.71
    assert metrics["tput"]["value"] == 107.77 and "regex" in metrics["tput"]["source"]
    assert metrics["power"] == {"name": "power", "value": 310.0, "unit": "W"}  # which way is better: unknown
    assert record["gate"] == [{"name": "json", "status": "fail", "detail": "3/8"}, {"name": "color", "status": "pass"}]
    shown = _show(lab, "replay-fix")
    assert shown["patch"]["status"] == "experimental"  # type: ignore[index]
    (link,) = shown["links"]  # type: ignore[misc]
    assert link["id"] == lid and link["state"] == "fresh"
    first = next(m for m in link["metrics"] if m["name"] == "output_throughput")
    assert (first["value"], first["unit"], first["direction"]) == (107.77, "tok/s", "higher")
    assert all(a["ok"] for a in link["artifacts"])


def test_states_fresh_equivalent_stale_broken_orphaned(evidence_lab: Lab) -> None:
    lab = evidence_lab
    fresh = _link(lab, "gemm-tile", "results/probe.log", "--verdict", "promoted")
    probe = _link(lab, "replay-probe", "results/bench.json")
    assert _show(lab, "gemm-tile")["patch"]["status"] == "promoted"  # type: ignore[index]

    # Re-saving an unchanged state leaves the bytes, and the link, as they were.
    assert lab.sm("save", "replay-probe", "-t", "vllm", "--series", "replay", "-m", "probe").code == 0
    assert _show(lab, "replay-probe")["links"][0]["state"] == "fresh"  # type: ignore[index]
    # A new description changes the bytes, not the change: equivalent.
    assert lab.sm("save", "replay-probe", "-t", "vllm", "--series", "replay", "--update", "-m", "probe v2").code == 0
    assert _show(lab, "replay-probe")["links"][0]["state"] == "equivalent"  # type: ignore[index]
    # A different change: stale.
    (lab.tree / "README").write_text("probe, with a fix\n")
    assert lab.sm("save", "replay-probe", "-t", "vllm", "--series", "replay", "--update", "-m", "probe v3").code == 0
    links = {row["id"]: row["state"] for row in json.loads(lab.sm("links", "--json").out)["links"]}
    assert links == {fresh: "stale", probe: "stale"}  # the kernel result measured vllm with the old probe too
    # An artifact changed by one byte: broken; and verify says so, naming it.
    (lab.store / "results" / "probe.log").write_text(
        "step 1\nOutput token throughput (tok/s): 107.78\nJSON gate: 3/8\n"
    )
    assert _show(lab, "gemm-tile")["links"][0]["state"] == "broken"  # type: ignore[index]
    verify = lab.sm("verify")
    assert verify.code == 1 and f"{fresh} (gemm-tile): artifact results/probe.log changed" in verify.out
    assert _show(lab, "gemm-tile")["patch"]["status"] == "experimental", "a promotion needs fresh evidence"  # type: ignore[index]
    # Out of every series: orphaned, and the record is still there to read.
    assert lab.sm("series", "remove", "replay", "replay-probe").code == 0
    assert _show(lab, "replay-probe")["links"][0]["state"] == "orphaned"  # type: ignore[index]


def test_verify_rederives_metrics(evidence_lab: Lab) -> None:
    lab = evidence_lab
    _link(lab, "replay-fix", "--from-json", "results/bench.json")
    assert lab.sm("verify").code == 0
    changed = dict(VLLM_JSON, output_throughput=99.0)
    (lab.store / "results" / "bench.json").write_text(json.dumps(changed))
    result = lab.sm("--json", "verify")
    assert result.code == 1
    problems = [p["what"] for p in json.loads(result.out)["problems"]]
    assert "metric output_throughput is 99 in results/bench.json, recorded 107.77" in problems


def test_verify_rereads_artifacts_instead_of_trusting_the_hash_cache(evidence_lab: Lab) -> None:
    """The stat-keyed hash cache speeds up `links` and `show`; `verify` is what checks it, so it re-reads."""
    import marshal

    lab = evidence_lab
    _link(lab, "replay-fix", "results/bench.json")
    assert _show(lab, "replay-fix")["links"][0]["state"] == "fresh"  # type: ignore[index]
    cache = lab.store / ".stackmgr" / "cache" / "artifacts.marshal"
    entries = marshal.loads(cache.read_bytes())
    entries = {path: [*sig[:4], "0" * 64] for path, sig in entries.items()}  # a cache that lies
    cache.write_bytes(marshal.dumps(entries))
    assert _show(lab, "replay-fix")["links"][0]["state"] == "broken"  # type: ignore[index]
    assert lab.sm("verify").code == 0  # the files are fine
    assert _show(lab, "replay-fix")["links"][0]["state"] == "fresh"  # type: ignore[index]


def test_links_filters_and_sorting(evidence_lab: Lab) -> None:
    lab = evidence_lab
    a = _link(lab, "replay-fix", "results/probe.log", "--metric", "output_throughput=100tok/s")
    b = _link(lab, "gemm-tile", "results/probe.log", "--metric", "output_throughput=120tok/s", "--verdict", "rejected")
    c = _link(lab, "replay-probe", "results/bench.json")

    def ids(*args: str) -> list[str]:
        return [row["id"] for row in json.loads(lab.sm("links", "--json", *args).out)["links"]]

    assert ids() == [a, b, c]
    assert ids("--tree", "vllm-xpu-kernels") == [b]
    assert ids("--series", "replay") == [a, c]
    assert ids("--verdict", "rejected") == [b]
    assert ids("--metric", "output_throughput", "--sort", "metric") == [b, a]
    assert ids("--stale") == []
    human = lab.sm("links")
    assert human.code == 0 and "gemm-tile" in human.out and "rejected" in human.out


def test_baseline_deltas_and_amendments(evidence_lab: Lab) -> None:
    lab = evidence_lab
    base = _link(lab, "replay-fix", "results/probe.log", "--metric", "output_throughput=98.4tok/s")
    new = _link(lab, "replay-fix", "results/probe.log", "--metric", "output_throughput=107.77tok/s",
                "--baseline", base, "--verdict", "promoted")  # fmt: skip
    links = {row["id"]: row for row in _show(lab, "replay-fix")["links"]}  # type: ignore[attr-defined]
    assert links[new]["metrics"][0]["delta"] == pytest.approx(9.37)
    assert "(+9.5%)" in lab.sm("show", "replay-fix").out
    assert _show(lab, "replay-fix")["patch"]["status"] == "promoted"  # type: ignore[index]
    _link(lab, "replay-fix", "results/probe.log", "--amends", new, "--verdict", "rejected", "--lesson", "regressed")
    assert _show(lab, "replay-fix")["patch"]["status"] == "rejected"  # type: ignore[index]
    assert len(list((lab.store / "links" / "replay-fix").iterdir())) == 3, "records are never rewritten"


def test_a_do_not_revive_lane_stops_series_add_and_apply_unless_overridden(evidence_lab: Lab) -> None:
    lab = evidence_lab
    _link(lab, "gemm-tile", "results/probe.log", "--verdict", "rejected", "--do-not-revive",
          "--lesson", "tile 128 breaks the color gate; keep fp32 accumulation first")  # fmt: skip
    assert lab.sm("series", "remove", "kernels", "gemm-tile").code == 0
    refused = lab.sm("series", "add", "kernels", "gemm-tile")
    assert refused.code == 1 and "do-not-revive" in refused.err and "keep fp32 accumulation" in refused.err
    assert (lab.store / "series" / "kernels").read_text() == ""
    # The same change under another name is the same lane (same patch-id).
    (lab.store / "patches" / "gemm-tile-again.patch").write_bytes(
        (lab.store / "patches" / "gemm-tile.patch")
        .read_bytes()
        .replace(b"Subject: [PATCH] tile", b"Subject: [PATCH] t2")
    )
    assert lab.sm("series", "add", "kernels", "gemm-tile-again").code == 1
    ok = lab.sm("series", "add", "kernels", "gemm-tile", "--override", "new epilogue keeps fp32")
    assert ok.code == 0 and "WARNING: reviving do-not-revive lane gemm-tile" in ok.err
    assert lab.sm("reset", "vllm-xpu-kernels").code == 0
    applied = lab.sm("apply", "kernels", "--override", "measured again after the epilogue fix")
    assert applied.code == 0 and "WARNING" in applied.err
    held = lab.sm("apply", "kernels")  # the tree holds it already: nothing is brought back, nothing to say
    assert held.code == 0 and "working tree already there" in held.out and held.err == ""
    assert lab.sm("reset", "vllm-xpu-kernels").code == 0
    again = lab.sm("apply", "kernels")  # the overrides are recorded: no need to repeat one
    assert again.code == 0 and "override recorded for it: \"measured again after the epilogue fix\"" in again.err


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("link", "nope", "results/probe.log"), 2, "no patch named nope"),
        (("link", "replay-fix", "results/missing.log"), 2, "does not exist"),
        (("link", "replay-fix", "results"), 2, "is a directory"),
        (("link", "replay-fix", "results/../results/probe.log"), 2, "'..'"),
        (("link", "replay-fix", "results/probe.log", "--metric", "x=fast"), 2, "not a number"),
        (("link", "replay-fix", "results/probe.log", "--metric", "x=/nomatch ([0-9]+)/"), 3, "matches no artifact"),
        (("link", "replay-fix", "results/probe.log", "--gate", "json=maybe"), 2, "pass|fail|not-run|error"),
        (("link", "replay-fix", "results/probe.log", "--amends", "lnk-000000000000"), 2, "no such link"),
        (("link", "replay-fix", "--from-json", "results/probe.log"), 3, "not JSON"),
        (("show", "nope"), 2, "no patch named nope"),
    ],
)
def test_bad_link_input_is_one_line_and_writes_nothing(
    evidence_lab: Lab, args: tuple[str, ...], code: int, says: str
) -> None:
    result = evidence_lab.sm(*args)
    assert result.code == code, result
    assert says in result.err and result.err.count("\n") == 1 and "Traceback" not in result.err
    assert not (evidence_lab.store / "links").exists() or not any((evidence_lab.store / "links").rglob("*.toml"))


def test_a_fifo_is_not_evidence(evidence_lab: Lab) -> None:
    import os

    os.mkfifo(evidence_lab.store / "results" / "pipe")
    result = evidence_lab.sm("link", "replay-fix", str(evidence_lab.store / "results" / "pipe"))
    assert result.code == 2 and "not a regular file" in result.err


@pytest.mark.regression("artifacts outside the store were recorded by absolute path: 'missing' on every other clone")
def test_an_artifact_outside_the_store_travels_as_a_content_addressed_copy(evidence_lab: Lab, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.log"
    outside.write_text("x\n")
    _link(evidence_lab, "replay-fix", str(outside))
    (record,) = (evidence_lab.store / "links" / "replay-fix").iterdir()
    artifact = tomllib.loads(record.read_text())["artifact"][0]
    digest = hashlib.sha256(b"x\n").hexdigest()
    assert artifact["path"] == f"artifacts/sha256/{digest[:2]}/{digest[2:]}" and artifact["origin"] == str(outside)
    assert (evidence_lab.store / artifact["path"]).read_bytes() == b"x\n"
    outside.unlink()  # the original gone (as on a teammate's machine): the copy is the evidence
    assert evidence_lab.sm("verify").code == 0
    (evidence_lab.store / artifact["path"]).write_bytes(b"y\n")  # the copy damaged: verify says so
    verify = evidence_lab.sm("verify")
    assert verify.code != 0 and artifact["path"] in verify.out + verify.err


def test_a_hostile_link_record_is_refused_on_read(evidence_lab: Lab) -> None:
    lab = evidence_lab
    _link(lab, "replay-fix", "results/probe.log")
    (record,) = (lab.store / "links" / "replay-fix").iterdir()
    text = record.read_text()
    record.write_text(text.replace('path = "results/probe.log"', 'path = "results/../../../etc/passwd"'))
    result = lab.sm("links")
    assert result.code == 3 and "climbs with '..'" in result.err and result.err.count("\n") == 1
    record.write_text(text.replace('name = "replay-fix"', 'name = "../../x"'))
    assert "invalid patch name" in lab.sm("show", "replay-fix").err


def test_sorting_by_metric_needs_a_metric(evidence_lab: Lab) -> None:
    result = evidence_lab.sm("links", "--sort", "metric")
    assert result.code == 2 and "--sort metric needs --metric NAME" in result.err


# --- link records: written once, read back exactly --------------------------------------------------------------------


HOSTILE = [
    'quote " and \\ backslash \\" \\\\',
    "newline\nCR\r tab\t nul\x00 bell\x07 esc\x1b del\x7f unit-sep\x1f",
    "unicode é ß 中文 😀 \u2028 \u2029 \ufeff zero\u200bwidth",
    "'''triple single''' and \"\"\"triple double\"\"\" and [table] = x # not a comment",
    "\\u0041 looks like an escape, \\n too",
    "x" * 200_000,
]


@pytest.mark.regression("edge case: hostile lesson and gate text")
@pytest.mark.parametrize("text", HOSTILE, ids=["quotes", "controls", "unicode", "toml-syntax", "fake-escapes", "long"])
def test_hostile_lesson_and_gate_detail_round_trip_byte_exactly(ev: Lab, text: str) -> None:
    _link(ev, "replay-fix", "results/probe.log", "--lesson", text, "--gate", f"json=fail:{text}")
    (record,) = link_records(ev, "replay-fix")
    assert record["verdict"]["lesson"] == text
    assert record["gate"][0]["detail"] == text
    (link,) = _show(ev, "replay-fix")["links"]
    assert link["verdict"]["lesson"] == text and link["gates"][0]["detail"] == text


@pytest.mark.regression("edge case: every string field through render and read")
def test_render_and_read_round_trip_every_string_field(tmp_path: Path) -> None:
    from stackmgr.evidence.metrics import Gate, Metric
    from stackmgr.evidence.records import Artifact, Link, StackEntry, read_link, render

    nasty = "".join(HOSTILE[:5])
    link = Link(
        id="lnk-0", created="2026-01-01T00:00:00.000001Z", author=nasty, patch="p", tree=nasty, sha256=nasty,
        patch_id=nasty, stack=[StackEntry(nasty, nasty, [(nasty, nasty)], "replay", True)],
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


@pytest.mark.regression("edge case: the keys of show --json")
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


@pytest.mark.regression("edge case: two records in the same microsecond")
def test_two_records_in_the_same_microsecond_are_both_kept(ev: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    import stackmgr.evidence.linking

    monkeypatch.setattr(stackmgr.evidence.linking, "utc_now", lambda: "2026-06-13T10:00:00.000001Z")
    a = _link(ev, "replay-fix", "results/probe.log", "--lesson", "one")
    b = _link(ev, "replay-fix", "results/probe.log", "--lesson", "two")
    assert a != b and len(link_records(ev, "replay-fix")) == 2
    # The very same record twice: refused in one line, the first one untouched.
    before = {p.name: p.read_bytes() for p in (ev.store / "links" / "replay-fix").iterdir()}
    one_line_error(ev.sm("link", "replay-fix", "results/probe.log", "--lesson", "one"), 3)
    assert {p.name: p.read_bytes() for p in (ev.store / "links" / "replay-fix").iterdir()} == before


@pytest.mark.regression("edge case: a links directory that turns read-only")
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
    one_line_error(ev.sm("link", "replay-fix", "results/probe.log", "--lesson", "x"), 3)
    assert sorted(p.name for p in (ev.store / "links").rglob("*")) == before
    monkeypatch.setattr(stackmgr.store.fs, "_create_exclusive", real_create)

    # The rename fails (the disk went read-only half-way): the temp file is removed, no record appears.
    def erofs_replace(src: Any, dst: Any) -> None:
        if str(dst).endswith(".toml"):
            raise OSError(errno.EROFS, "Read-only file system")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", erofs_replace)
    one_line_error(ev.sm("link", "replay-fix", "results/probe.log", "--lesson", "y"), 3)
    assert sorted(p.name for p in (ev.store / "links").rglob("*")) == before


@pytest.mark.regression("os.makedirs of links/<patch> escaped the OSError mapping")
def test_a_read_only_links_root_is_one_clear_line(ev: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """records.write_link: os.makedirs of links/<patch> is outside the OSError mapping: a read- only links/ gives
    'internal error: PermissionError'."""
    real = os.makedirs
    links_root = str(ev.store / "links")

    def makedirs(path: str, *args: Any, **kwargs: Any) -> None:
        if str(path).startswith(links_root):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        real(path, *args, **kwargs)

    monkeypatch.setattr(os, "makedirs", makedirs)
    one_line_error(ev.sm("link", "replay-fix", "results/probe.log"), 3)


@pytest.mark.regression("a store reached through a symlink recorded artifacts as '../../…'")
def test_a_store_reached_through_a_symlink_writes_a_readable_record(ev: Lab, tmp_path: Path) -> None:
    """evidence/records.py and states.py: a store reached through a symlink records the artifact as '../../…'
    (relpath against the unresolved root), which read_link then refuses: every show/links/verify fails from then
    on."""
    alias = tmp_path / "store-alias"
    alias.symlink_to(ev.store)
    # cwd is the real store directory (as after `cd $(readlink -f …)`), --store is the alias.
    result = Lab(alias, ev.tree).sm("link", "replay-fix", "results/probe.log")
    assert result.code == 0, result.err
    assert ev.sm("links").code == 0, ev.sm("links").err


@pytest.mark.regression("a non-UTF-8 artifact name raised UnicodeEncodeError")
def test_a_non_utf8_artifact_name_is_linked_or_refused_clearly(ev: Lab) -> None:
    """records.render encodes str paths with surrogates (non-UTF-8 file names) as UTF-8: UnicodeEncodeError, 'internal
    error'."""
    raw = os.fsencode(str(ev.store / "results")) + b"/r\xff.log"
    with open(raw, "wb") as f:
        f.write(b"x\n")
    result = ev.sm("link", "replay-fix", os.fsdecode(raw))
    if result.code == 0:
        assert ev.sm("links").code == 0
    else:
        one_line_error(result, 2)


@pytest.mark.regression("one corrupt record made show of every patch fail")
def test_one_corrupt_record_does_not_hide_another_patchs_evidence(ev: Lab) -> None:
    """`show` (cli/links.py, commands/links.py) loaded every record of every patch (for baselines): one unreadable
    record under another patch makes `show` of any patch fail."""
    _link(ev, "gemm-tile", "results/probe.log")
    (ev.store / "links" / "replay-fix").mkdir()
    (ev.store / "links" / "replay-fix" / "20260101T000000Z-lnk-bad.toml").write_text("not = [toml\n")
    assert ev.sm("show", "gemm-tile").code == 0


# --- bad link input ---------------------------------------------------------------------------------------------------


@pytest.mark.regression("edge case: bad link options")
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
    one_line_error(ev.sm("link", "replay-fix", "results/probe.log", *args), code)
    assert not list((ev.store / "links").rglob("*.toml"))


@pytest.mark.regression("--amends of another patch's link lifted that patch's guard")
def test_amends_must_name_a_link_of_the_same_patch(ev: Lab) -> None:
    """states.create_link accepts --amends of another patch's link; that silently lifts the other patch's
    do-not-revive guard while its show still lists it."""
    bad = _link(ev, "gemm-tile", "results/probe.log", "--verdict", "rejected", "--do-not-revive", "--lesson", "x")
    one_line_error(ev.sm("link", "replay-fix", "results/probe.log", "--amends", bad), 2)


@pytest.mark.regression("links --verdict took any string and listed nothing")
def test_links_with_an_unknown_verdict_is_a_usage_error(ev: Lab) -> None:
    """`links --verdict` is a free string (link's is a Choice): a typo silently lists nothing instead of
    a usage error."""
    _link(ev, "replay-fix", "results/probe.log", "--verdict", "rejected")
    one_line_error(ev.sm("links", "--verdict", "reject"), 2)


# --- states, amendments, baselines ------------------------------------------------------------------------------------


@pytest.mark.regression("edge case: verify after an artifact moved")
def test_verify_with_a_moved_artifact_reports_it_missing_once(ev: Lab) -> None:
    lid = _link(ev, "replay-fix", "--from-json", "results/bench.json")
    os.rename(ev.store / "results" / "bench.json", ev.store / "results" / "moved.json")
    result = ev.sm("--json", "verify")
    assert result.code == 1
    problems = json.loads(result.out)["problems"]
    assert problems == [{"link": lid, "patch": "replay-fix", "what": "artifact results/bench.json is missing"}]
    assert _show(ev, "replay-fix")["links"][0]["state"] == "broken"


@pytest.mark.regression("edge case: links --sort metric")
def test_links_sorted_by_a_metric_leave_out_links_without_it(ev: Lab) -> None:
    a = _link(ev, "replay-fix", "results/probe.log", "--metric", "tput=100tok/s")
    _link(ev, "gemm-tile", "results/probe.log", "--metric", "other=5")
    c = _link(ev, "replay-probe", "results/probe.log", "--metric", "tput=120tok/s")
    result = ev.sm("links", "--json", "--metric", "tput", "--sort", "metric")
    assert result.code == 0
    assert [row["id"] for row in json.loads(result.out)["links"]] == [c, a]
    assert ev.sm("links", "--metric", "tput", "--sort", "metric").code == 0


@pytest.mark.regression("edge case: the states of a deleted or renamed patch")
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


@pytest.mark.regression("edge case: links with a series file it cannot parse")
def test_a_broken_series_file_is_refused_by_links_in_one_line(ev: Lab) -> None:
    """Which series list a patch is one rule (store/series.py): a series that cannot be read is refused by every
    command that asks, in one line naming it, never a crash and never skipped."""
    _link(ev, "replay-fix", "results/probe.log")
    (ev.store / "series" / "replay").write_text("  # indented comment\nreplay-fix.patch\n")
    result = ev.sm("links", "--json")
    one_line_error(result, 3)
    assert "series/replay" in result.err, result.err


@pytest.mark.regression("an unparsable series file silently orphaned its links")
def test_a_broken_series_file_is_not_silently_orphaning(ev: Lab) -> None:
    """states.Evidence.gather skipped a series file it could not parse: every link of its patches silently turned
    'orphaned' (and showed under --stale) with no warning."""
    _link(ev, "replay-fix", "results/probe.log")
    (ev.store / "series" / "replay").write_text("  # indented comment\nreplay-fix.patch\n")
    for args in (("links", "--json"), ("show", "replay-fix"), ("links", "--stale")):
        result = ev.sm(*args)
        assert result.code == 3 and "series/replay" in result.err and "orphaned" not in result.out, (args, result)


@pytest.mark.regression("edge case: amendments of amendments")
def test_amendments_of_amendments_use_the_last_record(ev: Lab) -> None:
    a = _link(ev, "replay-fix", "results/probe.log", "--verdict", "promoted")
    b = _link(ev, "replay-fix", "results/probe.log", "--amends", a, "--verdict", "rejected", "--lesson", "no")
    assert _show(ev, "replay-fix")["patch"]["status"] == "rejected"
    _link(ev, "replay-fix", "results/probe.log", "--amends", b, "--verdict", "promoted")
    doc = _show(ev, "replay-fix")
    assert doc["patch"]["status"] == "promoted" and len(doc["links"]) == 3


@pytest.mark.regression("edge case: a baseline from another patch")
def test_a_baseline_of_another_patch_gives_deltas(ev: Lab) -> None:
    base = _link(ev, "gemm-tile", "results/probe.log", "--metric", "tput=100tok/s")
    _link(ev, "replay-fix", "results/probe.log", "--metric", "tput=110tok/s", "--baseline", base)
    (link,) = _show(ev, "replay-fix")["links"]
    assert link["baseline"] == base and link["metrics"][0]["delta"] == pytest.approx(10.0)
    assert "(+10.0%)" in ev.sm("show", "replay-fix").out


@pytest.mark.regression("show computed do-not-revive ignoring amendments")
def test_show_do_not_revive_follows_amendments(ev: Lab) -> None:
    """`show` computed do_not_revive over all links, ignoring amendments; lessons_against (the guard)
    uses effective(): show and the guard disagree."""
    bad = _link(ev, "gemm-tile", "results/probe.log", "--verdict", "rejected", "--do-not-revive", "--lesson", "x")
    _link(ev, "gemm-tile", "results/probe.log", "--amends", bad, "--verdict", "experimental")
    assert ev.sm("series", "remove", "kernels", "gemm-tile").code == 0
    assert ev.sm("series", "add", "kernels", "gemm-tile").code == 0, "the guard says the lane may come back"
    assert _show(ev, "gemm-tile")["patch"]["do_not_revive"] is False


@pytest.mark.regression("the headline was request_throughput, the same for runs whose output throughput differed")
def test_links_shows_the_headline_metric_of_the_config(ev: Lab) -> None:
    lid = _link(ev, "replay-fix", "--from-json", "results/bench.json")
    row = _table(ev.sm("links").out)[lid]
    assert row["output_throughput"] == "107.77 tok/s" and "request_throughput" not in row, \
        "no headline configured: output_throughput"
    config = ev.store / "stackmgr.toml"
    config.write_text(config.read_text() + '\n[evidence]\nheadline = "request_throughput"\n')
    row = _table(ev.sm("links").out)[lid]
    assert row["request_throughput"] == "0.41 req/s" and "output_throughput" not in row
    other = _link(ev, "gemm-tile", "results/probe.log", "--metric", "tput=5tok/s")
    rows = _table(ev.sm("links").out)
    assert rows[other]["tput"] == "5 tok/s" and rows[lid]["tput"] == "—", \
        "a link without the headline metric shows its first, in a column of its own"


@pytest.mark.parametrize("value", ['""', "3", '"two words"', '"../x"'])
def test_a_bad_headline_in_the_config_is_one_line(ev: Lab, value: str) -> None:
    _link(ev, "replay-fix", "--from-json", "results/bench.json")
    config = ev.store / "stackmgr.toml"
    config.write_text(config.read_text() + f"\n[evidence]\nheadline = {value}\n")
    result = ev.sm("links")
    one_line_error(result, 3)
    assert result.err == (f"stackmgr: {config}: [evidence] headline must be a metric name, e.g. "
                          '"output_throughput"; fix the config\n')  # fmt: skip
    assert ev.sm("check").code != 3, "check does not read [evidence]"


@pytest.mark.regression("links --sort metric put the largest first even for a lower-is-better latency")
def test_links_sorted_by_a_latency_put_the_lowest_first(ev: Lab) -> None:
    slow = _link(ev, "replay-fix", "results/probe.log", "--metric", "mean_ttft_ms=48.5ms")
    fast = _link(ev, "gemm-tile", "results/probe.log", "--metric", "mean_ttft_ms=39.1ms")
    mid = _link(ev, "replay-probe", "results/probe.log", "--metric", "mean_ttft_ms=41.2ms")
    result = ev.sm("links", "--json", "--metric", "mean_ttft_ms", "--sort", "metric")
    rows = json.loads(result.out)["links"]
    assert [(row["id"], row["metrics"][0]["direction"]) for row in rows] == [
        (fast, "lower"), (mid, "lower"), (slow, "lower")]  # fmt: skip
    result = ev.sm("links", "--json", "--metric", "tput", "--sort", "metric")
    assert json.loads(result.out)["links"] == []


@pytest.mark.regression("show printed all of a link's metrics (21 for vllm bench JSON) on one line")
def test_show_prints_one_metric_per_line_with_unit_direction_and_delta(ev: Lab) -> None:
    earlier = {**VLLM_JSON, "output_throughput": 98.4, "mean_ttft_ms": 45.0, "p99_tpot_ms": 11.0}
    (ev.store / "results" / "base.json").write_text(json.dumps(earlier))
    base = _link(ev, "replay-probe", "--from-json", "results/base.json")
    new = _link(ev, "replay-fix", "--from-json", "results/bench.json", "--gate", "json=pass", "--baseline", base)
    out = ev.sm("show", "replay-fix").out.splitlines()
    start = next(i for i, line in enumerate(out) if new in line)
    assert out[start].endswith(f"{new}  json ✓ · experimental · fresh · vs baseline {base}")
    out = [line for line in out if not line.startswith("      measured ")]  # the measured state: its own test
    assert out[start + 1 : start + 12] == [
        "      request_throughput               0.41  req/s   ↑  same",
        "      output_throughput              107.77  tok/s   ↑  +9.37 (+9.5%) better",
        "      total_token_throughput          320.5  tok/s   ↑  same",
        "      mean_ttft_ms                     41.2  ms      ↓  -3.8 (-8.4%) better",
        "      median_ttft_ms                     40  ms      ↓  same",
        "      p99_ttft_ms                      80.5  ms      ↓  same",
        "      mean_tpot_ms                      9.1  ms      ↓  same",
        "      p99_tpot_ms                      12.5  ms      ↓  +1.5 (+13.6%) worse",
        "      spec_decode_acceptance_rate      71.3  %       ↑  same",
        "      spec_decode_acceptance_length    2.71  tokens  ↑  same",
        "      results/bench.json (sha ok)",
    ]
    plain = ev.sm("show", "replay-probe").out.splitlines()
    assert "      output_throughput               98.4  tok/s   ↑" in plain, "no baseline: no delta"


@pytest.mark.regression("link --verdict promoted accepted a patch whose changes were not in its tree")
def test_a_promotion_is_refused_when_the_patch_is_not_in_its_trees_measured_state(ev: Lab) -> None:
    assert ev.sm("reset", "vllm").code == 0  # replay-fix is saved, but the tree no longer holds it
    refused = ev.sm("link", "replay-fix", "results/probe.log", "--verdict", "promoted")
    one_line_error(refused, 2)
    assert refused.err == ("stackmgr: cannot promote replay-fix: its changes are not in tree vllm's measured state; "
                           "push it (`stackmgr push -t vllm replay-fix`: series replay is applied) and measure "
                           "again, or record the result with --verdict experimental\n")  # fmt: skip
    assert not (ev.store / "links" / "replay-fix").exists()
    # A draft measured off-tree cannot be completed as a promotion either: its own stack is what counts.
    draft = _link(ev, "replay-fix", "results/probe.log")
    assert ev.sm("apply", "replay").code == 0  # the tree holds it now, but the draft was measured without it
    one_line_error(ev.sm("link", "replay-fix", "--amends", draft, "--verdict", "promoted"), 2)
    assert len(link_records(ev, "replay-fix")) == 1
    promoted = _link(ev, "replay-fix", "results/probe.log", "--verdict", "promoted")  # measured on it now
    assert [r["verdict"]["status"] for r in link_records(ev, "replay-fix")] == ["experimental", "promoted"]
    assert _show(ev, "replay-fix")["links"][-1]["id"] == promoted  # type: ignore[index]


def _dead_gemm_lane(ev: Lab) -> str:
    """gemm-tile rejected, do not revive; the kernels tree reset, then the same change typed again."""
    lid = _link(ev, "gemm-tile", "results/probe.log", "--verdict", "rejected", "--do-not-revive",
                "--lesson", "tile 128 breaks the color gate")  # fmt: skip
    assert ev.sm("reset", "vllm-xpu-kernels").code == 0
    (ev.tree.parent / "kernels" / "gemm.cpp").write_text("int tile = 128;\n")
    return lid


@pytest.mark.regression("save --series skipped the do-not-revive check that series add and apply make")
def test_save_into_a_series_refuses_a_do_not_revive_lane_unless_overridden(ev: Lab) -> None:
    lid = _dead_gemm_lane(ev)
    refused = ev.sm("save", "gemm-again", "-t", "vllm-xpu-kernels", "--series", "tiles", "-m", "again")
    one_line_error(refused, 1)
    assert refused.err == (f"stackmgr: gemm-again revives a do-not-revive lane ({lid} on gemm-tile: tile 128 breaks "
                           'the color gate); pass --override "why it is worth another try" to go ahead\n')  # fmt: skip
    assert not (ev.store / "patches" / "gemm-again.patch").exists() and not (ev.store / "series" / "tiles").exists()
    saved = ev.sm("save", "gemm-again", "-t", "vllm-xpu-kernels", "--series", "tiles", "-m", "again",
                  "--override", "fp32 epilogue now")  # fmt: skip
    assert saved.code == 0, saved.err
    assert saved.err == (f"stackmgr: WARNING: reviving do-not-revive lane gemm-tile ({lid}): tile 128 breaks the "
                         "color gate; override: fp32 epilogue now\n")  # fmt: skip
    assert (ev.store / "series" / "tiles").read_text() == "gemm-again.patch\n"
    (ev.tree.parent / "kernels" / "notes.txt").write_text("unrelated\n")  # a save holds only what is new
    assert ev.sm("save", "plain", "-t", "vllm-xpu-kernels", "-m", "no series, no check").code == 0


@pytest.mark.regression("--override was not recorded: every later apply of the same patch had to repeat it")
def test_an_override_is_recorded_shown_and_holds_for_the_same_patch_id(ev: Lab) -> None:
    lid = _dead_gemm_lane(ev)
    assert ev.sm("series", "remove", "kernels", "gemm-tile").code == 0
    assert ev.sm("series", "add", "kernels", "gemm-tile", "--override", "fp32 epilogue now").code == 0
    (record,) = (ev.store / "links" / "gemm-tile").glob("override-*")
    doc = tomllib.loads(record.read_text())
    patch = (ev.store / "patches" / "gemm-tile.patch").read_bytes()
    assert {k: v for k, v in doc.items() if k != "at"} == {
        "schema": 1, "kind": "override", "patch": "gemm-tile", "sha256": hashlib.sha256(patch).hexdigest(),
        "patch_id": _show(ev, "gemm-tile")["patch"]["patch_id"], "lanes": [lid],  # type: ignore[index]
        "reason": "fp32 epilogue now", "author": "Jane Doe <jane@example.com>", "command": "series add kernels"}
    at = doc["at"]
    digest = hashlib.sha256(record.read_bytes()).hexdigest()[:12]
    assert record.name == f"override-{at.replace('-', '').replace(':', '')}-{digest}"
    said = f'"fp32 epilogue now" (Jane Doe <jane@example.com>, {at[:16].replace("T", " ")} UTC, `series add kernels`)'
    # Later: apply, and the same change under another name (same patch-id), go ahead with a note.
    applied = ev.sm("apply", "kernels")
    assert applied.code == 0, applied.err
    assert applied.err.splitlines()[0] == (f"stackmgr: note: gemm-tile revives do-not-revive lane gemm-tile ({lid}); "
                                           f"going ahead on the override recorded for it: {said}")  # fmt: skip
    base = applied.out.split(" on ")[1][:12]
    assert applied.err.splitlines()[1:] == [f"stackmgr: vllm-xpu-kernels: HEAD detached at {base} "
                                            "(was on branch main); `stackmgr reset` returns to main"]  # fmt: skip
    (ev.store / "patches" / "tile-copy.patch").write_bytes(patch.replace(b"[PATCH] tile", b"[PATCH] t2"))
    added = ev.sm("series", "add", "other", "tile-copy")
    assert added.code == 0 and added.err.startswith("stackmgr: note: tile-copy revives do-not-revive lane gemm-tile")
    assert len(list((ev.store / "links").glob("*/override-*"))) == 1, "a note records nothing"
    shown = ev.sm("show", "gemm-tile")
    assert shown.out.endswith(f"do-not-revive overridden ({lid}): {said}\n")
    assert _show(ev, "gemm-tile")["overrides"] == [{  # type: ignore[comparison-overlap]
        "reason": "fp32 epilogue now", "author": "Jane Doe <jane@example.com>", "at": at,
        "command": "series add kernels", "lanes": [lid], "sha256": doc["sha256"], "patch_id": doc["patch_id"]}]
    assert ev.sm("report", "-o", str(ev.store / "site")).code == 0
    page = (ev.store / "site" / "patches" / "gemm-tile.html").read_text()
    assert ('<h2 id="overrides">Do-not-revive overridden</h2><ul class="overrides"><li><b>fp32 epilogue now</b> '
            f'<span class="muted">Jane Doe &lt;jane@example.com&gt; · {at[:16].replace("T", " ")} · '
            f"<code>series add kernels</code> · lane {lid}</span></li></ul>") in page
    # Undone with the command that wrote it.
    ops = json.loads(ev.sm("log", "--json").out)["operations"]
    (added_op,) = [o["id"] for o in ops if o["command"] == "series add kernels"]
    assert ev.sm("undo", added_op).code == 0
    assert not list((ev.store / "links").glob("*/override-*"))


# --- ranking within a run configuration, amended records ---------------------------------------------------------


def _bench_json(lab: Lab, name: str, rate: float, tput: float, ttft: float) -> str:
    """A `vllm bench serve --save-result` file under results/ measured at `rate` requests/s."""
    doc = {"model_id": "Qwen/Qwen3.6", "num_prompts": 50, "request_rate": rate, "max_concurrency": 8,
           "mean_ttft_ms": ttft, "output_throughput": tput}  # fmt: skip
    (lab.store / "results" / name).write_text(json.dumps(doc))
    return f"results/{name}"


def _row(listed: dict[str, Any], lid: str, shown: str, tail: str = "") -> list[str]:
    """The cells of a link's `links` row (one metric column showing `shown`, no gates), from its --json entry."""
    k = listed[lid]
    return [k["created"][:10], lid, k["patch"], k["tree"], shown, "—", k["verdict"]["status"], k["state"] + tail]


def _rows(out: str) -> list[list[str] | str]:
    """`links` under its header row: each link's row as its cells (apart by two spaces or more), a run
    configuration's line as it is."""
    return [cells if (cells := re.split(r"\s{2,}", line.strip()))[0][:2] == "20" else line
            for line in out.splitlines()[1:]]  # fmt: skip


def _table(out: str) -> dict[str, dict[str, str]]:
    """`links` as {link id: {column title: cell}}, the titles from its header row."""
    header = re.split(r"\s{2,}", out.splitlines()[0].strip())
    return {row[1]: dict(zip(header, row, strict=True)) for row in _rows(out) if isinstance(row, list)}


@pytest.mark.regression("links --sort metric ranked results of different run configurations against each other")
def test_links_sorted_by_a_metric_rank_within_each_run_configuration(ev: Lab) -> None:
    fix4 = _link(ev, "replay-fix", "--from-json", _bench_json(ev, "fix-4.json", 4.0, 300.0, 80.0))
    probe1 = _link(ev, "replay-probe", "--from-json", _bench_json(ev, "probe-1.json", 1.0, 110.0, 45.0))
    tile1 = _link(ev, "gemm-tile", "--from-json", _bench_json(ev, "tile-1.json", 1, 120.0, 50.0))
    fix1 = _link(ev, "replay-fix", "--from-json", _bench_json(ev, "fix-1.json", 1.0, 100.0, 40.0))
    hand = _link(ev, "gemm-tile", "results/probe.log", "--metric", "output_throughput=500tok/s",
                 "--metric", "mean_ttft_ms=10ms")  # fmt: skip
    listed = {k["id"]: k for k in json.loads(ev.sm("links", "--json").out)["links"]}
    shown = ev.sm("links", "--metric", "output_throughput", "--sort", "metric")
    assert shown.code == 0, shown.err
    assert re.split(r"\s{2,}", shown.out.splitlines()[0].strip()) == [
        "DATE", "LINK", "PATCH", "TREE", "output_throughput", "GATES", "VERDICT", "STATE"]  # fmt: skip
    assert _rows(shown.out) == [
        "model Qwen/Qwen3.6 · request rate 1 · max concurrency 8 · prompts 50",
        _row(listed, tile1, "120 tok/s"),
        _row(listed, probe1, "110 tok/s"),
        _row(listed, fix1, "100 tok/s"),
        "",
        "model Qwen/Qwen3.6 · request rate 4 · max concurrency 8 · prompts 50",
        _row(listed, fix4, "300 tok/s"),
        "",
        "run configuration not recorded (no vllm bench JSON artifact)",
        _row(listed, hand, "500 tok/s"),
    ]

    def ranked(metric: str) -> list[str]:
        out = ev.sm("links", "--json", "--metric", metric, "--sort", "metric").out
        return [k["id"] for k in json.loads(out)["links"]]

    assert ranked("output_throughput") == [tile1, probe1, fix1, fix4, hand]
    assert ranked("mean_ttft_ms") == [fix1, probe1, tile1, fix4, hand], "lower is better, within each configuration"
    assert listed[fix4]["config"] == {"model_id": "Qwen/Qwen3.6", "request_rate": "4", "max_concurrency": "8",
                                      "num_prompts": "50"}  # fmt: skip
    assert listed[hand]["config"] == dict.fromkeys(["model_id", "request_rate", "max_concurrency", "num_prompts"])


@pytest.mark.regression("links listed a draft that a later record amends as if it were still current")
def test_links_leaves_out_amended_records_unless_all_and_json_names_the_amendment(ev: Lab) -> None:
    draft = _link(ev, "replay-fix", "results/probe.log", "--metric", "tput=100tok/s")
    other = _link(ev, "gemm-tile", "results/probe.log", "--metric", "tput=90tok/s")
    final = _link(ev, "replay-fix", "--amends", draft, "--verdict", "rejected", "--lesson", "slower")
    doc = json.loads(ev.sm("links", "--json").out)["links"]
    listed = {k["id"]: k for k in doc}
    shown = ev.sm("links")
    assert _rows(shown.out) == [_row(listed, other, "90 tok/s"), _row(listed, final, "100 tok/s")]
    assert shown.err == "stackmgr: 1 amended record not listed (`stackmgr links --all` lists them)\n"
    every = ev.sm("links", "--all")
    assert _rows(every.out) == [_row(listed, draft, "100 tok/s", tail=f" amended by {final}"),
                                _row(listed, other, "90 tok/s"), _row(listed, final, "100 tok/s")]
    assert every.err == ""
    assert _rows(ev.sm("links", "--verdict", "experimental").out) == [_row(listed, other, "90 tok/s")]
    assert [(k["id"], k["amends"], k["amended_by"]) for k in doc] == [
        (draft, None, final), (other, None, None), (final, draft, None)], "--json lists every record"
    assert [(k["id"], k["amended_by"]) for k in _show(ev, "replay-fix")["links"]] == [(draft, final), (final, None)]


@pytest.mark.regression("show printed a completed draft in full beside its completion, and a run's command unquoted")
def test_show_names_an_amended_draft_in_one_line_and_quotes_the_command_of_a_run(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    script = "import sys; print('Output token throughput (tok/s): 107.7'); sys.exit(0)"
    done = stackmgr_process(lab.store, "run", "--name", "qps1", "--", sys.executable, "-c", script)
    assert done.returncode == 0, done.stderr
    draft = json.loads(lab.sm("links", "--json").out)["links"][0]["id"]
    completed = lab.sm("link", "fix", "--amends", "qps1", "--verdict", "promoted", "--lesson", "keep it")
    assert completed.code == 0, completed.err
    final = json.loads(lab.sm("links", "--json").out)["links"][1]["id"]
    shown = lab.sm("show", "fix").out.splitlines()
    assert shown[shown.index("links (2):") + 1].endswith(f"{draft}  amended by {final}")
    assert [line.strip() for line in shown if draft in line][1:] == [f"amends {draft}"]
    (run_line,) = [line for line in shown if "run qps1:" in line]
    assert shlex.split(run_line.split("`")[1]) == [sys.executable, "-c", script], "a shell gives back the argv"


@pytest.mark.regression("link --amends with an artifact threw away the draft's run and measured state, and promoted "
                        "a baseline run measured without the patch")  # fmt: skip
def test_amending_a_run_with_a_new_result_keeps_what_the_run_measured(ev: Lab) -> None:
    script = "print('Output token throughput (tok/s): 99.5')"
    done = stackmgr_process(ev.store, "run", "--name", "qps1", "--", sys.executable, "-c", script)
    assert done.returncode == 0, done.stderr
    drafts = {k["patch"]: k for k in json.loads(ev.sm("links", "--json").out)["links"]}
    assert sorted(drafts) == ["gemm-tile", "replay-probe"], "one draft per measured tree, both named qps1"
    done = ev.sm("--json", "link", "replay-probe", "results/bench.json", "--from-json", "results/bench.json",
                 "--amends", "qps1", "--verdict", "experimental")  # fmt: skip
    assert done.code == 0, done.err
    final = next(k for k in json.loads(ev.sm("links", "--json").out)["links"] if k["id"] == json.loads(done.out)["id"])
    draft = drafts["replay-probe"]
    assert final["amends"] == draft["id"] and final["run"] == draft["run"] and final["stack"] == draft["stack"]
    assert [a["path"] for a in final["artifacts"]] == [a["path"] for a in draft["artifacts"]] + ["results/bench.json"]
    assert {m["name"] for m in final["metrics"]} >= {"output_throughput", "mean_ttft_ms"}
    kernel = ev.sm("--json", "link", "gemm-tile", "--amends", "qps1", "--verdict", "rejected", "--lesson", "no")
    assert kernel.code == 0, "the run's name stands for each patch's own draft"
    again = ev.sm("link", "replay-probe", "--amends", draft["id"], "--verdict", "inconclusive")
    one_line_error(again, 2)
    assert f"amended already, by {final['id']}" in again.err, "a second amendment of one record would fork it"

    assert ev.sm("reset", "vllm").code == 0  # the patches are saved; the tree is at its base
    done = stackmgr_process(ev.store, "run", "-t", "vllm", "--link", "replay-fix", "--name", "upstream", "--",
                            sys.executable, "-c", script)  # fmt: skip
    assert done.returncode == 0, done.stderr
    refused = ev.sm("link", "replay-fix", "results/probe.log", "--amends", "upstream", "--verdict", "promoted")
    one_line_error(refused, 2)
    assert "its changes are not in tree vllm's measured state" in refused.err


@pytest.mark.regression("links --sort metric ranked a failed run best; an unknown --tree listed nothing, exit 0")
def test_sorting_by_metric_ranks_failed_runs_last_and_an_unknown_tree_is_a_usage_error(ev: Lab) -> None:
    good = _link(ev, "replay-fix", "--metric", "output_throughput=100tok/s")
    failed = _link(ev, "replay-fix", "--metric", "output_throughput=300tok/s", "--gate", "exit=fail:exit 1")
    better = _link(ev, "replay-probe", "--metric", "output_throughput=110tok/s")
    shown = ev.sm("links", "--metric", "output_throughput", "--sort", "metric").out
    assert [lid for line in shown.splitlines() for lid in (good, failed, better) if lid in line] == [
        better, good, failed]  # fmt: skip
    one_line_error(ev.sm("links", "--tree", "nosuch"), 2)


def test_series_membership_is_reused_only_while_every_series_file_stays_as_it_was(
    ev: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """states.series_members: which patches some series lists is kept by the series files' stat data; any
    change (a patch removed or added, a series file gone, new or unparsable) shows in the next `show`."""

    monkeypatch.setattr(fs, "SETTLED_NS", 0)  # the tmp file system keeps ns timestamps
    _link(ev, "replay-fix", "results/probe.log")
    cache = ev.store / ".stackmgr" / "cache" / "series-members.marshal"

    def state() -> str:
        return _show(ev, "replay-fix")["links"][0]["state"]  # type: ignore[index,no-any-return]

    assert state() == "fresh" and cache.exists()
    replay = (ev.store / "series" / "replay").read_text()
    assert ev.sm("series", "remove", "replay", "replay-fix").code == 0
    assert state() == "orphaned"
    (ev.store / "series" / "other").write_text("replay-fix.patch\n")
    assert state() == "fresh"
    (ev.store / "series" / "other").unlink()
    assert state() == "orphaned"
    (ev.store / "series" / "replay").write_text(replay)
    assert state() == "fresh"
    (ev.store / "series" / "replay").write_text("replay-fix.patch\n<<<<<<< HEAD\n")
    for _ in range(2):  # said every time, never answered from the cache
        result = ev.sm("show", "replay-fix")
        assert "series/replay" in result.err
