"""Reading link records: a command about one patch reads that patch's records (and the baselines it names) and no
other; `links` reads every record in brief; both caches see every change to a record file at once."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stackmgr.evidence.compare import run_config
from stackmgr.evidence.reading import find_ref, load_briefs, load_links
from stackmgr.store.config import load_store
from tests.conftest import Lab, link_id


def _json_result(lab: Lab, name: str, tput: float) -> str:
    doc = {"model_id": "m", "request_rate": 1.0, "max_concurrency": 8, "num_prompts": 50,
           "output_throughput": tput, "mean_ttft_ms": 40.0}  # fmt: skip
    (lab.store / "results" / name).write_text(json.dumps(doc))
    return f"results/{name}"


def _record_file(lab: Lab, patch: str, ident: str) -> Path:
    (path,) = (lab.store / "links" / patch).glob(f"*-{ident}.toml")
    return path


def _damage(path: Path) -> None:
    path.write_text(path.read_text().replace('schema = "stackmgr.link/v1"', "schema = [unterminated"))


@pytest.mark.regression("show and compare read every record of the store: 2-3.6 s on 20,000 records")
def test_show_reads_its_patch_and_its_baselines_records_and_no_other(ev: Lab) -> None:
    base = link_id(ev, "replay-fix", "--from-json", _json_result(ev, "a.json", 100.0))
    probe = link_id(ev, "replay-probe", "--from-json", _json_result(ev, "b.json", 110.0), "--baseline", base)
    other = link_id(ev, "gemm-tile", "--from-json", _json_result(ev, "c.json", 90.0))
    _damage(_record_file(ev, "gemm-tile", other))  # were it read, `show` would refuse it (exit 3)

    shown = ev.sm("show", "replay-probe")
    assert shown.code == 0, shown.err
    assert f"{probe}" in shown.out and f"vs baseline {base}" in shown.out
    assert "output_throughput  110  tok/s  ↑  +10 (+10.0%) better" in shown.out

    compared = ev.sm("compare", "replay-fix", probe)
    assert compared.code == 0, compared.err
    assert "110 (n=1)  +10.0%  too few runs" in compared.out
    assert ev.sm("show", "gemm-tile").code == 3  # the damaged record is said where it is read


def test_a_record_is_found_by_id_even_when_its_file_was_renamed_by_hand(ev: Lab) -> None:
    ident = link_id(ev, "replay-fix", "--from-json", _json_result(ev, "a.json", 100.0))
    path = _record_file(ev, "replay-fix", ident)
    path.rename(path.with_name("20260101T000000Z-renamed.toml"))
    store = load_store(str(ev.store))
    found = find_ref(store, ident)
    assert found is not None and found.id == ident and found.file.endswith("renamed.toml")
    shown = ev.sm("apply", "--link", ident, "--dry-run")
    assert "no link" not in shown.err


def test_links_brief_rows_agree_with_the_whole_records(ev: Lab) -> None:
    ids = [link_id(ev, "replay-fix", "--from-json", _json_result(ev, f"r{i}.json", 100.0 + i)) for i in range(3)]
    ids.append(link_id(ev, "replay-fix", "--amends", ids[0], "--verdict", "rejected", "--lesson", "slower"))
    store = load_store(str(ev.store))
    briefs, whole = load_briefs(store), load_links(store)
    assert [(b.id, b.patch, b.verdict, b.amends, b.sha256, b.metrics) for b in briefs] == [
        (k.id, k.patch, k.verdict, k.amends, k.sha256, [m.__class__(m.name, m.value, m.unit, m.direction)
                                                        for m in k.metrics]) for k in whole]  # fmt: skip
    assert [b.config for b in briefs] == [tuple(run_config(store, k).items()) for k in whole]
    listed = ev.sm("links", "--all")
    assert listed.code == 0, listed.err
    assert [line.split()[1] for line in listed.out.splitlines()[1:]] == [k.id for k in whole]  # under the header
    assert [line.split()[1] for line in ev.sm("links").out.splitlines()[1:]] == [k.id for k in whole[1:]], \
        "the amended record left out"


@pytest.mark.regression("links read brief rows kept by stat data: an in-place edit must show at once")
def test_links_shows_a_record_edited_in_place_with_its_size_and_mtime_put_back(ev: Lab) -> None:
    ident = link_id(ev, "replay-fix", "--from-json", _json_result(ev, "a.json", 100.0), "--verdict", "promoted")
    assert "promoted" in ev.sm("links").out  # both caches filled
    path = _record_file(ev, "replay-fix", ident)
    st = path.stat()
    path.write_text(path.read_text().replace('status = "promoted"', 'status = "rejected"'))
    assert path.stat().st_size == st.st_size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    _header, line = ev.sm("links").out.splitlines()
    assert " rejected " in line and " promoted " not in line
    assert line.endswith(" edited")  # records are write-once: this one changed after it was written


@pytest.mark.regression("show --json and links called a record edited after it was written fresh")
def test_a_record_edited_after_it_was_written_is_edited_in_show_and_links_on_any_clone(ev: Lab) -> None:
    ident = link_id(ev, "replay-fix", "--from-json", _json_result(ev, "a.json", 100.0))
    kept = link_id(ev, "replay-fix", "--from-json", _json_result(ev, "b.json", 101.0))
    path = _record_file(ev, "replay-fix", ident)
    path.write_text(path.read_text().replace("value = 100.0", "value = 150.0"))
    for fresh_clone in (False, True):  # first seen by this clone, or never seen (its id checks it)
        if fresh_clone:
            (ev.store / ".stackmgr" / "record-shas.marshal").unlink()
            import shutil

            shutil.rmtree(ev.store / ".stackmgr" / "cache")
        states = {k["id"]: k["state"] for k in json.loads(ev.sm("show", "replay-fix", "--json").out)["links"]}
        assert states == {ident: "edited", kept: "fresh"}
        listed = {line.split()[1]: line.split()[-1] for line in ev.sm("links").out.splitlines()[1:]}
        assert listed == {ident: "edited", kept: "fresh"}
        assert {k["id"]: k["state"] for k in json.loads(ev.sm("links", "--json").out)["links"]} == states
