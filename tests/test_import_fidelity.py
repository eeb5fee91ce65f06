"""`stackmgr import` agrees with the programs the patches were made for, and `export --quilt` gives back what came
in: file names as `git apply` reads them, the commit message `git am` makes, a quilt patch's header and its
series' comments byte for byte, and git's own reason (with the hunk) when a patch does not apply.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from stackmgr.store import patchfile
from tests.conftest import Lab, commit, git, git_text
from tests.test_import import applied_at_base, header, imp, patches

TAB_NAME, SPACE_NAME = "with\ttab", "with space"


def git_apply_tree(repo: Path, rev: str, diff: bytes, tmp: Path) -> subprocess.CompletedProcess[bytes]:
    """`git apply --cached` of `diff` on `rev` in a scratch index: what git itself makes of it (stdout: the tree)."""
    env = dict(os.environ, GIT_INDEX_FILE=str(tmp / "git-apply-index"))
    subprocess.run(["git", "read-tree", rev], cwd=repo, env=env, check=True)
    (tmp / "git-apply.diff").write_bytes(diff)
    proc = subprocess.run(["git", "apply", "--cached", str(tmp / "git-apply.diff")], cwd=repo, env=env,
                          capture_output=True)  # fmt: skip
    if proc.returncode == 0:
        proc.stdout = subprocess.run(["git", "write-tree"], cwd=repo, env=env, check=True, capture_output=True).stdout
    return proc


@pytest.fixture
def odd_names(lab: Lab) -> str:
    """Files named with a tab and with a space, changed upstream since: a patch made before applies at HEAD~1
    only, and import finds that commit only if it searches the history of the right names."""
    commit(lab.tree, {TAB_NAME: "one\n", SPACE_NAME: "x\n"}, "odd names")
    base = git_text(lab.tree, "rev-parse", "HEAD")
    commit(lab.tree, {TAB_NAME: "one\nupstream\n", SPACE_NAME: "x\nupstream\n"}, "upstream")
    return base


def traditional(old: str, new: str, name_old: str, name_new: str, before: str, after: str) -> bytes:
    return (f"--- {name_old}{old}\n+++ {name_new}{new}\n@@ -1 +1 @@\n-{before}\n+{after}\n").encode()


# --- names as git apply reads them (git's t4135) -------------------------------------------------------------------


@pytest.mark.regression("a diff -u name with a tab, or with a whitespace-damaged timestamp, was cut short")
@pytest.mark.parametrize("diff", [
    traditional("\t2010-07-05 19:41:17.620000023 -0500", "\t2010-07-05 19:41:18.000000000 -0500",
                f"a/{TAB_NAME}", f"b/{TAB_NAME}", "one", "two"),  # old diffutils: the tab kept raw
    traditional("  2010-07-05 19:41:17", "  2010-07-05 19:41:18",
                f"a/{SPACE_NAME}", f"b/{SPACE_NAME}", "x", "y"),  # a mailer turned the tab into spaces
    traditional("   2010-07-05 19:41:17 +08:00", "   2010-07-05 19:41:18 +08:00",
                f"a/{SPACE_NAME}", f"b/{SPACE_NAME}", "x", "y"),  # the same, with a colon in the zone
], ids=["tab-in-name", "damaged-timestamp", "damaged-colon-zone"])  # fmt: skip
def test_traditional_names_are_read_as_git_apply_reads_them(
    lab: Lab, odd_names: str, tmp_path: Path, diff: bytes
) -> None:
    wanted = git_apply_tree(lab.tree, odd_names, diff, tmp_path)
    assert wanted.returncode == 0, wanted.stderr
    (tmp_path / "odd.diff").write_bytes(diff)
    result = imp(lab, str(tmp_path / "odd.diff"))
    assert result.code == 0, result.err
    data = patches(lab.store)["odd.patch"]
    assert header(data)["Stackmgr-Base"] == odd_names
    assert applied_at_base(lab.tree, data, tmp=tmp_path) == wanted.stdout.decode().strip()


@pytest.mark.parametrize("diff", [
    traditional("", "", f"a/{TAB_NAME}", f"b/{TAB_NAME}", "one", "two"),  # no timestamp: the name ends at the tab
    traditional(" ", " ", f"a/{SPACE_NAME}", f"b/{SPACE_NAME}", "x", "y"),  # a trailing space is part of the name
], ids=["tab-without-timestamp", "trailing-space"])  # fmt: skip
def test_a_name_git_apply_reads_otherwise_is_refused_with_gits_reason(
    lab: Lab, odd_names: str, tmp_path: Path, diff: bytes
) -> None:
    by_git = git_apply_tree(lab.tree, odd_names, diff, tmp_path)
    reason = by_git.stderr.decode().splitlines()[0]
    assert by_git.returncode != 0 and reason.endswith(": does not exist in index"), reason
    (tmp_path / "odd.diff").write_bytes(diff)
    result = imp(lab, str(tmp_path / "odd.diff"))
    assert result.code == 3 and f"(at HEAD: {reason};" in result.err, result.err
    assert not patches(lab.store)


@pytest.mark.regression("a rename in a --no-prefix or mnemonic-prefix git diff was read with the wrong -p level")
@pytest.mark.parametrize("prefix", [("-c", "diff.noprefix=true"), ("-c", "diff.mnemonicPrefix=true"),
                                    ("--src-prefix=x/", "--dst-prefix=y/")],
                         ids=["no-prefix", "mnemonic-c-i", "custom-x-y"])  # fmt: skip
def test_a_renaming_diff_with_any_prefix_git_writes_imports(
    lab: Lab, odd_names: str, tmp_path: Path, prefix: tuple[str, str]
) -> None:
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(lab.tree), str(work))
    git(work, "checkout", "-q", odd_names)
    git(work, "mv", TAB_NAME, "renamed\ttab")
    (work / "renamed\ttab").write_text("one\ntwo\n")
    git(work, "add", "-A")
    options, command = (prefix, ["diff"]) if prefix[0] == "-c" else ((), ["diff", *prefix])
    diff = git(work, *options, *command, "--cached", "-M")
    assert b"\nrename from " in diff
    (tmp_path / "moved.diff").write_bytes(diff)
    result = imp(lab, str(tmp_path / "moved.diff"))
    assert result.code == 0, result.err
    data = patches(lab.store)["moved.patch"]
    assert header(data)["Stackmgr-Base"] == odd_names
    assert applied_at_base(lab.tree, data, tmp=tmp_path) == git_text(work, "write-tree")


# --- a refusal names file, hunk and git's reason ----------------------------------------------------------------------


@pytest.mark.regression("a refused patch named git's file and line but not the hunk that failed")
def test_a_refused_patch_names_its_failing_hunk(lab: Lab, tmp_path: Path) -> None:
    lines = [f"line {n}" for n in range(1, 21)]
    commit(lab.tree, {"numbers.txt": "\n".join(lines) + "\n"}, "numbers")
    edited = [ln.replace("line 2", "LINE 2").replace("line 18", "LINE 18") for ln in lines]
    (lab.tree / "numbers.txt").write_text("\n".join(edited) + "\n")
    (tmp_path / "two-hunks.diff").write_bytes(git(lab.tree, "diff"))
    git(lab.tree, "checkout", "--", ".")
    commit(lab.tree, {"numbers.txt": "\n".join(lines).replace("line 17", "line seventeen") + "\n"}, "upstream")
    hunk = "(hunk 2 of 2, @@ -15,6 +15,6 @@)"
    alone = imp(lab, str(tmp_path / "two-hunks.diff"), "--base", "HEAD")
    assert alone.code == 3
    assert alone.err.strip().endswith(f"(at --base: error: patch failed: numbers.txt:15 {hunk})"), alone.err
    (lab.tree / "README").write_text("hello\nfirst\n")
    (tmp_path / "1-first.diff").write_bytes(git(lab.tree, "diff"))
    git(lab.tree, "checkout", "--", ".")
    files = (str(tmp_path / "1-first.diff"), str(tmp_path / "two-hunks.diff"))
    stack = imp(lab, "--series", "S", "--base", "HEAD", *files)
    assert stack.code == 1
    assert stack.err.strip().endswith(f"two-hunks.diff: does not apply on --base: error: patch failed: numbers.txt:15 "
                                      f"{hunk}"), stack.err  # fmt: skip
    assert (lab.store / "series" / "S").read_text() == "1-first.patch\n"


# --- what git am keeps, and what export --quilt gives back ----------------------------------------------------------

MIXED = (b"From: Jane Dev <jane@example.com>\nSubject: Fix the readme greeting\nOrigin: upstream, "
         b"https://example.org/commit/1\nBug-Debian: https://bugs.debian.org/123\nForwarded: not-needed\n"
         b"Last-Update: 2026-11-29\nReviewed-by: Rev Iewer <rev@example.org>\n\nBecause hello is too long.  \n\n"
         b"---\nThis patch header follows DEP-3: http://dep.debian.net/deps/dep3/\n README | 2 +-\n\n"
         b"Index: b/README\n" + b"=" * 67 + b"\n--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+hi\n")  # fmt: skip
DEP3 = (b"Description: Return 2 from f\n It was 1.\n .\n A second paragraph.\nAuthor: A U Thor <author@example.org>\n"
        b"Origin: vendor\nApplied-Upstream: no\nLast-Update: 2026-01-02\n---\n\n"
        b"--- a/src/model.py\t2026-01-02 10:00:00.000000000 +0000\n"
        b"+++ b/src/model.py\t2026-01-02 10:00:01.000000000 +0000\n"
        b"@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n")  # fmt: skip
FREE = (b"just a line of text\r\nwith CRLF \xe9 and latin-1\r\n\r\n"
        b"diff -u a/notes b/notes\n--- /dev/null\n+++ b/notes\n@@ -0,0 +1 @@\n+n\n")
SERIES = b"# Debian patches\n\n# from upstream\nmixed.patch\n\ndep3.patch -p1   # vendor only\nfree.patch\n# end\n"


def quilt_dir(tmp_path: Path) -> Path:
    quilt = tmp_path / "pkg" / "debian" / "patches"
    quilt.mkdir(parents=True)
    for name, data in (("mixed.patch", MIXED), ("dep3.patch", DEP3), ("free.patch", FREE), ("series", SERIES)):
        (quilt / name).write_bytes(data)
    return quilt


def diff_start(data: bytes) -> int:
    return min(at for at in (data.find(b"\nIndex: "), data.find(b"\n--- "), data.find(b"\ndiff ")) if at >= 0) + 1


def git_am_message(repo: Path, patch: Path) -> tuple[str, str, str]:
    """(author, subject, body) of the commit `git am` makes of `patch` on `repo`'s HEAD, in a scratch clone."""
    work = patch.parent / f"am-{patch.stem}"
    git(repo.parent, "clone", "-q", str(repo), str(work))
    git(work, "am", "-q", "--keep-cr", str(patch))
    return (git_text(work, "log", "-1", "--format=%an <%ae>"), git_text(work, "log", "-1", "--format=%s"),
            git(work, "log", "-1", "--format=%b").decode().strip())  # fmt: skip


