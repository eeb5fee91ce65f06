"""`save`: a tree's changes, or some paths of them, become a patch that git apply, patch -p1 and git am accept and
that rebuilds exactly the snapshot's tree id (a real-size tree with every kind of change first); `--series` stacks
on the applied series; odd names, subdirectories and line endings."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from stackmgr.store.patchfile import parse_header
from tests.conftest import Lab, applied_state, check_codes, git, git_text, make_repo, rebuilt_tree, run_stackmgr

TRICKY_BASE: dict[str, bytes | str] = {
    "edit.py": "".join(f"line {i}\n" for i in range(50)),
    "gone.txt": "to be deleted\n",
    "run.sh": "#!/bin/sh\necho hi\n",
    "crlf.txt": b"one\r\ntwo\r\nthree\r\n",
    "nonl.txt": b"no final newline",
    "blob.bin": bytes(range(256)) * 4,
    "dir with space/file name.txt": "spaced\n",
    "link": "",  # replaced by a symlink below
}


def _big_tree(root: Path, n: int = 5000) -> Path:
    files: dict[str, bytes | str] = dict(TRICKY_BASE)
    for i in range(n):
        files[f"pkg{i % 50}/mod{i}.py"] = f"def f{i}(x):\n    return x + {i}\n"
    repo = make_repo(root, files)
    (repo / "link").unlink()
    os.symlink("edit.py", repo / "link")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "symlink")
    return repo


def _make_every_kind_of_change(tree: Path) -> None:
    (tree / "edit.py").write_text("".join(f"line {i}\n" for i in range(50)).replace("line 7\n", "line seven\n"))
    (tree / "gone.txt").unlink()
    (tree / "run.sh").chmod(0o755)
    (tree / "crlf.txt").write_bytes(b"one\r\nTWO\r\nthree\r\n")
    (tree / "nonl.txt").write_bytes(b"still no final newline")
    (tree / "blob.bin").write_bytes(bytes(reversed(range(256))) * 4 + b"\0tail")
    (tree / "dir with space" / "file name.txt").write_text("spaced and edited\n")
    (tree / "link").unlink()
    os.symlink("run.sh", tree / "link")
    (tree / "new dir").mkdir()
    (tree / "new dir" / "caf\u00e9 \u65e5\u672c.txt").write_text("unicode name\n")
    (tree / os.fsdecode(b"bad\xe9name.txt")).write_bytes(b"latin-1 name\n")
    (tree / "pkg3" / "mod3.py").write_text("def f3(x):\n    return x * 3\n")
    (tree / "empty.txt").write_bytes(b"")


@pytest.fixture
def big_lab(tmp_path: Path) -> Lab:
    tree = _big_tree(tmp_path / "vllm")
    store = tmp_path / "store"
    assert run_stackmgr("init", str(store)).code == 0
    assert run_stackmgr("--store", str(store), "tree", "add", "vllm", str(tree)).code == 0
    return Lab(store, tree)


def _clean_checkout(src: Path, dest: Path, base: str) -> Path:
    git(src.parent, "clone", "-q", "--no-checkout", str(src), str(dest))
    git(dest, "checkout", "-q", "--detach", base)
    return dest


@pytest.mark.slow
def test_save_round_trips_through_git_apply_patch_and_git_am(big_lab: Lab, tmp_path: Path) -> None:
    tree = big_lab.tree
    base = git_text(tree, "rev-parse", "HEAD")
    _make_every_kind_of_change(tree)
    expected = big_lab.worktree_id()
    real_index = (tree / ".git" / "index").read_bytes()

    assert big_lab.sm("check").code == 1
    saved = big_lab.sm("save", "vllm-every-kind", "-m", "every kind of change\n\nbinary, modes, symlinks, names")
    assert saved.code == 0, saved.err
    assert big_lab.sm("check").code == 0
    assert (tree / ".git" / "index").read_bytes() == real_index, "save must not touch the real index"

    patch = big_lab.store / "patches" / "vllm-every-kind.patch"
    data = patch.read_bytes()
    assert data.startswith(b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n")
    assert b"\nStackmgr-Tree: vllm\nStackmgr-Base: " + base.encode() + b"\n---\n" in data
    assert b"GIT binary patch" in data and b"\r\n" in data

    applied = _clean_checkout(tree, tmp_path / "apply", base)
    git(applied, "apply", "--check", str(patch))
    git(applied, "apply", "--index", str(patch))
    assert git_text(applied, "write-tree") == expected

    am = _clean_checkout(tree, tmp_path / "am", base)
    git(am, "am", "-q", "--keep-cr", str(patch))
    assert git_text(am, "rev-parse", "HEAD^{tree}") == expected
    assert git_text(am, "log", "-1", "--format=%s") == "every kind of change"

    if shutil.which("patch") is None:
        pytest.skip("GNU patch is not installed (CI installs it)")
    plain = _clean_checkout(tree, tmp_path / "plain", base)
    dry = subprocess.run(["patch", "-p1", "--dry-run", "-i", str(patch)], cwd=plain, capture_output=True)
    # GNU patch cannot apply git binary patches; every text file must still check out cleanly.
    assert b"FAILED" not in dry.stdout, dry.stdout.decode(errors="replace")


def test_resave_of_an_unchanged_state_is_byte_identical(lab: Lab) -> None:
    (lab.tree / "README").write_text("hello world\n")
    assert lab.sm("save", "readme", "-m", "say hello").code == 0
    first = (lab.store / "patches" / "readme.patch").read_bytes()
    os.environ["GIT_AUTHOR_DATE"] = "1790000000 +0200"  # a later save must not stamp a new date
    again = lab.sm("save", "readme", "--update", "-m", "say hello")
    assert again.code == 0 and "unchanged" in again.out
    assert (lab.store / "patches" / "readme.patch").read_bytes() == first
    same = lab.sm("save", "readme", "-m", "say hello")
    assert same.code == 0 and "unchanged" in same.out


def test_update_replaces_and_keeps_the_previous_version(lab: Lab) -> None:
    (lab.tree / "README").write_text("v1\n")
    lab.sm("save", "readme", "-m", "readme")
    v1 = (lab.store / "patches" / "readme.patch").read_bytes()
    (lab.tree / "README").write_text("v2\n")
    refused = lab.sm("save", "readme", "-m", "readme")
    assert refused.code == 3 and "--update" in refused.err
    assert (lab.store / "patches" / "readme.patch").read_bytes() == v1
    assert lab.sm("save", "readme", "--update", "-m", "readme").code == 0
    assert b"+v2" in (lab.store / "patches" / "readme.patch").read_bytes()
    kept = list((lab.store / "patches" / ".versions" / "readme").iterdir())
    assert [p.read_bytes() for p in kept] == [v1]


def test_save_of_some_paths_leaves_the_others_unpreserved(lab: Lab) -> None:
    (lab.tree / "README").write_text("edited\n")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (lab.tree / "notes.txt").write_text("new\n")
    assert lab.sm("save", "only-model", "src/model.py", "-m", "model only").code == 0
    data = (lab.store / "patches" / "only-model.patch").read_bytes()
    assert b"src/model.py" in data and b"README" not in data and b"notes.txt" not in data
    check = lab.sm("check", "-v")
    assert check.code == 1
    assert "README" in check.out and "notes.txt" in check.out and "model.py" not in check.out


def test_paths_are_relative_to_the_current_directory_inside_the_tree(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    (lab.tree / "README").write_text("edited\n")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    monkeypatch.chdir(lab.tree / "src")
    assert lab.sm("save", "model", "model.py", "-m", "model").code == 0
    assert b"b/src/model.py" in (lab.store / "patches" / "model.patch").read_bytes()


def test_save_with_series_stacks_on_the_applied_series_and_refuses_otherwise(lab: Lab) -> None:
    base = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "README").write_text("one\n")
    assert lab.sm("save", "one", "--series", "replay", "-m", "one").code == 0
    assert (lab.store / "series" / "replay").read_bytes() == b"one.patch\n"
    (lab.tree / "README").write_text("one\ntwo\n")
    (lab.tree / "new.txt").write_text("n\n")
    stacked = lab.sm("save", "two", "--series", "replay", "-m", "two")
    assert stacked.code == 0, stacked.err
    two = (lab.store / "patches" / "two.patch").read_bytes()
    assert b"Stackmgr-Base: " + base.encode() in two
    assert b" one\n+two\n" in two and b"-hello" not in two, "only what is new on top of the series"
    assert (lab.store / "series" / "replay").read_bytes() == b"one.patch\ntwo.patch\n"
    assert lab.sm("check").code == 0
    expected = lab.worktree_id()
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "replay").code == 0
    assert lab.worktree_id() == expected
    assert lab.sm("reset").code == 0  # the series is no longer applied
    (lab.tree / "README").write_text("three\n")
    refused = lab.sm("save", "three", "--series", "replay", "-m", "three")
    assert refused.code == 2 and "apply replay" in refused.err
    assert not (lab.store / "patches" / "three.patch").exists()
    assert (lab.store / "series" / "replay").read_bytes() == b"one.patch\ntwo.patch\n"


def test_round_trip_failure_leaves_nothing(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    from stackmgr.git.tempindex import TempIndex

    (lab.tree / "README").write_text("edited\n")
    monkeypatch.setattr(TempIndex, "apply_bytes", lambda *a, **k: (False, "error: simulated corruption"))
    result = lab.sm("save", "broken", "-m", "x")
    assert result.code == 3 and "does not apply" in result.err
    assert sorted(p.name for p in (lab.store / "patches").iterdir()) == []


def test_base_keeps_local_commits(lab: Lab) -> None:
    base = git_text(lab.tree, "rev-parse", "HEAD")
    (lab.tree / "README").write_text("committed locally\n")
    git(lab.tree, "commit", "-qam", "local")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    assert lab.sm("save", "with-commits", "--base", base, "-m", "local work").code == 0
    data = (lab.store / "patches" / "with-commits.patch").read_bytes()
    assert b"Stackmgr-Base: " + base.encode() in data
    assert b"+committed locally" in data and b"+    return 3" in data


def test_git_config_of_the_user_does_not_change_the_patch(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "README").write_text("hello\tworld \n")
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 5\n")
    assert lab.sm("save", "plain", "-m", "x").code == 0
    clean = (lab.store / "patches" / "plain.patch").read_bytes()
    (lab.store / "patches" / "plain.patch").unlink()
    shutil.rmtree(lab.store / ".stackmgr" / "cache", ignore_errors=True)
    hostile = Path(os.environ["GIT_CONFIG_GLOBAL"])
    hostile.write_text(
        "[diff]\n\tnoprefix = true\n\tmnemonicPrefix = true\n\texternal = /bin/false\n\tcontext = 9\n"
        "[color]\n\tui = always\n[apply]\n\twhitespace = fix\n[core]\n\tquotePath = false\n"
    )
    assert lab.sm("save", "plain", "-m", "x").code == 0
    assert (lab.store / "patches" / "plain.patch").read_bytes() == clean


def test_save_leaves_no_frozen_index_behind(lab: Lab) -> None:
    (lab.tree / "README").write_text("x\n")
    assert lab.sm("save", "p", "-m", "m").code == 0
    assert lab.sm("save", "p", "-m", "m", "-t", "nope").code == 2
    assert lab.sm("save", "q", "-m", "m", "no/such/path").code == 2
    leftovers = [p.name for p in (lab.tree / ".git" / "stackmgr").iterdir() if "frozen" in p.name]
    assert leftovers == []


# --- save --series on top of an applied series ------------------------------------------------------------------------


@pytest.mark.regression("save --series on top recorded a force-added ignored file as deleted")
def test_a_force_added_ignored_file_of_a_series_survives_save_on_top(lab: Lab) -> None:
    """apply writes the base as the real index, so a force-added ignored file of the series is untracked+ignored
    afterwards: snapshot drops it, status reports drift, and `save --series` on top records a deletion the user never
    made (save_series.stack_for)."""
    (lab.tree / ".gitignore").write_text("*.log\n")
    git(lab.tree, "add", ".gitignore")
    git(lab.tree, "commit", "-qm", "ignore logs")
    (lab.tree / "config.log").write_text("force-added on purpose\n")
    git(lab.tree, "add", "-f", "config.log")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "s").code == 0
    (lab.tree / "README").write_text("on top\n")
    assert lab.sm("save", "q", "--series", "s", "-m", "q").code == 0
    assert b"config.log" not in (lab.store / "patches" / "q.patch").read_bytes()


@pytest.mark.regression("edge case: save --series --update of the top patch, then apply")
def test_save_series_refreshing_the_top_patch_then_apply(lab: Lab) -> None:
    (lab.tree / "README").write_text("one\n")
    assert lab.sm("save", "one", "--series", "s", "-m", "one").code == 0
    (lab.tree / "new.txt").write_text("two\n")
    assert lab.sm("save", "two", "--series", "s", "-m", "two").code == 0
    (lab.tree / "new.txt").write_text("two, refreshed\n")
    assert lab.sm("save", "two", "--series", "s", "-m", "two").code == 3, "an existing name needs --update"
    assert lab.sm("save", "two", "--series", "s", "-m", "two", "--update").code == 0
    two = (lab.store / "patches" / "two.patch").read_text()
    assert "+two, refreshed" in two and "README" not in two, "the refreshed top patch holds only its own change"
    assert (lab.store / "series" / "s").read_text().count("two.patch") == 1
    wanted = lab.worktree_id()
    applied = applied_state(lab)
    assert applied is not None and applied["patches"] == ["one", "two"] and applied["matches"] is True
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "s").code == 0 and lab.worktree_id() == wanted
    applied = applied_state(lab)
    assert applied is not None and applied["matches"] is True


# --- odd names, subdirectories, line endings, messages ----------------------------------------------------------------


_ODD_NAMES = [b"new\nline.txt", b"tab\there", b'qu"ote', b"-leading", b"bad\xe9.txt", b"back\\slash",
              b" space ", b"a b/c d", b"*", b"[ab]", b"x\rcr"]  # fmt: skip


@pytest.mark.regression("edge case: odd file names")
def test_odd_file_names_save_round_trip_and_check(lab: Lab) -> None:
    for name in _ODD_NAMES:
        path = os.path.join(os.fsencode(lab.tree), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"content " + name + b"\n")
    assert check_codes(lab, 2) == [1, 1]
    assert lab.sm("save", "names", "-m", "odd names").code == 0
    assert check_codes(lab, 2) == [0, 0]
    assert rebuilt_tree(lab, "names") == lab.worktree_id()


@pytest.mark.regression("edge case: PATH arguments that look like globs or options")
def test_save_takes_odd_names_as_literal_paths(lab: Lab) -> None:
    (lab.tree / "-dash").write_text("d\n")
    (lab.tree / "*").write_text("star\n")
    (lab.tree / "other.txt").write_text("o\n")
    assert lab.sm("save", "star", "-m", "star", "--", "*").code == 0
    data = (lab.store / "patches" / "star.patch").read_bytes()
    assert b"b/*\n" in data and b"other.txt" not in data and b"-dash" not in data
    assert lab.sm("save", "dash", "-m", "dash", "--", "-dash").code == 0
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.strip() == "vllm: other.txt (added)"


@pytest.mark.regression("edge case: save run from a subdirectory")
def test_save_from_a_subdirectory_takes_paths_relative_to_it(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(lab.tree / "src")
    (lab.tree / "src" / "model.py").write_text("x\n")
    (lab.tree / "README").write_text("r\n")
    assert lab.sm("save", "model", "-m", "model", "model.py").code == 0
    check = lab.sm("check", "-v")
    assert check.code == 1 and check.out.strip() == "vllm: README (modified)"
    assert lab.sm("save", "readme", "-m", "readme", "../README").code == 0
    assert lab.sm("check").code == 0
    assert lab.sm("save", "outside", "-m", "x", "../../elsewhere").code == 2


@pytest.mark.regression("edge case: core.autocrlf and eol=crlf")
def test_autocrlf_and_eol_crlf_files_round_trip_with_normalised_blobs(lab: Lab) -> None:
    git(lab.tree, "config", "core.autocrlf", "true")
    # written with CRLF, as a checkout here would write it (an LF file is reported unpreserved: row 68)
    (lab.tree / ".gitattributes").write_bytes(b"*.txt text eol=crlf\r\n")
    (lab.tree / "README").write_bytes(b"hello\r\nworld\r\n")
    (lab.tree / "new.txt").write_bytes(b"a\r\nb\r\n")
    assert lab.sm("save", "crlf", "-m", "crlf").code == 0
    assert lab.sm("check").code == 0
    assert rebuilt_tree(lab, "crlf") == lab.worktree_id()
    assert b"\r" not in (lab.store / "patches" / "crlf.patch").read_bytes(), "blobs are stored normalised"


@pytest.mark.regression('a body line starting with "From " split the patch for git am')
def test_a_body_line_starting_with_from_keeps_the_patch_git_am_able(lab: Lab, tmp_path: Path) -> None:
    """patchfile.check_message lets a body line git mailsplit reads as an mbox 'From ' separator through; git am then
    says 'Patch is empty'."""
    (lab.tree / "README").write_text("x\n")
    saved = lab.sm("save", "p", "-m", "subject\n\nFrom run at 12:34:56 2026 the numbers were\nbetter.")
    if saved.code != 0:
        assert saved.code in (2, 3) and "From" in saved.err  # refusing is fine too
        return
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(lab.tree), str(clone))
    am = subprocess.run(["git", "am", str(lab.store / "patches" / "p.patch")], cwd=clone, capture_output=True)
    assert am.returncode == 0, am.stdout + am.stderr


@pytest.mark.regression("save --update without -m threw the description away")
def test_update_without_a_message_keeps_the_description(lab: Lab) -> None:
    (lab.tree / "README").write_text("first\n")
    message = "Décodage: replay boundary\n\nWhy: the decode replay crossed a block.\nSeen on 1 qps runs."
    assert lab.sm("save", "fix", "-m", message).code == 0
    (lab.tree / "README").write_text("second\n")
    assert lab.sm("save", "fix", "--update").code == 0
    header = parse_header((lab.store / "patches" / "fix.patch").read_bytes(), "fix")
    assert (header.subject, header.body) == ("Décodage: replay boundary",
                                             "Why: the decode replay crossed a block.\nSeen on 1 qps runs.")
    (lab.tree / "README").write_text("third\n")
    assert lab.sm("save", "fix", "--update", "-m", "a new subject").code == 0
    assert parse_header((lab.store / "patches" / "fix.patch").read_bytes(), "fix").subject == "a new subject"


@pytest.mark.regression("a mode-only patch of a file an earlier patch created was falsely 'not preserved'")
def test_saving_only_a_mode_change_on_top_of_a_series_preserves_it(lab: Lab) -> None:
    (lab.tree / "run.sh").write_text("#!/bin/sh\necho hi\n")
    assert lab.sm("save", "script", "--series", "S", "-m", "a script").code == 0
    (lab.tree / "run.sh").chmod(0o755)
    saved = lab.sm("save", "exec", "--series", "S", "-m", "make it executable")
    assert saved.code == 0, saved.err
    assert b"index " not in (lab.store / "patches" / "exec.patch").read_bytes().split(b"diff --git", 1)[1]
    want = lab.worktree_id()
    shutil.rmtree(lab.store / ".stackmgr" / "cache")  # what check then reads from the patch files alone
    check = lab.sm("check", "-v")
    assert check.code == 0, check.out + check.err
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "S").code == 0
    assert lab.worktree_id() == want


@pytest.mark.regression("a mode-only patch above an edit of the same tracked file was never counted as preserved")
@pytest.mark.parametrize("cache", ["kept", "deleted"])
def test_a_mode_change_of_a_tracked_file_is_preserved_alone_and_above_an_edit(lab: Lab, cache: str) -> None:
    """Alone (the content is HEAD's) and stacked on an edit of the file (the content is the edit's): the
    mode-only patch names no content, so it preserves the mode with whatever holds the content; the same
    from the cache `save` wrote and from the patch files read afresh."""
    (lab.tree / "src" / "model.py").chmod(0o755)
    assert lab.sm("save", "exec-alone", "-m", "executable").code == 0
    if cache == "deleted":
        shutil.rmtree(lab.store / ".stackmgr" / "cache")
    assert lab.sm("check").code == 0
    assert lab.sm("reset").code == 0
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 42\n")
    assert lab.sm("save", "edit", "--series", "S", "-m", "an edit").code == 0
    (lab.tree / "src" / "model.py").chmod(0o755)
    assert lab.sm("save", "exec", "--series", "S", "-m", "make it executable").code == 0
    want = lab.worktree_id()
    if cache == "deleted":
        shutil.rmtree(lab.store / ".stackmgr" / "cache")
    check = lab.sm("check", "-v")
    assert check.code == 0, check.out + check.err
    assert lab.sm("reset").code == 0 and lab.sm("apply", "S").code == 0
    assert lab.worktree_id() == want
    (lab.tree / "src" / "model.py").chmod(0o644)  # the edit without the mode: preserved by `edit` alone
    assert lab.sm("check").code == 0
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 7\n")  # content no patch holds
    (lab.tree / "src" / "model.py").chmod(0o755)
    assert lab.sm("check").code == 1


def test_a_big_patch_is_verified_a_part_at_a_time_with_the_same_verdict(lab: Lab, tmp_path: Path) -> None:
    """Over `scratch.PART` bytes, save's round trip applies the written patch in parts cut at file sections (git
    apply holds a whole patch in memory): the parts rebuild exactly what the whole does, and a damaged section in
    a later part still fails the verification."""
    from stackmgr.git import scratch
    from stackmgr.git.repo import open_repo

    for i in range(40):
        (lab.tree / f"f{i:02d}.txt").write_text("".join(f"line {n} of file {i}\n" for n in range(200)))
    os.symlink("f00.txt", lab.tree / "link")
    assert lab.sm("save", "big", "-m", "big").code == 0
    patch = lab.store / "patches" / "big.patch"
    parts = list(scratch.file_sections(str(patch), 4096))
    assert len(parts) > 5 and b"".join(parts) == patch.read_bytes()
    assert all(p.count(b"diff --git ") >= 1 and (i == 0 or p.startswith(b"diff --git ")) for i, p in enumerate(parts))
    repo = open_repo(str(lab.tree))
    whole, _ = scratch.apply_to_entries(repo, [], str(patch))
    old_part = scratch.PART
    scratch.PART = 4096
    try:
        in_parts, _ = scratch.apply_to_entries(repo, [], str(patch))
        damaged = tmp_path / "damaged.patch"
        damaged.write_bytes(patch.read_bytes().replace(b"+line 150 of file 37\n", b"+line 150 of file 99\n"))
        changed, _ = scratch.apply_to_entries(repo, [], str(damaged))
        broken = tmp_path / "broken.patch"
        data = patch.read_bytes()
        at = data.index(b"+line 0 of file 37\n")  # a file near the end, in a later part: its hunk made to lie
        hunk = data.rindex(b"@@ -0,0 +1,200 @@", 0, at)
        broken.write_bytes(data[:hunk] + b"@@ -0,0 +1,201 @@" + data[hunk + 17 :])
        failed, why = scratch.apply_to_entries(repo, [], str(broken))
    finally:
        scratch.PART = old_part
    assert whole is not None and in_parts == whole
    assert changed is not None and changed != whole
    assert failed is None and why


def test_the_round_trip_is_applied_part_by_part_while_git_writes_the_diff(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A diff of many files is applied in parts as git writes it (each part cut where a file's section starts);
    the patch is the same bytes, and a part that fails to apply leaves nothing written."""
    from stackmgr.git import scratch
    from stackmgr.git.tempindex import TempIndex

    for n in range(12):
        (lab.tree / f"f{n:02d}.txt").write_text(f"file {n}\n" * 40)
    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("save", "whole", "-m", "many files").code == 0
    whole = (lab.store / "patches" / "whole.patch").read_bytes()
    assert lab.sm("drop", "whole").code == 0
    monkeypatch.setattr(scratch, "STREAM_PART", 200)
    parts: list[bytes] = []
    real = TempIndex.apply_bytes

    def counted(self: TempIndex, patch: bytes) -> tuple[bool, str]:
        parts.append(patch)
        return real(self, patch)

    monkeypatch.setattr(TempIndex, "apply_bytes", counted)
    assert lab.sm("save", "whole", "-m", "many files").code == 0
    assert (lab.store / "patches" / "whole.patch").read_bytes() == whole
    assert len(parts) >= 2 and all(p.count(b"\ndiff --git ") + p.startswith(b"diff --git ") >= 1 for p in parts)
    assert whole.endswith(b"".join(parts))
    assert lab.sm("drop", "whole").code == 0

    def second_fails(self: TempIndex, patch: bytes) -> tuple[bool, str]:
        parts.append(patch)
        return (False, "error: simulated") if len(parts) == 2 else real(self, patch)

    parts.clear()
    monkeypatch.setattr(TempIndex, "apply_bytes", second_fails)
    result = lab.sm("save", "whole", "-m", "many files")
    assert result.code == 3 and "does not apply to its base (error: simulated)" in result.err
    assert not (lab.store / "patches" / "whole.patch").exists()


def test_a_header_git_apply_would_read_as_a_patch_is_verified_from_the_written_file() -> None:
    from stackmgr.commands.save import Streamed

    diff = b" a | 1 +\n\ndiff --git a/a b/a\n"
    assert Streamed(b"From x\nSubject: s\n\nbody\n---\n" + diff, diff, {}, "").speaks
    assert not Streamed(b"From x\n\n--- a/a\n+++ b/a\n---\n" + diff, diff, {}, "").speaks
    assert not Streamed(b"From x\n---\n" + diff + b"trailer\n", diff, {}, "").speaks
