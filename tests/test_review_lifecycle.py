"""Adversarial review of `stackmgr import` (incoming.py, importing.py) and `stackmgr rebase` (rebase.py).

Each test first reproduced a bug a user would hit (as a strict xfail); all are fixed now and pin the fix. The
others pin behaviour that was checked and found right (edge formats, path safety, classification, clean-up).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from stackmgr.store import patchfile
from tests.conftest import GIT_DATE, Lab, git, git_text, make_repo, run_stackmgr
from tests.test_import import applied_at_base, clone, commit, header, imp, patches, tree_of

README_DIFF = b"--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hi\n"
MAIL_DATE = "Sat, 13 Jun 2026 10:02:11 +0000"  # GIT_DATE as git format-patch writes it
assert GIT_DATE.startswith("1781344931")


def mail(frm: bytes = b"A U Thor <author@example.org>", date: bytes = MAIL_DATE.encode(), extra: bytes = b"",
         body: bytes = b"why\n") -> bytes:  # fmt: skip
    return (b"From 1234567890123456789012345678901234567890 Mon Sep 17 00:00:00 2001\nFrom: " + frm + b"\nDate: "
            + date + b"\nSubject: [PATCH] fix readme\n" + extra + b"\n" + body + b"---\n" + README_DIFF)  # fmt: skip


def one_patch_series(lab: Lab, files: dict[str, str | None], name: str = "p1") -> None:
    """Edit the tree (series S applied, if there is one), save it as `name` at the end of S, reset the tree."""
    if (lab.store / "series" / "S").exists():
        assert lab.sm("apply", "S").code == 0
    for path, text in files.items():
        target = lab.tree / path
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    assert lab.sm("save", name, "--series", "S", "-m", name).code == 0
    assert lab.sm("reset").code == 0


def rebase_json(lab: Lab, *args: str) -> tuple[int, dict[str, object], str]:
    result = lab.sm("rebase", *args, "--json")
    assert "Traceback" not in result.err and "internal error" not in result.err, result.err
    return result.code, json.loads(result.out) if result.out.strip() else {}, result.err


def cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real console entry in its own process: what a subprocess (--exec) writes lands where it would."""
    return subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(store), *args], capture_output=True,
                          text=True)  # fmt: skip


# --- import: formats that must come in intact ---------------------------------------------------------------------


def test_format_patch_with_renames_modes_empty_file_symlink_and_unicode_name(lab: Lab, tmp_path: Path) -> None:
    work = clone(lab, tmp_path / "work")
    (work / "README").chmod(0o755)
    (work / "empty").write_bytes(b"")
    os.symlink("README", work / "link")
    (work / "crlf.txt").write_bytes(b"one\r\ntwo")  # CRLF and no newline at end of file
    git(work, "mv", "src/model.py", "src/renamed model \u00fc.py")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "mixed bag")
    mail_file = tmp_path / "mixed.patch"
    mail_file.write_bytes(git(work, "format-patch", "-M", "--stdout", "-1"))
    assert b"rename from" in mail_file.read_bytes()
    result = imp(lab, str(mail_file))
    assert result.code == 0, result.err
    assert applied_at_base(lab.tree, patches(lab.store)["mixed.patch"], tmp=tmp_path) == tree_of(work)


def test_mbox_with_two_messages_of_the_same_subject(lab: Lab, tmp_path: Path) -> None:
    work = clone(lab, tmp_path / "work")
    start = git_text(work, "rev-parse", "HEAD")
    commit(work, {"a.txt": "1\n"}, "wip")
    commit(work, {"b.txt": "2\n"}, "wip")
    mbox = tmp_path / "wip.mbox"
    mbox.write_bytes(git(work, "format-patch", "--stdout", f"{start}..HEAD"))
    result = imp(lab, str(mbox), "--series", "S")
    assert result.code == 0, result.err
    assert lab.sm("apply", "S").code == 0 and lab.worktree_id() == tree_of(work)