@pytest.mark.regression("a quilt header's DEP-3 lines beside From/Subject, and the text below ---, were lost")
def test_quilt_headers_come_back_byte_for_byte_from_export(lab: Lab, tmp_path: Path) -> None:
    quilt = quilt_dir(tmp_path)
    result = imp(lab, str(quilt))  # pkg/debian/patches: series pkg
    assert result.code == 0, result.err
    out = tmp_path / "exported"
    assert lab.sm("export", "pkg", "--quilt", str(out)).code == 0
    for name in ("mixed.patch", "dep3.patch", "free.patch"):
        original, exported = (quilt / name).read_bytes(), (out / name).read_bytes()
        head = original[: diff_start(original)]
        assert exported[: len(head)] == head, name
        assert exported[len(head) :] == patchfile.diff_part((lab.store / "patches" / name).read_bytes())
    stored = patchfile.parse_header(patches(lab.store)["mixed.patch"], "mixed")
    assert (stored.subject, stored.body, stored.author) == ("Fix the readme greeting", "Because hello is too long.",
                                                            "Jane Dev <jane@example.com>")  # what git am keeps
    assert patchfile.parse_header(patches(lab.store)["dep3.patch"], "dep3").subject == "Return 2 from f"
    if shutil.which("quilt"):  # the exported series builds what apply builds
        assert lab.sm("apply", "pkg").code == 0
        wanted = lab.worktree_id()
        assert lab.sm("reset").code == 0
        env = dict(os.environ, QUILT_PATCHES=str(out), QUILT_PC=str(tmp_path / "pc"))
        subprocess.run(["quilt", "--quiltrc", "-", "push", "-a", "-q"], cwd=lab.tree, env=env, check=True,
                       capture_output=True, stdin=subprocess.DEVNULL)  # fmt: skip
        assert lab.worktree_id() == wanted


