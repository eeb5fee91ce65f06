"""A team's day on one store, with real git: a bare remote, Alice's store and Bob's clone, each with the tree at
a path of their own. Both save, link and append to one series at the same time; they push, pull and merge; and
every command on both clones says what was recorded, with no cache deleted: after the merge, after a record
edited in place with its size and mtime put back, and after a `git checkout` of an older store commit and back."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import Lab, git, git_text, link_id


def pull(who: Lab) -> None:
    pulled = subprocess.run(["git", "pull", "-q", "--no-rebase", "--no-edit"], cwd=who.store, capture_output=True)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr


def team(lab: Lab, tmp_path: Path) -> Lab:
    """Alice's store (lab) pushed to a bare remote; Bob's clone, his own checkout of the tree, `git-setup` and
    `tree set` run as the README says a teammate does."""
    (lab.tree / "README").write_text("hello\nbase\n")
    assert lab.sm("save", "base", "--series", "S", "-m", "the base").code == 0
    assert lab.sm("reset").code == 0
    git(lab.store, "init", "-q", "-b", "main")
    assert lab.sm("git-setup").code == 0
    git(lab.store, "add", "-A")
    git(lab.store, "commit", "-q", "-m", "the lab's store")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(lab.store, "remote", "add", "origin", str(remote))
    git(lab.store, "push", "-q", "-u", "origin", "main")
    store, tree = tmp_path / "bob" / "store", tmp_path / "bob" / "src" / "vllm"
    git(tmp_path, "clone", "-q", str(remote), str(store))
    git(tmp_path, "clone", "-q", str(lab.tree), str(tree))
    bob = Lab(store, tree)
    assert bob.sm("git-setup").code == 0
    said = bob.sm("status")
    assert "no path on this machine" in said.out + said.err
    assert bob.sm("tree", "set", "vllm", str(tree)).code == 0
    return bob


def work(who: Lab, name: str, path: str, verdict: str) -> str:
    """`name` saved into S on top of what S holds, a result linked to it, the tree reset, the store committed."""
    assert who.sm("apply", "S").code == 0
    (who.tree / path).write_text(f"{name}'s change\n")
    assert who.sm("save", name, "--series", "S", "-m", f"{name}'s change").code == 0
    log = who.store / "artifacts" / f"{name}.log"
    log.parent.mkdir(exist_ok=True)
    log.write_text(f"Output token throughput (tok/s): {len(name) * 10}.5\n")
    link = link_id(who, name, str(log), "--verdict", verdict, "--lesson", f"{name}: {verdict}",
                   "--metric", f"tok_s={len(name) * 10}.5tok/s")  # fmt: skip
    assert who.sm("reset").code == 0
    git(who.store, "add", "-A")
    git(who.store, "commit", "-q", "-m", f"{name}: saved and linked")
    return link


def seen(who: Lab) -> dict[str, Any]:
    """What a teammate reads of the store: series, patches, links, verdicts, lessons, metrics and checks."""
    links = json.loads(who.sm("links", "--json").out)["links"]
    shown = {p: json.loads(who.sm("show", p, "--json").out) for p in ("base", "alice", "bob")
             if (who.store / "patches" / f"{p}.patch").exists()}  # fmt: skip
    verify = who.sm("verify")
    return {
        "series": (who.store / "series" / "S").read_text(),
        "links": sorted(
            (
                k["id"],
                k["patch"],
                k["verdict"]["status"],
                k["verdict"]["lesson"],
                json.dumps(k.get("metrics"), sort_keys=True),
            )
            for k in links
        ),
        "show": {
            p: (s["patch"]["name"], s["patch"].get("sha256"), sorted(k["id"] for k in s["links"]))
            for p, s in shown.items()
        },
        "verify": verify.code,
        "check": who.sm("check").code,
        "status": who.sm("status").code,
    }


def test_two_engineers_share_a_day_and_every_command_says_what_was_recorded(lab: Lab, tmp_path: Path) -> None:
    bob = team(lab, tmp_path)
    warm = seen(lab), seen(bob)  # every cache filled before anything git does to the store
    assert warm[0] == warm[1]
    alice_link = work(lab, "alice", "alice.txt", "promoted")
    bob_link = work(bob, "bob", "bob.txt", "rejected")
    seen(lab), seen(bob)  # caches hold each one's own half now
    git(bob.store, "push", "-q", "origin", "main")
    pull(lab)  # the series merge driver joins both appends
    git(lab.store, "push", "-q", "origin", "main")
    pull(bob)
    merged = git_text(lab.store, "rev-parse", "HEAD")
    assert git_text(bob.store, "rev-parse", "HEAD") == merged
    ours, theirs = seen(lab), seen(bob)
    assert ours == theirs, (ours, theirs)
    assert ours["series"] == "base.patch\nalice.patch\nbob.patch\n"
    assert {k[:4] for k in ours["links"]} == {(alice_link, "alice", "promoted", "alice: promoted"),
                                              (bob_link, "bob", "rejected", "bob: rejected")}  # fmt: skip
    assert ours["verify"] == ours["check"] == ours["status"] == 0
    for who in (lab, bob):  # the merged series rebuilds both halves on each engineer's own tree
        assert who.sm("apply", "S").code == 0
        assert (who.tree / "alice.txt").read_text() == "alice's change\n"
        assert (who.tree / "bob.txt").read_text() == "bob's change\n"
        assert who.sm("reset").code == 0

    # Bob corrects his lesson in place, the record's size and mtime put back; Alice pulls it.
    record = next((bob.store / "links" / "bob").glob("*.toml"))
    before, text = record.stat(), record.read_text()
    edited = text.replace('"bob: rejected"', '"bob: REJECTED"')
    assert len(edited) == len(text), "the edit keeps the record's size"
    with open(record, "r+") as f:
        f.write(edited)
    os.utime(record, ns=(before.st_atime_ns, before.st_mtime_ns))
    git(bob.store, "commit", "-q", "-am", "bob's lesson corrected")
    git(bob.store, "push", "-q", "origin", "main")
    pull(lab)
    ours, theirs = seen(lab), seen(bob)
    assert ours == theirs
    assert (bob_link, "bob", "rejected", "bob: REJECTED") in {k[:4] for k in ours["links"]}
    assert ours["verify"] != 0  # a write-once record changed after it was written, and verify says so
    for who in (lab, bob):
        lint = who.sm("lint")
        assert lint.code == 1 and "changed after it was written" in lint.out + lint.err

    # Back to the store before the merge, and forward again: each state read as it is.
    edited_state = ours
    git(lab.store, "checkout", "-q", f"{merged}~1")  # Alice's own commit, before Bob's work arrived
    old = seen(lab)
    assert old["series"] == "base.patch\nalice.patch\n"
    assert {k[1] for k in old["links"]} == {"alice"}
    assert old["show"].keys() == {"base", "alice"}
    assert old["check"] == 0 and old["status"] == 0
    git(lab.store, "checkout", "-q", "main")
    assert seen(lab) == edited_state