def test_mail_saved_by_a_mail_client(lab: Lab, tmp_path: Path) -> None:
    eml = tmp_path / "fix.patch"
    data = mail(body=b"because\n")
    first, rest = data.split(b"\n", 1)
    eml.write_bytes(first + b"\nReturn-Path: <author@example.org>\nMessage-ID: <1@example.org>\n" + rest)
    assert imp(lab, str(eml)).code == 0
    head = patchfile.parse_header(patches(lab.store)["fix.patch"], "fix")
    assert (head.subject, head.author, head.date) == ("fix readme", "A U Thor <author@example.org>", MAIL_DATE)
    assert head.body == "because"


def test_quilt_patch_with_diffstat_header(lab: Lab, tmp_path: Path) -> None:
    patch = tmp_path / "greet.patch"
    stat = b"---\n README |    2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n\n"
    patch.write_bytes(b"Fix the readme greeting\n\nLonger text.\n" + stat + b"Index: b/README\n" + b"=" * 67 + b"\n"
                      + README_DIFF)  # fmt: skip
    assert imp(lab, str(patch)).code == 0
    head = patchfile.parse_header(patches(lab.store)["greet.patch"], "greet")
    assert (head.subject, head.body) == ("Fix the readme greeting", "Longer text.")


def test_mail_in_latin1(lab: Lab, tmp_path: Path) -> None:
    latin = tmp_path / "latin.patch"
    mime = b"MIME-Version: 1.0\nContent-Type: text/plain; charset=ISO-8859-1\nContent-Transfer-Encoding: 8bit\n"
    latin.write_bytes(b"From: J\xf6rg <j@example.org>\nDate: " + MAIL_DATE.encode() + b"\nSubject: [PATCH] caf\xe9\n"
                      + mime + b"\nna\xefve body\n---\n" + README_DIFF)  # fmt: skip
    assert imp(lab, str(latin)).code == 0
    head = patchfile.parse_header(patches(lab.store)["latin.patch"], "latin")
    assert (head.author, head.subject, head.body) == ("J\u00f6rg <j@example.org>", "caf\u00e9", "na\u00efve body")


def test_encoded_newline_in_author_is_one_refusal(lab: Lab, tmp_path: Path) -> None:
    evil, good = tmp_path / "evil.patch", tmp_path / "good.diff"
    evil.write_bytes(mail(frm=b"=?utf-8?q?Evil=0A=0AStackmgr-Tree=3A_other?= <e@example.org>"))
    good.write_bytes(b"--- a/src/model.py\n+++ b/src/model.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n"
                     b"+    return 3\n")  # fmt: skip
    result = imp(lab, str(good), str(evil))
    assert "internal error" not in result.err, result.err
    assert result.code in (0, 1) and "good.patch" in patches(lab.store)


def test_unparsable_date_still_gives_a_git_am_patch(lab: Lab, tmp_path: Path) -> None:
    odd = tmp_path / "odd.patch"
    odd.write_bytes(mail(date=b"last tuesday"))
    result = imp(lab, str(odd))
    if result.code == 3:
        return  # refusing the file is fine too
    written = tmp_path / "written.patch"
    written.write_bytes(patches(lab.store)["odd.patch"])
    work = clone(lab, tmp_path / "work")
    am = subprocess.run(["git", "am", "-q", str(written)], cwd=work, capture_output=True)
    assert am.returncode == 0, am.stderr


def test_format_patch_attach(lab: Lab, tmp_path: Path) -> None:
    work = clone(lab, tmp_path / "work")
    commit(work, {"README": "hi\n"}, "fix readme\n\nbecause.")
    attached = tmp_path / "attached.patch"
    attached.write_bytes(git(work, "format-patch", "--attach", "--stdout", "-1"))
    assert imp(lab, str(attached)).code == 0
    assert patchfile.parse_header(patches(lab.store)["attached.patch"], "attached").body == "because."


def test_git_diff_without_prefixes(lab: Lab, tmp_path: Path) -> None:
    work = clone(lab, tmp_path / "work")
    (work / "src" / "extra.py").write_text("x = 1\n")
    git(work, "add", "-N", "src/extra.py")
    noprefix = tmp_path / "extra.diff"
    noprefix.write_bytes(git(work, "-c", "diff.noprefix=true", "diff"))
    assert noprefix.read_bytes().startswith(b"diff --git src/extra.py src/extra.py\n")
    result = imp(lab, str(noprefix))
    written = b"".join(patches(lab.store).values())
    assert b"+++ b/extra.py" not in written, "src/extra.py landed at the top level"
    assert result.code == 3 or b"+++ b/src/extra.py" in written


