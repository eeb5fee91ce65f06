"""`stackmgr rebase SERIES --onto REV`: a 20-patch series carried over a generated upstream
history that shifts some patches, rewrites the context of one, conflicts with one and merges another. The
classification must be exactly right, the user's tree untouched, and the result apply strictly on the new base."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Lab, git, git_text, link_id, show_json

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


def stackmgr(store: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, so that it can be killed."""
    return subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(store), *args], capture_output=True,
                          text=True, env={**os.environ, **env})  # fmt: skip


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
    assert lab.sm("undo").code == 0 and _fingerprint(lab) != before  # and again redoes it

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


def test_refusals(stacked: Lab, tmp_path: Path) -> None:
    lab = stacked
    bad = lab.sm("rebase", "S", "--onto", "no-such-rev")
    assert bad.code == 2 and "not a commit" in bad.err and "Traceback" not in bad.err
    assert lab.sm("rebase", "S").code == 2
    assert lab.sm("rebase", "--onto", "HEAD").code == 2
    assert lab.sm("rebase", "S", "--onto", "HEAD", "--abort").code == 2
    missing = lab.sm("rebase", "nope", "--onto", "HEAD")
    assert missing.code in (2, 3) and "nope" in missing.err


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


def test_exec_and_tree_only_with_onto(stacked: Lab) -> None:
    for args in (("--continue", "--exec", "true"), ("--abort", "-t", "vllm")):
        result = stacked.sm("rebase", *args)
        assert result.code == 2 and "go with --onto" in result.err and "Traceback" not in result.err
