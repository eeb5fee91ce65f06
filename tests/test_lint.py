"""`stackmgr lint`: every defect seeded into a store is found, and nothing in a clean one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import Lab, git_text


def _findings(lab: Lab) -> list[dict[str, str]]:
    result = lab.sm("lint", "--json")
    assert result.code in (0, 1), result.err
    found = list(json.loads(result.out)["findings"])
    assert (result.code == 1) == bool(found)
    return found


def _clean_store(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    (lab.tree / "README").write_text("probe\n")
    (lab.tree / "bin.dat").write_bytes(bytes(range(256)))
    assert lab.sm("save", "probe", "--series", "S", "-m", "probe").code == 0
    results = lab.store / "results"
    results.mkdir()
    (results / "run.log").write_text("ok\n")
    assert lab.sm("link", "fix", str(results / "run.log"), "--verdict", "promoted").code == 0


def test_a_clean_store_has_no_findings(lab: Lab) -> None:
    _clean_store(lab)
    result = lab.sm("lint")
    assert result.code == 0 and result.out == "" and result.err == "stackmgr: no findings\n"
    assert _findings(lab) == []


def test_every_seeded_defect_is_found(lab: Lab, tmp_path: Path) -> None:
    _clean_store(lab)
    patches, series = lab.store / "patches", lab.store / "series"
    fix = (patches / "fix.patch").read_bytes()
    # series: a missing entry, a duplicate entry, a bad line
    (series / "missing").write_text("fix.patch\ngone.patch\n")
    (series / "dup").write_text("fix.patch\nfix.patch\n")
    (series / "badline").write_text("fix.patch -p2\n")
    # patches: orphaned, no trailers, conflict markers, CRLF header, binary stub, unknown tree, base missing,
    # not applying
    (patches / "orphan.patch").write_bytes(fix)
    (patches / "notrailers.patch").write_bytes(fix.replace(b"Stackmgr-Tree: vllm\n", b""))
    (patches / "conflict.patch").write_bytes(fix.replace(b"+    return 2\n", b"+<<<<<<< ours\n+    return 2\n"))
    head_end = fix.index(b"\ndiff --git ")
    (patches / "crlf.patch").write_bytes(fix[:head_end].replace(b"\n", b"\r\n") + fix[head_end:])
    (patches / "othertree.patch").write_bytes(fix.replace(b"Stackmgr-Tree: vllm", b"Stackmgr-Tree: kernels"))
    base = git_text(lab.tree, "rev-parse", "HEAD")
    (patches / "nobase.patch").write_bytes(fix.replace(base.encode(), b"1" * 40))
    (patches / "stale.patch").write_bytes(fix.replace(b"     return 1\n", b"     return 9\n")
                                          .replace(b"-    return 1\n", b"-    return 9\n"))  # fmt: skip
    probe = (patches / "probe.patch").read_bytes()
    start = probe.index(b"GIT binary patch")
    end = probe.index(b"\ndiff --git", start) if b"\ndiff --git" in probe[start:] else len(probe)
    (patches / "stub.patch").write_bytes(probe[:start] + b"Binary files a/bin.dat and b/bin.dat differ\n"
                                         + probe[end:])  # fmt: skip
    for name in ("orphan", "notrailers", "conflict", "crlf", "othertree", "nobase", "stale", "stub"):
        (series / f"s-{name}").write_text(f"{name}.patch\n") if name != "orphan" else None
    # links: a record cut in half, evidence for a patch that does not exist
    record = next((lab.store / "links" / "fix").glob("*.toml"))
    record.write_bytes(record.read_bytes()[: len(record.read_bytes()) // 2])
    (lab.store / "links" / "ghost").mkdir()

    found = {(f["file"], f["message"]) for f in _findings(lab)}
    text = "\n".join(f"{w}: {m}" for w, m in sorted(found))
    for needle in (
        "series/missing:2: gone.patch does not exist",
        "series/dup:2: ",  # listed twice
        "series/badline:1: ",
        "patches/orphan.patch: in no series",
        "patches/notrailers.patch: no Stackmgr-Tree/Stackmgr-Base lines",
        "patches/conflict.patch: adds conflict markers",
        "patches/crlf.patch: its line endings were changed to CRLF",
        "patches/othertree.patch: its tree kernels is not registered",
        "series/s-nobase: base 111111111111 of tree vllm is not a commit there",
        "series/s-stale: does not apply strictly",
        "patches/stub.patch: 'bin.dat' is a 'Binary files differ' stub",
        f"links/fix/{record.name}: ",
        "links/ghost/: evidence for patch ghost, which does not exist",
    ):
        assert needle in text, f"{needle!r} not found in:\n{text}"
    result = lab.sm("lint")
    assert result.code == 1 and "findings" in result.err and "Traceback" not in result.err


def test_lint_writes_nothing(lab: Lab) -> None:
    _clean_store(lab)
    (lab.store / "series" / "S").write_text("fix.patch\nnope.patch\n")
    before = {p: p.read_bytes() for p in lab.store.rglob("*") if p.is_file() and ".stackmgr" not in p.parts}
    assert lab.sm("lint").code == 1
    after = {p: p.read_bytes() for p in lab.store.rglob("*") if p.is_file() and ".stackmgr" not in p.parts}
    assert after == before


@pytest.mark.regression("temp files a killed command left stayed in the store forever")
def test_temp_files_of_killed_writers_are_swept_and_lint_reports_none_left(lab: Lab) -> None:
    """A command killed between writing a temp file and renaming it (save verifying its patch, link writing its
    record, the journal writing CURRENT, a cache write) leaves `.NAME.<pid>.<n>.tmp` / `NAME.<pid>.tmp` behind,
    forever: nothing removed them. `lint` reports them; the next mutating command removes those in the
    directories written most, `recover` every one; one whose writer is alive stays."""
    import subprocess

    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("save", "p", "-m", "p").code == 0
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead, alive = gone.pid, os.getpid()
    (lab.store / "links" / "p").mkdir(parents=True)
    litter = [lab.store / "patches" / f".p.patch.{dead}.7.tmp",
              lab.store / ".stackmgr" / "ops" / f".CURRENT.{dead}.1.tmp",
              lab.store / ".stackmgr" / "cache" / f"patch-index.marshal.{dead}.tmp",
              lab.store / "links" / "p" / f".20260613-abc.toml.{dead}.3.tmp"]  # fmt: skip
    live = lab.store / "patches" / f".q.patch.{alive}.1.tmp"
    users = lab.store / "results" / f".bench.{dead}.1.tmp"  # a folder of the user's own in the store: not ours
    for path in [*litter, live, users]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    linted = lab.sm("lint", "--json")
    assert linted.code == 1
    reported = {f["file"] for f in json.loads(linted.out)["findings"] if f["kind"] == "store"}
    assert reported == {str(p.relative_to(lab.store)) for p in litter}
    assert lab.sm("series", "new", "X").code == 0  # a mutating command: the directories it writes most
    assert [p.exists() for p in litter] == [False, False, False, True] and live.exists()
    assert lab.sm("recover").code == 0
    assert not any(p.exists() for p in litter) and live.exists() and users.exists()
    live.unlink()
    after = lab.sm("lint", "--json")
    assert [f for f in json.loads(after.out)["findings"] if f["kind"] == "store"] == [], after.out
