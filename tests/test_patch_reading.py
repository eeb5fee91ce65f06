"""Reading what a patch records: every section's path, modes and blobs (store/patchfile.post_images) as git's own
raw diff says them, and the claims check's refusal of an overflowing hunk header wherever it sits
(safety/claims.py). Both read a 13 MiB series in place, without splitting it: these pin that they still read it
right."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stackmgr.errors import StackmgrError
from stackmgr.safety import claims
from stackmgr.store import patchfile
from tests.conftest import commit, git, make_repo


def _raw(repo: Path, old: str, new: str) -> dict[bytes, tuple[str, str, str, str]]:
    """git's answer: path -> (old mode, old blob, new mode, new blob), blobs None-as-zeros."""
    out = git(repo, "diff-tree", "-r", "-z", "--raw", "--no-renames", "--full-index", old, new).split(b"\0")
    rows = {}
    for meta, path in zip(out[0:-1:2], out[1::2], strict=True):
        om, nm, ob, nb, _ = meta[1:].decode().split(" ")
        rows[path] = (om, ob, nm, nb)
    return rows


def test_post_images_of_every_kind_of_section_match_gits_raw_diff(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"edit.py": "a\nb\nc\n", "gone.txt": "bye\n", "tool.sh": "echo\n",
                                      "kind": "a file\n", "blob.bin": b"\0\1\2" * 50})  # fmt: skip
    old = git(repo, "rev-parse", "HEAD").decode().strip()
    (repo / "edit.py").write_text("a\n@@ -1 +1 @@ not a hunk\n--- not a header\ndiff --git not a section\nc\n")
    (repo / "gone.txt").unlink()
    os.chmod(repo / "tool.sh", 0o755)  # a mode-only change: no index line
    (repo / "kind").unlink()
    os.symlink("edit.py", repo / "kind")  # a type change: two sections, one path
    (repo / "blob.bin").write_bytes(b"\3\4" * 70)
    (repo / "new dir").mkdir()
    (repo / "new dir" / "made.txt").write_text("new\n")
    (repo / "tab\there.txt").write_text("quoted path\n")
    new = commit(repo, {}, "everything")
    diff = git(repo, "diff", "--binary", "--full-index", "--no-renames", old, new)
    images = {im.path: im for im in patchfile.post_images(diff, "p")}

    raw = _raw(repo, old, new)
    assert set(images) == set(raw) | {b"kind"}  # git's raw diff lists the type change as two rows of one path
    for path, (om, ob, nm, nb) in raw.items():
        im = images[path]
        if path == b"tool.sh":
            assert (im.old_mode, im.mode, im.old_blob, im.blob) == (om, nm, None, None)
            continue
        zero = "0" * 40
        assert (im.old_mode, im.mode) == (om, nm), path
        assert (im.old_blob or zero, im.blob or zero) == (ob, nb), path
    kind = images[b"kind"]
    assert (kind.old_mode, kind.mode) == ("100644", "120000")


def test_a_section_whose_header_ends_the_patch_without_a_newline_is_read(tmp_path: Path) -> None:
    diff = (b"diff --git a/x b/x\nnew file mode 100644\nindex " + b"0" * 40 + b".." + b"1" * 40)
    (image,) = patchfile.post_images(diff, "p")
    assert (image.path, image.old_mode, image.mode, image.blob) == (b"x", "000000", "100644", "1" * 40)


class _Patch:
    def __init__(self, data: bytes) -> None:
        self.name, self.path, self.data = "p", "/store/patches/p.patch", data


def _two_file_patch(third_hunk: bytes) -> bytes:
    section = (b"diff --git a/%s b/%s\nindex " + b"a" * 40 + b".." + b"b" * 40 + b" 100644\n--- a/%s\n+++ b/%s\n")
    hunk = b"@@ -1,2 +1,2 @@\n-x\n+y\n z\n"
    first = section.replace(b"%s", b"one") + hunk * 3
    second = section.replace(b"%s", b"two") + hunk * 2 + third_hunk + b"-x\n+y\n z\n"
    return b"From x\nSubject: s\n\n---\n 2 files changed\n\n" + first + second


@pytest.mark.parametrize("header", [
    b"@@ -1,2 +2147483648,2 @@",
    b"@@ -2147483648,2 +1,2 @@",
    b"@@ -1,18446744073709551617 +1,2 @@",
    b"@@ -1 +1,99999999999999999999999 @@",
])  # fmt: skip
def test_an_overflowing_hunk_header_in_a_later_section_is_refused(header: bytes) -> None:
    with pytest.raises(StackmgrError, match="overflow"):
        claims._images(_Patch(_two_file_patch(header + b"\n")))  # type: ignore[arg-type]


@pytest.mark.parametrize("header", [
    b"@@ -1,2 +1,2 @@ def f(x=12345678901234):",  # ten digits after the header, in the function context
    b"@@ -1234567,2 +1234567,2 @@",
])  # fmt: skip
def test_long_but_fitting_numbers_are_not_refused(header: bytes) -> None:
    assert len(claims._images(_Patch(_two_file_patch(header + b"\n")))) == 2  # type: ignore[arg-type]
