"""A fresh clone's first reading of its records is spread over worker processes (store/workers.py) when there are
thousands: what the workers read must be what one process reads, a damaged record said the same way, and the
artifacts hashed in workers judged as if hashed here."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from stackmgr.evidence import artifact_hashes, reading
from stackmgr.store import workers
from tests.conftest import Lab, link_id


def _fresh(lab: Lab) -> None:
    """The clone's caches gone, as on a fresh clone."""
    found = [state for state in (lab.store / ".git" / "stackmgr-store", lab.store / ".stackmgr")
             if (state / "cache").is_dir()]  # fmt: skip
    assert found, "the clone's state directory"
    for state in found:
        shutil.rmtree(state / "cache")
        (state / "record-shas.marshal").unlink(missing_ok=True)


@pytest.fixture
def records(evidence_lab: Lab) -> Lab:
    results = evidence_lab.store / "results"
    for n in range(6):
        (results / f"run{n}.json").write_text(json.dumps({"output_throughput": 100.0 + n}))
        link_id(evidence_lab, "replay-fix" if n % 2 else "replay-probe", f"results/run{n}.json")
    return evidence_lab


def test_records_read_in_workers_list_as_records_read_here(records: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh(records)
    here = records.sm("links", "--all")  # in brief: what a first reading makes
    assert here.code == 0, here.err
    _fresh(records)
    monkeypatch.setattr(reading, "FIRST_READING_IN_WORKERS", 1)  # every first reading in workers
    monkeypatch.setattr(artifact_hashes, "FIRST_HASHING_IN_WORKERS", 1)
    jobs: list[int] = []

    def counted(job: Any, count: int) -> Any:
        jobs.append(count)
        return real(job, count)

    real = workers.fork_map
    monkeypatch.setattr(workers, "fork_map", counted)
    spread = records.sm("links", "--all")
    assert spread.code == 0, spread.err
    assert jobs[:1] == [2] and len(jobs) == 2, jobs  # the two record folders, then the artifacts
    assert spread.out == here.out and spread.out.count(" fresh") == 6
    again = records.sm("links", "--all")  # from the caches the workers' rows were kept in
    assert again.out == here.out


def test_a_damaged_record_is_said_the_same_when_workers_read_first(records: Lab,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    damaged = sorted((records.store / "links" / "replay-fix").glob("*.toml"))[0]
    damaged.write_bytes(damaged.read_bytes()[:200])  # cut short, as a bad merge or a full disk leaves it
    _fresh(records)
    here = records.sm("links")
    _fresh(records)
    monkeypatch.setattr(reading, "FIRST_READING_IN_WORKERS", 1)
    spread = records.sm("links")
    assert (spread.code, spread.err) == (here.code, here.err) and here.code == 3
    assert damaged.name in spread.err and len(spread.err.strip().splitlines()) <= 2, spread.err
