"""`bisect` and `run` under kills, and where their command runs: a test stopped by a signal blames no patch, a
bisect sent SIGTERM or killed with -9 gives the tree back exactly (the saved work in it included), and CMD runs
in the measured tree wherever stackmgr was started (docs/FORMATS.md, `[run]`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Lab, git_text, link_records
from tests.test_bisect import GATE, five_patches_the_third_breaks_the_gate

NOTES = b"mine, saved, in the tree while I bisect\n"


def bisect_day(lab: Lab) -> tuple[str, str, str]:
    """Series S (p3 breaks the gate) and a dirty tree whose work is saved: the tree id, HEAD and branch."""
    five_patches_the_third_breaks_the_gate(lab)
    (lab.tree / "notes.txt").write_bytes(NOTES)
    assert lab.sm("save", "notes", "-m", "notes").code == 0
    return lab.worktree_id(), git_text(lab.tree, "rev-parse", "HEAD"), git_text(lab.tree, "symbolic-ref", "HEAD")


def assert_tree_as_before(lab: Lab, before: tuple[str, str, str]) -> None:
    assert lab.worktree_id() == before[0]
    assert (lab.tree / "notes.txt").read_bytes() == NOTES
    assert git_text(lab.tree, "rev-parse", "HEAD") == before[1]
    assert git_text(lab.tree, "symbolic-ref", "HEAD") == before[2]


def start(lab: Lab, *args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "stackmgr", "--store", str(lab.store), *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, start_new_session=True)


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.parametrize("gate", ["kill -TERM $$", "exit 143", "kill -HUP $$"])
def test_a_test_stopped_by_a_signal_blames_no_patch_and_the_tree_comes_back(lab: Lab, gate: str) -> None:
    """A `timeout` or a Slurm limit ending the test says nothing of the patch: the bisect stops."""
    before = bisect_day(lab)
    done = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), "bisect", "S", "--", "sh",
                           "-c", gate], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "first bad" not in done.stdout and "interrupted" in done.stderr and "no patch is blamed" in done.stderr
    assert_tree_as_before(lab, before)


def test_bisect_sent_sigterm_mid_test_gives_the_tree_back_and_exits_143(lab: Lab, tmp_path: Path) -> None:
    before = bisect_day(lab)
    began = tmp_path / "began"
    proc = start(lab, "bisect", "S", "--", "sh", "-c", f"touch {began}; sleep 30")
    wait_for(began, proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "first bad" not in out and "SIGTERM" in err
    assert_tree_as_before(lab, before)
    assert lab.sm("check").code == 0
    (record,) = link_records(lab, "p5")  # the interrupted test is recorded, with the signal that stopped it
    assert record["run"]["interrupted"] is True and record["run"]["signal"] == "SIGTERM"


def test_bisect_killed_with_kill_9_is_reported_and_recover_gives_the_tree_back(lab: Lab, tmp_path: Path) -> None:
    before = bisect_day(lab)
    applied_before = lab.sm("status", "--json").out
    began = tmp_path / "began"
    proc = start(lab, "bisect", "S", "--", "sh", "-c", f"echo $$ > {began}.pid; touch {began}; sleep 30")
    wait_for(began, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # stackmgr, with no chance to put anything back
    proc.communicate()
    os.kill(int((tmp_path / "began.pid").read_text()), signal.SIGKILL)  # the test, in a group of its own
    assert not (lab.tree / "notes.txt").exists()  # the tree is at a prefix of S: the saved work is out of it
    checked = lab.sm("check")
    assert checked.code != 0 and "bisect" in checked.err and "stackmgr recover" in checked.err
    assert "bisect" in lab.sm("status").err + lab.sm("status").out
    at_prefix = lab.worktree_id()
    for move in (("pop", "-a"), ("push", "-a"), ("apply", "S")):  # recover would undo it later: refused first
        moved = lab.sm(*move)
        assert moved.code == 3 and "interrupted" in moved.err and "stackmgr recover" in moved.err, (move, moved)
        assert lab.worktree_id() == at_prefix
    recovered = lab.sm("recover")
    assert recovered.code == 0, recovered.err
    assert "is back as it was before it" in recovered.err and recovered.out == "", recovered  # one story, not two
    assert_tree_as_before(lab, before)
    assert lab.sm("check").code == 0
    assert lab.sm("status", "--json").out == applied_before
    assert lab.sm("recover").code == 0 and lab.worktree_id() == before[0]  # once only


def test_run_started_from_the_store_runs_the_command_in_the_measured_tree(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    five_patches_the_third_breaks_the_gate(lab)
    monkeypatch.chdir(lab.store)
    done = lab.sm("run", "-t", "vllm", "--link", "p1", "--", "test", "-f", "src/model.py")
    assert done.code == 0, done.err
    assert "runs in" in done.err and str(lab.tree) in done.err  # said, since it is not where the user stands
    (record,) = link_records(lab, "p1")
    assert os.path.realpath(record["run"]["cwd"]) == os.path.realpath(lab.tree)


def test_run_with_cwd_runs_the_command_there(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    five_patches_the_third_breaks_the_gate(lab)
    elsewhere = tmp_path / "bench"
    elsewhere.mkdir()
    (elsewhere / "marker").write_text("x")
    monkeypatch.chdir(lab.tree)
    assert lab.sm("run", "-t", "vllm", "--link", "p1", "--cwd", str(elsewhere), "--", "test", "-f", "marker").code == 0
    assert lab.sm("run", "-t", "vllm", "--link", "p1", "--", "test", "-f", "marker").code == 1


def test_a_relative_result_dir_is_read_where_the_command_writes(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    five_patches_the_third_breaks_the_gate(lab)
    monkeypatch.chdir(lab.store)
    bench = ("import json, os; os.makedirs('out', exist_ok=True); "
             "json.dump({'output_throughput': 100.0}, open('out/b.json', 'w'))")  # fmt: skip
    done = lab.sm("run", "-t", "vllm", "--link", "p1", "--result-dir", "out", "--", sys.executable, "-c", bench)
    assert done.code == 0, done.err
    (record,) = link_records(lab, "p1")
    assert [m["value"] for m in record.get("metric", []) if m["name"] == "output_throughput"] == [100.0]
    assert not (lab.store / "out").exists() and (lab.tree / "out" / "b.json").exists()


def test_bisect_started_from_the_store_runs_a_tree_relative_gate_in_the_tree(lab: Lab) -> None:
    before = bisect_day(lab)
    done = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), "--json", "bisect", "S", "--",
                           sys.executable, "-c", GATE, "src/model.py"], capture_output=True, text=True,
                          cwd=lab.store)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["first_bad"] == "p3"
    assert "runs in" in done.stderr
    assert_tree_as_before(lab, before)


def test_ctrl_c_while_bisect_moves_the_tree_gives_it_back_and_exits_130(lab: Lab) -> None:
    """Ctrl-C (to the whole process group, as a terminal sends it) during a move between two tests."""
    before = bisect_day(lab)
    proc = subprocess.Popen([sys.executable, "-m", "stackmgr", "--store", str(lab.store), "bisect", "S", "--", "sh",
                             "-c", "exit 1"], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env={**os.environ, "STACKMGR_CRASH_AT": "pop:1:INT"})  # fmt: skip
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "first bad" not in out
    assert_tree_as_before(lab, before)
    assert lab.sm("check").code == 0


def test_the_next_bisect_first_gives_back_the_tree_a_killed_one_left(lab: Lab, tmp_path: Path) -> None:
    before = bisect_day(lab)
    began = tmp_path / "began"
    proc = start(lab, "bisect", "S", "--", "sh", "-c", f"echo $$ > {began}.pid; touch {began}; exec sleep 30")
    wait_for(began, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    os.kill(int((tmp_path / "began.pid").read_text()), signal.SIGKILL)
    assert lab.worktree_id() != before[0]
    done = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), "--json", "bisect", "S", "--",
                           sys.executable, "-c", GATE, "src/model.py"], capture_output=True, text=True,
                          cwd=lab.tree)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["first_bad"] == "p3" and "was interrupted" in done.stderr
    assert_tree_as_before(lab, before)
    assert lab.sm("check").code == 0


@pytest.mark.parametrize("step", ["apply:2", "apply:4", "pop:2", "pop:4", "bisect::2", "bisect::4"])
def test_bisect_killed_at_any_journal_step_is_given_back_by_recover(lab: Lab, step: str) -> None:
    """kill -9 inside one of the bisect's own moves (the journal rolls that move back, then the bisect's)."""
    before = bisect_day(lab)
    killed = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), "bisect", "S", "--", "sh",
                             "-c", "exit 1"], capture_output=True, text=True,
                            env={**os.environ, "STACKMGR_CRASH_AT": step})  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert lab.sm("check").code != 0
    recovered = lab.sm("recover")
    assert recovered.code == 0, recovered.err
    assert_tree_as_before(lab, before)
    assert lab.sm("check").code == 0


def test_status_after_a_killed_ab_leave_out_names_the_interruption_not_an_edited_series(lab: Lab,
                                                                                        tmp_path: Path) -> None:
    """`ab p2 --leave-out` killed while A (p1+p3) runs: the stack is not a prefix, but nobody edited the series;
    status says a walk was interrupted and points to recover alone, and recover puts the tree back."""
    from tests.test_ab import three_patches_the_middle_one_fast

    three_patches_the_middle_one_fast(lab)
    before = lab.worktree_id()
    began = tmp_path / "began"
    proc = start(lab, "ab", "p2", "--leave-out", "--", "sh", "-c", f"echo $$ > {began}.pid; touch {began}; sleep 30")
    wait_for(began, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    os.kill(int((tmp_path / "began.pid").read_text()), signal.SIGKILL)
    assert not (lab.tree / "fast.txt").exists()  # A: the stack without p2
    shown = lab.sm("status")
    said = shown.out + shown.err
    assert "a bisect, ab or ablate was interrupted here; `stackmgr recover` puts the tree back as it was" in said, said
    assert "edited since" not in said and "stackmgr push" not in said, said
    assert json.loads(lab.sm("status", "--json").out)["trees"][0]["applied"]["interrupted"] is True
    assert lab.sm("recover").code == 0 and lab.worktree_id() == before
    assert "interrupted" not in lab.sm("status").out