def test_bad_quoted_name_is_refused_alone(lab: Lab, tmp_path: Path) -> None:
    bad, good = tmp_path / "bad.patch", tmp_path / "good.diff"
    bad.write_bytes(b'diff --git "a/x\\qy" "b/x\\qy"\n--- "a/x\\qy"\n+++ "b/x\\qy"\n@@ -1 +1 @@\n-a\n+b\n')
    good.write_bytes(README_DIFF)
    result = imp(lab, str(good), str(bad))
    assert result.code == 1 and result.err.startswith(f"stackmgr: refused {bad}: "), result.err
    assert "good.patch" in patches(lab.store)


def test_bad_inputs_are_refused_one_by_one(lab: Lab, tmp_path: Path) -> None:
    junk, quilt = tmp_path / "junk.bin", tmp_path / "vendor"
    junk.write_bytes(bytes(range(256)) * 40)
    quilt.mkdir()
    (quilt / "ok.patch").write_bytes(README_DIFF)
    (quilt / "series").write_bytes(b"../outside.patch\n/etc/passwd\nsub/../../x.patch\nmissing.patch\nok.patch -p1\n")
    result = imp(lab, str(junk), str(quilt))
    assert result.code == 1 and "internal error" not in result.err
    assert [ln.split(": ", 2)[-1] for ln in result.err.splitlines()] == [
        "not a patch (a binary file)", "../outside.patch points outside the quilt directory",
        "/etc/passwd points outside the quilt directory", "sub/../../x.patch points outside the quilt directory",
        "missing.patch is listed but missing"]  # fmt: skip
    assert sorted(patches(lab.store)) == ["ok.patch"] and not (tmp_path / "outside.patch").exists()
    empty_dir = tmp_path / "nothing"
    empty_dir.mkdir()
    alone = imp(lab, str(empty_dir))
    assert alone.code == 3 and "without a quilt `series` file" in alone.err


# --- import: the base and the trees ---------------------------------------------------------------------------------


def test_base_in_a_two_tree_store(lab: Lab, tmp_path: Path) -> None:
    kernels = make_repo(tmp_path / "kernels", {"gemm.cpp": "int tile = 64;\n"})
    assert lab.sm("tree", "add", "kernels", str(kernels)).code == 0
    base = git_text(lab.tree, "rev-parse", "HEAD")
    commit(lab.tree, {"README": "hello upstream\n"}, "up 1")
    commit(lab.tree, {"notes": "n\n"}, "up 2")
    diff = tmp_path / "readme.diff"
    diff.write_bytes(README_DIFF)
    result = imp(lab, str(diff), "--base", "HEAD~2", trees=(kernels,))
    assert result.code == 0, result.err
    assert header(patches(lab.store)["readme.patch"])["Stackmgr-Base"] == base