@pytest.mark.regression("in-body From:/Subject: lines and a `Re: [PATCH v2]` subject were not read as git am does")
def test_a_mail_imports_with_the_message_git_am_makes(lab: Lab, tmp_path: Path) -> None:
    mail = tmp_path / "forwarded.patch"
    mail.write_bytes(b"From 1234567890123456789012345678901234567890 Mon Sep 17 00:00:00 2001\n"
                     b"From: Sender <sender@example.org>\nDate: Sat, 13 Jun 2026 10:02:11 +0000\n"
                     b"Subject: Re: [PATCH v2 1/3] fix the\n readme\nOrigin: upstream\n"
                     b"Message-ID: <1@example.org>\n\n\n"
                     b"From: Real Author <real@example.org>\nSubject: [PATCH] the real subject\n\n"
                     b"Body line with trailing blanks  \n\n\n\nReviewed-by: R <r@example.org>\n---\nnotes\n"
                     b" README | 2 +-\n\ndiff --git a/README b/README\n--- a/README\n+++ b/README\n@@ -1 +1 @@\n"
                     b"-hello\n+hi\n-- \n2.39.2\n\n")  # fmt: skip
    assert imp(lab, str(mail)).code == 0
    stored = patchfile.parse_header(patches(lab.store)["forwarded.patch"], "forwarded")
    am = git_am_message(lab.tree, mail)
    assert (stored.author, stored.subject, stored.body) == am
    assert am == ("Real Author <real@example.org>", "the real subject",
                  "Body line with trailing blanks\n\nReviewed-by: R <r@example.org>")  # fmt: skip
    out = tmp_path / "exported"
    assert lab.sm("series", "add", "S", "forwarded").code == 0
    assert lab.sm("export", "S", "--quilt", str(out)).code == 0
    exported = (out / "forwarded.patch").read_bytes()
    assert exported.startswith(mail.read_bytes().split(b"diff --git")[0] + b"diff --git a/README b/README\nindex ")


