"""Catalogue row 68, its configuration half: a user's global git config that changes what diff, apply and status
print or do (docs/ARCHITECTURE.md#invariants, 8) must not change what stackmgr writes or rebuilds.

The hostile config is written to the file GIT_CONFIG_GLOBAL names (tests/conftest.py `hermetic_git`): no prefixes
or mnemonic ones, an external diff and a textconv that print garbage, colour always, copies and renames, patience,
more context, whitespace "fixing" and ignoring on apply, an order file, relative diffs, ignored submodules,
untracked files hidden from status, pagers that print garbage, a v4 index. Then:

- `save` writes the same bytes with and without it (both on a fresh tree and on one whose private index was built
  before the config changed), and `check`/`status` answer the same;
- save → reset → apply rebuilds every byte, and the seeded round-trip property (tests/test_roundtrip_property.py)
  holds for many seeds with the config installed;
- `core.autocrlf=true` changes what git considers content, so it is tested apart: the round trip reproduces the
  working-tree bytes, and the rest of the hostile config changes nothing on top of it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import tests.test_roundtrip_property as roundtrip
from tests.conftest import Lab, git, git_text, make_repo, run_stackmgr, tree_files
from tests.reliability.conftest import REBUILDABLE, assert_one_line_error, changed_paths, fingerprint

PROPERTY_SEEDS = 40
QUICK_SEEDS = 2  # the first seeds also run in the edit loop (`-m "not slow"`); all of them in a full run


def _config() -> Path:
    return Path(os.environ["GIT_CONFIG_GLOBAL"])


def _set(key: str, value: str) -> None:
    git(_config().parent, "config", "--file", str(_config()), key, value)


def install_hostile(quote_path: str = "true") -> None:
    """Append the hostile settings to the global config (init.defaultBranch=main stays)."""
    home = _config().parent
    garbage = home / "garbage.sh"
    garbage.write_text("#!/bin/sh\necho 'GARBAGE from a hostile diff tool'\ncat >/dev/null 2>&1\nexit 0\n")
    garbage.chmod(0o755)
    (home / "order").write_text("z*\n*.bin\n*\n")
    (home / "attributes").write_text("*.txt diff=garble\n*.py diff=garble\n")
    settings = {
        "apply.whitespace": "fix",
        "apply.ignoreWhitespace": "change",
        "diff.noprefix": "true",
        "diff.mnemonicPrefix": "true",
        "diff.srcPrefix": "SRC/",
        "diff.dstPrefix": "DST/",
        "diff.external": str(garbage),
        "diff.garble.textconv": str(garbage),
        "diff.renames": "copies",
        "diff.algorithm": "patience",
        "diff.context": "9",
        "diff.interHunkContext": "20",
        "diff.indentHeuristic": "false",
        "diff.suppressBlankEmpty": "true",
        "diff.orderFile": str(home / "order"),
        "diff.relative": "true",
        "diff.ignoreSubmodules": "all",
        "diff.wsErrorHighlight": "all",
        "diff.colorMoved": "zebra",
        "diff.statGraphWidth": "5",
        "diff.dirstat": "files",
        "color.ui": "always",
        "color.diff": "always",
        "color.status": "always",
        "core.quotePath": quote_path,
        "core.attributesFile": str(home / "attributes"),
        "core.pager": str(garbage),
        "core.whitespace": "trailing-space,space-before-tab,indent-with-non-tab,cr-at-eol",
        "pager.diff": str(garbage),
        "pager.status": str(garbage),
        "status.showUntrackedFiles": "no",
        "status.renames": "copies",
        "status.relativePaths": "true",
        "feature.manyFiles": "true",
    }
    for key, value in settings.items():
        _set(key, value)


# --- a tree with every kind of change the settings above could bend --------------------------------------------

MODEL = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(20))
BASE: dict[str, bytes | str] = {
    "README": "hello\n",
    "src/model.py": MODEL,
    "old_name.txt": "a file that will be renamed\nwith two lines\n",
    "empty-old": "",
    "bin.dat": b"\0\1\2binary\xff" * 8,
    "script.sh": "#!/bin/sh\necho hi\n",
    "notes.txt": "notes\n",
}


def _rich_edits(tree: Path) -> None:
    (tree / "README").write_text("hello  \n \tspace before tab\ntrailing tab\t\n\n\n")
    lines = MODEL.splitlines(keepends=True)
    moved = lines[3:9]
    body = lines[:3] + lines[9:30] + moved + lines[30:]
    body[12] = "    return x * 12  # changed\n"
    body[40] = "    return x * 40  # changed, two hunks close together\n"
    (tree / "src" / "model.py").write_text("".join(body))
    (tree / "src" / "copy.py").write_text(MODEL)  # a copy of a modified file's old content
    (tree / "old_name.txt").rename(tree / "new_name.txt")  # a rename, byte for byte
    (tree / "empty-old").unlink()
    (tree / "empty-new").write_bytes(b"")
    (tree / "bin.dat").write_bytes(b"\0\1\2binary\xfe" * 8)
    (tree / "script.sh").chmod(0o755)
    os.symlink("src/model.py", tree / "link")
    (tree / "notes.txt").write_text("notes, edited (textconv would hide this)\n")
    (tree / "café é.txt").write_text("unicode name\n")
    (tree / 'q"t x.txt').write_text("quoted name\n")
    (tree / "z-first.txt").write_text("an order file would put me first\n")
    (tree / "crlf.txt").write_bytes(b"crlf\r\ncontent\r\n")
    (tree / "src" / "deep").mkdir()
    (tree / "src" / "deep" / "x.py").write_text("x = 1   \n")


def _new_lab(root: Path, files: dict[str, bytes | str] | None = None) -> Lab:
    tree = make_repo(root / "vllm", files or BASE)
    store = root / "store"
    assert run_stackmgr("init", str(store)).code == 0
    assert run_stackmgr("--store", str(store), "tree", "add", "vllm", str(tree)).code == 0
    return Lab(store, tree)


def _answers(lab: Lab, root: Path) -> tuple[str, str, int]:
    """What check -v and status --json say, with the lab's own directory taken out."""
    check = lab.sm("check", "-v")
    status = lab.sm("--json", "status")
    assert status.code == 0, status.err
    return check.out.replace(str(root), "ROOT"), status.out.replace(str(root), "ROOT"), check.code


