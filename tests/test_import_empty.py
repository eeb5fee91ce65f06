"""Empty patches in an import: a branch with an empty commit ("Initial plan", which GitHub's agents push first) comes
out of `git format-patch` as a 0-byte file (git 2.39) or as a mail with a subject and no diff (newer git). It
changes nothing: `import` skips it with a note and goes on with the rest, as `git am --empty=drop` drops it;
the tree equals `git am` of the others. An import where every patch is empty imports nothing: exit 3.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import Lab, commit, git, git_text, one_line_error
from tests.test_import import clone, imp, patches

NO_DIFF_MAIL = (b"From 1234567890abcdef1234567890abcdef12345678 Mon Sep 17 00:00:00 2001\n"
                b"From: Copilot <copilot@example.com>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n"
                b"Subject: [PATCH 2/3] Initial plan\n\nPlanning the change.\n---\n-- \n2.43.0\n\n")  # fmt: skip


def agent_branch(lab: Lab, tmp: Path) -> tuple[Path, list[Path]]:
    """A colleague's branch of three commits, the middle one empty, as `git format-patch` writes it."""
    work = clone(lab, tmp / "colleague")
    commit(work, {"src/model.py": "def f():\n    return 2\n"}, "return 2")
    git(work, "commit", "-q", "--allow-empty", "-m", "Initial plan")
    commit(work, {"README": "hello, world\n"}, "greet the world")
    out = tmp / "mails"
    git(work, "format-patch", "-q", "-o", str(out), "HEAD~3")
    files = sorted(out.glob("*.patch"))
    assert [f.name for f in files] == ["0001-return-2.patch", "0002-Initial-plan.patch", "0003-greet-the-world.patch"]
    return work, files


def git_am_tree(lab: Lab, tmp: Path, files: list[Path]) -> str:
    """The tree `git am` makes of `files` on the user's HEAD, in a scratch clone (git 2.39's `git am` refuses a
    0-byte file as an empty mbox, so the empty ones are left out, as `git am --skip` leaves them)."""
    work = tmp / "am"
    git(tmp, "clone", "-q", str(lab.tree), str(work))
    git(work, "am", "-q", "--empty=drop", *(str(f) for f in files if f.stat().st_size))
    return git_text(work, "rev-parse", "HEAD^{tree}")


def applied_tree(lab: Lab, series: str) -> str:
    assert lab.sm("apply", series).code == 0
    tree = lab.worktree_id()
    assert lab.sm("reset").code == 0
    return tree


def test_an_empty_commit_of_a_branch_is_skipped_and_the_stack_goes_on(lab: Lab, tmp_path: Path) -> None:
    work, files = agent_branch(lab, tmp_path)
    result = imp(lab, *map(str, files), "--series", "agent")
    assert result.code == 0, result.err
    assert result.err == f"stackmgr: skipped {files[1]}: empty, it changes nothing (as git am --empty=drop)\n"
    assert result.out.splitlines()[-1] == "series agent: 2 patches appended"
    assert (lab.store / "series" / "agent").read_text() == "0001-return-2.patch\n0003-greet-the-world.patch\n"
    assert sorted(patches(lab.store)) == ["0001-return-2.patch", "0003-greet-the-world.patch"]
    assert applied_tree(lab, "agent") == git_am_tree(lab, tmp_path, files) == git_text(work, "rev-parse", "HEAD^{tree}")


def test_a_mail_with_a_subject_and_no_diff_is_an_empty_commit_too(lab: Lab, tmp_path: Path) -> None:
    work, files = agent_branch(lab, tmp_path)
    files[1].write_bytes(NO_DIFF_MAIL)  # what newer git format-patch writes for the empty commit
    result = imp(lab, *map(str, files), "--series", "agent", "--json")
    assert result.code == 0, result.err
    shown = json.loads(result.out)
    assert [i["name"] for i in shown["imported"]] == ["0001-return-2", "0003-greet-the-world"]
    said = "empty, it changes nothing (as git am --empty=drop)"
    assert shown["skipped"] == [{"source": str(files[1]), "reason": said}]
    assert shown["refused"] == []
    assert applied_tree(lab, "agent") == git_text(work, "rev-parse", "HEAD^{tree}")


def test_empty_files_given_one_by_one_are_skipped_and_the_others_imported(lab: Lab, tmp_path: Path) -> None:
    _, files = agent_branch(lab, tmp_path)
    blank = tmp_path / "blank.patch"
    blank.write_bytes(b"\n\n")
    result = imp(lab, str(files[1]), str(blank), str(files[0]))
    assert result.code == 0, result.err
    said = "empty, it changes nothing (as git am --empty=drop)"
    assert result.err == f"stackmgr: skipped {files[1]}: {said}\nstackmgr: skipped {blank}: {said}\n"
    assert sorted(patches(lab.store)) == ["0001-return-2.patch"]


def test_a_text_file_without_a_diff_is_still_refused(lab: Lab, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"Meeting notes\n\n- try the bigger tile\n")
    result = imp(lab, str(notes))
    assert (result.code, result.err) == (3, f"stackmgr: refused {notes}: not a patch (no diff found)\n")


def test_an_import_where_every_patch_is_empty_writes_nothing_and_says_so(lab: Lab, tmp_path: Path) -> None:
    _, files = agent_branch(lab, tmp_path)
    other = tmp_path / "0004-Plan-again.patch"
    other.write_bytes(NO_DIFF_MAIL)
    before = sorted(str(p.relative_to(lab.store)) for p in lab.store.rglob("*") if ".git" not in p.parts)
    result = imp(lab, str(files[1]), str(other), "--series", "plans")
    one_line_error(result, 3)
    assert result.err == ("stackmgr: nothing to import: every patch given is empty (2 files); give the patches "
                          "that change something\n")  # fmt: skip
    assert sorted(str(p.relative_to(lab.store)) for p in lab.store.rglob("*") if ".git" not in p.parts) == before


