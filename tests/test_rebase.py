"""`stackmgr rebase SERIES --onto REV`: a 20-patch series carried over a generated upstream
history that shifts some patches, rewrites the context of one, conflicts with one and merges another. The
classification must be exactly right, the user's tree untouched, and the result apply strictly on the new base."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from stackmgr.store import patchfile
from tests.conftest import Lab, commit, git, git_text, link_id, run_stackmgr, show_json
from tests.conftest import stackmgr_process as stackmgr

N = 20


def _lines(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, 41))


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def _fingerprint(lab: Lab) -> dict[str, bytes]:
    return {str(p.relative_to(lab.store)): p.read_bytes() for d in ("patches", "series")
            for p in sorted((lab.store / d).rglob("*")) if p.is_file()}  # fmt: skip


@pytest.fixture
def stacked(lab: Lab) -> Lab:
    """Files f00..f19 of 40 lines; patch pNN rewrites line 20 of fNN; all in series S, saved on top of each other."""
    for i in range(N):
        (lab.tree / f"f{i:02d}.txt").write_text(_lines(40))
    git(lab.tree, "add", "-A")
    git(lab.tree, "commit", "-q", "-m", "twenty files")
    for i in range(N):
        _edit(lab.tree / f"f{i:02d}.txt", "line 20\n", f"line 20 patched by p{i:02d}\n")
        result = lab.sm("save", f"p{i:02d}", "--series", "S", "-m", f"patch {i}")
        assert result.code == 0, result.err
    assert lab.sm("reset").code == 0
    return lab


def _upstream(lab: Lab) -> str:
    """Upstream history on top of the series' base: several commits, as upstream moves."""
    t = lab.tree
    for i in (1, 2, 3):  # lines inserted far above: the hunks move (context drift, same patch-id)
        _edit(t / f"f{i:02d}.txt", "line 1\n", "new first line\nline 1\n")
    git(t, "commit", "-q", "-am", "upstream: headers")
    _edit(t / "f15.txt", "line 38\n", "line 38 upstream\n")  # outside the hunk: blob ids change, patch-id not
    _edit(t / "f05.txt", "line 18\n", "line 18 upstream\n")  # inside the hunk's context: a 3-way merge
    git(t, "commit", "-q", "-am", "upstream: nearby edits")
    _edit(t / "f07.txt", "line 20\n", "line 20 rewritten upstream\n")  # the same line: a conflict
    _edit(t / "f11.txt", "line 20\n", "line 20 patched by p11\n")  # p11 merged upstream
    (t / "NEWS").write_text("upstream news\n")
    git(t, "add", "-A")
    git(t, "commit", "-q", "-m", "upstream: conflict and merge")
    return git_text(t, "rev-parse", "HEAD")


EXPECTED = {f"p{i:02d}": "unchanged" for i in range(N)} | {
    "p01": "context drift", "p02": "context drift", "p03": "context drift", "p15": "context drift",
    "p05": "merged (3-way)", "p07": "conflict resolved", "p11": "already upstream",
}  # fmt: skip


@pytest.mark.slow
def test_twenty_patches_over_upstream_history(stacked: Lab) -> None:
    lab = stacked
    probe = lab.store / "probe.log"
    probe.write_text("tok/s 107.77\n")
    shifted, nearby = link_id(lab, "p01", str(probe)), link_id(lab, "p05", str(probe))
    onto = _upstream(lab)
    head, status, before = git_text(lab.tree, "rev-parse", "HEAD"), git(lab.tree, "status"), _fingerprint(lab)

    stopped = lab.sm("rebase", "S", "--onto", "HEAD", "--json")
    assert stopped.code == 3
    state = json.loads(stopped.out)
    assert state["done"] is False and "p07 (8 of 20) conflicts in f07.txt" in stopped.err
    assert [p["outcome"] for p in state["patches"][:7]] == [EXPECTED[f"p{i:02d}"] for i in range(7)]
    assert _fingerprint(lab) == before  # nothing written to the store before every patch is carried
    assert git_text(lab.tree, "rev-parse", "HEAD") == head and git(lab.tree, "status") == status

    again = lab.sm("rebase", "S", "--onto", "HEAD")
    assert again.code == 2 and "in progress" in again.err
    worktree = Path(state["worktree"])
    conflicted = worktree / "f07.txt"
    assert "<<<<<<<" in conflicted.read_text()
    early = lab.sm("rebase", "--continue")
    assert early.code == 3 and "conflict markers" in early.err
    conflicted.write_text(_lines(40).replace("line 20\n", "line 20 rewritten upstream, then patched by p07\n"))

    done = lab.sm("rebase", "--continue", "--json")
    assert done.code == 0, done.err
    outcomes = {p["name"]: p["outcome"] for p in json.loads(done.out)["patches"]}
    assert outcomes == EXPECTED

    # The rewritten series applies strictly on the new base; p11 is kept as a comment, its file as it was.
    series = (lab.store / "series" / "S").read_text()
    assert "# p11.patch  (already upstream in" in series and "\np12.patch\n" in series
    assert (lab.store / "patches" / "p11.patch").read_bytes() == before["patches/p11.patch"]
    for name, outcome in EXPECTED.items():
        data = (lab.store / "patches" / f"{name}.patch").read_bytes()
        if outcome != "already upstream":
            assert f"Stackmgr-Base: {onto}\n".encode() in data
        if outcome == "unchanged":  # only the base line differs
            assert data.replace(onto.encode(), b"") == before[f"patches/{name}.patch"].replace(
                before[f"patches/{name}.patch"].split(b"Stackmgr-Base: ")[1][:40], b"")  # fmt: skip
    assert git_text(lab.tree, "rev-parse", "HEAD") == head
    assert (lab.store / "patches" / ".versions" / "p01").is_dir()  # the replaced versions, for interdiff
    undone = lab.sm("undo")
    assert undone.code == 0 and _fingerprint(lab) == before  # undo puts the old series back byte for byte
    assert lab.sm("redo").code == 0 and _fingerprint(lab) != before  # and redo redoes it

    applied = lab.sm("apply", "S")
    assert applied.code == 0, applied.err
    assert git_text(lab.tree, "rev-parse", "HEAD") == onto
    assert "rewritten upstream, then patched by p07" in (lab.tree / "f07.txt").read_text()
    assert "line 18 upstream\nline 19\nline 20 patched by p05\n" in (lab.tree / "f05.txt").read_text()
    assert (lab.tree / "f11.txt").read_text().count("patched by p11") == 1

    # Links follow patch-ids: a moved patch's evidence stays equivalent; a rewritten change's goes stale.
    assert [lk["state"] for lk in show_json(lab, "p01")["links"] if lk["id"] == shifted] == ["equivalent"]
    assert [lk["state"] for lk in show_json(lab, "p05")["links"] if lk["id"] == nearby] == ["stale"]
    assert git_text(lab.tree, "worktree", "list").count("\n") == 0  # the scratch worktree is gone