@pytest.mark.regression("a quilt series' comments and blank lines were dropped on import")
def test_quilt_series_comments_are_kept_in_place_and_exported(lab: Lab, tmp_path: Path) -> None:
    quilt = quilt_dir(tmp_path)
    (quilt / "series").write_bytes(SERIES.replace(b"# end\n", b"   # indented\n# end\n"))
    assert imp(lab, str(quilt), "--series", "pkg").code == 0
    kept = SERIES.replace(b"# end\n", b"# indented\n# end\n")  # moved to column 0: stackmgr refuses indented '#'
    assert (lab.store / "series" / "pkg").read_bytes() == kept
    out = tmp_path / "exported"
    assert lab.sm("export", "pkg", "--quilt", str(out)).code == 0
    assert (out / "series").read_bytes() == kept
    assert imp(lab, str(quilt), "--series", "pkg").code == 0  # importing it again changes nothing
    assert (lab.store / "series" / "pkg").read_bytes() == kept


@pytest.mark.regression("an imported quilt header was lost when rebase or save --update rewrote the patch")
def test_the_quilt_header_survives_rebase(lab: Lab, tmp_path: Path) -> None:
    quilt = quilt_dir(tmp_path)
    (quilt / "series").write_bytes(b"dep3.patch\n")
    assert imp(lab, str(quilt), "--series", "pkg").code == 0
    before = patches(lab.store)["dep3.patch"]
    commit(lab.tree, {"src/model.py": "# upstream\ndef f():\n    return 1\n"}, "upstream")
    result = lab.sm("rebase", "pkg", "--onto", "HEAD")
    assert result.code == 0, result.err
    after = patches(lab.store)["dep3.patch"]
    assert after != before and patchfile.original_header(after) == DEP3[: diff_start(DEP3)]
    assert lab.sm("apply", "pkg").code == 0
    (lab.tree / "src" / "model.py").write_text("# upstream\ndef f():\n    return 3\n")
    assert lab.sm("save", "dep3", "--update").code == 0  # keeps its description, so the header too (quilt refresh)
    updated = patches(lab.store)["dep3.patch"]
    assert updated != after and patchfile.original_header(updated) == DEP3[: diff_start(DEP3)]


