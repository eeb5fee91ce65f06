"""A declared result directory leaves out only what no applied patch holds: a file there that a patch of the
series applied to the tree created (saved before the directory was declared, the lab's real order) is work like
any file: in the snapshot, never deleted by a patch saved on top, never a residue, preserved by its patch."""

from __future__ import annotations

import json
import tomllib

import pytest

from tests.conftest import Lab, applied_state, link_id, porcelain


def results_saved_then_declared(lab: Lab) -> None:
    """Series S with patch p1, which holds results/probe.log (saved before `results` was declared); then
    `results = ["results"]` under [trees.vllm]; the tree still as S made it."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (lab.tree / "results").mkdir()
    (lab.tree / "results" / "probe.log").write_text("output_throughput=107.77 tok/s\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    assert b"results/probe.log" in (lab.store / "patches" / "p1.patch").read_bytes()
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["results"]\n')  # under [trees.vllm]


def diffstat(lab: Lab, patch: str) -> bytes:
    data = (lab.store / "patches" / f"{patch}.patch").read_bytes()
    return data[data.index(b"\n---\n") + 5 : data.index(b"\ndiff --git ")]


@pytest.mark.regression("a patch saved on top of a series deleted the result file an earlier patch had created")
def test_a_patch_saved_on_top_keeps_a_result_file_the_series_holds(lab: Lab) -> None:
    results_saved_then_declared(lab)
    (lab.tree / "README").write_text("hello\nmore\n")
    assert lab.sm("save", "p2", "--series", "S", "-m", "p2").code == 0
    assert diffstat(lab, "p2") == b" README | 1 +\n 1 file changed, 1 insertion(+)\n"
    state = applied_state(lab)
    assert state is not None and state["result_tree"] == lab.worktree_id() and state["matches"] is True
    assert lab.sm("reset").code == 0 and not (lab.tree / "results" / "probe.log").exists()
    assert lab.sm("apply", "S").code == 0
    assert (lab.tree / "results" / "probe.log").read_text() == "output_throughput=107.77 tok/s\n"
    assert lab.sm("check").code == 0


@pytest.mark.regression("refreshing the top patch dropped the result file it held")
def test_refresh_keeps_the_result_file_the_top_patch_holds(lab: Lab) -> None:
    results_saved_then_declared(lab)
    before = (lab.store / "patches" / "p1.patch").read_bytes()
    assert lab.sm("refresh").code == 0
    assert (lab.store / "patches" / "p1.patch").read_bytes() == before  # nothing changed: the same bytes
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    assert lab.sm("refresh").code == 0
    data = (lab.store / "patches" / "p1.patch").read_bytes()
    assert b"results/probe.log" in data and b"+    return 3" in data and b"deleted file" not in data
    state = applied_state(lab)
    assert state is not None and state["result_tree"] == lab.worktree_id()
    (lab.tree / "results" / "probe.log").unlink()  # let the series drop it: what is written there is output again
    assert lab.sm("refresh").code == 0 and b"results/" not in (lab.store / "patches" / "p1.patch").read_bytes()
    (lab.tree / "results" / "probe.log").write_text("a later run's log\n")
    assert lab.sm("check").code == 0
    state = applied_state(lab)
    assert state is not None and state["matches"] is True


@pytest.mark.regression("status said a tree drifted from its series for the result file the series made")
def test_status_and_check_count_a_held_result_file_as_work_and_new_outputs_as_outputs(lab: Lab) -> None:
    results_saved_then_declared(lab)
    state = applied_state(lab)
    assert state is not None and state["matches"] is True and state["drift"] == []
    (lab.tree / "results" / "bench-2.json").write_text('{"request_throughput": 3.1}')  # an output: left out
    assert lab.sm("check").code == 0
    state = applied_state(lab)
    assert state is not None and state["matches"] is True
    (lab.tree / "results" / "probe.log").write_text("overwritten\n")  # the patch's file changed: work to save
    done = lab.sm("--json", "check")
    assert done.code == 1
    (tree,) = json.loads(done.out)["trees"]
    assert [u["path"] for u in tree["unpreserved"]] == ["results/probe.log"]
    refused = lab.sm("reset")
    assert refused.code == 1 and (lab.tree / "results" / "probe.log").read_text() == "overwritten\n"
    (lab.tree / "results" / "probe.log").write_text("output_throughput=107.77 tok/s\n")
    assert lab.sm("reset").code == 0  # preserved by p1: the reset may take it away, `apply S` gives it back
    assert porcelain(lab.tree) == b"?? results/bench-2.json\n"  # the output is left alone
    (lab.tree / "results" / "probe.log").write_text("a later run's log\n")  # no series holds it now: output
    assert lab.sm("check").code == 0


@pytest.mark.regression("the measured state's residue deleted the result file the applied series holds")
def test_a_measured_state_holds_the_series_result_file_and_rebuilds_it(lab: Lab) -> None:
    results_saved_then_declared(lab)
    measured = lab.worktree_id()  # the tree as the series made it: the output below is no part of it
    (lab.tree / "results" / "bench-2.json").write_text('{"request_throughput": 3.1}')
    link = link_id(lab, "p1", str(lab.store / "stackmgr.toml"))
    (record,) = (lab.store / "links" / "p1").glob("*.toml")
    (stack,) = tomllib.loads(record.read_text())["stack"]
    assert stack["snapshot"] == measured and stack["residue"] is False
    assert [p["name"] for p in stack["patches"]] == ["p1"]
    assert lab.sm("reset").code == 0 and not (lab.tree / "results" / "probe.log").exists()
    done = lab.sm("--json", "apply", "--link", link)
    assert done.code == 0, done.err
    assert (lab.tree / "results" / "probe.log").read_text() == "output_throughput=107.77 tok/s\n"
    assert (lab.tree / "results" / "bench-2.json").exists()
