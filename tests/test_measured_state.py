"""Every result leads back to its exact tree: a link records, per tree, the snapshot id, every patch present
(whatever series) and the residue, kept by content under artifacts/; `apply --link` rebuilds it on another clone
and proves it by snapshot id. Result and note directories declared in the config are outputs, never work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import Lab, applied_state, git, link_id, link_records, porcelain


def three_patches_two_series_and_a_residue(lab: Lab) -> str:
    """Patches p1, p2 in series S (applied), `side` in series X (present, not applied), then an edit and an
    untracked binary nobody saved; returns the working tree's id."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    (lab.tree / "docs.txt").write_text("notes\n")
    assert lab.sm("save", "p2", "--series", "S", "-m", "p2").code == 0
    assert lab.sm("series", "new", "X").code == 0
    (lab.tree / "side.txt").write_text("side lane\n")
    assert lab.sm("save", "side", "-m", "side", "side.txt").code == 0
    assert lab.sm("series", "add", "X", "side").code == 0
    (lab.tree / "README").write_text("hello\nresidue\n")
    (lab.tree / "blob.bin").write_bytes(b"\0\1\2 not saved")
    return lab.worktree_id()


def stack_of(lab: Lab, patch: str) -> dict[str, object]:
    (record,) = (lab.store / "links" / patch).glob("*.toml")
    (stack,) = tomllib.loads(record.read_text())["stack"]
    return dict(stack)


@pytest.mark.regression("a link recorded only the series last saved into, no snapshot id and no residue")
def test_a_link_records_the_exact_measured_tree(lab: Lab) -> None:
    measured = three_patches_two_series_and_a_residue(lab)
    link_id(lab, "p2", str(lab.store / "stackmgr.toml"))
    stack = stack_of(lab, "p2")
    assert stack["snapshot"] == measured and stack["base"] == git(lab.tree, "rev-parse", "HEAD").decode().strip()
    assert [p["name"] for p in stack["present"]] == ["p1", "p2", "side"]  # type: ignore[attr-defined]
    assert [p["name"] for p in stack["patches"]] == ["p1", "p2", "side"]  # type: ignore[attr-defined]
    residue = lab.store / str(stack["residue_patch"])
    assert stack["residue"] is True and residue.parent.parent.name == "sha256"
    text = residue.read_bytes()
    assert b"+residue" in text and b"blob.bin" in text and b"side.txt" not in text  # only what no patch holds


def test_apply_link_rebuilds_the_measured_tree_on_a_teammate_s_clone(lab: Lab, tmp_path: Path) -> None:
    measured = three_patches_two_series_and_a_residue(lab)
    link = link_id(lab, "p2", str(lab.store / "stackmgr.toml"))
    git(lab.store, "init", "-q")
    git(lab.store, "add", "-A")
    git(lab.store, "commit", "-q", "-m", "the day's results")
    store, tree = tmp_path / "bob" / "store", tmp_path / "bob" / "vllm"
    git(tmp_path, "clone", "-q", str(lab.store), str(store))
    git(tmp_path, "clone", "-q", str(lab.tree), str(tree))
    bob = Lab(store, tree)
    assert bob.sm("tree", "set", "vllm", str(tree)).code == 0
    done = bob.sm("--json", "apply", "--link", link)
    assert done.code == 0, done.err
    (rebuilt,) = json.loads(done.out)["trees"]
    assert rebuilt["snapshot"] == measured and rebuilt["changed"] is True
    assert bob.worktree_id() == measured  # byte for byte, the binary and the residue included
    assert (tree / "blob.bin").read_bytes() == b"\0\1\2 not saved"
    again = bob.sm("apply", "--link", link.removeprefix("lnk-"))  # the id without its prefix; the tree is there
    assert again.code == 0 and "already at the measured state" in again.out, again.err
    assert bob.worktree_id() == measured


def test_apply_link_refuses_a_tree_with_unsaved_work_and_changes_nothing(lab: Lab) -> None:
    three_patches_two_series_and_a_residue(lab)
    link = link_id(lab, "p2", str(lab.store / "stackmgr.toml"))
    assert lab.sm("save", "rest", "-m", "the residue").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "wip.txt").write_text("unsaved\n")
    before = porcelain(lab.tree)
    refused = lab.sm("apply", "--link", link)
    assert refused.code == 1 and "wip.txt" in refused.err
    assert porcelain(lab.tree) == before


