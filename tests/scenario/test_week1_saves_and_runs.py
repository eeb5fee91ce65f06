"""Week 1: Alice saves a series on vllm, runs a fake bench on it (one clean run, one tainted, one failed), and
rejects a lane as do-not-revive. Saving never duplicates saved work; a new series beside an applied one needs to be
asked for; every move that brings the lane back is refused; a tainted or failed run is never shown as clean."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys

from tests.scenario.conftest import Month


def quotes(number: str, text: str) -> bool:
    """Whether *text* shows *number* as a number, not as digits inside a hash or an id (lnk-7af25999e151)."""
    return re.search(rf"(?<![0-9A-Za-z]){number}(?![0-9A-Za-z])", text) is not None


def test_a_week_of_saves_runs_and_a_rejected_lane(month: Month) -> None:
    alice, bob = month.alice, month.bob
    tree = alice.tree

    month.step("mon: p1 and p2 saved into series replay; the tree is as it was")
    (tree / "src" / "model.py").write_bytes(b"def f():\n    return 2\n")
    dirty = alice.tree_id()
    assert alice.sm("save", "p1", "-t", "vllm", "--series", "replay", "-m", "p1: return 2").code == 0
    (tree / "README").write_bytes(b"vllm\nreplay notes\n")
    after_p2 = alice.tree_id()
    assert alice.sm("save", "p2", "-t", "vllm", "--series", "replay", "-m", "p2: notes").code == 0
    assert alice.tree_id() == after_p2 != dirty
    assert alice.series("replay") == b"p1.patch\np2.patch\n"
    assert b"+    return 2\n" in alice.patch("p1") and b"+replay notes\n" not in alice.patch("p1")
    assert b"+replay notes\n" in alice.patch("p2") and b"+    return 2\n" not in alice.patch("p2")
    assert alice.sm("check").code == 0

    month.step("mon: `save W` with nothing new while replay is applied and saved: refused, nothing written")
    done = alice.sm("save", "W", "-t", "vllm", "-m", "again")
    month.expect(done.code == 3 and "nothing" in (done.out + done.err).lower(), f"exit 3 'nothing to save', got {done}")
    if not month.expect(not (alice.store / "patches" / "W.patch").exists(), "no patches/W.patch duplicating p1+p2"):
        assert alice.sm("drop", "W").code == 0  # the user removes the duplicate by hand
    assert alice.tree_id() == after_p2

    month.step("mon: `save W --series replya` (a typo): refused with did-you-mean, no series, no patch")
    (tree / "notes.txt").write_bytes(b"W's note\n")
    with_note = alice.tree_id()
    done = alice.sm("save", "W", "-t", "vllm", "--series", "replya", "-m", "W")
    month.expect(done.code == 2 and "replay" in done.err and "mean" in done.err.lower(),
                 f"exit 2 with did-you-mean replay, got {done}")  # fmt: skip
    month.expect(not (alice.store / "series" / "replya").exists(), "no series replya created")
    if not month.expect(not (alice.store / "patches" / "W.patch").exists(), "no patches/W.patch"):
        (alice.store / "series" / "replya").unlink(missing_ok=True)  # undone by hand, as the user would
        assert alice.sm("apply", "replay").code == 0
        assert alice.sm("drop", "W").code == 0
        (tree / "notes.txt").write_bytes(b"W's note\n")
    assert alice.series("replay") == b"p1.patch\np2.patch\n" and alice.tree_id() == with_note
    month.kept(alice, "notes.txt", b"W's note\n")

    month.step("mon: `save W --series replay`: W holds only the note")
    assert alice.sm("save", "W", "-t", "vllm", "--series", "replay", "-m", "W: a note").code == 0
    w = alice.patch("W")
    assert w.count(b"diff --git") == 1 and b"+W's note\n" in w and b"return 2" not in w
    assert alice.series("replay") == b"p1.patch\np2.patch\nW.patch\n" and alice.tree_id() == with_note

    month.step("tue: `save k1 --series second` beside the applied replay: refused, nothing written")
    (tree / "kernel_hint.txt").write_bytes(b"second series starts here\n")
    with_hint = alice.tree_id()
    done = alice.sm("save", "k1", "-t", "vllm", "--series", "second", "-m", "k1")
    month.expect(done.code == 2 and "replay" in done.err, f"exit 2 naming the applied replay, got {done}")
    if not month.expect(not (alice.store / "patches" / "k1.patch").exists(), "no patches/k1.patch"):
        k1 = alice.patch("k1")
        month.expect(k1.count(b"diff --git") == 1, f"k1 in series second holds {k1.count(b'diff --git')} files, not 1")
        (alice.store / "series" / "second").unlink(missing_ok=True)  # undone by hand
        assert alice.sm("apply", "replay").code == 0
        assert alice.sm("drop", "k1").code == 0
        (tree / "kernel_hint.txt").write_bytes(b"second series starts here\n")
    assert alice.tree_id() == with_hint

    month.step("tue: `save k1` (no series) as the hint says: appended to replay, one file, not replay's patches again")
    done = alice.sm("save", "k1", "-t", "vllm", "-m", "k1: the hint")
    assert done.code == 0, done
    k1 = alice.patch("k1")
    assert b"+second series starts here\n" in k1
    month.expect(k1.count(b"diff --git") == 1 and b"return 2" not in k1 and b"W's note" not in k1,
                 f"k1 holds only the hint, not replay's patches ({k1.count(b'diff --git')} files)")  # fmt: skip
    assert alice.series("replay") == b"p1.patch\np2.patch\nW.patch\nk1.patch\n" and alice.tree_id() == with_hint
    assert alice.sm("check").code == 0
    assert alice.sm("reset", "vllm").code == 0 and not (tree / "kernel_hint.txt").exists()
    month.kept(alice, "kernel_hint.txt", b"second series starts here\n")
    assert alice.sm("apply", "replay").code == 0
    applied = alice.tree_id()
    assert applied == with_hint

    month.step("wed: run r1 (clean, 100 tok/s) on replay: recorded on k1 (the top) with the tree's id")
    out = month.tmp / "out"
    bench = [sys.executable, str(month.bench)]
    done = alice.proc("run", "-t", "vllm", "--name", "r1", "--result-dir", str(out), "--", *bench, "100.0", str(out))
    assert done.returncode == 0, done.stderr
    r1 = alice.link_by_run("r1")
    assert r1["patch"] == "k1" and r1["verdict"]["status"] == "experimental"
    assert alice.tree_id() == applied

    month.step("wed: run r2 touches the tree while it runs (999 tok/s): tainted everywhere")
    out2, out3 = month.tmp / "out2", month.tmp / "out3"
    touch = f"echo touched >> {tree / 'README'} && {shlex.join([*bench, '999.0', str(out2)])}"
    done = alice.proc("run", "-t", "vllm", "--name", "r2", "--result-dir", str(out2), "--", "sh", "-c", touch)
    assert done.returncode == 0, done.stderr
    assert "tainted" in done.stderr
    (tree / "README").write_bytes(b"vllm\nreplay notes\n")  # the touch undone by hand
    assert alice.tree_id() == applied
    r2 = alice.link_by_run("r2")
    assert "TAINTED" in alice.sm("links").out

    month.step("wed: run r3 fails (exit 3) after writing 500 tok/s: failed everywhere, exit passed through")
    fail = f"{shlex.join([*bench, '500.0', str(out3)])}; exit 3"
    done = alice.proc("run", "-t", "vllm", "--name", "r3", "--result-dir", str(out3), "--", "sh", "-c", fail)
    assert done.returncode == 3, done.stderr
    r3 = alice.link_by_run("r3")

    month.step("wed: compare of r1, r2, r3 named by the user: r1 the reference, r2 and r3 shown marked, never averaged")
    done = alice.sm("compare", r1["id"], r2["id"], r3["id"], "--json")
    assert done.code == 0, done
    (group,) = json.loads(done.out)["groups"]
    marks = {tuple(r["links"]): (r["reference"], r["marked"]) for r in group["results"]}
    month.expect(marks.get((r1["id"],)) == (True, None), f"r1 is the reference: {marks}")
    month.expect(marks.get((r2["id"],)) == (False, "tainted"), f"r2 shown, marked tainted: {marks}")
    month.expect(marks.get((r3["id"],)) == (False, "exit 3"), f"r3 shown, marked failed: {marks}")
    (tput,) = [m for m in group["metrics"] if m["name"] == "output_throughput"]
    month.expect([v["mean"] for v in tput["values"]] == [100.0, 999.0, 500.0], f"each its own number: {tput}")

    month.step("wed: the HTML report and the lessons page never show r2/r3 as clean or quote their numbers")
    site = month.tmp / "site"
    assert alice.sm("report", "-o", str(site)).code == 0
    index = (site / "index.html").read_text().split("</style>")[-1]  # the page, not its style sheet
    month.expect(not quotes("999", index) and not quotes("500", index),
                 "the index's best metric takes a tainted/failed run")
    for page in site.rglob("*.html"):
        html = page.read_text().split("</style>")[-1]
        for run, word in (("999", "taint"), ("500", "fail")):
            if quotes(run, html):
                month.expect(word in html.lower(), f"{page.name} shows {run} without saying {word}ed")
    lessons = month.tmp / "lessons.md"
    assert alice.sm("report", "--markdown", str(lessons)).code == 0
    for line in lessons.read_text().splitlines():
        month.expect(not quotes("999", line) or "taint" in line.lower(), f"lessons quote the tainted run: {line}")
        month.expect(not quotes("500", line) or "fail" in line.lower(), f"lessons quote the failed run: {line}")

    month.step("thu: lane p3 (queue 64) run as r4, then rejected do-not-revive with a lesson")
    (tree / "src" / "sched.py").write_bytes(b"QUEUE = 64\n")
    assert alice.sm("save", "p3", "-t", "vllm", "--series", "replay", "-m", "p3: queue 64").code == 0
    with_lane = alice.tree_id()
    done = alice.proc("run", "-t", "vllm", "--name", "r4", "--", *bench, "80.0", str(month.tmp / "out4"))
    assert done.returncode == 0, done.stderr
    r4 = alice.link_by_run("r4")
    assert r4["patch"] == "p3"
    done = alice.sm("link", "p3", "--amends", "r4", "--verdict", "rejected", "--do-not-revive",
                    "--lesson", "queue 64 deadlocks")  # fmt: skip
    assert done.code == 0, done
    lane_shown = json.loads(alice.sm("show", "p3", "--json").out)
    assert "queue 64 deadlocks" in json.dumps(lane_shown)

    month.step("thu: pop p3 off; `push` and `push -a` refuse to bring the lane back (exit 1, tree unchanged)")
    assert alice.sm("pop", "-t", "vllm").code == 0
    assert alice.tree_id() == applied and (tree / "src" / "sched.py").read_bytes() == b"QUEUE = 8\n"
    for args in (("push", "-t", "vllm"), ("push", "-t", "vllm", "-a")):
        done = alice.sm(*args)
        month.expect(done.code == 1 and "do-not-revive" in done.err, f"{args}: exit 1 do-not-revive, got {done}")
        if not month.expect(alice.tree_id() == applied, f"{args} brought the lane back into the tree"):
            assert alice.sm("pop", "-t", "vllm").code == 0 and alice.tree_id() == applied

    month.step("thu: `apply --link r4` (measured with the lane) refuses the same way")
    assert alice.sm("reset", "vllm").code == 0
    reset = alice.tree_id()
    done = alice.sm("apply", "--link", r4["id"])
    month.expect(done.code == 1 and "do-not-revive" in done.err, f"apply --link: exit 1 do-not-revive, got {done}")
    if not month.expect(alice.tree_id() == reset, "apply --link brought the lane back"):
        assert alice.sm("reset", "vllm").code == 0 and alice.tree_id() == reset

    month.step("thu: `import --series other` of the lane's change under another name refuses too")
    lane = month.tmp / "queue.patch"
    shutil.copyfile(alice.store / "patches" / "p3.patch", lane)
    done = alice.sm("import", "-t", "vllm", "--series", "other", "--name", "q64", str(lane))
    month.expect(done.code == 1 and "do-not-revive" in done.err, f"import: exit 1 do-not-revive, got {done}")
    month.expect(not (alice.store / "series" / "other").exists(), "import wrote series other holding the lane")
    if (alice.store / "series" / "other").exists():
        (alice.store / "series" / "other").unlink()
    if (alice.store / "patches" / "q64.patch").exists():
        assert alice.sm("drop", "q64").code == 0
    assert alice.sm("reset", "vllm").code == 0 and alice.tree_id() == reset

    month.step("fri: an amendment with no verdict (a gate) keeps the lane rejected, do-not-revive, with its lesson")
    done = alice.sm("link", "p3", "--amends", "r4", "--gate", "review=pass")
    assert done.code == 0, done
    shown = json.loads(alice.sm("show", "p3", "--json").out)
    month.expect(
        shown["patch"]["status"] == lane_shown["patch"]["status"],
        f"lane status {lane_shown['patch']['status']} -> {shown['patch']['status']} with no verdict",
    )
    latest = shown["links"][-1]["verdict"]
    month.expect(latest["status"] == "rejected" and latest["lesson"] == "queue 64 deadlocks",
                 f"the amended lane keeps rejected + its lesson, got {latest}")  # fmt: skip
    done = alice.sm("apply", "replay")
    month.expect(done.code == 1, f"apply of replay (lane inside) still refused, got {done}")
    if alice.tree_id() != reset:
        assert alice.sm("reset", "vllm").code == 0
    lessons2 = month.tmp / "lessons2.md"
    assert alice.sm("report", "--markdown", str(lessons2)).code == 0
    month.expect("queue 64 deadlocks" in lessons2.read_text(), "the lessons page keeps the lane's lesson")

    month.step("fri: a promoted result amended to rejected do-not-revive keeps its lesson")
    done = alice.sm("link", "k1", "--amends", "r1", "--verdict", "promoted", "--lesson", "the note helps")
    assert done.code == 0, done
    done = alice.sm("link", "k1", "--amends", "r1", "--verdict", "rejected", "--do-not-revive")
    assert done.code == 0, done
    month.expect("the note helps" in json.dumps(json.loads(alice.sm("show", "k1", "--json").out)["links"][-1]),
                 "the amendment to rejected keeps the lesson it did not change")  # fmt: skip

    month.step("fri: the week pushed; Bob pulls and sees the same lanes; nothing of Alice's is lost")
    alice.push("week 1")
    bob.pull()
    assert bob.series("replay") == alice.series("replay") == b"p1.patch\np2.patch\nW.patch\nk1.patch\np3.patch\n"
    assert bob.patch("p3") == alice.patch("p3")
    bob_clean = bob.tree_id()
    assert bob.sm("apply", "replay").code == 1 and bob.tree_id() == bob_clean
    for path, data in (("src/model.py", b"def f():\n    return 2\n"), ("README", b"vllm\nreplay notes\n"),
                       ("notes.txt", b"W's note\n"), ("src/sched.py", b"QUEUE = 64\n")):  # fmt: skip
        month.kept(alice, path, data)
    assert with_lane != applied and r2["id"] and r3["id"]
    month.verdict()
