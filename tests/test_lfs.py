"""Big results through git LFS, with real git-lfs (CI installs Debian's): `git-setup --lfs` makes the files of
`artifacts/` above a size LFS objects, each engineer's linked results stay LFS objects through a merge, and a
teammate's clone verifies after `git lfs pull`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Lab, git

needs_lfs = pytest.mark.skipif(shutil.which("git-lfs") is None, reason="git-lfs is not installed (CI installs it)")


@needs_lfs
def test_a_big_artifact_travels_through_git_lfs_and_verifies_on_a_teammate_s_clone(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(lab.store)  # the lab works from the store: artifacts are recorded relative to it
    git(lab.store, "init", "-q")
    setup = lab.sm("git-setup", "--lfs")
    assert setup.code == 0, setup.err
    assert "files of 1.0 MiB or more are git LFS objects" in setup.out
    big = lab.store / "artifacts" / "run.log"
    big.parent.mkdir(exist_ok=True)  # git-setup --lfs made it, with its .gitattributes
    big.write_bytes(b"".join(b"step %d tok/s 107.77\n" % n for n in range(200_000)))  # ~4 MB
    (lab.store / "artifacts" / "bench.json").write_text('{"request_throughput": 3.1}')
    (lab.tree / "README").write_text("hello\nmeasured\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    assert lab.sm("link", "fix", "artifacts/run.log", "artifacts/bench.json", "--verdict", "promoted").code == 0
    git(lab.store, "add", "-A")
    git(lab.store, "commit", "-q", "-m", "a run")
    stored = git(lab.store, "cat-file", "-p", "HEAD:artifacts/run.log")
    assert stored.startswith(b"version https://git-lfs.github.com/spec/v1")  # git holds the pointer only
    assert git(lab.store, "cat-file", "-p", "HEAD:artifacts/bench.json") == b'{"request_throughput": 3.1}'  # small
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(lab.store, "remote", "add", "origin", remote.as_uri())  # git-lfs's local transfer wants a file:// URL
    git(lab.store, "push", "-q", "origin", "HEAD:refs/heads/main")
    theirs = tmp_path / "bob" / "store"
    env = {"GIT_LFS_SKIP_SMUDGE": "1"}  # a teammate without LFS set up yet: pointers in the checkout
    subprocess.run(["git", "clone", "-q", "-b", "main", remote.as_uri(), str(theirs)], check=True,
                   env={**os.environ, **env})  # fmt: skip
    bob = Lab(theirs, lab.tree)
    before = bob.sm("verify")
    said = before.out + before.err
    assert before.code != 0 and "git LFS pointer" in said and "git lfs pull" in said
    assert bob.sm("git-setup", "--lfs").code == 0
    git(theirs, "lfs", "pull")
    after = bob.sm("verify")
    assert after.code == 0, after.out + after.err
    assert (theirs / "artifacts" / "run.log").read_bytes() == big.read_bytes()


def test_git_setup_lfs_without_git_lfs_says_what_to_install(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    from stackmgr.commands import git_setup

    git(lab.store, "init", "-q")
    monkeypatch.setattr(git_setup, "lfs_version", lambda _top: None)
    result = lab.sm("git-setup", "--lfs")
    assert result.code == 3 and "git-lfs is not installed" in result.err and "apt-get install git-lfs" in result.err


def lfs_blob(store: Path, path: str) -> bool:
    return git(store, "cat-file", "-p", f"HEAD:{path}").startswith(b"version https://git-lfs.github.com/spec/v1")


@needs_lfs
def test_a_threshold_chosen_once_holds_for_files_already_there_and_files_linked_later(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(lab.store)
    git(lab.store, "init", "-q")
    artifacts = lab.store / "artifacts"
    artifacts.mkdir()
    (artifacts / "old run.log").write_bytes(b"x" * 3000)  # there before LFS was set up, a space in its name
    (artifacts / "notes.md").write_text("short\n")
    setup = lab.sm("git-setup", "--lfs", "--lfs-above", "2k")
    assert setup.code == 0, setup.err
    assert "files of 2.0 KiB or more" in setup.out and "artifacts/old run.log" in setup.out
    assert "git add --renormalize artifacts" in setup.out
    assert lab.sm("git-setup", "--lfs").code == 0  # again, without the size: the one chosen stays
    (lab.tree / "README").write_text("hello\nmeasured\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    (artifacts / "new.log").write_bytes(b"y" * 2048)
    (artifacts / "small.log").write_bytes(b"y" * 2047)
    assert lab.sm("link", "fix", "artifacts/new.log", "artifacts/small.log").code == 0
    git(lab.store, "add", "-A")
    git(lab.store, "commit", "-q", "-m", "runs")
    assert [lfs_blob(lab.store, f"artifacts/{n}") for n in ("old run.log", "new.log", "small.log", "notes.md")] \
        == [True, True, False, False]  # fmt: skip
    assert lab.sm("verify").code == 0
    bad = lab.sm("git-setup", "--lfs", "--lfs-above", "lots")
    assert bad.code == 2 and "'lots' is not a size" in bad.err


@needs_lfs
def test_two_engineers_big_results_both_stay_lfs_objects_after_a_merge(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(lab.store, "init", "-q", "-b", "main")
    assert lab.sm("git-setup", "--lfs", "--lfs-above", "1k").code == 0
    (lab.tree / "README").write_text("hello\nmeasured\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    assert lab.sm("reset").code == 0
    git(lab.store, "add", "-A")
    git(lab.store, "commit", "-q", "-m", "store")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(lab.store, "remote", "add", "origin", remote.as_uri())
    git(lab.store, "push", "-q", "-u", "origin", "main")
    theirs = tmp_path / "bob"
    git(tmp_path, "clone", "-q", remote.as_uri(), str(theirs))
    bob = Lab(theirs, lab.tree)
    assert bob.sm("git-setup", "--lfs").code == 0
    for who, name in ((lab, "alice"), (bob, "bob")):
        monkeypatch.chdir(who.store)
        (who.store / "artifacts" / f"{name}.log").write_bytes(name.encode() * 1000)
        assert who.sm("link", "fix", f"artifacts/{name}.log").code == 0
        git(who.store, "add", "-A")
        git(who.store, "commit", "-q", "-m", f"{name}'s run")
    git(theirs, "push", "-q", "origin", "main")
    pulled = subprocess.run(["git", "pull", "-q", "--no-rebase", "--no-edit"], cwd=lab.store, capture_output=True)
    assert pulled.returncode == 0, pulled.stderr  # artifacts/.gitattributes: a union of both engineers' lines
    assert "<<<<<<<" not in (lab.store / "artifacts" / ".gitattributes").read_text()
    assert lfs_blob(lab.store, "artifacts/alice.log") and lfs_blob(lab.store, "artifacts/bob.log")
    assert lab.sm("verify").code == 0


@pytest.mark.regression("an odd character in an LFS pattern was '?', so a small neighbour of its shape went to LFS")
def test_each_lfs_pattern_matches_its_file_and_no_other(lab: Lab) -> None:
    from stackmgr.store.lfs import pattern

    git(lab.store, "init", "-q")
    names = ["a b.bin", "A?big.bin", "x*y", "été.log", "br[1].log", 'q"uote', "back\\slash", "sub/deep file.txt"]
    (lab.store / "artifacts").mkdir()
    (lab.store / "artifacts" / ".gitattributes").write_bytes(b"".join(pattern(n) + b" filter=lfs\n" for n in names))
    neighbours = ["A_big.bin", "xzy", "br1.log", "backslash", "a_b.bin"]
    out = subprocess.run(["git", "check-attr", "-z", "filter", "--", *(f"artifacts/{n}" for n in names + neighbours)],
                         cwd=lab.store, capture_output=True, check=True).stdout.split(b"\0")  # fmt: skip
    said = {out[i].decode(): out[i + 2].decode() for i in range(0, len(out) - 2, 3)}
    assert [said[f"artifacts/{n}"] for n in names] == ["lfs"] * len(names)
    assert [said[f"artifacts/{n}"] for n in neighbours] == ["unspecified"] * len(neighbours)
