"""What a result measured: the patches of its measured stack, by content (a rename keeps them), at the versions
measured (a refresh of any of them, not only the linked patch, leaves the result stale), and, for a run on a tree
`apply --link` rebuilt at an older version, that version (so the run's own result rebuilds the same tree)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from tests.conftest import Lab, applied_state, git, link_id, link_records


def _bench(lab: Lab, name: str, tput: float) -> str:
    """A `vllm bench serve --save-result` file in the store's results/."""
    doc = {"backend": "vllm", "model_id": "Qwen/Qwen3.6", "num_prompts": 50, "request_rate": 1.0,
           "max_concurrency": 8, "output_throughput": tput, "mean_ttft_ms": 40.0}  # fmt: skip
    path = lab.store / "results" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(doc))
    return str(path)


def _two_patches(lab: Lab) -> None:
    """Series S applied: p1 (model.py), p2 (docs.txt) on top."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    (lab.tree / "docs.txt").write_text("notes\n")
    assert lab.sm("save", "p2", "--series", "S", "-m", "p2").code == 0


def _listed(lab: Lab, ident: str) -> dict[str, Any]:
    done = lab.sm("--json", "links")
    assert done.code == 0, done.err
    (found,) = [k for k in json.loads(done.out)["links"] if k["id"] == ident]
    return dict(found)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_apply_link_rebuilds_a_result_measured_before_its_patch_was_renamed(lab: Lab) -> None:
    _two_patches(lab)
    measured = lab.worktree_id()
    result = link_id(lab, "p2", "--from-json", _bench(lab, "p2.json", 110.0))
    assert lab.sm("rename", "p2", "p2-new").code == 0
    assert lab.sm("reset", "vllm").code == 0 and lab.worktree_id() != measured
    done = lab.sm("apply", "--link", result)
    assert done.code == 0, done.err
    assert lab.worktree_id() == measured


def test_a_result_measured_before_a_rename_still_measured_the_renamed_patch(lab: Lab) -> None:
    _two_patches(lab)
    before = link_id(lab, "p2", "--from-json", _bench(lab, "p2.json", 110.0))
    assert lab.sm("rename", "p2", "p2-new").code == 0
    listed = _listed(lab, before)
    assert listed["patch"] == "p2-new" and listed["measured_patch"] is True and listed["state"] == "fresh"
    compared = json.loads(lab.sm("--json", "compare", "p2-new").out)
    (group,) = compared["groups"]
    assert [r["links"] for r in group["results"]] == [[before]] and group["left_out"] == []
    done = lab.sm("link", "p2-new", "--amends", before, "--verdict", "promoted", "--lesson", "keep it")
    assert done.code == 0, done.err
    assert link_records(lab, "p2-new")[-1]["verdict"]["status"] == "promoted"


def test_a_result_goes_stale_when_a_lower_patch_of_its_measured_stack_is_refreshed(lab: Lab) -> None:
    _two_patches(lab)
    result = link_id(lab, "p2", "--from-json", _bench(lab, "p2.json", 110.0))
    assert _listed(lab, result)["state"] == "fresh"
    assert lab.sm("pop").code == 0  # p1 on top
    assert lab.sm("save", "p1", "--series", "S", "--update", "-m", "p1, described").code == 0
    assert _listed(lab, result)["state"] == "equivalent"  # p1's bytes changed, its change did not
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    assert lab.sm("refresh").code == 0
    assert lab.sm("push").code == 0
    assert (lab.tree / "docs.txt").read_text() == "notes\n"  # p2 itself is byte for byte what was measured
    assert _listed(lab, result)["state"] == "stale"
    shown = json.loads(lab.sm("show", "p2", "--json").out)
    assert [k["state"] for k in shown["links"] if k["id"] == result] == ["stale"]


def test_a_run_on_a_tree_rebuilt_at_an_older_version_records_that_version(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    old_tree, old_sha = lab.worktree_id(), _sha(lab.store / "patches" / "p1.patch")
    first = link_id(lab, "p1", "--from-json", _bench(lab, "v1.json", 100.0))
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    assert lab.sm("refresh").code == 0
    new_tree = lab.worktree_id()
    assert _sha(lab.store / "patches" / "p1.patch") != old_sha and new_tree != old_tree
    assert lab.sm("apply", "--link", first).code == 0 and lab.worktree_id() == old_tree
    ran = lab.sm("run", "--name", "again", "--", sys.executable, "-c", "print('Output token throughput: 1')")
    assert ran.code == 0, ran.err
    (again,) = [r for r in link_records(lab, "p1") if r.get("run", {}).get("name") == "again"]
    (stack,) = again["stack"]
    assert stack["snapshot"] == old_tree
    assert [(p["name"], p["sha256"]) for p in stack["patches"]] == [("p1", old_sha)]
    assert stack["residue"] is False and "residue_patch" not in stack
    assert again["patch"]["sha256"] == old_sha  # the version it measured, not the file's now
    assert _listed(lab, again["id"])["measured_current_version"] is False
    assert lab.sm("apply", "S").code == 0 and lab.worktree_id() == new_tree
    done = lab.sm("apply", "--link", again["id"])
    assert done.code == 0, done.err
    assert lab.worktree_id() == old_tree


def test_a_result_on_a_lower_patch_renamed_since_rebuilds_and_reruns_by_the_names_now(lab: Lab) -> None:
    _two_patches(lab)
    measured, p1_sha = lab.worktree_id(), _sha(lab.store / "patches" / "p1.patch")
    p2_sha = _sha(lab.store / "patches" / "p2.patch")
    result = link_id(lab, "p2", "--from-json", _bench(lab, "p2.json", 110.0))
    assert lab.sm("rename", "p1", "p1-base").code == 0
    assert _listed(lab, result)["state"] == "fresh"  # the same bytes under another name
    assert lab.sm("reset", "vllm").code == 0
    assert lab.sm("apply", "--link", result).code == 0 and lab.worktree_id() == measured
    held = applied_state(lab)
    assert held is not None and held["patches"] == ["p1-base", "p2"]  # type: ignore[index]
    ran = lab.sm("run", "--name", "again", "--", sys.executable, "-c", "print(1)")
    assert ran.code == 0, ran.err
    (again,) = [r for r in link_records(lab, "p2") if r.get("run", {}).get("name") == "again"]
    (stack,) = again["stack"]
    assert stack["snapshot"] == measured and stack["residue"] is False
    assert [(p["name"], p["sha256"]) for p in stack["patches"]] == [("p1-base", p1_sha), ("p2", p2_sha)]


def test_a_result_with_no_measured_state_of_its_tree_did_not_measure_its_patch_in_every_view(ev: Lab) -> None:
    kernels = ev.tree.parent / "kernels"
    kernels.rename(ev.tree.parent / "kernels-away")  # the kernel tree is not where this machine placed it
    result = link_id(ev, "gemm-tile", "--from-json", "results/bench.json")
    (record,) = link_records(ev, "gemm-tile")
    assert [s["tree"] for s in record["stack"]] == ["vllm"]  # no measured state of its own tree
    assert _listed(ev, result)["measured_patch"] is False
    (group,) = json.loads(ev.sm("--json", "compare", "gemm-tile").out)["groups"]
    assert [k["link"] for k in group["left_out"]] == [result]
    refused = ev.sm("link", "gemm-tile", "--amends", result, "--verdict", "promoted")
    assert refused.code == 2 and "its changes are not in tree vllm-xpu-kernels's measured state" in refused.err


def test_a_teammate_s_pulled_rename_leaves_every_result_rebuildable_and_counted(lab: Lab, tmp_path: Path) -> None:
    from tests.test_team_day import pull, team, work

    bob = team(lab, tmp_path)
    result = work(lab, "fast", "fast.txt", "experimental")
    assert lab.sm("apply", "S").code == 0
    measured = lab.worktree_id()
    assert lab.sm("reset").code == 0
    git(lab.store, "push", "-q")
    pull(bob)
    assert bob.sm("rename", "fast", "fast-path").code == 0
    git(bob.store, "add", "-A")
    git(bob.store, "commit", "-q", "-m", "fast: a better name")
    git(bob.store, "push", "-q")
    pull(lab)
    for who in (lab, bob):
        assert _listed(who, result)["patch"] == "fast-path"
        assert _listed(who, result)["state"] == "fresh" and _listed(who, result)["measured_patch"] is True
        done = who.sm("apply", "--link", result)
        assert done.code == 0, done.err
        assert who.worktree_id() == measured
        held = applied_state(who)
        assert held is not None and held["patches"] == ["base", "fast-path"]  # type: ignore[index]
