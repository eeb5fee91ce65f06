"""A change on top of an applied series that puts back one of its patches' changes (a hunk reverted, a file
restored to HEAD) is the user's work: `apply` of that series again, or `apply --link` of a result measured on it,
refuses to overwrite it (exit 1, nothing changed), as `pop` does, and says how to keep it."""

from __future__ import annotations

from tests.conftest import Lab, git_text, link_id


def _tree_id(lab: Lab) -> str:
    git_text(lab.tree, "add", "-A")
    tree = git_text(lab.tree, "write-tree")
    git_text(lab.tree, "reset", "-q")
    return tree


def _series_with_a_reverted_file(lab: Lab) -> str:
    """Series s = p1 (README and src/model.py changed), applied; README then put back to HEAD's by hand."""
    (lab.tree / "README").write_text("five\n")
    (lab.tree / "src" / "model.py").write_text("model v2\n")
    assert lab.sm("save", "p1", "--series", "s", "-m", "p1").code == 0
    assert lab.sm("reset").code == 0 and lab.sm("apply", "s").code == 0
    (lab.tree / "README").write_text("hello\n")  # HEAD's content: the patch's change undone by hand
    return _tree_id(lab)


def test_apply_again_refuses_to_overwrite_a_change_put_back_by_hand(lab: Lab) -> None:
    before = _series_with_a_reverted_file(lab)
    status = lab.sm("status")
    assert "patch p1: applied (s), 1 of its 2 files changed again by hand since (`stackmgr diff -z`)" in status.out
    refused = lab.sm("apply", "s")
    assert refused.code == 1, refused
    first = refused.err.splitlines()[0]
    assert first.startswith("stackmgr: apply refused, nothing changed: tree vllm has changes on top of series s"), first
    assert "diff -z" in first and "  README (put back to HEAD's on top of series s)" in refused.err.splitlines()
    assert (lab.tree / "README").read_text() == "hello\n" and _tree_id(lab) == before
    unsaved = lab.sm("diff", "-z")
    assert unsaved.code == 0 and "-five\n+hello\n" in unsaved.out
    # Kept as a patch on top, the same state applies again exactly.
    assert lab.sm("save", "keep-readme", "-m", "README back").code == 0
    assert lab.sm("reset").code == 0 and lab.sm("apply", "s").code == 0
    assert _tree_id(lab) == before


def test_apply_of_another_series_that_leaves_the_file_alone_goes_ahead(lab: Lab) -> None:
    (lab.tree / "other.txt").write_text("o\n")
    assert lab.sm("save", "o1", "--series", "other", "-m", "o1").code == 0
    assert lab.sm("reset").code == 0
    _series_with_a_reverted_file(lab)
    moved = lab.sm("apply", "other")  # README stays HEAD's either way: nothing of the user's is overwritten
    assert moved.code == 0, moved.err
    assert (lab.tree / "README").read_text() == "hello\n"


def test_apply_link_refuses_to_overwrite_a_change_put_back_by_hand(lab: Lab) -> None:
    (lab.tree / "README").write_text("five\n")
    (lab.tree / "src" / "model.py").write_text("model v2\n")  # still changed: the tree is not simply the base
    assert lab.sm("save", "p1", "--series", "s", "-m", "p1").code == 0
    result = lab.store / "results" / "r.log"
    result.parent.mkdir()
    result.write_text("tput 1\n")
    lid = link_id(lab, "p1", str(result), "--verdict", "experimental")
    (lab.tree / "README").write_text("hello\n")
    before = _tree_id(lab)
    refused = lab.sm("apply", "--link", lid)
    assert refused.code == 1 and "apply --link refused, nothing changed" in refused.err, refused
    assert _tree_id(lab) == before


def test_reset_loses_nothing_of_such_a_change_and_is_not_refused(lab: Lab) -> None:
    _series_with_a_reverted_file(lab)
    assert lab.sm("reset").code == 0
    assert (lab.tree / "README").read_text() == "hello\n"


def test_apply_refuses_even_when_an_older_version_of_the_patch_holds_the_content(lab: Lab) -> None:
    """The file put back by hand equals what the patch's previous version made: 'kept' by that version, but the
    state is the user's and in no patch."""
    (lab.tree / "README").write_text("hello\nA\n")
    assert lab.sm("save", "p", "--series", "S", "-m", "p").code == 0
    (lab.tree / "README").write_text("hello\nA\nB\n")
    assert lab.sm("save", "p", "--update").code == 0
    (lab.tree / "README").write_text("hello\nA\n")  # B taken out by hand: the old version's content
    before = _tree_id(lab)
    refused = lab.sm("apply", "S")
    assert refused.code == 1 and "README (changed on top of series S; only p@" in refused.err, refused
    assert _tree_id(lab) == before


def test_a_tree_put_back_to_its_base_behind_stackmgrs_back_applies_again(lab: Lab) -> None:
    """`git reset --hard` after `apply S` (no shell guard): the tree is the base, nothing of the user's is on top."""
    (lab.tree / "README").write_text("five\n")
    (lab.tree / "src" / "model.py").write_text("model v2\n")
    assert lab.sm("save", "p1", "--series", "s", "-m", "p1").code == 0
    git_text(lab.tree, "reset", "-q", "--hard")
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert (lab.tree / "README").read_text() == "five\n"
