"""Week 3: Alice bisects a series where p3 breaks the gate: under SIGTERM (a `timeout`), killed with -9, and from
the store with a tree-relative gate; runs on an older version rebuilt by `apply --link`; compares runs of
different measured states. The tree and the saved WIP always come back; no innocent patch is blamed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from typing import Any

from tests.scenario.conftest import Engineer, Month

GATE = "import sys; sys.exit(1 if 'broken' in open(sys.argv[1]).read() else 0)"


def records(who: Engineer, patch: str) -> list[dict[str, Any]]:
    return [tomllib.loads(p.read_text()) for p in sorted((who.store / "links" / patch).glob("*.toml"))]


def test_a_week_of_bisects_kills_and_older_versions(month: Month) -> None:
    alice = month.alice
    tree = alice.tree

    month.step("mon: series bis p1..p4 (p3 breaks src/model.py); a WIP note saved aside")
    for n in range(1, 5):
        (tree / f"f{n}.txt").write_bytes(f"{n}\n".encode())
        if n == 3:
            (tree / "src" / "model.py").write_bytes(b"def f():\n    return 'broken'\n")
        assert alice.sm("save", f"p{n}", "-t", "vllm", "--series", "bis", "-m", f"p{n}").code == 0
    assert alice.series("bis") == b"p1.patch\np2.patch\np3.patch\np4.patch\n"
    assert alice.sm("reset", "vllm").code == 0
    (tree / "wip.txt").write_bytes(b"my work in progress\n")
    assert alice.sm("save", "wip", "-t", "vllm", "-m", "wip").code == 0
    before = alice.tree_id()
    assert alice.sm("check").code == 0

    month.step("tue: bisect whose test is stopped by SIGTERM (timeout, exit 143): no patch blamed, tree back")
    term = ["timeout", "--preserve-status", "-s", "TERM", "0.3", "sleep", "5"]
    done = alice.proc("--json", "bisect", "bis", "--", *term)
    month.expect(done.returncode == 3, f"bisect under SIGTERM: exit 3, got {done.returncode}: {done.stderr}")
    month.expect("first_bad" not in done.stdout or json.loads(done.stdout).get("first_bad") is None,
                 f"no patch blamed under SIGTERM: {done.stdout}")  # fmt: skip
    assert alice.tree_id() == before and (tree / "wip.txt").read_bytes() == b"my work in progress\n"

    month.step("tue: a run stopped by SIGTERM is said to be SIGTERM, not Ctrl-C")
    assert alice.sm("apply", "bis").code == 0
    done = alice.proc("run", "-t", "vllm", "--name", "termed", "--", "sh", "-c", "kill -TERM $$")
    assert done.returncode == 143, (done.returncode, done.stderr)
    shown = alice.sm("show", "p4")
    month.expect("Ctrl-C" not in shown.out and "SIGTERM" in shown.out, f"show says SIGTERM: {shown.out}")
    assert alice.sm("reset", "vllm").code == 0 and alice.sm("apply", "--link", "termed").code in (0, 1, 3)
    assert alice.sm("reset", "vllm").code == 0
    (tree / "wip.txt").write_bytes(b"my work in progress\n")
    assert alice.tree_id() == before

    month.step("wed: bisect killed with -9 mid-test; the next command (recover) puts tree and WIP back")
    mark = month.tmp / "testing"
    proc = subprocess.Popen([sys.executable, "-m", "stackmgr", "--store", str(alice.store), "bisect", "bis", "--",
                             "sh", "-c", f"touch {mark}; sleep 30"], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 20
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    month.expect(alice.tree_id() != before, "the kill left the tree at a prefix (the story's premise)")
    done = alice.sm("recover")
    month.expect(done.code == 0, f"recover after kill -9: exit 0, got {done}")
    month.expect(alice.tree_id() == before, "after kill -9 the next command restored the tree")
    month.kept(alice, "wip.txt", b"my work in progress\n")
    month.expect((tree / "wip.txt").is_file(), "the saved WIP is back in the tree")
    if alice.tree_id() != before:
        assert alice.sm("reset", "vllm", "--force").code in (0, 1)
        assert alice.sm("reset", "vllm").code == 0
        (tree / "wip.txt").write_bytes(b"my work in progress\n")
    assert alice.tree_id() == before and alice.sm("check").code == 0

    month.step("thu: bisect started from the store with a tree-relative gate runs it in the tree: p3")
    done = alice.proc("--json", "bisect", "bis", "--", sys.executable, "-c", GATE, "src/model.py", cwd=alice.store)
    month.expect(done.returncode == 0, f"bisect from the store: exit 0, got {done.returncode}: {done.stderr}")
    if done.returncode == 0:
        month.expect(json.loads(done.stdout)["first_bad"] == "p3", f"first bad p3: {done.stdout}")
    month.expect(str(tree) in done.stderr, f"bisect says CMD runs in the tree: {done.stderr}")
    assert alice.tree_id() == before

    month.step("thu: run from the store with a relative --result-dir reads what the bench wrote (in the tree)")
    assert alice.sm("apply", "bis").code == 0
    applied = alice.tree_id()
    done = alice.proc("run", "-t", "vllm", "--name", "rel", "--result-dir", "out", "--",
                      sys.executable, str(month.bench), "107.77", "out", cwd=alice.store)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rel = alice.link_by_run("rel")
    month.expect({(m["name"], m["value"]) for m in rel["metrics"]} >= {("output_throughput", 107.77)},
                 f"the relative result dir's JSON was read: {rel['metrics']}")  # fmt: skip
    if (tree / "out").exists():
        import shutil

        shutil.rmtree(tree / "out")
    assert alice.tree_id() == applied

    month.step("fri: run v1 on bis; p1 refreshed (v2); result v1 is no longer fresh")
    out = month.tmp / "o1"
    done = alice.proc("run", "-t", "vllm", "--name", "v1", "--result-dir", str(out), "--",
                      sys.executable, str(month.bench), "107.77", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    v1 = alice.link_by_run("v1")
    v1_stack = next(r for r in records(alice, "p4") if r.get("run", {}).get("name") == "v1")["stack"]
    old_p1 = alice.patch("p1")
    assert alice.sm("pop", "-t", "vllm", "p1").code == 0
    (tree / "f1.txt").write_bytes(b"1\nv2\n")
    assert alice.sm("refresh", "-t", "vllm").code == 0
    assert alice.patch("p1") != old_p1 and b"+v2\n" in alice.patch("p1")
    state = [k for k in json.loads(alice.sm("show", "p4", "--json").out)["links"] if k["id"] == v1["id"]]
    month.expect(state and state[0]["state"] != "fresh", f"v1 measured p1 v1, now refreshed: not fresh ({state})")

    month.step("fri: apply --link v1 rebuilds the old version; a run there records that kept version")
    assert alice.sm("reset", "vllm").code == 0
    done = alice.sm("apply", "--link", "v1")
    assert done.code == 0, done
    assert alice.tree_id() == v1_stack[0]["snapshot"]
    out2 = month.tmp / "o2"
    done = alice.proc("run", "-t", "vllm", "--name", "again", "--result-dir", str(out2), "--",
                      sys.executable, str(month.bench), "117.43", str(out2))  # fmt: skip
    assert done.returncode == 0, done.stderr
    again = [r for p in ("p1", "p2", "p3", "p4", "wip") for r in records(alice, p)
             if r.get("run", {}).get("name") == "again"]  # fmt: skip
    assert again, "the run was recorded"
    stack = again[0]["stack"][0]
    month.expect(not stack.get("residue"), f"the run records the kept version, not current + residue: {stack}")
    month.expect({p["sha256"] for p in stack.get("patches", [])} >= {p["sha256"] for p in v1_stack[0]["patches"]},
                 "the chain names p1's kept version")  # fmt: skip

    month.step("fri: compare never averages two measured states as repeats")
    done = alice.sm("compare", "v1", "again", "--json")
    assert done.code == 0, done
    month.expect("112.6" not in done.out, f"107.77 and 117.43 averaged into one mean: {done.out}")
    done = alice.sm("compare", "v1", "v1")
    month.expect("e-15" not in done.out and "e-1" not in done.out, f"float noise shown as a change: {done.out}")
    assert alice.sm("reset", "vllm").code == 0
    (tree / "wip.txt").write_bytes(b"my work in progress\n")
    month.kept(alice, "wip.txt", b"my work in progress\n")
    month.kept(alice, "f1.txt", b"1\nv2\n")
    month.verdict()
