"""`series NAME` and `series -v NAME` as quilt's `series -v` and `stg series` show a stack: `+` applied, `>` the top
applied one, `-` not applied (in the tree the series is applied in), with each patch's verdict and latest
headline result; plain `series` says how many of each series are applied in which tree."""

from __future__ import annotations

import json

from tests.conftest import Lab, link_id

LEGEND = "(+ applied, > top applied, - not applied)"


def _words(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


def _three_patches(lab: Lab) -> None:
    """Series S on the lab's tree: p1, p2, p3, each saved on top of the one before (all three applied)."""
    for n, (path, text) in enumerate([("README", "one\n"), ("src/model.py", "two\n"), ("new.txt", "three\n")], 1):
        (lab.tree / path).write_text(text)
        assert lab.sm("save", f"p{n}", "--series", "S", "-m", f"p{n}").code == 0


def test_series_marks_applied_patches_and_the_top_one_like_stg(lab: Lab) -> None:
    _three_patches(lab)
    popped = lab.sm("pop")
    assert popped.code == 0, popped.err
    tree_before = lab.worktree_id()
    shown = lab.sm("series", "S")
    assert shown.code == 0, shown.err
    assert _words(shown.out) == [
        "series S: 3 patches, 2 of 3 applied in vllm",
        "+ 1. p1 vllm +1 -1",
        "> 2. p2 vllm +1 -2",
        "- 3. p3 vllm +1 -0",
        LEGEND,
    ]
    assert lab.sm("series", "-v", "S").out == shown.out  # quilt's flag: the same view
    rows = json.loads(lab.sm("series", "S", "--json").out)["patches"]
    assert [(r["patch"], r["applied"], r["top"]) for r in rows] == [
        ("p1", True, False), ("p2", True, True), ("p3", False, False)]  # fmt: skip
    assert [r["verdict"] for r in rows] == ["unlinked"] * 3
    assert lab.worktree_id() == tree_before  # a view: the tree is as it was


def test_a_series_applied_in_no_tree_is_all_not_applied(lab: Lab) -> None:
    _three_patches(lab)
    base = lab.sm("reset")
    assert base.code == 0, base.err
    shown = lab.sm("series", "-v", "S")
    assert shown.code == 0 and _words(shown.out)[0] == "series S: 3 patches"
    assert [line.split()[0] for line in _words(shown.out)[1:4]] == ["-", "-", "-"]
    rows = json.loads(lab.sm("--json", "series", "S").out)["patches"]
    assert [(r["applied"], r["top"]) for r in rows] == [(False, False)] * 3


def test_series_shows_each_patch_verdict_and_its_latest_result(evidence_lab: Lab) -> None:
    lab = evidence_lab
    link_id(lab, "replay-fix", "results/probe.log", "--from-json", "results/bench.json", "--verdict", "experimental")
    link_id(lab, "replay-probe", "results/probe.log", "--metric", "output_throughput=90tok/s",
            "--verdict", "rejected", "--lesson", "slower")  # fmt: skip
    shown = lab.sm("series", "replay")
    assert shown.code == 0, shown.err
    rows = _words(shown.out)
    assert rows[1].startswith("+ 1. replay-fix vllm +1 -1") and "experimental" in rows[1], rows
    assert "output_throughput 107.77 tok/s" in rows[1], rows
    assert rows[2].startswith("> 2. replay-probe vllm +1 -1") and "rejected" in rows[2], rows
    data = json.loads(lab.sm("series", "replay", "--json").out)["patches"]
    assert [(r["verdict"], r["applied"], r["top"]) for r in data] == [
        ("experimental", True, False), ("rejected", True, True)]  # fmt: skip
    assert data[0]["metric"] == {"name": "output_throughput", "value": 107.77, "unit": "tok/s"}
    assert data[1]["metric"] == {"name": "output_throughput", "value": 90.0, "unit": "tok/s"}  # rejected: still its
    link_id(lab, "gemm-tile", "results/probe.log", "--verdict", "rejected", "--do-not-revive", "--lesson", "no")
    kernels = lab.sm("series", "kernels")
    assert kernels.code == 0 and "rejected, do-not-revive" in _words(kernels.out)[1], kernels.out
    assert json.loads(lab.sm("series", "kernels", "--json").out)["patches"][0]["do_not_revive"] is True


def test_series_list_says_how_many_are_applied_in_which_tree(evidence_lab: Lab) -> None:
    lab = evidence_lab
    assert lab.sm("pop", "-t", "vllm").code == 0
    listing = lab.sm("series")
    assert listing.code == 0, listing.err
    assert _words(listing.out) == [
        "kernels 1 patch, 1 of 1 applied in vllm-xpu-kernels",
        "replay 2 patches, 1 of 2 applied in vllm",
    ]
    rows = json.loads(lab.sm("--json", "series").out)["series"]
    assert [r["applied"] for r in rows] == [
        [{"tree": "vllm-xpu-kernels", "applied": 1, "of": 1, "top": "gemm-tile"}],
        [{"tree": "vllm", "applied": 1, "of": 2, "top": "replay-fix"}],
    ]
