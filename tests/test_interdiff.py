"""`stackmgr interdiff`: the real difference between two versions of a change."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Lab, git, run_stackmgr


def _interdiff(lab: Lab, *args: str) -> tuple[int, str, str]:
    result = lab.sm("interdiff", *args)
    return result.code, result.out, result.err


def test_update_keeps_the_previous_version_and_interdiff_shows_only_what_changed(lab: Lab) -> None:
    """v1 edits two files; v2 (save --update) changes one of those edits: interdiff names only that line."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (lab.tree / "README").write_text("hello, v1\n")
    assert lab.sm("save", "fix", "-m", "fix").code == 0
    (lab.tree / "README").write_text("hello, v2\n")
    assert lab.sm("save", "fix", "--update", "-m", "fix").code == 0
    code, out, err = _interdiff(lab, "fix@prev", "fix")
    assert code == 0, err
    assert "diff --git a/README b/README" in out and "-hello, v1" in out and "+hello, v2" in out
    assert "model.py" not in out, "an edit both versions make identically is no difference"


def test_same_change_refreshed_on_other_context_is_no_difference(lab: Lab, tmp_path: Path) -> None:
    """A patch file re-made with more context (`git diff -U10`) is textually different but the same change."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "-m", "fix").code == 0
    patch = (lab.store / "patches" / "fix.patch").read_bytes()
    wide = tmp_path / "wide.patch"
    wide.write_bytes(patch.replace(b"@@ -1,2 +1,2 @@", b"@@ -1,2 +1,2 @@ def f():"))  # hunk header text only
    code, out, err = _interdiff(lab, "fix", "--against", str(wide))
    assert code == 0 and out == "" and "no difference" in err


def test_against_a_commit_that_took_the_change(lab: Lab) -> None:
    """Upstream committed the same fix: against that commit, nothing differs in the files the patch touches."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "-m", "fix").code == 0
    git(lab.tree, "commit", "-qam", "upstream takes the fix")
    code, out, err = _interdiff(lab, "fix", "--against", "HEAD")
    assert code == 0 and out == "" and "no difference" in err
    code, out, _ = _interdiff(lab, "fix", "--against", "HEAD~1")
    assert code == 0 and "-    return 2" in out


def test_bad_arguments_are_one_line_usage_errors(lab: Lab) -> None:
    for args in (("nope", "--against", "HEAD"), ("fix@prev", "fix"), ("a",), ("a", "b", "--against", "HEAD")):
        result = run_stackmgr("--store", str(lab.store), "interdiff", *args)
        assert result.code == 2, (args, result.err)
        assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err