def _round_trip(lab: Lab) -> None:
    wanted_id, wanted = lab.worktree_id(), tree_files(lab.tree)
    head = git_text(lab.tree, "rev-parse", "HEAD")
    saved = lab.sm("save", "rt", "--series", "s", "-m", "round trip")
    assert saved.code == 0, saved.err
    assert lab.sm("check").code == 0
    reset = lab.sm("reset")
    assert reset.code == 0, reset.err
    assert lab.worktree_id() == git_text(lab.tree, "rev-parse", "HEAD^{tree}")
    assert git(lab.tree, "status", "--porcelain", "--untracked-files=all") == b""
    applied = lab.sm("apply", "s")
    assert applied.code == 0, applied.err
    assert git_text(lab.tree, "rev-parse", "HEAD") == head
    assert lab.worktree_id() == wanted_id
    assert tree_files(lab.tree) == wanted
    assert lab.sm("check").code == 0


# --- patch bytes and answers --------------------------------------------------------------------------------------


@pytest.mark.catalogue(68)
@pytest.mark.parametrize("quote_path", ["true", "false"])
def test_row68_save_writes_the_same_patch_bytes_under_a_hostile_config(tmp_path: Path, quote_path: str) -> None:
    """Row 68: the same changes saved with a clean config and with the hostile one give identical patch bytes:
    on a second, identical tree built under the hostile config, and again on the first tree (its private index
    warm from before). check and status answer the same."""
    plain = _new_lab(tmp_path / "plain")
    _rich_edits(plain.tree)
    plain_answers = _answers(plain, tmp_path / "plain")
    assert plain_answers[2] == 1
    assert plain.sm("save", "p", "-m", "every kind of change").code == 0
    expected = (plain.store / "patches" / "p.patch").read_bytes()
    assert b"diff --git a/src/model.py b/src/model.py\n" in expected and b"GARBAGE" not in expected

    install_hostile(quote_path)
    garbage = subprocess.run(["git", "diff"], cwd=plain.tree, capture_output=True).stdout
    assert b"GARBAGE" in garbage, "the hostile config is live for git porcelain"

    hostile = _new_lab(tmp_path / "hostile")
    assert git_text(hostile.tree, "rev-parse", "HEAD") == git_text(plain.tree, "rev-parse", "HEAD")
    _rich_edits(hostile.tree)
    assert _answers(hostile, tmp_path / "hostile") == plain_answers
    saved = hostile.sm("save", "p", "-m", "every kind of change")
    assert saved.code == 0, saved.err
    assert (hostile.store / "patches" / "p.patch").read_bytes() == expected

    again = plain.sm("save", "p2", "-m", "every kind of change")
    assert again.code == 0, again.err
    assert (plain.store / "patches" / "p2.patch").read_bytes() == expected
    assert hostile.sm("check").code == 0