def test_show_says_whether_the_current_version_of_the_patch_was_measured(lab: Lab) -> None:
    three_patches_two_series_and_a_residue(lab)
    link = link_id(lab, "side", str(lab.store / "stackmgr.toml"))
    shown = lab.sm("show", "side")
    assert "measured this version of the patch" in shown.out and f"apply --link {link}" in shown.out
    assert "measured on vllm " in shown.out and "p1, p2, side + residue = tree" in shown.out
    (lab.tree / "side.txt").write_text("side lane, refreshed\n")
    assert lab.sm("save", "side", "--update", "side.txt").code == 0
    later = lab.sm("show", "side")
    assert "measured an older version of the patch" in later.out
    assert json.loads(lab.sm("show", "side", "--json").out)["links"][0]["measured_current_version"] is False
    assert lab.sm("reset", "--force").code == 0
    rebuilt = lab.sm("apply", "--link", link)  # the measured version, from patches/.versions/
    assert rebuilt.code == 0, rebuilt.err
    assert (lab.tree / "side.txt").read_text() == "side lane\n"


def test_apply_link_of_a_record_without_a_snapshot_says_it_cannot_be_rebuilt(lab: Lab) -> None:
    three_patches_two_series_and_a_residue(lab)
    link_id(lab, "p2", str(lab.store / "stackmgr.toml"))
    (record,) = (lab.store / "links" / "p2").glob("*.toml")
    text = record.read_text()
    record.write_text("\n".join(ln for ln in text.splitlines() if not ln.startswith("snapshot = ")) + "\n")
    (old,) = json.loads(lab.sm("links", "--json").out)["links"]
    result = lab.sm("apply", "--link", old["id"])
    assert result.code == 3 and "recorded before measured states were kept" in result.err
    assert lab.sm("apply", "--link", "lnk-000000000000").code == 2


def test_declared_result_directories_never_block_check_and_are_left_alone(lab: Lab) -> None:
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["results", "notes/"]\n')  # under [trees.vllm]
    (lab.tree / "results").mkdir()
    (lab.tree / "results" / "bench.json").write_text('{"request_throughput": 3.1}')
    (lab.tree / "notes").mkdir()
    (lab.tree / "notes" / "day.md").write_text("tried k=3\n")
    assert lab.sm("check").code == 0
    (lab.tree / "README").write_text("hello\nfix\n")
    assert lab.sm("check").code == 1
    assert lab.sm("save", "fix", "-m", "fix").code == 0
    assert b"results/" not in (lab.store / "patches" / "fix.patch").read_bytes()
    assert lab.sm("reset").code == 0
    assert (lab.tree / "results" / "bench.json").exists() and (lab.tree / "notes" / "day.md").exists()
    config.write_text(config.read_text().replace('["results", "notes/"]', '["../elsewhere"]'))
    bad = lab.sm("check")
    assert bad.code == 3 and "must be a directory inside the tree" in bad.err


def patches_on_head(lab: Lab, names: list[str]) -> str:
    """HEAD with patches/NAME.patch applied in order, in a scratch index (git alone); the tree id."""
    env = dict(os.environ, GIT_INDEX_FILE=str(lab.tree / ".git" / "test-chain-index"))
    subprocess.run(["git", "read-tree", "HEAD"], cwd=lab.tree, env=env, check=True)
    for name in names:
        subprocess.run(["git", "apply", "--cached", str(lab.store / "patches" / f"{name}.patch")], cwd=lab.tree,
                       env=env, check=True)  # fmt: skip
    tree = subprocess.run(["git", "write-tree"], cwd=lab.tree, env=env, check=True, capture_output=True)
    os.unlink(env["GIT_INDEX_FILE"])
    return tree.stdout.decode().strip()


def measured_then_rebuilt(lab: Lab) -> tuple[str, str, dict[str, object]]:
    """The residue scenario linked to p2, the tree reset (forced: the residue is nobody's patch) and the measured
    state rebuilt with `apply --link`; (link id, measured tree id, the record's stack)."""
    measured = three_patches_two_series_and_a_residue(lab)
    link = link_id(lab, "p2", str(lab.store / "stackmgr.toml"))
    assert lab.sm("reset", "--force").code == 0
    assert lab.worktree_id() != measured
    done = lab.sm("apply", "--link", link)
    assert done.code == 0, done.err
    assert lab.worktree_id() == measured
    return link, measured, stack_of(lab, "p2")


