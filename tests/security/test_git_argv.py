"""No value from the store reaches git as an option (docs/SECURITY.md): a patch's `Stackmgr-Base` trailer, a file
name in its diff, its author and date are checked where the patch file is read (one line naming the file) and
again where the git command line is built (stackmgr/git/checked.py), so `--index-output=PATH` or `--output=PATH`
in a pulled patch never becomes a file git writes. A listing shows such a patch as bad and goes on."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Result, git, git_text
from tests.security.conftest import Team, one_line_refusal


def pulled_patch(team: Team) -> bytes:
    return (team.victim.store / "patches" / "fix.patch").read_bytes()


def with_base(data: bytes, value: str) -> bytes:
    return re.sub(rb"(?m)^Stackmgr-Base: .*$", b"Stackmgr-Base: " + value.encode(), data)


def calm(result: Result, args: tuple[str, ...]) -> None:
    """Whatever the command said, it said it as stackmgr does: no traceback, no internal error."""
    assert "Traceback" not in result.err and "internal error" not in result.err, (args, result.err)


# Options of the git commands a base reaches (read-tree, diff-tree, diff-index, log, rev-parse) that write files.
OPTIONS = {
    "index-output": "--index-output={outside}/pwned",  # read-tree: the index it builds, written there
    "output": "--output={home}/.bashrc",  # diff-tree / diff-index / log: their output, written there
}


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_a_base_trailer_that_is_a_git_option_writes_nothing_in_any_command(team: Team, option: str) -> None:
    value = OPTIONS[option].format(outside=team.victim.store.parent / "outside", home=team.home)
    team.attack({"patches/fix.patch": with_base(pulled_patch(team), value)})
    mbox = team.victim.store.parent / "fix.mbox"
    results = {args: team.sm(*args) for args in (
        ("check",), ("status",), ("series", "replay"), ("show", "fix"), ("lint",), ("pop",), ("push",),
        ("apply", "replay"), ("export", "replay", "--mbox", str(mbox)), ("export", "replay", "--git", "b"),
        ("rebase", "replay", "--onto", "HEAD"), ("interdiff", "fix", "fix"))}  # fmt: skip
    team.canary.assert_untouched(*(r.out + r.err for r in results.values()))
    assert not (team.victim.store.parent / "outside" / "pwned").exists()
    assert not mbox.exists() and git(team.victim.tree, "branch", "--list", "b") == b""
    for args, result in results.items():
        calm(result, args)
        if args[0] in ("apply", "export", "rebase", "interdiff"):
            one_line_refusal(result)
            assert "patches/fix.patch" in result.err and "Stackmgr-Base" in result.err, (args, result.err)


def test_a_listing_shows_a_patch_with_a_bad_base_as_bad_and_goes_on(team: Team) -> None:
    (team.victim.tree / "README").write_text("a second change\n")
    assert team.sm("save", "second", "-m", "second", "--series", "replay").code == 0
    team.victim_commit()
    team.attack({"patches/fix.patch": with_base(pulled_patch(team), "--index-output=/tmp/x")})
    listing = team.sm("series", "replay")
    assert listing.code == 0, listing.err
    rows = {line.split()[2]: line for line in listing.out.splitlines() if line.split()[1:2] in (["1."], ["2."])}
    assert "Stackmgr-Base" in rows["fix"] and "not a commit id" in rows["fix"]
    assert "Stackmgr-Base" not in rows["second"]


def test_a_nul_byte_in_a_pulled_patch_s_file_name_is_a_bad_patch_not_a_crash(team: Team) -> None:
    """A quoted name with `\\000` would end an argument early or forge a record of the NUL-separated lists git
    is given (`update-index -z --index-info`): the patch is bad, named; the commands go on or refuse in one line."""
    data = pulled_patch(team).replace(b"diff --git a/src/model.py b/src/model.py",
                                      b'diff --git "a/src/model.py\\000x" "b/src/model.py\\000x"')  # fmt: skip
    assert team.sm("reset").code == 0  # the victim's tree back at its base, so `apply` reads the patch
    team.attack({"patches/fix.patch": data})
    outputs = []
    for args in (("check",), ("status",), ("series", "replay"), ("apply", "replay"), ("lint",)):
        result = team.sm(*args)
        calm(result, args)
        outputs += [result.out, result.err]
    applied = team.sm("apply", "replay")
    one_line_refusal(applied)
    assert "patches/fix.patch" in applied.err
    team.canary.assert_untouched(*outputs)


def test_an_author_with_a_nul_byte_never_reaches_git_s_environment(team: Team) -> None:
    data = pulled_patch(team).replace(b"From: Jane Doe", b"From: Jane\x00Doe")
    team.attack({"patches/fix.patch": data})
    result = team.sm("export", "replay", "--git", "handed-on")
    one_line_refusal(result)
    assert "patches/fix.patch" in result.err and "control characters" in result.err
    assert git(team.victim.tree, "branch", "--list", "handed-on") == b""
    team.canary.assert_untouched(result.out, result.err)


# --- the last line: the git layer itself (values from records other code reads: journal, applied state) -------


def test_the_git_layer_refuses_an_option_where_a_revision_goes(team: Team, tmp_path: Path) -> None:
    from stackmgr.errors import StackmgrError
    from stackmgr.git import refs
    from stackmgr.git.repo import open_repo
    from stackmgr.git.tempindex import TempIndex

    repo = open_repo(str(team.victim.tree))
    pwned = tmp_path / "outside" / "pwned"
    head = git_text(team.victim.tree, "rev-parse", "HEAD")
    attempts = [
        lambda: TempIndex.scratch(repo, "probe").read_tree(f"--index-output={pwned}"),
        lambda: repo.diff_trees(f"--output={pwned}", "HEAD"),
        lambda: repo.has_commit(f"--output={pwned}"),
        lambda: repo.missing_objects([head + "\n" + head]),
        lambda: refs.detach_head(repo, "-d", "probe", expect=head),  # `update-ref -d HEAD`: HEAD deleted
        lambda: refs.attach_head(repo, "-d", "probe"),  # `symbolic-ref -d`: HEAD deleted
        lambda: refs.update_refs(repo, [(f"refs/stackmgr/x {head}\ndelete refs/heads/main", head)], "probe"),
        lambda: refs.update_ref(repo, "refs/heads/main", "--stdin", "probe"),
    ]
    for attempt in attempts:
        with pytest.raises(StackmgrError):
            attempt()
    assert not pwned.exists()
    assert git_text(team.victim.tree, "rev-parse", "HEAD") == head
    assert git_text(team.victim.tree, "rev-parse", "refs/heads/main") == head
    team.canary.assert_untouched()


@pytest.mark.parametrize("name", [".git/hooks/post-checkout", "sub/.GIT/config"])
def test_a_quilt_name_a_pulled_patch_carries_never_writes_into_a_git_directory(
    team: Team, tmp_path: Path, name: str
) -> None:
    """An imported patch keeps the name it had in its quilt series (below `---`, for `export --quilt`): a name
    that would put a file into a `.git` of the export directory (a hook, once someone runs `git init` there, or
    a config) is not used; the patch is exported under its store name."""
    data = pulled_patch(team).replace(b"\n---\n", b"\n---\nStackmgr-Original-Header: " + name.encode()
                                      + b"\n| Subject: a fix\n", 1)  # fmt: skip
    team.attack({"patches/fix.patch": data})
    quilt = tmp_path / "quilt"
    result = team.sm("export", "replay", "--quilt", str(quilt))
    assert result.code == 0, result.err
    assert sorted(p.name for p in quilt.iterdir()) == ["fix.patch", "series"]
    assert (quilt / "series").read_text() == "fix.patch\n"
    team.canary.assert_untouched(result.out, result.err)


def upstream_commit(tree: Path, path: str, content: str) -> str:
    """A commit on top of the tree's HEAD changing one file, made without touching its working tree or index."""
    index = tree / ".git" / "upstream-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}

    def run(*args: str, data: bytes | None = None) -> str:
        done = subprocess.run(["git", *args], cwd=tree, env=env, input=data, check=True, capture_output=True)
        return done.stdout.decode().strip()

    run("read-tree", "HEAD")
    blob = run("hash-object", "-w", "--stdin", data=content.encode())
    run("update-index", "--cacheinfo", f"100644,{blob},{path}")
    commit = run("commit-tree", run("write-tree"), "-p", "HEAD", "-m", "upstream")
    index.unlink()
    return commit