@pytest.mark.regression("a quilt patch name ending in '-' lost it (openssh's series), so the export no longer matched")
def test_a_quilt_patch_name_keeps_a_trailing_dash(lab: Lab, tmp_path: Path) -> None:
    quilt = tmp_path / "openssh" / "patches"
    quilt.mkdir(parents=True)
    name = "Disable-async-signal-unsafe-code-from-the-sshsigdie-.patch"
    (quilt / name).write_bytes(MIXED)
    (quilt / "series").write_text(f"{name}\n")
    assert imp(lab, str(quilt)).code == 0
    assert (lab.store / "series" / "openssh").read_text() == f"{name}\n"
    assert lab.sm("export", "openssh", "--quilt", str(tmp_path / "out")).code == 0
    assert (tmp_path / "out" / "series").read_text() == f"{name}\n" and (tmp_path / "out" / name).is_file()


@pytest.mark.regression("an empty patch in a quilt series (procps' ps_checks), which quilt applies, stopped the stack")
def test_an_empty_quilt_patch_is_kept_as_a_comment_and_the_stack_goes_on(lab: Lab, tmp_path: Path) -> None:
    quilt = quilt_dir(tmp_path)
    (quilt / "placeholder").write_bytes(b"")
    (quilt / "series").write_bytes(b"mixed.patch\nplaceholder\ndep3.patch\n")
    result = imp(lab, str(quilt), "--series", "pkg")
    assert result.code == 0, result.err
    assert result.err == f"stackmgr: skipped {quilt / 'placeholder'}: empty (quilt applies it as nothing); kept as a " \
                         "comment in the series\n"  # fmt: skip
    kept = b"mixed.patch\n# placeholder  (empty in the quilt series)\ndep3.patch\n"
    assert (lab.store / "series" / "pkg").read_bytes() == kept
    assert lab.sm("apply", "pkg").code == 0
    wanted = lab.worktree_id()
    assert lab.sm("reset").code == 0
    if shutil.which("quilt"):  # quilt itself, on the original series: the same tree
        env = dict(os.environ, QUILT_PATCHES=str(quilt), QUILT_PC=str(tmp_path / "pc"))
        subprocess.run(["quilt", "--quiltrc", "-", "push", "-a", "-q"], cwd=lab.tree, env=env, check=True,
                       capture_output=True, stdin=subprocess.DEVNULL)  # fmt: skip
        assert lab.worktree_id() == wanted