def test_a_quilt_series_of_only_empty_patches_imports_nothing(lab: Lab, tmp_path: Path) -> None:
    quilt = tmp_path / "pkg" / "debian" / "patches"
    quilt.mkdir(parents=True)
    (quilt / "placeholder").write_bytes(b"")
    (quilt / "series").write_bytes(b"placeholder\n")
    result = imp(lab, str(quilt))
    one_line_error(result, 3)
    assert result.err.startswith("stackmgr: nothing to import: every patch given is empty (1 file)")
    assert not (lab.store / "series" / "pkg").exists()


def test_in_a_quilt_series_a_mail_without_a_diff_stops_the_stack_as_quilt_does(lab: Lab, tmp_path: Path) -> None:
    """GNU patch finds "only garbage" in it and `quilt push` stops there: no empty patch for quilt."""
    quilt = tmp_path / "pkg" / "debian" / "patches"
    quilt.mkdir(parents=True)
    (quilt / "plan.patch").write_bytes(NO_DIFF_MAIL)
    (quilt / "fix.patch").write_bytes(b"--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hi\n")
    (quilt / "series").write_bytes(b"plan.patch\nfix.patch\n")
    result = imp(lab, str(quilt))
    assert result.code == 3
    assert result.err.splitlines() == [f"stackmgr: refused {quilt / 'plan.patch'}: not a patch (no diff found)",
                                       f"stackmgr: refused {quilt / 'fix.patch'}: not imported: an earlier patch of "
                                       "the stack was refused"]  # fmt: skip
    if shutil.which("quilt"):
        env = dict(os.environ, QUILT_PATCHES=str(quilt), QUILT_PC=str(tmp_path / "pc"))
        pushed = subprocess.run(["quilt", "--quiltrc", "-", "push", "-a", "-q"], cwd=lab.tree, env=env,
                                capture_output=True, stdin=subprocess.DEVNULL)  # fmt: skip
        assert pushed.returncode != 0 and b"Only garbage" in pushed.stdout + pushed.stderr


def test_a_stack_whose_first_patch_does_not_apply_at_base_is_refused_whole(lab: Lab, tmp_path: Path) -> None:
    """With --base the stack is tried whole there; the first patch alone is asked only to say why none applies."""
    _, files = agent_branch(lab, tmp_path)
    commit(lab.tree, {"src/model.py": "def f():\n    return 3\n"}, "upstream changed f")
    result = imp(lab, str(files[0]), str(files[2]), "--series", "agent", "--base", "HEAD")
    assert result.code == 3
    assert result.err.splitlines() == [
        f"stackmgr: refused {files[0]}: does not apply to tree vllm at commit HEAD (at --base: error: patch failed: "
        "src/model.py:1 (hunk 1 of 1, @@ -1,2 +1,2 @@))",
        f"stackmgr: refused {files[2]}: not imported: an earlier patch of the stack was refused",
    ]
    assert not (lab.store / "series" / "agent").exists() and patches(lab.store) == {}


def test_a_base64_mail_or_an_attachment_is_never_taken_for_an_empty_patch(lab: Lab, tmp_path: Path) -> None:
    """Their diff is in the encoded body or the attachment, where `git am` finds it: skipping them as empty would
    build a tree without their change, silently. A base64 or quoted-printable body is decoded as git am decodes
    it (the tree equals git am's); a base64 attachment is refused, never skipped."""
    import base64
    import quopri

    _work, files = agent_branch(lab, tmp_path)
    mail = files[2].read_bytes()
    head, _, body = mail.partition(b"\n\n")
    wanted = git_am_tree(lab, tmp_path, [files[0], files[2]])
    for n, (how, coded) in enumerate((("base64", base64.encodebytes(body)), ("quoted-printable",
                                                                             quopri.encodestring(body)))):  # fmt: skip
        encoded = tmp_path / f"{how}.patch"
        encoded.write_bytes(head + f"\nContent-Transfer-Encoding: {how}\n\n".encode() + coded)
        result = imp(lab, "--series", f"s{n}", str(files[0]), str(encoded))
        assert result.code == 0 and "skipped" not in result.err, result
        assert applied_tree(lab, f"s{n}") == wanted
    attached = tmp_path / "attached.patch"
    attached.write_bytes(head + b'\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="b"\n\n--b\n'
                         b"Content-Type: text/plain\n\nsee attached\n--b\nContent-Type: text/x-patch\n"
                         b"Content-Transfer-Encoding: base64\n\n" + base64.encodebytes(body) + b"--b--\n")  # fmt: skip
    result = imp(lab, "--series", "s3", str(files[0]), str(attached))
    assert result.code != 0 and "empty" not in result.err and "skipped" not in result.err, result


def test_a_quilt_series_listing_a_patch_twice_stops_there_as_quilt_push_does(lab: Lab, tmp_path: Path) -> None:
    """quilt pushes up to the second line of one patch and refuses it ("already applied; check your series
    file"): the import keeps what comes before and refuses the rest, an empty patch or not."""
    quilt = tmp_path / "pkg" / "debian" / "patches"
    quilt.mkdir(parents=True)
    (quilt / "placeholder").write_bytes(b"")
    (quilt / "fix.patch").write_bytes(b"--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hi\n")
    (quilt / "series").write_bytes(b"placeholder\nfix.patch\nplaceholder\nfix.patch\n")
    result = imp(lab, str(quilt))
    assert result.code == 1, result
    assert f"refused {quilt / 'series'}:3: placeholder is listed twice (first on line 1)" in result.err
    assert list(patches(lab.store)) == ["fix.patch"]