def test_a_damaged_rebase_state_is_refused_never_handed_to_git(team: Team) -> None:
    """A rebase stopped on a conflict keeps its state (the commits it carries onto and from) in the store's state
    directory. Edited there (an older stackmgr's file, an unpacked archive's), a commit that is an option such as
    `--output=FILE` makes `rebase --continue` refuse the state as damaged: git never sees it."""
    from stackmgr.store.config import load_store

    onto = upstream_commit(team.victim.tree, "src/model.py", "def f():\n    return 3\n")
    stopped = team.sm("rebase", "replay", "--onto", onto)
    assert stopped.code == 3 and "conflict" in stopped.err, stopped.err
    state_file = Path(load_store(str(team.victim.store)).state_dir) / "rebase" / "replay.json"
    state = json.loads(state_file.read_text())
    state.update(stopped=None, old_base=f"--output={team.home}/.bashrc")
    state_file.write_text(json.dumps(state))
    result = team.sm("rebase", "replay", "--continue")
    one_line_refusal(result)
    assert "damaged" in result.err
    team.canary.assert_untouched(result.out, result.err)
    assert team.sm("rebase", "replay", "--abort").code == 0


def test_a_bare_repository_planted_in_the_store_is_never_used_by_git(team: Team) -> None:
    """git finds a bare repository by its shape (HEAD, objects/, refs/) and reads its config; one pushed into the
    store (a folder stackmgr runs git in, if the store were found there) is refused (`safe.bareRepository`)."""
    from stackmgr.git.store_repo import in_repository

    team.attack({"incoming/HEAD": "ref: refs/heads/main\n", "incoming/objects/info/keep": "",
                 "incoming/refs/heads/keep": "", "incoming/config": "[core]\n\tbare = true\n\tfsmonitor = true\n",
                 "incoming/stackmgr.toml": "[trees]\n"})  # fmt: skip
    assert not in_repository(str(team.victim.store / "incoming"))
    assert in_repository(str(team.victim.store))
    team.canary.assert_untouched()
