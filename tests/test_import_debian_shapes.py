"""Shapes of real Debian quilt patches that quilt (GNU patch) applies and `import` must take the same way: each
test's tree is checked against `quilt push -a` of the same series where quilt is installed (CI installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Lab, commit
from tests.test_import import imp


def _series(tmp_path: Path, patches: dict[str, bytes]) -> Path:
    quilt = tmp_path / "debian" / "patches"
    quilt.mkdir(parents=True)
    for name, data in patches.items():
        (quilt / name).write_bytes(data)
    (quilt / "series").write_text("".join(f"{name}\n" for name in patches))
    return quilt


def _imported_and_applied_as_quilt_does(lab: Lab, tmp_path: Path, quilt: Path) -> str:
    """Import the series, apply it, and check the tree against quilt's; the tree id and what import said."""
    result = imp(lab, str(quilt), "--series", "pkg")
    assert result.code == 0, result.err
    applied = lab.sm("apply", "pkg")
    assert applied.code == 0, applied.err
    wanted = lab.worktree_id()
    assert lab.sm("reset").code == 0
    if shutil.which("quilt"):
        env = dict(os.environ, QUILT_PATCHES=str(quilt), QUILT_PC=str(tmp_path / "pc"))
        subprocess.run(["quilt", "--quiltrc", "-", "push", "-a", "-q"], cwd=lab.tree, env=env, check=True,
                       capture_output=True, stdin=subprocess.DEVNULL)  # fmt: skip
        assert lab.worktree_id() == wanted
    return wanted + "\n" + result.err


TRIMMED = b"""From: A U Thor <a@example.com>
Subject: [PATCH] fix a (backport: the change to b dropped)

---
 a.txt | 2 +-
 b.txt | 2 +-
 2 files changed, 2 insertions(+), 2 deletions(-)

diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-one
+ONE
"""


@pytest.mark.regression("a security backport that dropped a file of the upstream mail and kept its diffstat was "
                        "refused as truncated (jq, sqlite3, cyrus-sasl2, cdparanoia in Debian)")  # fmt: skip
def test_a_quilt_patch_whose_diffstat_lists_files_it_dropped_is_applied(lab: Lab, tmp_path: Path) -> None:
    commit(lab.tree, {"a.txt": "one\n", "b.txt": "two\n"}, "two files")
    before = lab.worktree_id()
    said = _imported_and_applied_as_quilt_does(lab, tmp_path, _series(tmp_path, {"CVE-1.patch": TRIMMED}))
    assert said.split("\n")[0] != before


SQUASHED = b"""From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001
From: A U Thor <a@example.com>
Subject: [PATCH] first upstream fix

From 2222222222222222222222222222222222222222 Mon Sep 17 00:00:00 2001
From: A U Thor <a@example.com>
Subject: [PATCH] second upstream fix

---
diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-one
+ONE
diff --git a/b.txt b/b.txt
--- a/b.txt
+++ b/b.txt
@@ -1 +1 @@
-two
+TWO
"""


@pytest.mark.regression("a quilt patch squashing two upstream commits' headers above one diff was split into "
                        "mails, the first 'not a patch' (libwebp's CVE-2023-4863.patch, lcms2)")  # fmt: skip
def test_a_quilt_patch_with_two_mail_headers_is_one_patch(lab: Lab, tmp_path: Path) -> None:
    commit(lab.tree, {"a.txt": "one\n", "b.txt": "two\n"}, "two files")
    _imported_and_applied_as_quilt_does(lab, tmp_path, _series(tmp_path, {"CVE-2023-4863.patch": SQUASHED}))
    assert [p.name for p in (lab.store / "patches").glob("*.patch")] == ["CVE-2023-4863.patch"]


def test_a_quilt_series_listing_no_patch_is_refused_in_one_line_and_makes_no_series(lab: Lab, tmp_path: Path) -> None:
    quilt = tmp_path / "debian" / "patches"
    quilt.mkdir(parents=True)
    (quilt / "series").write_text("# nothing to patch in this release\n")
    result = imp(lab, str(quilt), "--series", "pkg")
    assert result.code == 3 and result.out == ""
    assert result.err.startswith(f"stackmgr: nothing to import: the quilt series in {quilt} lists no patch; no series")
    assert result.err.count("\n") == 1 and not (lab.store / "series" / "pkg").exists()