@pytest.mark.regression("apply --link recorded no applied state: run needed --link, re-applying it refused")
def test_apply_link_records_what_the_tree_holds_and_applies_again_as_a_no_op(lab: Lab) -> None:
    link, measured, stack = measured_then_rebuilt(lab)
    head = git(lab.tree, "rev-parse", "HEAD").decode().strip()
    state = json.loads((lab.store / ".stackmgr" / "applied.json").read_text())["trees"]["vllm"]
    assert state["series"] == "S" and state["base"] == head == stack["base"]
    assert [n for n, _sha in state["patches"]] == ["p1", "p2", "side"]
    assert state["measured"] == {"link": link, "patch": "p2", "residue": stack["residue_patch"], "tree": measured}
    below = state["result_tree"]  # the patches alone: the residue is on top of them, in no patch
    assert below != measured and below == patches_on_head(lab, ["p1", "p2", "side"])
    shown = applied_state(lab)
    assert shown is not None and shown["matches"] is True and shown["measured"]["link"] == link  # type: ignore[index]
    assert f"the residue of {link} (in no patch; kept in artifacts/sha256/" in lab.sm("status").out
    assert lab.sm("check").code == 0  # the residue is exactly what artifacts/ keeps: preserved
    again = lab.sm("--json", "apply", "--link", link)  # over itself: nothing to lose, nothing to move
    assert again.code == 0, again.err
    assert json.loads(again.out)["trees"][0]["changed"] is False
    assert lab.worktree_id() == measured and git(lab.tree, "rev-parse", "HEAD").decode().strip() == head
    ran = lab.sm("--json", "run", "--", sys.executable, "-c", "print('throughput: 1')")  # no --link needed
    assert ran.code == 0, ran.err
    (new,) = [r for r in link_records(lab, "p2") if r.get("run")]
    (again_stack,) = new["stack"]
    assert again_stack["snapshot"] == measured and again_stack["residue_patch"] == stack["residue_patch"]
    assert again_stack["series"] == "S" and [p["name"] for p in again_stack["patches"]] == ["p1", "p2", "side"]


@pytest.mark.regression("the residue apply --link puts on top could be lost or block every reset")
def test_the_residue_counts_as_preserved_only_while_byte_identical(lab: Lab) -> None:
    link, measured, stack = measured_then_rebuilt(lab)
    readme = (lab.tree / "README").read_bytes()
    (lab.tree / "README").write_bytes(readme.replace(b"residue", b"residuE"))  # the user's edit, one byte
    assert lab.sm("check").code == 1
    refused = lab.sm("reset")
    assert refused.code == 1 and "README" in refused.err
    assert (lab.tree / "README").read_bytes() == readme.replace(b"residue", b"residuE")  # never lost
    assert lab.sm("apply", "--link", link).code == 1  # it would overwrite the edit: refused too
    (lab.tree / "README").write_bytes(readme)  # back to the measured bytes
    assert lab.sm("check").code == 0
    (lab.tree / "blob.bin").write_bytes(b"\0\1\2 not saved, changed")
    assert lab.sm("check").code == 1
    (lab.tree / "blob.bin").write_bytes(b"\0\1\2 not saved")
    kept = lab.store / str(stack["residue_patch"])
    data = kept.read_bytes()
    kept.write_bytes(data + b"\n")  # the store's copy damaged: it no longer reproduces anything
    assert lab.sm("check").code == 1 and "missing or damaged" in lab.sm("status").out
    kept.write_bytes(data)
    assert lab.sm("check").code == 0
    assert lab.sm("reset").code == 0  # allowed: everything, the residue too, is in the store
    assert lab.worktree_id() == git(lab.tree, "rev-parse", "HEAD^{tree}").decode().strip()
    assert applied_state(lab) is not None and applied_state(lab)["measured"] is None  # type: ignore[index]
    assert lab.sm("apply", "--link", link).code == 0 and lab.worktree_id() == measured  # and it comes back


@pytest.mark.regression("status after apply --link of a result measured at the base said the series' patches were "
                        "appended since")  # fmt: skip
def test_status_after_rebuilding_a_state_measured_at_the_base_says_no_false_edits(lab: Lab) -> None:
    for n in (1, 2):
        (lab.tree / f"f{n}.txt").write_text(f"{n}\n")
        assert lab.sm("save", f"p{n}", "--series", "S", "-m", f"p{n}").code == 0
    assert lab.sm("reset").code == 0
    upstream = link_id(lab, "p1", str(lab.store / "stackmgr.toml"))  # measured on the base alone
    assert lab.sm("apply", "S").code == 0
    done = lab.sm("apply", "--link", upstream)
    assert done.code == 0, done.err
    status = lab.sm("status").out
    assert "appended" not in status and "edited since" not in status, status