def test_a_tree_without_commits_does_not_block_other_imports(lab: Lab, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert lab.sm("tree", "add", "empty", str(empty)).code == 0
    diff = tmp_path / "readme.diff"
    diff.write_bytes(README_DIFF)
    result = imp(lab, str(diff))
    assert result.code == 0, result.err
    assert header(patches(lab.store)["readme.patch"])["Stackmgr-Tree"] == "vllm"


# --- rebase: classification -------------------------------------------------------------------------------------------


def test_rebase_classifies_add_add_and_partial_upstream(lab: Lab) -> None:
    one_patch_series(lab, {"new.txt": "mine\n"}, "same")
    one_patch_series(lab, {"src/model.py": "def f():\n    return 2\n", "README": "hello\nworld\n"}, "partly")
    one_patch_series(lab, {"other.txt": "mine\n"}, "clash")
    commit(lab.tree, {"new.txt": "mine\n", "README": "hello\nworld\n", "other.txt": "theirs\n"}, "upstream")
    code, state, err = rebase_json(lab, "S", "--onto", "HEAD")
    assert code == 3 and "clash (3 of 3) conflicts in other.txt" in err
    assert [p["outcome"] for p in state["patches"]] == ["already upstream", "merged (3-way)", None]  # type: ignore
    assert lab.sm("rebase", "--abort").code == 0
    assert git_text(lab.tree, "worktree", "list").count("\n") == 0


def test_delete_of_a_file_upstream_modified_is_explained(lab: Lab) -> None:
    one_patch_series(lab, {"src/model.py": None})
    commit(lab.tree, {"src/model.py": "def f():\n    return 3\n"}, "upstream edits the file")
    result = lab.sm("rebase", "S", "--onto", "HEAD")
    assert result.code == 3
    assert "original blobs are missing" not in result.err, result.err


def test_a_resolution_committed_in_the_worktree_stays_with_its_patch(lab: Lab) -> None:
    one_patch_series(lab, {"README": "hello\nmore\n"}, "p1")
    one_patch_series(lab, {"src/model.py": "def f():\n    return 2\n"}, "p2")
    commit(lab.tree, {"README": "bye\n"}, "upstream")
    code, state, _ = rebase_json(lab, "S", "--onto", "HEAD")
    worktree = Path(str(state["worktree"]))
    (worktree / "README").write_text("bye\nmore\n")
    git(worktree, "commit", "-qam", "resolved")
    code, state, err = rebase_json(lab, "--continue")
    assert code == 0, err
    assert [p["outcome"] for p in state["patches"]] == ["conflict resolved", "unchanged"]  # type: ignore
    assert (lab.store / "series" / "S").read_text() == "p1.patch\np2.patch\n"
    assert b"README" not in (lab.store / "patches" / "p2.patch").read_bytes()


def test_a_heading_underline_is_not_a_conflict_marker(lab: Lab) -> None:
    one_patch_series(lab, {"doc.rst": "Title\n=====\n\nSummary\n=======\n\ntext\n"})
    commit(lab.tree, {"doc.rst": "Title\n=====\n\nother text\n"}, "upstream")
    _, state, _ = rebase_json(lab, "S", "--onto", "HEAD")
    (Path(str(state["worktree"])) / "doc.rst").write_text("Title\n=====\n\nother text\n\nSummary\n=======\n\ntext\n")
    done = lab.sm("rebase", "--continue")
    assert done.code == 0, done.err


def test_rebase_of_a_series_assembled_from_patches_saved_at_different_bases(lab: Lab) -> None:
    (lab.tree / "README").write_text("hello\nmore\n")
    assert lab.sm("save", "p1", "-m", "p1").code == 0 and lab.sm("reset").code == 0
    commit(lab.tree, {"other": "x\n"}, "upstream 1")
    (lab.tree / "src" / "model.py").write_text("changed\n")
    assert lab.sm("save", "p2", "-m", "p2").code == 0 and lab.sm("reset").code == 0
    assert lab.sm("series", "new", "S").code == 0 and lab.sm("series", "add", "S", "p1", "p2").code == 0
    assert lab.sm("lint").code == 0
    commit(lab.tree, {"other2": "y\n"}, "upstream 2")
    result = lab.sm("rebase", "S", "--onto", "HEAD")
    assert result.code == 0, result.err


# --- rebase: --exec ---------------------------------------------------------------------------------------------------


def test_exec_output_does_not_corrupt_json(lab: Lab) -> None:
    one_patch_series(lab, {"README": "hello\nmore\n"})
    commit(lab.tree, {"other": "x\n"}, "upstream")
    proc = cli(lab.store, "rebase", "S", "--onto", "HEAD", "--exec", "echo build ok", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["done"] is True


def test_exec_that_leaves_tracked_changes(lab: Lab) -> None:
    one_patch_series(lab, {"README": "hello\nmore\n"}, "p1")
    one_patch_series(lab, {"README": "hello\nmore\nand more\n"}, "p2")
    commit(lab.tree, {"other": "x\n"}, "upstream")
    result = lab.sm("rebase", "S", "--onto", "HEAD", "--exec", "echo generated >> README")
    assert "original blobs are missing" not in result.err, result.err


# --- rebase: state, worktree, store ---------------------------------------------------------------------------------


def _stopped(lab: Lab) -> Path:
    """Series S (one patch) stopped on a conflict; the worktree path."""
    one_patch_series(lab, {"README": "hello\nmore\n"})
    commit(lab.tree, {"README": "bye\n"}, "upstream")
    code, state, _ = rebase_json(lab, "S", "--onto", "HEAD")
    assert code == 3
    return Path(str(state["worktree"]))


def test_continue_after_the_worktree_was_deleted(lab: Lab) -> None:
    shutil.rmtree(_stopped(lab))
    gone = lab.sm("rebase", "--continue")
    assert gone.code == 3 and "is gone" in gone.err and len(gone.err.splitlines()) == 1
    assert lab.sm("rebase", "--abort").code == 0
    assert git_text(lab.tree, "worktree", "list").count("\n") == 0


def test_series_edited_during_the_rebase_is_refused_and_nothing_is_written(lab: Lab) -> None:
    worktree = _stopped(lab)
    (worktree / "README").write_text("bye\nmore\n")
    with open(lab.store / "series" / "S", "a") as f:
        f.write("# a note\n")
    before = (lab.store / "patches" / "p1.patch").read_bytes()
    edited = lab.sm("rebase", "--continue")
    assert edited.code == 3 and "was edited during the rebase" in edited.err
    assert (lab.store / "patches" / "p1.patch").read_bytes() == before
    assert lab.sm("rebase", "--abort").code == 0


def test_damaged_state_can_still_be_aborted(lab: Lab) -> None:
    _stopped(lab)
    (lab.store / ".stackmgr" / "rebase" / "S.json").write_text('{"series": "S"}')
    aborted = lab.sm("rebase", "--abort")
    assert "internal error" not in aborted.err, aborted.err


def test_abort_never_deletes_a_directory_outside_its_scratch_area(lab: Lab, tmp_path: Path) -> None:
    _stopped(lab)
    victim = tmp_path / "results"
    victim.mkdir()
    (victim / "bench.json").write_text("{}")
    state_file = lab.store / ".stackmgr" / "rebase" / "S.json"
    state = json.loads(state_file.read_text())
    state["worktree"] = str(victim)
    state_file.write_text(json.dumps(state))
    lab.sm("rebase", "--abort")
    assert (victim / "bench.json").exists()


def test_two_stores_rebasing_series_of_the_same_name(lab: Lab, tmp_path: Path) -> None:
    worktree = _stopped(lab)
    (worktree / "README").write_text("bye\nmore\n")  # the user's resolution, not yet continued
    other = tmp_path / "store2"
    assert run_stackmgr("init", str(other)).code == 0
    assert run_stackmgr("--store", str(other), "tree", "add", "vllm", str(lab.tree)).code == 0
    shutil.copy(lab.store / "patches" / "p1.patch", other / "patches" / "p1.patch")
    (other / "series" / "S").write_text("p1.patch\n")
    run_stackmgr("--store", str(other), "rebase", "S", "--onto", "HEAD")
    assert (worktree / "README").read_text() == "bye\nmore\n"


def test_tree_with_the_old_series_stays_preserved_after_rebase(lab: Lab) -> None:
    lines = "".join(f"l{i}\n" for i in range(30))
    commit(lab.tree, {"f.txt": lines}, "f")
    (lab.tree / "f.txt").write_text(lines.replace("l20", "L20"))
    assert lab.sm("save", "p1", "--series", "S", "-m", "p1").code == 0
    git(lab.tree, "stash")
    onto = commit(lab.tree, {"f.txt": lines.replace("l1\n", "l1 upstream\n")}, "upstream")
    git(lab.tree, "checkout", "-q", "HEAD~1")
    git(lab.tree, "stash", "pop")
    assert lab.sm("check").code == 0
    code, state, _ = rebase_json(lab, "S", "--onto", onto)
    assert code == 0 and [p["outcome"] for p in state["patches"]] == ["context drift"]  # type: ignore
    assert lab.sm("check").code == 0, "the rebase itself made the user's tree unpreserved"
    applied = lab.sm("apply", "S")
    assert applied.code == 0, applied.err
