"""A run's name (`stackmgr run --name`) stands for one result: named in two clones and merged, it stands for two,
and every command that takes a name refuses it in one line naming the link ids to give instead; `lint` says so.
Compare's column titles read patch names through a rename, say which version a column measured where columns
differ by it, and say a result that is not fresh."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import Lab, git, link_id, one_line_error
from tests.test_measured_rules import _bench, _two_patches
from tests.test_team_day import pull, team


def _nightly(who: Lab, tput: int) -> str:
    """`run --name nightly` on S applied, its record's id; the tree reset, the store committed."""
    assert who.sm("apply", "S").code == 0
    ran = who.sm("run", "--name", "nightly", "--", sys.executable, "-c",
                 f"print('Output token throughput (tok/s): {tput}')")  # fmt: skip
    assert ran.code == 0, ran.err
    (record,) = [k for k in json.loads(who.sm("links", "--json").out)["links"]
                 if k.get("run", {}).get("name") == "nightly"]  # fmt: skip
    assert who.sm("reset").code == 0
    git(who.store, "add", "-A")
    git(who.store, "commit", "-q", "-m", f"nightly at {tput}")
    return str(record["id"])


def _records(lab: Lab) -> dict[str, bytes]:
    return {str(p.relative_to(lab.store)): p.read_bytes() for p in (lab.store / "links").rglob("*.toml")}


def test_a_run_name_recorded_in_two_clones_is_refused_everywhere_with_the_ids(lab: Lab, tmp_path: Path) -> None:
    bob = team(lab, tmp_path)
    bobs = _nightly(bob, 130)
    assert bob.sm("compare", "nightly").code == 0, "one run of that name in Bob's clone: that run"
    git(bob.store, "push", "-q", "origin", "main")
    alices = _nightly(lab, 90)  # before pulling: the name was free in her clone
    pull(lab)  # the store merges cleanly: two records, one name
    before = _records(lab)
    assert len(before) == 2
    for args in (("compare", "nightly"), ("compare", "base", "nightly"),
                 ("link", "base", "--amends", "nightly", "--verdict", "promoted", "--lesson", "x"),
                 ("link", "base", "--baseline", "nightly", "--metric", "tok_s=1tok/s"),
                 ("apply", "--link", "nightly")):  # fmt: skip
        refused = lab.sm(*args)
        one_line_error(refused, 2)
        assert "nightly" in refused.err and alices in refused.err and bobs in refused.err, (args, refused.err)
        assert _records(lab) == before, f"{args}: nothing written"
    assert lab.sm("status").code == 0
    linted = lab.sm("lint")
    assert linted.code != 0
    (said,) = [line for line in linted.out.splitlines() + linted.err.splitlines() if "nightly" in line]
    assert alices in said and bobs in said, said
    by_id = lab.sm("compare", bobs, alices)
    assert by_id.code == 0, by_id.err
    promoted = link_id(lab, "base", "--amends", bobs, "--verdict", "rejected", "--lesson", "Bob's number")
    (amendment,) = [k for k in json.loads(lab.sm("links", "--json").out)["links"] if k["id"] == promoted]
    assert amendment["amends"] == bobs


def test_a_run_name_completed_by_its_amendment_still_names_one_run(lab: Lab, tmp_path: Path) -> None:
    bob = team(lab, tmp_path)
    draft = _nightly(bob, 130)
    done = link_id(bob, "base", "--amends", "nightly", "--verdict", "rejected", "--lesson", "too slow")
    shown = bob.sm("--json", "compare", "nightly")
    assert shown.code == 0, shown.err
    (group,) = json.loads(shown.out)["groups"]
    assert [r["links"] for r in group["results"]] == [[done]] and done != draft
    assert "nightly" not in bob.sm("lint").out


def test_compare_titles_columns_by_the_names_now_the_version_measured_and_a_stale_state(lab: Lab) -> None:
    import hashlib

    _two_patches(lab)
    old = hashlib.sha256((lab.store / "patches" / "p2.patch").read_bytes()).hexdigest()
    v1 = link_id(lab, "p2", "--from-json", _bench(lab, "v1.json", 100.0))
    assert lab.sm("rename", "p1", "p1-base").code == 0
    (lab.tree / "docs.txt").write_text("notes, v2\n")
    assert lab.sm("refresh").code == 0
    new = hashlib.sha256((lab.store / "patches" / "p2.patch").read_bytes()).hexdigest()
    assert new != old
    v2 = link_id(lab, "p2", "--from-json", _bench(lab, "v2.json", 120.0))
    shown = lab.sm("--json", "compare", "p2")
    assert shown.code == 0, shown.err
    (group,) = json.loads(shown.out)["groups"]
    assert [(r["links"], r["label"]) for r in group["results"]] == [
        ([v1], f"p2@{old[:6]} on p1-base+p2@{old[:6]} (stale)"),
        ([v2], f"p2@{new[:6]} on p1-base+p2@{new[:6]}")]  # fmt: skip
    text = lab.sm("compare", "p2").out.splitlines()
    assert text[1:3] == [
        f"  p2@{old[:6]} on p1-base+p2@{old[:6]} (stale) (reference): {v1}",
        f"  p2@{new[:6]} on p1-base+p2@{new[:6]}: {v2}",
    ], text
    assert "p1+" not in "\n".join(text), "the old name is not shown"