@pytest.mark.slow
def test_abort_changes_nothing(stacked: Lab) -> None:
    lab = stacked
    _upstream(lab)
    before = _fingerprint(lab)
    assert lab.sm("rebase", "S", "--onto", "HEAD").code == 3
    aborted = lab.sm("rebase", "--abort")
    assert aborted.code == 0 and "nothing was changed" in aborted.out
    assert _fingerprint(lab) == before
    assert git_text(lab.tree, "worktree", "list").count("\n") == 0
    assert lab.sm("rebase", "--continue").code == 2  # nothing in progress any more


@pytest.mark.slow
def test_exec_runs_after_each_patch_and_a_failure_stops(stacked: Lab, tmp_path: Path) -> None:
    lab = stacked
    git(lab.tree, "commit", "-q", "--allow-empty", "-m", "upstream moved on")
    log = tmp_path / "exec.log"
    result = lab.sm("rebase", "S", "--onto", "HEAD", "--exec", f"grep -l patched f*.txt | wc -l >> {log}")
    assert result.code == 0, result.err
    assert [int(n) for n in log.read_text().split()] == list(range(1, N + 1))  # after each patch, in order
    assert [ln.split()[0] for ln in result.out.splitlines()[:N]] == ["unchanged"] * N

    git(lab.tree, "commit", "-q", "--allow-empty", "-m", "and again")
    check = "if grep -q 'patched by p03' f03.txt && test ! -e fixed; then exit 5; fi"
    stop = lab.sm("rebase", "S", "--onto", "HEAD", "--exec", check, "--json")
    assert stop.code == 3 and "failed (exit 5) after p03" in stop.err
    worktree = Path(json.loads(stop.out)["worktree"])
    _edit(worktree / "f03.txt", "line 30\n", "line 30 fixed by hand\n")
    (worktree / "fixed").write_text("a build artefact, never `git add`ed\n")
    resumed = lab.sm("rebase", "--continue", "--json")
    assert resumed.code == 0, resumed.err
    outcomes = {p["name"]: p["outcome"] for p in json.loads(resumed.out)["patches"]}
    assert outcomes["p03"] == "changed by hand" and outcomes["p04"] == "unchanged"
    p03 = (lab.store / "patches" / "p03.patch").read_bytes()
    assert b"+line 30 fixed by hand" in p03 and b"fixed" not in p03.replace(b"fixed by hand", b"")


@pytest.mark.slow
def test_refusals(stacked: Lab, tmp_path: Path) -> None:
    lab = stacked
    bad = lab.sm("rebase", "S", "--onto", "no-such-rev")
    assert bad.code == 2 and "not a commit" in bad.err and "Traceback" not in bad.err
    assert lab.sm("rebase", "S").code == 2
    assert lab.sm("rebase", "--onto", "HEAD").code == 2
    assert lab.sm("rebase", "S", "--onto", "HEAD", "--abort").code == 2
    missing = lab.sm("rebase", "nope", "--onto", "HEAD")
    assert missing.code in (2, 3) and "nope" in missing.err


@pytest.mark.slow
def test_a_killed_rebase_goes_on_where_it_stopped(stacked: Lab, tmp_path: Path) -> None:
    """SIGKILL in the middle (after p03 was carried, before that was recorded), then during the final write:
    `--continue` each time, and the result is the one an uninterrupted run gives."""
    lab = stacked
    _edit(lab.tree / "f01.txt", "line 1\n", "new first line\nline 1\n")
    git(lab.tree, "commit", "-q", "-am", "upstream")
    flag = tmp_path / "killed-once"
    kill = f"if grep -q 'patched by p03' f03.txt && test ! -e {flag}; then touch {flag}; kill -9 $PPID; fi"
    assert stackmgr(lab.store, "rebase", "S", "--onto", "HEAD", "--exec", kill).returncode == -9
    crashed = stackmgr(lab.store, "rebase", "--continue", STACKMGR_CRASH_AT="rebase:3")
    assert crashed.returncode == -9
    done = stackmgr(lab.store, "rebase", "--continue", "--json")
    assert done.returncode == 0, done.stderr
    outcomes = [p["outcome"] for p in json.loads(done.stdout)["patches"]]
    assert outcomes == ["unchanged", "context drift"] + ["unchanged"] * (N - 2)
    assert lab.sm("apply", "S").code == 0
    assert (lab.tree / "f03.txt").read_text().count("patched by p03") == 1
    assert git_text(lab.tree, "worktree", "list").count("\n") == 0


@pytest.mark.slow
def test_exec_and_tree_only_with_onto(stacked: Lab) -> None:
    for args in (("--continue", "--exec", "true"), ("--abort", "-t", "vllm")):
        result = stacked.sm("rebase", *args)
        assert result.code == 2 and "go with --onto" in result.err and "Traceback" not in result.err


# --- classification of smaller series ---------------------------------------------------------------------------------


def one_patch_series(lab: Lab, files: dict[str, str | None], name: str = "p1") -> None:
    """Edit the tree (series S applied, if there is one), save it as `name` at the end of S, reset the tree."""
    if (lab.store / "series" / "S").exists():
        assert lab.sm("apply", "S").code == 0
    for path, text in files.items():
        target = lab.tree / path
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    assert lab.sm("save", name, "--series", "S", "-m", name).code == 0
    assert lab.sm("reset").code == 0


def rebase_json(lab: Lab, *args: str) -> tuple[int, dict[str, object], str]:
    result = lab.sm("rebase", *args, "--json")
    assert "Traceback" not in result.err and "internal error" not in result.err, result.err
    return result.code, json.loads(result.out) if result.out.strip() else {}, result.err


