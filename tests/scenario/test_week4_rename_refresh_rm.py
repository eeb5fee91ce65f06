"""Week 4: Bob forgets a tree he has no path for (`tree rm`), Alice pulls it with unsaved edits in her checkout;
Alice refreshes with no paths while another patch holds a carried file; a patch renamed after a result was
measured; a store named by STACKMGR_STORE beside the one the user stands in."""

from __future__ import annotations

import json
import os
import sys

from tests.conftest import run_stackmgr
from tests.scenario.conftest import Month


def test_a_week_of_rename_refresh_and_a_teammates_tree_rm(month: Month) -> None:
    alice, bob = month.alice, month.bob
    kernels = alice.trees["kernels"]

    month.step("mon: Bob's `tree rm kernels` reaches Alice by pull; her unsaved kernel edit stays guarded")
    (kernels / "gemm.cpp").write_bytes(b"int tile = 128;\n")
    assert alice.sm("check").code == 1
    assert bob.sm("tree", "rm", "kernels").code == 0
    bob.push("kernels forgotten")
    alice.pull()
    done = alice.sm("check")
    month.expect(done.code == 1, f"check after a teammate's tree rm: exit 1 (unsaved gemm.cpp), got {done}")
    old = os.getcwd()
    os.chdir(kernels)
    try:
        guarded = run_stackmgr("--store", str(alice.store), "guard", "--", "reset", "--hard").code
    finally:
        os.chdir(old)
    month.expect(guarded == 1, f"the shell guard refuses `git reset --hard` in kernels, got exit {guarded}")
    assert (kernels / "gemm.cpp").read_bytes() == b"int tile = 128;\n"
    month.kept(alice, "gemm.cpp", b"int tile = 128;\n", tree="kernels")

    month.step("tue: Alice's series s (a1 then a2); a carried file held by patch `held` stays out of a no-path refresh")
    tree = alice.tree
    (tree / "carried.txt").write_bytes(b"held elsewhere\n")
    assert alice.sm("save", "held", "-t", "vllm", "-m", "held", "carried.txt").code == 0  # no series applied
    assert alice.sm("reset", "vllm").code == 0 and not (tree / "carried.txt").exists()
    (tree / "src" / "model.py").write_bytes(b"def f():\n    return 'a1'\n")
    assert alice.sm("save", "a1", "-t", "vllm", "--series", "s", "-m", "a1").code == 0
    (tree / "src" / "sched.py").write_bytes(b"QUEUE = 32\n")
    assert alice.sm("save", "a2", "-t", "vllm", "--series", "s", "-m", "a2").code == 0
    (tree / "carried.txt").write_bytes(b"held elsewhere\n")  # carried along: `held` preserves it
    (tree / "src" / "sched.py").write_bytes(b"QUEUE = 48\n")
    done = alice.sm("refresh", "-t", "vllm")
    assert done.code == 0, done
    a2 = alice.patch("a2")
    assert b"+QUEUE = 48\n" in a2
    month.expect(b"carried.txt" not in a2, "refresh with no paths folded carried.txt (held by `held`) into a2")
    assert alice.sm("reset", "vllm").code == 0
    assert alice.sm("apply", "s").code == 0
    month.expect(not (tree / "carried.txt").exists(), "apply s creates carried.txt")
    month.kept(alice, "carried.txt", b"held elsewhere\n")

    month.step("wed: run r on s (measured with a2), then `rename a2 a2-new`; apply --link r rebuilds it")
    if (tree / "carried.txt").exists():
        assert alice.sm("reset", "vllm").code == 0 and alice.sm("apply", "s").code == 0
    measured = alice.tree_id()
    out = month.tmp / "r"
    done = alice.proc("run", "-t", "vllm", "--name", "r", "--result-dir", str(out), "--",
                      sys.executable, str(month.bench), "107.77", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert alice.sm("reset", "vllm").code == 0
    a2_bytes = alice.patch("a2")
    assert alice.sm("rename", "a2", "a2-new").code == 0
    assert alice.patch("a2-new") == a2_bytes and not (alice.store / "patches" / "a2.patch").exists()
    assert alice.series("s") == b"a1.patch\na2-new.patch\n"
    done = alice.sm("apply", "--link", "r")
    month.expect(done.code == 0, f"apply --link of a result measured before the rename: exit 0, got {done}")
    month.expect(alice.tree_id() == measured, "apply --link rebuilt the measured tree")
    done = alice.sm("compare", "a2-new", "--json")
    month.expect(done.code == 0 and "107.77" in done.out, f"compare counts r as measured with a2-new: {done}")
    done = alice.sm("link", "a2-new", "--amends", "r", "--verdict", "promoted", "--lesson", "queue 48")
    month.expect(done.code == 0, f"promoting r on the renamed patch: exit 0, got {done}")
    assert alice.sm("reset", "vllm").code == 0

    month.step("thu: STACKMGR_STORE names Bob's store while Alice stands in hers: a mutating command says which")
    alice.push("week 4")
    bob.pull()
    done = alice.here(alice.store, "git-setup", env={"STACKMGR_STORE": str(bob.store)})
    assert done.code == 0, done
    month.expect(str(bob.store) in done.out + done.err or str(alice.store) in done.out + done.err,
                 f"git-setup says which store it acts on when both exist: {done}")  # fmt: skip
    done = alice.here(alice.store, "--json", "status", env={"STACKMGR_STORE": str(bob.store)})
    assert done.code == 0, done
    assert json.loads(done.out)

    month.step("fri: nothing lost on either side")
    for path, data in (("src/model.py", b"def f():\n    return 'a1'\n"), ("src/sched.py", b"QUEUE = 48\n")):
        month.kept(alice, path, data)
    month.kept(alice, "gemm.cpp", b"int tile = 128;\n", tree="kernels")
    assert bob.patch("a2-new") == alice.patch("a2-new")
    month.verdict()
