"""Week 2: Alice and Bob append to one series at the same time; git's merge driver joins the appends. The applied
stack is read against the merged series on both sides; a refresh on both sides of one patch never drops the
teammate's change; a clone without `git-setup` is told what is missing."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import git
from tests.scenario.conftest import Month


def test_a_week_of_appends_merges_and_refreshes_on_both_sides(month: Month) -> None:
    alice, bob = month.alice, month.bob

    month.step("mon: Alice saves t0 into series team and pushes; Bob pulls and applies it")
    (alice.tree / "src" / "model.py").write_bytes(b"def f():\n    return 't0'\n")
    assert alice.sm("save", "t0", "-t", "vllm", "--series", "team", "-m", "t0").code == 0
    alice.push("t0")
    bob.pull()
    assert bob.series("team") == b"t0.patch\n" and bob.patch("t0") == alice.patch("t0")
    assert bob.sm("apply", "team").code == 0
    assert bob.tree_id() == alice.tree_id()

    month.step("tue: both append at once (a1, b1); Bob's pull merges the appends, both hold one series")
    (alice.tree / "alice.txt").write_bytes(b"alice's change\n")
    assert alice.sm("save", "a1", "-t", "vllm", "--series", "team", "-m", "a1").code == 0
    alice_a1 = alice.tree_id()
    (bob.tree / "bob.txt").write_bytes(b"bob's change\n")
    assert bob.sm("save", "b1", "-t", "vllm", "--series", "team", "-m", "b1").code == 0
    bob_b1 = bob.tree_id()
    alice.push("a1")
    bob.commit("bob: b1")
    bob.pull()
    bob.push("b1 merged")
    alice.pull()
    merged = alice.series("team")
    assert merged == bob.series("team") and sorted(merged.splitlines()) == [b"a1.patch", b"b1.patch", b"t0.patch"]
    assert merged.splitlines()[0] == b"t0.patch"
    assert alice.tree_id() == alice_a1 and bob.tree_id() == bob_b1  # a pull never touches a tree
    assert alice.sm("check").code == 0 and bob.sm("check").code == 0

    month.step("tue: status on the side whose applied patches are not the merged series' prefix says so")
    order = [line.decode().removesuffix(".patch") for line in merged.splitlines()]
    off = alice if order[1] == "b1" else bob  # the one whose own append went last
    mine = "a1" if off is alice else "b1"
    said = off.sm("status")
    assert said.code == 0
    month.expect(
        "2 of 3 applied" not in said.out or "matches" not in said.out,
        f"status claims '2 of 3 applied — tree matches' with {mine} applied out of order: {said.out}",
    )
    status = json.loads(off.sm("--json", "status").out)
    (applied,) = [t["applied"] for t in status["trees"] if t["name"] == "vllm"]
    month.expect(
        not (applied["matches"] and applied["in_series"] == 2),
        f"status --json: 2 of 3 applied and matching with {mine} out of order: {applied}",
    )

    month.step("tue: push on that side brings the tree to the whole series; pop takes the real top off")
    done = off.sm("push", "-t", "vllm")
    month.expect(done.code == 0, f"push after the merge: exit 0, got {done}")
    if done.code == 0:
        for path, data in (("alice.txt", b"alice's change\n"), ("bob.txt", b"bob's change\n")):
            month.expect((off.tree / path).read_bytes() == data, f"push: {path} in the tree")
        done = off.sm("pop", "-t", "vllm")
        month.expect(done.code == 0, f"pop: exit 0, got {done}")
        gone = order[2] + ".txt" if order[2] != "t0" else ""
        month.expect(not (off.tree / gone).exists(), f"pop took {order[2]} (the series' top) off")
    assert off.sm("reset", "vllm").code == 0
    assert off.sm("apply", "team").code == 0
    other = bob if off is alice else alice
    assert other.sm("reset", "vllm").code == 0 and other.sm("apply", "team").code == 0
    assert alice.tree_id() == bob.tree_id()
    full = alice.tree_id()

    month.step("wed: Alice refreshes the top patch and pushes; Bob pulls")
    top = order[2]
    path = {"a1": "alice.txt", "b1": "bob.txt"}[top]
    assert (alice.tree / path).is_file()
    (alice.tree / path).write_bytes((alice.tree / path).read_bytes() + b"alice v2\n")
    done = alice.sm("refresh", "-t", "vllm")
    assert done.code == 0, done
    refreshed = alice.patch(top)
    assert b"+alice v2\n" in refreshed
    alice.push(f"{top} refreshed")
    bob.pull()
    assert bob.patch(top) == refreshed
    said = bob.sm("status")
    assert said.code == 0 and "rewritten" in said.out + said.err, said

    month.step("wed: Bob refreshes the same patch from his tree: Alice's change is not dropped")
    (bob.tree / "src" / "sched.py").write_bytes(b"QUEUE = 16\n")
    done = bob.sm("refresh", "-t", "vllm")
    now = bob.patch(top)
    month.expect(b"+alice v2\n" in now, f"bob's refresh (exit {done.code}) dropped alice's change from {top}")
    month.expect(done.code == 3 or b"+QUEUE = 16\n" in now, f"refresh: refused (3) or both changes kept, got {done}")
    month.kept(bob, "src/sched.py", b"QUEUE = 16\n")
    if done.code == 0 and b"+alice v2\n" not in now:
        assert bob.sm("refresh", "-t", "vllm").code in (0, 3)
    (bob.tree / "src" / "sched.py").write_bytes(b"QUEUE = 8\n")

    month.step("thu: a clone without git-setup: status and lint name the missing driver and the fix")
    carol = month.tmp / "carol-store"
    git(month.tmp, "clone", "-q", str(month.remote), str(carol))
    said = subprocess.run(["git", "config", "--get-regexp", "merge"], cwd=carol, capture_output=True, text=True)
    assert "stackmgr" not in said.stdout
    from tests.conftest import run_stackmgr

    status = run_stackmgr("--store", str(carol), "status")
    month.expect("git-setup" in status.out + status.err, f"status names git-setup: {status}")
    lint = run_stackmgr("--store", str(carol), "lint")
    month.expect(lint.code == 1 and "git-setup" in lint.out + lint.err, f"lint: exit 1 naming git-setup, got {lint}")

    month.step("thu: that clone appends beside Alice: the merge conflicts, and status says why")
    series = carol / "series" / "team"
    series.write_bytes(series.read_bytes() + b"c1.patch\n")
    (carol / "patches" / "c1.patch").write_bytes(alice.patch("t0").replace(b"'t0'", b"'c1'"))
    git(carol, "add", "-A")
    git(carol, "commit", "-q", "-m", "carol c1")
    (alice.tree / "late.txt").write_bytes(b"alice later\n")
    assert alice.sm("save", "a2", "-t", "vllm", "--series", "team", "-m", "a2").code == 0
    alice.push("a2")
    pulled = subprocess.run(["git", "pull", "-q", "--no-rebase", "--no-edit"], cwd=carol, capture_output=True)
    assert pulled.returncode != 0  # git's own text merge: both appended at the end
    status = run_stackmgr("--store", str(carol), "status")
    month.expect("git-setup" in status.out + status.err, f"status mid-conflict names git-setup: {status}")

    month.step("fri: nothing of either engineer is lost")
    if top == "a1":
        month.kept(alice, "alice.txt", b"alice's change\nalice v2\n")
    month.kept(bob, "bob.txt", b"bob's change\n")
    month.kept(alice, "late.txt", b"alice later\n")
    assert full
    month.verdict()