@pytest.mark.regression("edge case: add/add and partly upstream patches")
def test_rebase_classifies_add_add_and_partial_upstream(lab: Lab) -> None:
    one_patch_series(lab, {"new.txt": "mine\n"}, "same")
    one_patch_series(lab, {"src/model.py": "def f():\n    return 2\n", "README": "hello\nworld\n"}, "partly")
    one_patch_series(lab, {"other.txt": "mine\n"}, "clash")
    commit(lab.tree, {"new.txt": "mine\n", "README": "hello\nworld\n", "other.txt": "theirs\n"}, "upstream")
    code, state, err = rebase_json(lab, "S", "--onto", "HEAD")
    assert code == 3 and "clash (3 of 3) conflicts in other.txt" in err
    assert [p["outcome"] for p in state["patches"]] == ["already upstream", "merged (3-way)", None]  # type: ignore
    assert lab.sm("rebase", "--abort").code == 0
    assert git_text(lab.tree, "worktree", "list").count("\n") == 0


@pytest.mark.regression("a deletion of a file upstream modified was reported as missing blobs")
def test_a_deletion_of_a_file_upstream_modified_is_explained(lab: Lab) -> None:
    one_patch_series(lab, {"src/model.py": None})
    commit(lab.tree, {"src/model.py": "def f():\n    return 3\n"}, "upstream edits the file")
    result = lab.sm("rebase", "S", "--onto", "HEAD")
    assert result.code == 3
    assert "original blobs are missing" not in result.err, result.err


@pytest.mark.regression("a resolution committed in the rebase worktree went to the next patch")
def test_a_resolution_committed_in_the_worktree_stays_with_its_patch(lab: Lab) -> None:
    one_patch_series(lab, {"README": "hello\nmore\n"}, "p1")
    one_patch_series(lab, {"src/model.py": "def f():\n    return 2\n"}, "p2")
    commit(lab.tree, {"README": "bye\n"}, "upstream")
    code, state, _ = rebase_json(lab, "S", "--onto", "HEAD")
    worktree = Path(str(state["worktree"]))
    (worktree / "README").write_text("bye\nmore\n")
    git(worktree, "commit", "-qam", "resolved")
    code, state, err = rebase_json(lab, "--continue")
    assert code == 0, err
    assert [p["outcome"] for p in state["patches"]] == ["conflict resolved", "unchanged"]  # type: ignore
    assert (lab.store / "series" / "S").read_text() == "p1.patch\np2.patch\n"
    assert b"README" not in (lab.store / "patches" / "p2.patch").read_bytes()


@pytest.mark.regression("a lone ======= heading underline was taken for a conflict marker")
def test_a_heading_underline_is_not_a_conflict_marker(lab: Lab) -> None:
    one_patch_series(lab, {"doc.rst": "Title\n=====\n\nSummary\n=======\n\ntext\n"})
    commit(lab.tree, {"doc.rst": "Title\n=====\n\nother text\n"}, "upstream")
    _, state, _ = rebase_json(lab, "S", "--onto", "HEAD")
    (Path(str(state["worktree"])) / "doc.rst").write_text("Title\n=====\n\nother text\n\nSummary\n=======\n\ntext\n")
    done = lab.sm("rebase", "--continue")
    assert done.code == 0, done.err


@pytest.mark.regression("a series of patches saved at different bases could not be rebased")
def test_rebase_of_a_series_assembled_from_patches_saved_at_different_bases(lab: Lab) -> None:
    (lab.tree / "README").write_text("hello\nmore\n")
    assert lab.sm("save", "p1", "-m", "p1").code == 0 and lab.sm("reset").code == 0
    commit(lab.tree, {"other": "x\n"}, "upstream 1")
    (lab.tree / "src" / "model.py").write_text("changed\n")
    assert lab.sm("save", "p2", "-m", "p2").code == 0 and lab.sm("reset").code == 0
    assert lab.sm("series", "new", "S").code == 0 and lab.sm("series", "add", "S", "p1", "p2").code == 0
    assert lab.sm("lint").code == 0
    commit(lab.tree, {"other2": "y\n"}, "upstream 2")
    result = lab.sm("rebase", "S", "--onto", "HEAD")
    assert result.code == 0, result.err


# --- --exec -----------------------------------------------------------------------------------------------------------


