"""The field suite's own logic (field/run.py), offline: tree ids, verdicts, known differences, tarballs, and one
Debian-style case built from a local fixture instead of a download."""

from __future__ import annotations

import io
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "field"))

from harness import debian
from harness.cases import Result, Side, exit_code, known_reason, load_known, summary
from harness.fetch import DebianSource, extract
from harness.sh import Env, commit_all, new_repo, worktree_id


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env.hermetic(tmp_path / "field")


def make_tarball(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_worktree_id_counts_edits_deletions_and_new_files_and_leaves_the_index(env: Env, tmp_path: Path) -> None:
    repo = new_repo(env, tmp_path / "r")
    (repo / "a").write_text("one\n")
    (repo / "b").write_text("two\n")
    commit_all(env, repo, "base")
    index_before = (repo / ".git" / "index").read_bytes()
    (repo / "a").write_text("changed\n")
    (repo / "b").unlink()
    (repo / "new").write_text("new\n")
    seen = worktree_id(env, repo)
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert seen == env.git(repo, "rev-parse", f"{commit_all(env, repo, 'all')}^{{tree}}")


def test_extract_strips_the_single_top_directory_only(tmp_path: Path) -> None:
    one = make_tarball(tmp_path / "one.tar.gz", {"pkg-1.0/a.c": b"a", "pkg-1.0/sub/b.c": b"b"})
    two = make_tarball(tmp_path / "two.tar.gz", {"x/a": b"a", "y/b": b"b"})
    assert sorted(str(p.relative_to(tmp_path / "o")) for p in extract(one, tmp_path / "o").rglob("*.c")) == [
        "a.c", "sub/b.c"]  # fmt: skip
    assert (extract(two, tmp_path / "t") / "x" / "a").exists()
    assert (extract(one, tmp_path / "k", strip_top=False) / "pkg-1.0" / "a.c").exists()


def test_verdicts_known_differences_and_the_summary(tmp_path: Path) -> None:
    same = Result("debian", "p", Side("stackmgr", "t1"), Side("quilt", "t1"))
    both_refuse = Result("rebase", "r1", Side("stackmgr", None, stop="f"), Side("git", None, stop="f"))
    elsewhere = Result("rebase", "r2", Side("stackmgr", None, stop="f"), Side("git", None, stop="g"))
    safer = Result("am", "m", Side("stackmgr", None, "refused"), Side("git am", "t2"))
    assert same.agree and both_refuse.agree and not elsewhere.agree and not safer.agree
    assert exit_code([same, both_refuse]) == 0 and exit_code([same, safer]) == 1
    safer.known, elsewhere.known = "stackmgr refuses fuzz", "stops one patch later"
    assert safer.verdict == "known difference" and exit_code([same, safer, elsewhere]) == 0
    assert summary([same, both_refuse, elsewhere, safer], ("debian", "am", "rebase")) == (
        "field: 2 agree, 2 disagree, 2 of them known (debian 1/1, am 0/1, rebase 1/2)")
    (tmp_path / "known.toml").write_text('[[known]]\ncase = "am/x"\nreason = ""\n')
    with pytest.raises(ValueError, match="non-empty `reason`"):
        load_known(tmp_path / "known.toml")


def test_series_names_skip_comments_blank_lines_and_options(tmp_path: Path) -> None:
    (tmp_path / "series").write_text("# top\n\none.patch\ntwo.diff -p1\n  \nsub/three.patch #+guard\n")
    assert debian.series_names(tmp_path) == ["one.patch", "two.diff", "sub/three.patch"]


class LocalCache:
    """Stands in for the download cache: a source package made here."""

    def __init__(self, source: DebianSource) -> None:
        self.source = source

    def debian(self, package: str, env: Env) -> DebianSource:
        return self.source


@pytest.mark.skipif(shutil.which("quilt") is None, reason="needs quilt")
def test_a_debian_case_from_a_local_package_agrees_in_every_suite(env: Env, tmp_path: Path) -> None:
    orig = make_tarball(tmp_path / "demo_1.0.orig.tar.gz", {
        "demo-1.0/main.c": b"".join(b"line %d\n" % n for n in range(20)), "demo-1.0/gone.txt": b"bye\n"})  # fmt: skip
    edit = (b"Description: tweak main\nAuthor: Someone <s@example.org>\n\n--- a/main.c\n+++ b/main.c\n"
            b"@@ -3,3 +3,3 @@\n line 2\n-line 3\n+line three\n line 4\n")  # fmt: skip
    create = b"--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n"
    delete = b"Subject: drop gone.txt\n\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
    patches = {"debian/patches/series": b"# comment\nedit.patch\ncreate.patch\ndelete.patch\n",
               "debian/patches/edit.patch": edit, "debian/patches/create.patch": create,
               "debian/patches/delete.patch": delete}  # fmt: skip
    source = DebianSource("demo", "1.0-1", orig, make_tarball(tmp_path / "demo_1.0-1.debian.tar.gz", patches))
    results = debian.run_package(env, LocalCache(source), "demo", tmp_path / "work")  # type: ignore[arg-type]
    assert [(r.suite, r.verdict) for r in results] == [("debian", "agree"), ("export", "agree"), ("export", "agree"),
                                                       ("am", "agree")]  # fmt: skip
    assert len({r.other.tree for r in results}) == 1 and results[0].other.tree is not None


def test_a_known_difference_is_named_by_its_case_or_the_start_of_it() -> None:
    moved = Result("rebase", "tomli moved: 2.0.0→2.0.1 at 2.0.0 (2 patches)", Side("s", None), Side("g", "t"))
    deb = Result("debian", "bc 1.07.1-3 (7 patches)", Side("s", None), Side("q", "t"))
    assert known_reason({"rebase/tomli moved:": "renames"}, moved) == "renames"
    assert known_reason({"debian/bc": "fuzz"}, deb) == "fuzz"
    assert known_reason({"debian/b": "no"}, deb) is None  # a prefix only counts up to a space or a colon
    assert known_reason({"rebase/tomli": "x"}, deb) is None