@pytest.mark.catalogue(68)
def test_row68_round_trip_under_a_hostile_config_rebuilds_every_byte(tmp_path: Path) -> None:
    """Row 68: everything built and run under the hostile config: save → reset → apply gives every byte back."""
    install_hostile()
    lab = _new_lab(tmp_path)
    _rich_edits(lab.tree)
    _round_trip(lab)
    data = (lab.store / "patches" / "rt.patch").read_bytes()
    assert b"similarity index" not in data and b"copy from" not in data and b"rename from" not in data
    assert b"\x1b[" not in data and b"GARBAGE" not in data


@pytest.mark.catalogue(68)
@pytest.mark.parametrize("seed", [pytest.param(s, marks=[pytest.mark.slow] if s >= QUICK_SEEDS else [])
                                  for s in range(PROPERTY_SEEDS)])  # fmt: skip
def test_row68_the_round_trip_property_holds_under_a_hostile_config(seed: int, tmp_path: Path) -> None:
    """Row 68: tests/test_roundtrip_property.py's seeded case (random edits, odd names, stacked and partial
    saves, unsaved work refused) passes unchanged with the hostile config installed."""
    install_hostile()
    roundtrip.test_round_trip(seed, tmp_path)


@pytest.mark.catalogue(68)
@pytest.mark.parametrize("hostile", [False, True], ids=["plain", "hostile"])
def test_row68_apply_settings_do_not_loosen_a_patch_whose_context_changed(lab: Lab, hostile: bool) -> None:
    """Row 68: a patch whose context line differs only in whitespace does not apply, apply.ignoreWhitespace and
    apply.whitespace=fix or not: one line naming the hunk, exit 3, nothing changed."""
    (lab.tree / "README").write_text("one\ntwo\nthree\n")
    git(lab.tree, "commit", "-qam", "three lines")
    (lab.tree / "README").write_text("one\nTWO\nthree\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "p").code == 0
    assert lab.sm("reset").code == 0
    patch = lab.store / "patches" / "p.patch"
    patch.write_bytes(patch.read_bytes().replace(b"\n one\n", b"\n one  \n"))
    if hostile:
        install_hostile()
    assert lab.sm("check").code == 0
    before = fingerprint(lab.store, lab.tree)
    result = lab.sm("apply", "s")
    assert result.code == 3
    assert_one_line_error(
        result.err, "patch p", "does not apply", "README, hunk @@ -1,3 +1,3 @@", "nothing was changed"
    )
    assert changed_paths(before, fingerprint(lab.store, lab.tree), (*REBUILDABLE, "/.git/stackmgr")) == []


@pytest.mark.catalogue(26, 68)
def test_row68_a_dirty_submodule_is_seen_through_a_config_that_ignores_submodules(lab: Lab, tmp_path: Path) -> None:
    """Row 68 (with row 26): diff.ignoreSubmodules=all, status.showUntrackedFiles=no and submodule.recurse=true do not
    hide a submodule's inner edits from status (unprotected), nor let reset (forced or not) touch them."""
    origin = make_repo(tmp_path / "subsrc", {"s.txt": "s\n"})
    git(lab.tree, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(origin), "sub")
    git(lab.tree, "commit", "-qm", "add sub")
    install_hostile()
    _set("submodule.recurse", "true")
    sub = lab.tree / "sub"
    (sub / "s.txt").write_text("edited inside\n")
    (sub / "untracked.txt").write_text("new inside\n")
    (lab.tree / "README").write_text("unsaved\n")
    inner = tree_files(sub)
    status = json.loads(lab.sm("--json", "status").out)["trees"][0]
    assert [u["path"] for u in status["unprotected"]] == ["sub"]
    refused = lab.sm("reset")
    assert refused.code == 1
    forced = lab.sm("reset", "--force")
    assert forced.code == 0, forced.err
    assert tree_files(sub) == inner, "the submodule's own work is untouched"
    assert (lab.tree / "README").read_text() == "hello\n"


# --- core.autocrlf ------------------------------------------------------------------------------------------------

CRLF_BASE: dict[str, bytes | str] = {
    "a.txt": b"one\ntwo\nthree\n",
    "b.txt": b"kept as is\n",
    "lone.txt": b"lone\rcarriage return\n",
    "bin.dat": b"\0\r\n\n\0binary",
}


def _autocrlf_lab(root: Path) -> Lab:
    """A tree cloned while core.autocrlf=true: its text files are CRLF on disk, LF in the repository."""
    origin = make_repo(root / "origin", CRLF_BASE)
    tree = root / "vllm"
    git(root, "clone", "-q", str(origin), str(tree))
    assert (tree / "a.txt").read_bytes() == b"one\r\ntwo\r\nthree\r\n"
    store = root / "store"
    assert run_stackmgr("init", str(store)).code == 0
    assert run_stackmgr("--store", str(store), "tree", "add", "vllm", str(tree)).code == 0
    return Lab(store, tree)


def _crlf_edits(tree: Path) -> None:
    """Edits as an editor on such a tree makes them: CRLF text, binary bytes, a lone CR kept."""
    (tree / "a.txt").write_bytes(b"one\r\nTWO\r\nthree\r\nfour\r\n")
    (tree / "new.txt").write_bytes(b"new\r\nfile\r\n")
    (tree / "sub").mkdir()
    (tree / "sub" / "c.txt").write_bytes(b"c\r\n")
    (tree / "lone.txt").write_bytes(b"lone\rcarriage return, edited\n")
    (tree / "bin.dat").write_bytes(b"\0\r\n\r\n\0binary, edited")
    (tree / "b.txt").unlink()


@pytest.mark.catalogue(68)
def test_row68_autocrlf_round_trip_reproduces_the_working_tree_bytes(tmp_path: Path) -> None:
    """Row 68: with core.autocrlf=true, save → reset → apply gives back the CRLF bytes on disk; the patch holds
    the normalised (LF) content git stores."""
    _set("core.autocrlf", "true")
    lab = _autocrlf_lab(tmp_path)
    _crlf_edits(lab.tree)
    _round_trip(lab)
    data = (lab.store / "patches" / "rt.patch").read_bytes()
    assert b"\n+TWO\n" in data and b"\n+TWO\r\n" not in data
    assert (lab.tree / "a.txt").read_bytes() == b"one\r\nTWO\r\nthree\r\nfour\r\n"


@pytest.mark.catalogue(68)
def test_row68_autocrlf_patches_are_the_same_with_the_rest_of_the_hostile_config(tmp_path: Path) -> None:
    """Row 68: under core.autocrlf=true, adding every other hostile setting changes neither the patch bytes nor
    the rebuilt working tree."""
    _set("core.autocrlf", "true")
    plain = _autocrlf_lab(tmp_path / "plain")
    _crlf_edits(plain.tree)
    assert plain.sm("save", "p", "-m", "crlf edits").code == 0
    expected = (plain.store / "patches" / "p.patch").read_bytes()
    plain_files = tree_files(plain.tree)

    install_hostile()
    hostile = _autocrlf_lab(tmp_path / "hostile")
    _crlf_edits(hostile.tree)
    assert hostile.sm("save", "p", "-m", "crlf edits").code == 0
    assert (hostile.store / "patches" / "p.patch").read_bytes() == expected
    (hostile.store / "series" / "s").write_text("p.patch\n")
    assert hostile.sm("reset").code == 0
    assert hostile.sm("apply", "s").code == 0
    assert tree_files(hostile.tree) == plain_files


@pytest.mark.catalogue(68)
def test_row68_autocrlf_a_file_written_with_lf_endings_keeps_its_bytes(tmp_path: Path) -> None:
    """Row 68: under core.autocrlf=true a tool writes LF (or mixed) files; git stores them normalised and would
    check them out as CRLF. The round trip must still give back the bytes on disk, or stackmgr must not call
    them preserved (check 1 / reset refuses)."""
    _set("core.autocrlf", "true")
    lab = _autocrlf_lab(tmp_path)
    (lab.tree / "lf.txt").write_bytes(b"written by a tool\nwith LF\n")
    (lab.tree / "mixed.txt").write_bytes(b"crlf\r\nlf\n")
    assert lab.sm("save", "p", "--series", "s", "-m", "lf").code == 0
    wanted = tree_files(lab.tree)
    if lab.sm("check").code != 0:  # not preserved: reset must refuse
        assert lab.sm("reset").code == 1 and tree_files(lab.tree) == wanted
        return
    assert lab.sm("reset").code == 0
    assert lab.sm("apply", "s").code == 0
    assert tree_files(lab.tree) == wanted