@pytest.mark.regression("a hand-trimmed patch whose diffstat total disagrees with its lines (glibc) was 'truncated'")
def test_a_stale_diffstat_is_not_taken_for_truncation(lab: Lab, tmp_path: Path) -> None:
    commit(lab.tree, {"a.txt": "a\n", "b.txt": "b\n"}, "two files")
    mail = tmp_path / "two.patch"
    (lab.tree / "a.txt").write_text("A\n")
    (lab.tree / "b.txt").write_text("B\n")
    git(lab.tree, "commit", "-q", "-am", "edit both")
    mail.write_bytes(git(lab.tree, "format-patch", "--stdout", "-1"))
    git(lab.tree, "reset", "-q", "--hard", "HEAD~1")
    cut = mail.read_bytes()[: mail.read_bytes().index(b"diff --git a/b.txt")]
    (tmp_path / "cut.patch").write_bytes(cut)  # cut at a file boundary: its stat still lists two files
    assert "truncated (its diffstat lists 2 files, the diff has 1)" in imp(lab, str(tmp_path / "cut.patch")).err
    trimmed = cut.replace(b" b.txt | 2 +-\n", b"")  # a maintainer dropped b.txt's diff and its stat line
    (tmp_path / "trimmed.patch").write_bytes(trimmed)
    result = imp(lab, str(tmp_path / "trimmed.patch"))
    assert result.code == 0, result.err
    assert applied_at_base(lab.tree, patches(lab.store)["trimmed.patch"], tmp=tmp_path) == git_apply_tree(
        lab.tree, "HEAD", trimmed, tmp_path).stdout.decode().strip()  # fmt: skip


@pytest.mark.regression("a quilt series' file names (fix.diff, ps_checks, locale/x.diff) came back as NAME.patch")
def test_export_gives_quilt_patches_back_their_file_names(lab: Lab, tmp_path: Path) -> None:
    quilt = quilt_dir(tmp_path)
    (quilt / "locale").mkdir()
    for old, new in (("mixed.patch", "mixed.diff"), ("dep3.patch", "locale/dep3.diff"), ("free.patch", "free")):
        (quilt / old).rename(quilt / new)
    series = b"# Debian patches\nmixed.diff\n\nlocale/dep3.diff -p1   # vendor only\nfree\n"
    (quilt / "series").write_bytes(series)
    assert imp(lab, str(quilt)).code == 0
    assert (lab.store / "series" / "pkg").read_bytes() == b"# Debian patches\nmixed.patch\n\ndep3.patch -p1   # " \
                                                          b"vendor only\nfree.patch\n"  # fmt: skip
    out = tmp_path / "exported"
    for _ in range(2):  # a second export into the same directory is fine too
        assert lab.sm("export", "pkg", "--quilt", str(out)).code == 0
    assert (out / "series").read_bytes() == series
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "free", "locale/dep3.diff", "mixed.diff", "series"]  # fmt: skip
    assert (out / "locale" / "dep3.diff").read_bytes().startswith(DEP3[: diff_start(DEP3)] + b"diff --git ")


@pytest.mark.regression("a mail whose maintainer took one file out (Debian's sed CVE patch) was 'truncated'")
def test_a_signed_mail_missing_a_file_its_diffstat_lists_imports(lab: Lab, tmp_path: Path) -> None:
    commit(lab.tree, {"a.txt": "a\n", "NEWS": "news\n"}, "two files")
    (lab.tree / "a.txt").write_text("A\n")
    (lab.tree / "NEWS").write_text("news\nmore\n")
    git(lab.tree, "commit", "-q", "-am", "edit both")
    mail = git(lab.tree, "format-patch", "--stdout", "-1")
    git(lab.tree, "reset", "-q", "--hard", "HEAD~1")
    start, end = mail.index(b"diff --git a/NEWS"), mail.index(b"diff --git a/a.txt")
    trimmed = mail[:start] + mail[end:]  # NEWS's diff gone, its stat line and the signature kept
    assert trimmed.rstrip().endswith(b"\n-- \n" + trimmed.rstrip().rsplit(b"\n", 1)[1])
    (tmp_path / "cve.patch").write_bytes(trimmed)
    result = imp(lab, str(tmp_path / "cve.patch"))
    assert result.code == 0, result.err
    assert applied_at_base(lab.tree, patches(lab.store)["cve.patch"], tmp=tmp_path) == git_apply_tree(
        lab.tree, "HEAD", trimmed, tmp_path).stdout.decode().strip()  # fmt: skip
