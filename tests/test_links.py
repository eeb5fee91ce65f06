"""Evidence: link records, their states computed on read, show/links/verify, and do-not-revive lanes."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from tests.conftest import VLLM_JSON, Lab
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
    assert metrics["power"] == {"name": "power", "value": 310.0, "unit": "W", "direction": "higher"}
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
    assert links == {fresh: "fresh", probe: "stale"}
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
    assert lab.sm("apply", "kernels").code == 1
    applied = lab.sm("apply", "kernels", "--override", "measured again after the epilogue fix")
    assert applied.code == 0 and "WARNING" in applied.err


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


def test_an_artifact_outside_the_store_is_recorded_absolute(evidence_lab: Lab, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.log"
    outside.write_text("x\n")
    _link(evidence_lab, "replay-fix", str(outside))
    (record,) = (evidence_lab.store / "links" / "replay-fix").iterdir()
    assert tomllib.loads(record.read_text())["artifact"][0]["path"] == str(outside)


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