@pytest.mark.regression("--exec output went to stdout, into the JSON")
def test_rebase_exec_output_does_not_corrupt_json(lab: Lab) -> None:
    one_patch_series(lab, {"README": "hello\nmore\n"})
    commit(lab.tree, {"other": "x\n"}, "upstream")
    proc = stackmgr(lab.store, "rebase", "S", "--onto", "HEAD", "--exec", "echo build ok", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["done"] is True


@pytest.mark.regression("tracked changes left by --exec did not stop the rebase")
def test_rebase_exec_that_leaves_tracked_changes_stops_cleanly(lab: Lab) -> None:
    one_patch_series(lab, {"README": "hello\nmore\n"}, "p1")
    one_patch_series(lab, {"README": "hello\nmore\nand more\n"}, "p2")
    commit(lab.tree, {"other": "x\n"}, "upstream")
    result = lab.sm("rebase", "S", "--onto", "HEAD", "--exec", "echo generated >> README")
    assert "original blobs are missing" not in result.err, result.err


# --- state, worktree, store -------------------------------------------------------------------------------------------


def _stopped(lab: Lab) -> Path:
    """Series S (one patch) stopped on a conflict; the worktree path."""
    one_patch_series(lab, {"README": "hello\nmore\n"})
    commit(lab.tree, {"README": "bye\n"}, "upstream")
    code, state, _ = rebase_json(lab, "S", "--onto", "HEAD")
    assert code == 3
    return Path(str(state["worktree"]))


@pytest.mark.regression("edge case: the rebase worktree deleted before --continue")
def test_rebase_continue_after_the_worktree_was_deleted(lab: Lab) -> None:
    shutil.rmtree(_stopped(lab))
    gone = lab.sm("rebase", "--continue")
    assert gone.code == 3 and "is gone" in gone.err and len(gone.err.splitlines()) == 1
    assert lab.sm("rebase", "--abort").code == 0
    assert git_text(lab.tree, "worktree", "list").count("\n") == 0


@pytest.mark.regression("edge case: the series edited during the rebase")
def test_a_series_edited_during_the_rebase_is_refused_and_nothing_is_written(lab: Lab) -> None:
    worktree = _stopped(lab)
    (worktree / "README").write_text("bye\nmore\n")
    with open(lab.store / "series" / "S", "a") as f:
        f.write("# a note\n")
    before = (lab.store / "patches" / "p1.patch").read_bytes()
    edited = lab.sm("rebase", "--continue")
    assert edited.code == 3 and "was edited during the rebase" in edited.err
    assert (lab.store / "patches" / "p1.patch").read_bytes() == before
    assert lab.sm("rebase", "--abort").code == 0


@pytest.mark.regression("a damaged state file made --abort an internal error")
def test_a_damaged_rebase_state_can_still_be_aborted(lab: Lab) -> None:
    _stopped(lab)
    (lab.store / ".stackmgr" / "rebase" / "S.json").write_text('{"series": "S"}')
    aborted = lab.sm("rebase", "--abort")
    assert "internal error" not in aborted.err, aborted.err


@pytest.mark.regression("--abort deleted the worktree path read from the state file")
def test_rebase_abort_never_deletes_a_directory_outside_its_scratch_area(lab: Lab, tmp_path: Path) -> None:
    _stopped(lab)
    victim = tmp_path / "results"
    victim.mkdir()
    (victim / "bench.json").write_text("{}")
    state_file = lab.store / ".stackmgr" / "rebase" / "S.json"
    state = json.loads(state_file.read_text())
    state["worktree"] = str(victim)
    state_file.write_text(json.dumps(state))
    lab.sm("rebase", "--abort")
    assert (victim / "bench.json").exists()


@pytest.mark.regression("two stores rebasing series of one name shared a worktree")
def test_two_stores_rebasing_series_of_the_same_name(lab: Lab, tmp_path: Path) -> None:
    worktree = _stopped(lab)
    (worktree / "README").write_text("bye\nmore\n")  # the user's resolution, not yet continued
    other = tmp_path / "store2"
    assert run_stackmgr("init", str(other)).code == 0
    assert run_stackmgr("--store", str(other), "tree", "add", "vllm", str(lab.tree)).code == 0
    shutil.copy(lab.store / "patches" / "p1.patch", other / "patches" / "p1.patch")
    (other / "series" / "S").write_text("p1.patch\n")
    run_stackmgr("--store", str(other), "rebase", "S", "--onto", "HEAD")
    assert (worktree / "README").read_text() == "bye\nmore\n"


@pytest.mark.regression("a rebase left a tree still on the old series unpreserved")
def test_a_tree_with_the_old_series_stays_preserved_after_rebase(lab: Lab) -> None:
    lines = "".join(f"l{i}\n" for i in range(30))
    commit(lab.tree, {"f.txt": lines}, "f")
    (lab.tree / "f.txt").write_text(lines.replace("l20", "L20"))
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    git(lab.tree, "stash")
    onto = commit(lab.tree, {"f.txt": lines.replace("l1\n", "l1 upstream\n")}, "upstream")
    git(lab.tree, "checkout", "-q", "HEAD~1")
    git(lab.tree, "stash", "pop")
    assert lab.sm("check").code == 0
    code, state, _ = rebase_json(lab, "S", "--onto", onto)
    assert code == 0 and [p["outcome"] for p in state["patches"]] == ["context drift"]  # type: ignore
    assert lab.sm("check").code == 0, "the rebase itself made the user's tree unpreserved"
    applied = lab.sm("apply", "S")
    assert applied.code == 0, applied.err


BEFORE = "x = 1\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n"
WITH_F = "x = 1\n\n\ndef a():\n    return 1\n\n\ndef f():\n    return 1\n\n\ndef b():\n    return 2\n"


@pytest.mark.regression("a change already upstream was carried again at an offset: the function twice")
def test_a_patch_upstream_already_made_is_dropped_not_applied_at_an_offset(lab: Lab) -> None:
    """The patch adds f; upstream made the same change (and added a file). Its hunk's context also matches just
    after upstream's copy of f, so a strict `git apply` succeeds at an offset and would add f a second time; git
    rebase drops the patch. So must stackmgr, and the series then builds upstream's file, f once."""
    commit(lab.tree, {"m.py": BEFORE}, "m.py")
    one_patch_series(lab, {"m.py": WITH_F}, "add-f")
    commit(lab.tree, {"m.py": WITH_F, "NEWS": "upstream news\n"}, "upstream: f, and news")
    code, state, err = rebase_json(lab, "S", "--onto", "HEAD")
    assert code == 0, err
    assert [p["outcome"] for p in state["patches"]] == ["already upstream"]  # type: ignore[index]
    assert (lab.tree / "m.py").read_text() == WITH_F


@pytest.mark.regression("after a rebase that found every patch upstream, the printed next step failed")
def test_a_series_found_all_upstream_says_a_next_step_that_works(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0  # the tree holds S
    upstream = tmp_path / "upstream"
    git(tmp_path, "clone", "-q", str(lab.tree), str(upstream))
    onto = commit(upstream, {"src/model.py": "def f():\n    return 2\n", "NEWS": "news\n"}, "upstream has it")
    git(lab.tree, "fetch", "-q", str(upstream), "HEAD:refs/heads/upstream")
    result = lab.sm("rebase", "S", "--onto", "upstream")
    assert result.code == 0, result.err
    step = [ln for ln in result.out.splitlines() if "every patch is upstream now" in ln]
    assert step, result.out
    command = step[0].split("`")[1].split()
    assert command == ["stackmgr", "apply", "S"]
    assert lab.sm(*command[1:]).code == 0
    assert git_text(lab.tree, "rev-parse", "HEAD") == onto and lab.sm("check").code == 0
    assert "S: 0 of 0 applied (on " in lab.sm("status").out
    assert lab.sm("lint").code == 0, lab.sm("lint").out


@pytest.mark.regression("rebasing one series rewrote a patch another series also uses")
def test_a_patch_shared_with_another_series_is_not_rewritten_under_it(lab: Lab) -> None:
    one_patch_series(lab, {"README": "hello\nshared\n"}, "shared")
    (lab.store / "series" / "T").write_text("shared.patch\n")
    commit(lab.tree, {"NEWS": "upstream\n"}, "upstream")
    before = _fingerprint(lab)
    result = lab.sm("rebase", "S", "--onto", "HEAD")
    assert result.code == 3  # refused, nothing changed: exit 3
    assert "patch shared.patch is also in series T: rebasing S would change what T builds" in result.err
    assert "--own-copy" in result.err
    assert _fingerprint(lab) == before


@pytest.mark.regression("rebasing one series rewrote a patch another series also uses")
def test_own_copy_gives_the_rebased_series_its_own_copy_of_a_shared_patch(lab: Lab) -> None:
    one_patch_series(lab, {"README": "hello\nshared\n"}, "shared")
    one_patch_series(lab, {"src/model.py": "def f():\n    return 2\n"}, "mine")
    (lab.store / "series" / "T").write_text("# the other lane\nshared.patch\n")
    shared = (lab.store / "patches" / "shared.patch").read_bytes()
    old_t = tree_of_series(lab, "T")
    onto = commit(lab.tree, {"NEWS": "upstream\n"}, "upstream")
    git(lab.tree, "branch", "upstream")
    result = lab.sm("rebase", "S", "--onto", "HEAD", "--own-copy")
    assert result.code == 0, result.err
    assert "series S now lists its own copy shared--S.patch" in result.out
    assert (lab.store / "series" / "S").read_text() == "shared--S.patch\nmine.patch\n"
    assert (lab.store / "series" / "T").read_text() == "# the other lane\nshared.patch\n"
    assert (lab.store / "patches" / "shared.patch").read_bytes() == shared, "T builds what it built"
    assert tree_of_series(lab, "T") == old_t
    copy = (lab.store / "patches" / "shared--S.patch").read_bytes()
    assert f"Stackmgr-Base: {onto}".encode() in copy
    assert lab.sm("undo").code == 0  # the rewrite is one operation
    assert (lab.store / "series" / "S").read_text() == "shared.patch\nmine.patch\n"
    assert not (lab.store / "patches" / "shared--S.patch").exists()
    assert lab.sm("redo").code == 0  # and redone
    assert lab.sm("apply", "S").code == 0
    assert (lab.tree / "NEWS").exists() and (lab.tree / "README").read_text() == "hello\nshared\n"
    assert lab.sm("lint").code == 0, lab.sm("lint").out


def tree_of_series(lab: Lab, series: str) -> str:
    """The tree id series `series` builds, applied by plain git to its recorded base in a scratch index."""
    import tempfile

    names = [ln for ln in (lab.store / "series" / series).read_text().splitlines() if ln and not ln.startswith("#")]
    base = patchfile.parse_header((lab.store / "patches" / names[0]).read_bytes(), names[0]).base
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(tmp, "index"))
        subprocess.run(["git", "read-tree", base], cwd=lab.tree, env=env, check=True)
        for name in names:
            subprocess.run(["git", "apply", "--cached", str(lab.store / "patches" / name)], cwd=lab.tree, env=env,
                           check=True)  # fmt: skip
        return subprocess.run(["git", "write-tree"], cwd=lab.tree, env=env, check=True, capture_output=True,
                              text=True).stdout.strip()  # fmt: skip


@pytest.mark.regression("a backport upstream later changed again conflicted where git rebase drops it")
def test_a_patch_upstream_took_and_then_changed_again_is_upstream(lab: Lab) -> None:
    """The patch is upstream as its own commit (same `git patch-id`, `git cherry` marks it `-`), and upstream
    later rewrote the same line: a merge conflicts, git rebase drops the patch. So does stackmgr."""
    one_patch_series(lab, {"src/model.py": "def f():\n    return 2\n"}, "backport")
    commit(lab.tree, {"src/model.py": "def f():\n    return 2\n"}, "upstream: the same change")
    commit(lab.tree, {"src/model.py": "def f():\n    return 3\n"}, "upstream: changed again")
    code, state, err = rebase_json(lab, "S", "--onto", "HEAD")
    assert code == 0, err
    assert [p["outcome"] for p in state["patches"]] == ["already upstream"]  # type: ignore[index]


def test_patch_ids_of_many_patches_in_one_git_call_equal_one_call_each(stacked: Lab) -> None:
    from stackmgr.git.repo import patch_id, patch_ids
    from stackmgr.store import patchfile

    diffs = [patchfile.diff_part(p.read_bytes()) for p in sorted((stacked.store / "patches").glob("*.patch"))]
    diffs += [b"", b"not a patch\n", diffs[0].rstrip(b"\n")]
    cwd = str(stacked.tree)
    assert patch_ids(cwd, diffs) == [patch_id(cwd, d) for d in diffs] and patch_ids(cwd, []) == []


@pytest.mark.slow
def test_a_rebase_starts_a_few_git_processes_per_patch(stacked: Lab, tmp_path: Path) -> None:
    """The re-diffs, trees, patch-ids and HEAD are asked once or batched, not several times per patch."""
    lab = stacked
    _edit(lab.tree / "f03.txt", "line 1\n", "new first line\nline 1\n")  # one patch drifts, the others do not
    git(lab.tree, "commit", "-q", "-am", "upstream: a header")
    trace = tmp_path / "git-trace"
    done = stackmgr(lab.store, "rebase", "S", "--onto", "HEAD", "--json", GIT_TRACE=str(trace))
    assert done.returncode == 0, done.stderr
    assert {p["name"]: p["outcome"] for p in json.loads(done.stdout)["patches"]} == {
        f"p{i:02d}": "context drift" if i == 3 else "unchanged" for i in range(N)}  # fmt: skip
    started = trace.read_text().count("trace: built-in: git")
    assert started <= 4 * N + 25, started  # apply --3way, write-tree, commit-tree, diff-tree a patch (was 12)


@pytest.mark.regression("a squash-merged stack conflicted where StGit finds it merged upstream")
def test_a_stack_upstream_took_as_one_squashed_commit_is_upstream(lab: Lab) -> None:
    """Upstream squash-merged the branch: neither patch has an upstream commit's patch-id, and carrying the first
    alone conflicts (upstream's line is the second patch's). StGit's test (reverse the stack from the top on the new
    base) finds both merged; the series is left empty and the tree moves to the new base."""
    one_patch_series(lab, {"README": "hello\none\n"}, "p1")
    one_patch_series(lab, {"README": "hello\ntwo\n"}, "p2")
    onto = commit(lab.tree, {"README": "hello\ntwo\n", "NEWS": "squashed\n"}, "upstream: the branch, squashed")
    git(lab.tree, "branch", "upstream")
    code, state, err = rebase_json(lab, "S", "--onto", "upstream")
    assert code == 0, err
    assert [p["outcome"] for p in state["patches"]] == ["already upstream", "already upstream"]  # type: ignore[index]
    assert lab.sm("reset", "--to", onto).code == 0 and lab.sm("check").code == 0
    assert lab.sm("lint").code == 0, lab.sm("lint").out


@pytest.mark.regression("the merged test walked the whole stack again for every stuck patch: quadratic, 12x git's "
                        "time on attrs 23.1.0 -> 24.1.0 carried as 96 patches")  # fmt: skip
def test_the_merged_test_walks_the_stack_once_while_every_patch_is_found_upstream(lab: Lab, tmp_path: Path) -> None:
    """Each of 12 files changed twice on one line by the stack (first all first changes, then all second ones),
    and upstream made both changes in one commit: every first change conflicts alone, StGit's test finds them all
    merged. One walk down the stack answers for all of them: about one reverse apply per patch, not n^2/2."""
    files = [f"f{i:02d}.txt" for i in range(12)]
    lines = "".join(f"line {n}\n" for n in range(1, 21))
    commit(lab.tree, dict.fromkeys(files, lines), "twelve files")
    for f in files:
        one_patch_series(lab, {f: lines.replace("line 10\n", "line ten\n")}, f"a-{f[:3]}")
    for f in files:
        one_patch_series(lab, {f: lines.replace("line 10\n", "line TEN\n")}, f"b-{f[:3]}")
    assert lab.sm("reset").code == 0
    commit(lab.tree, dict.fromkeys(files, lines.replace("line 10\n", "line TEN\n")), "upstream: both releases")
    trace = tmp_path / "git-trace"
    done = stackmgr(lab.store, "rebase", "S", "--onto", "HEAD", "--json", GIT_TRACE=str(trace))
    assert done.returncode == 0, done.stderr
    assert {p["outcome"] for p in json.loads(done.stdout)["patches"]} == {"already upstream"}
    reversals = sum(" '-R'" in ln or " -R " in ln for ln in trace.read_text().splitlines() if "'apply'" in ln or
                    " apply " in ln)  # fmt: skip
    assert 24 <= reversals <= 3 * 24, reversals  # a walk of 24 patches: a check and an apply each (was 300+)


@pytest.mark.regression("a squash-merged stack conflicted where StGit finds it merged upstream")
def test_a_conflict_that_is_not_upstream_still_stops(lab: Lab) -> None:
    one_patch_series(lab, {"README": "hello\none\n"}, "p1")
    commit(lab.tree, {"README": "hello\nsomething else\n"}, "upstream: its own line")
    git(lab.tree, "branch", "upstream")
    code, _state, err = rebase_json(lab, "S", "--onto", "upstream")
    assert code == 3 and "conflict" in err
    assert "a rebase of series S is in progress" in lab.sm("status").err  # as `git status` says it
    assert lab.sm("rebase", "S", "--abort").code == 0
    assert "rebase" not in lab.sm("status").err


@pytest.mark.regression("rebase stopped where git rebase follows upstream's rename of the patched file")
def test_a_patch_of_a_file_upstream_moved_is_carried_to_the_new_path_as_git_rebase_does(lab: Lab) -> None:
    """Found on real PyPI histories (tomli 2.0.1 moved its modules under src/): git rebase's merge follows the
    rename; carrying by the blobs finds no old path and would stop."""
    lines = "".join(f"{n}\n" for n in range(1, 21))
    commit(lab.tree, {"old.txt": lines}, "a file")
    one_patch_series(lab, {"old.txt": lines.replace("5\n", "five\n", 1)}, "fix")
    git(lab.tree, "mv", "old.txt", "new.txt")
    git(lab.tree, "commit", "-qm", "upstream: move old.txt to new.txt")
    git(lab.tree, "branch", "upstream")
    code, state, err = rebase_json(lab, "S", "--onto", "upstream")
    assert code == 0, err
    assert [p["outcome"] for p in state["patches"]] == ["merged (3-way)"]  # type: ignore[index]
    assert lab.sm("apply", "S").code == 0
    assert (lab.tree / "new.txt").read_text() == lines.replace("5\n", "five\n", 1)
    assert not (lab.tree / "old.txt").exists()


@pytest.mark.regression("rebase stopped where git rebase follows upstream's rename of the patched file")
def test_a_patch_upstream_took_under_a_new_path_is_upstream(lab: Lab) -> None:
    lines = "".join(f"{n}\n" for n in range(1, 21))
    commit(lab.tree, {"old.txt": lines}, "a file")
    one_patch_series(lab, {"old.txt": lines.replace("5\n", "five\n", 1)}, "fix")
    git(lab.tree, "mv", "old.txt", "new.txt")
    (lab.tree / "new.txt").write_text(lines.replace("5\n", "five\n", 1))
    git(lab.tree, "commit", "-qam", "upstream: moved, with the fix")
    git(lab.tree, "branch", "upstream")
    code, state, err = rebase_json(lab, "S", "--onto", "upstream")
    assert code == 0, err
    assert [p["outcome"] for p in state["patches"]] == ["already upstream"]  # type: ignore[index]


@pytest.mark.regression("a rebase stopped on a file upstream moved left no conflict markers to resolve")
def test_a_conflict_in_a_file_upstream_moved_is_left_at_the_new_path_as_git_rebase_leaves_it(lab: Lab) -> None:
    """Upstream moves old.txt to new.txt and rewrites the line the patch rewrites: git rebase stops with markers
    in new.txt. So must stackmgr, for the user to resolve there and go on."""
    lines = "".join(f"{n}\n" for n in range(1, 21))
    commit(lab.tree, {"old.txt": lines}, "a file")
    one_patch_series(lab, {"old.txt": lines.replace("5\n", "five\n", 1)}, "fix")
    git(lab.tree, "mv", "old.txt", "new.txt")
    (lab.tree / "new.txt").write_text(lines.replace("5\n", "FIVE upstream\n", 1))
    git(lab.tree, "commit", "-qam", "upstream: moved, and line 5 rewritten")
    git(lab.tree, "branch", "upstream")
    code, state, err = rebase_json(lab, "S", "--onto", "upstream")
    assert code == 3 and "fix (1 of 1) conflicts in new.txt" in err, err
    worktree = Path(str(state["worktree"]))
    assert "<<<<<<<" in (worktree / "new.txt").read_text() and not (worktree / "old.txt").exists()
    assert git(worktree, "ls-files", "-u", "new.txt").count(b"\n") >= 2  # unmerged, as git leaves it
    (worktree / "new.txt").write_text(lines.replace("5\n", "five, after upstream's FIVE\n", 1))
    git(worktree, "add", "new.txt")
    done = lab.sm("rebase", "--continue", "--json")
    assert done.code == 0, done.err
    assert [p["outcome"] for p in json.loads(done.out)["patches"]] == ["conflict resolved"]
    assert lab.sm("apply", "S").code == 0
    assert (lab.tree / "new.txt").read_text() == lines.replace("5\n", "five, after upstream's FIVE\n", 1)


@pytest.mark.regression("rebase called a deletion of a file upstream moved 'already upstream': it was lost")
def test_a_deletion_of_a_file_upstream_moved_stops_as_git_rebase_does(lab: Lab) -> None:
    """Found on requests 2.30 -> 2.32 (upstream moved the package under src/): the deletion's reverse applies on
    the new base (the old path is gone), but git rebase stops with a rename/delete conflict."""
    commit(lab.tree, {"pkg/hooks.py": "".join(f"hook {n}\n" for n in range(10)), "other.txt": "o\n"}, "a package")
    one_patch_series(lab, {"pkg/hooks.py": None}, "delete-hooks")
    one_patch_series(lab, {"other.txt": "o\nmore\n"}, "other")
    git(lab.tree, "mv", "pkg", "src")  # src/ exists: pkg/ goes to src/pkg/
    git(lab.tree, "commit", "-qm", "upstream: move pkg under src/")
    git(lab.tree, "branch", "moved")
    code, state, err = rebase_json(lab, "S", "--onto", "moved")
    assert code == 3 and "delete-hooks (1 of 2) conflicts in src/pkg/hooks.py" in err, err
    worktree = Path(str(state["worktree"]))
    git(worktree, "rm", "-q", "src/pkg/hooks.py")  # the resolution: the deletion, at the new path
    done = lab.sm("rebase", "--continue", "--json")
    assert done.code == 0, done.err
    assert [p["outcome"] for p in json.loads(done.out)["patches"]] == ["conflict resolved", "unchanged"]
    assert lab.sm("apply", "S").code == 0
    assert not (lab.tree / "src" / "pkg" / "hooks.py").exists()
    assert (lab.tree / "other.txt").read_text() == "o\nmore\n"


@pytest.mark.regression("rebase called a deletion of a file upstream moved 'already upstream': it was lost")
def test_a_deletion_upstream_made_too_is_already_upstream(lab: Lab) -> None:
    commit(lab.tree, {"pkg/hooks.py": "".join(f"hook {n}\n" for n in range(10)), "other.txt": "o\n"}, "a package")
    one_patch_series(lab, {"pkg/hooks.py": None}, "delete-hooks")
    one_patch_series(lab, {"other.txt": "o\nmore\n"}, "other")
    commit(lab.tree, {"pkg/hooks.py": None, "NEWS": "hooks are gone\n"}, "upstream: hooks go")
    code, state, err = rebase_json(lab, "S", "--onto", "HEAD")
    assert code == 0, err
    assert [p["outcome"] for p in state["patches"]] == ["already upstream", "unchanged"]  # type: ignore[index]


@pytest.mark.regression("rebase called a patch upstream when upstream made the same edit to an identical block")
def test_the_same_edit_upstream_in_another_identical_block_is_a_conflict(lab: Lab) -> None:
    """Two identical blocks; the patch edits the first, upstream the second (and a line beside the first): git
    rebase conflicts. The patch's change reverses only at an offset, in the wrong block: not upstream."""
    block = "c1\nc2\nc3\nx = 1\nc4\nc5\nc6\n"
    head = "".join(f"head {n}\n" for n in range(1, 6))
    mid = "".join(f"mid {n}\n" for n in range(1, 9))
    commit(lab.tree, {"f": head + block + mid + block + "tail\n"}, "two blocks")
    one_patch_series(lab, {"f": head + block.replace("x = 1", "x = 2") + mid + block + "tail\n"}, "p1")
    commit(lab.tree, {"f": head + block.replace("c3", "c3 changed upstream") + mid
                      + block.replace("x = 1", "x = 2") + "tail\n"}, "upstream")  # fmt: skip
    git(lab.tree, "branch", "upstream")
    code, _state, err = rebase_json(lab, "S", "--onto", "upstream")
    assert code == 3 and "conflict" in err, err
    assert lab.sm("rebase", "S", "--abort").code == 0


@pytest.mark.regression("rebase --abort after a kill mid-rewrite said 'nothing was changed' and left patches rewritten")
def test_abort_after_a_rebase_killed_while_writing_puts_the_patches_back(lab: Lab, tmp_path: Path) -> None:
    one_patch_series(lab, {"README": "hello\none\n"}, "p1")
    one_patch_series(lab, {"src/model.py": "def f():\n    return 2\n"}, "p2")
    commit(lab.tree, {"NEWS": "upstream\n"}, "upstream")
    git(lab.tree, "branch", "upstream")
    before = {p.name: p.read_bytes() for p in (lab.store / "patches").glob("*.patch")}
    trace = tmp_path / "steps"
    killed = stackmgr(lab.store, "rebase", "S", "--onto", "upstream", STACKMGR_TRACE_STEPS=str(trace),
                      STACKMGR_CRASH_AT="rebase:4")  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    steps = [line.split(":", 2)[2] for line in trace.read_text().splitlines()]
    assert steps[:2] == [f"write patches/.versions/p{n}/" + steps[n - 1].split("/")[-1] for n in (1, 2)]
    assert steps[2:] == ["write patches/p1.patch", "write patches/p2.patch"]  # the old versions kept; both patch
    # files recorded by the journal in one go before the first is replaced (killed there)
    lint = lab.sm("lint")
    assert lint.code == 1 and "interrupted" in lint.out, lint.out
    aborted = lab.sm("rebase", "S", "--abort")
    assert aborted.code == 0, aborted.err
    assert {p.name: p.read_bytes() for p in (lab.store / "patches").glob("*.patch")} == before
    assert lab.sm("lint").code == 0


def _killed_with_its_git(stacked: Lab, tmp_path: Path) -> Path:
    """`rebase S --onto HEAD` killed after p03 together with the git child working in the scratch worktree: that
    git's `index.lock` stays behind (nobody holds it); the scratch worktree's git dir is returned."""
    lab = stacked
    _edit(lab.tree / "f01.txt", "line 1\n", "new first line\nline 1\n")
    git(lab.tree, "commit", "-q", "-am", "upstream")
    flag = tmp_path / "killed-once"
    kill = (f"if grep -q 'patched by p03' f03.txt && test ! -e {flag}; then touch {flag}; "
            "touch \"$(git rev-parse --absolute-git-dir)/index.lock\"; kill -9 $PPID; fi")  # fmt: skip
    assert stackmgr(lab.store, "rebase", "S", "--onto", "HEAD", "--exec", kill).returncode == -9
    locks = list((lab.tree / ".git" / "worktrees").glob("*/index.lock"))
    assert len(locks) == 1
    old = locks[0].stat().st_mtime - 60  # the kill was a while ago
    os.utime(locks[0], (old, old))
    return locks[0].parent


@pytest.mark.slow
@pytest.mark.regression("a rebase killed with its git child could neither --continue nor --abort (index.lock)")
def test_a_rebase_killed_with_its_git_goes_on_and_can_be_aborted(stacked: Lab, tmp_path: Path) -> None:
    """The dead git's index.lock in the scratch worktree made `rebase --continue` fail forever ("Unable to
    create … index.lock: File exists"): the rebase stayed in progress. `--continue` removes that lock (its own
    scratch worktree's, held by no process) and finishes as an uninterrupted run; `--abort` works the same."""
    lab = stacked
    _killed_with_its_git(stacked, tmp_path)
    done = stackmgr(lab.store, "rebase", "--continue", "--json")
    assert done.returncode == 0, done.stderr
    outcomes = [p["outcome"] for p in json.loads(done.stdout)["patches"]]
    assert outcomes == ["unchanged", "context drift"] + ["unchanged"] * (N - 2)
    assert git_text(lab.tree, "worktree", "list").count("\n") == 0


@pytest.mark.slow
@pytest.mark.regression("edge case: a killed rebase's --continue must not remove a lock a live git holds")
def test_a_rebase_killed_with_its_git_can_be_aborted_and_a_live_lock_is_left(stacked: Lab, tmp_path: Path) -> None:
    """A lock some live process holds open is another git's: `--continue` refuses naming it and leaves it;
    once it is gone, `--abort` removes the worktree and the state, nothing changed."""
    lab = stacked
    before = _fingerprint(lab)
    gitdir = _killed_with_its_git(stacked, tmp_path)
    with open(gitdir / "index.lock", "rb"):  # held open: a git at work there
        refused = stackmgr(lab.store, "rebase", "--continue")
        assert refused.returncode == 3 and "index.lock" in refused.stderr, refused.stderr
        assert (gitdir / "index.lock").exists()
    aborted = stackmgr(lab.store, "rebase", "--abort")
    assert aborted.returncode == 0, aborted.stderr
    assert _fingerprint(lab) == before and not (lab.store / ".stackmgr" / "rebase" / "S.json").exists()
    assert git_text(lab.tree, "worktree", "list").count("\n") == 0


def _two_patch_series_killed_while_writing(lab: Lab) -> dict[str, bytes]:
    """Series S of p1, p2 and an upstream commit; `rebase S --onto upstream` killed after rewriting p1 (journal
    step 3): the patches before are returned."""
    one_patch_series(lab, {"README": "hello\none\n"}, "p1")
    one_patch_series(lab, {"src/model.py": "def f():\n    return 2\n"}, "p2")
    commit(lab.tree, {"NEWS": "upstream\n"}, "upstream")
    git(lab.tree, "branch", "upstream")
    before = {p.name: p.read_bytes() for p in (lab.store / "patches").glob("*.patch")}
    killed = stackmgr(lab.store, "rebase", "S", "--onto", "upstream", STACKMGR_CRASH_AT="rebase:3")
    assert killed.returncode == -9, killed.stderr
    assert (lab.store / ".stackmgr" / "rebase" / "S.json").exists()
    return before


@pytest.mark.regression("a killed rebase stayed 'in progress' forever: recover left it, the command again refused")
def test_recover_rolls_a_killed_rebase_back_and_it_runs_again(lab: Lab) -> None:
    before = _two_patch_series_killed_while_writing(lab)
    recovered = lab.sm("recover")
    assert recovered.code == 0, recovered.err
    assert "rolled back" in recovered.err and "a rebase of series S was killed before it finished" in recovered.err
    assert {p.name: p.read_bytes() for p in (lab.store / "patches").glob("*.patch")} == before
    assert not (lab.store / ".stackmgr" / "rebase" / "S.json").exists()
    assert git_text(lab.tree, "worktree", "list").count("\n") == 0
    again = lab.sm("rebase", "S", "--onto", "upstream")
    assert again.code == 0, again.err
    upstream = git_text(lab.tree, "rev-parse", "upstream").strip()
    assert all(f"Stackmgr-Base: {upstream}".encode() in p.read_bytes() for p in (lab.store / "patches").glob("*.patch"))


@pytest.mark.regression("a killed rebase stayed 'in progress' forever: recover left it, the command again refused")
def test_a_killed_rebase_run_again_ends_as_an_unkilled_one(lab: Lab, tmp_path: Path) -> None:
    _two_patch_series_killed_while_writing(lab)
    again = lab.sm("rebase", "S", "--onto", "upstream", "--json")
    assert again.code == 0, again.err
    assert "a rebase of series S was killed before it finished" in again.err
    assert [p["outcome"] for p in json.loads(again.out)["patches"]] == ["unchanged", "unchanged"]
    assert lab.sm("apply", "S").code == 0
    assert (lab.tree / "NEWS").read_text() == "upstream\n" and (lab.tree / "README").read_text() == "hello\none\n"
    assert lab.sm("lint").code == 0


@pytest.mark.regression("recover threw away a whitespace-only conflict resolution (classified context drift) of a "
                        "killed --continue")  # fmt: skip
def test_a_killed_rebase_that_holds_a_resolved_conflict_is_kept_for_continue(stacked: Lab) -> None:
    """What the user did in the scratch worktree (a resolved conflict, edits after a failed --exec) is never thrown
    away by `recover` nor by the command run again: `--continue` is the way on."""
    lab = stacked
    git(lab.tree, "commit", "-q", "--allow-empty", "-m", "upstream moved on")
    stop = lab.sm("rebase", "S", "--onto", "HEAD", "--exec", "test ! -e f02.txt || grep -q fixed f02.txt")
    assert stop.code == 3, stop.err
    state_file = lab.store / ".stackmgr" / "rebase" / "S.json"
    state = json.loads(state_file.read_text())
    assert state["user_work"] == "exec"
    # as a --continue killed after taking the user's edit (whitespace only: classified as context drift)
    state["steps"][state["position"]]["outcome"] = "context drift"
    state["stopped"] = None
    state_file.write_text(json.dumps(state))
    recovered = lab.sm("recover")
    assert recovered.code == 0 and "`stackmgr rebase S --continue` goes on" in recovered.err, recovered.err
    assert state_file.exists()
    again = lab.sm("rebase", "S", "--onto", "HEAD")
    assert again.code == 2 and "in progress" in again.err and state_file.exists()
    assert lab.sm("rebase", "S", "--abort").code == 0
