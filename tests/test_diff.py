"""`stackmgr diff`: a patch's diff as saved (the top applied one by default, `diff PATCH` any), and `diff -z` for
what the tree holds on top of its applied patches that no patch keeps yet, as quilt's `diff [-z]` and StGit's
`stg diff`/`stg show` do. Read-only: the tree, its index and HEAD are the same bytes after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import Lab, git, git_text, one_line_error


def diff_of(lab: Lab, patch: str) -> bytes:
    """The diff part of patches/PATCH.patch: from the first `diff --git` line to the end, byte for byte."""
    data = (lab.store / "patches" / f"{patch}.patch").read_bytes()
    return data[data.index(b"\ndiff --git ") + 1 :]


def raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def save_fix_and_notes(lab: Lab) -> None:
    """Series S on tree vllm: `fix` (an edit), then `notes` (README grows, a binary file, CRLF text); both applied."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix: return 2").code == 0
    (lab.tree / "README").write_text("hello\nand more\n")
    (lab.tree / "weights.bin").write_bytes(bytes(range(256)) * 4)
    (lab.tree / "notes.txt").write_bytes(b"windows\r\nline endings\r\n")
    assert lab.sm("save", "notes", "--series", "S", "-m", "notes").code == 0


def index_and_tree(lab: Lab) -> tuple[bytes, str, str]:
    """What a read-only command must leave as it was: the real index's bytes, HEAD, the working tree's id."""
    return (lab.tree / ".git" / "index").read_bytes(), git_text(lab.tree, "rev-parse", "HEAD"), lab.worktree_id()


def test_diff_with_no_patch_prints_the_top_applied_patch_as_saved(lab: Lab) -> None:
    save_fix_and_notes(lab)
    before = index_and_tree(lab)

    shown = lab.sm("diff")

    assert shown.code == 0, shown.err
    assert raw(shown.out) == diff_of(lab, "notes")  # binary hunk and CRLF lines included
    assert b"GIT binary patch" in raw(shown.out)
    assert index_and_tree(lab) == before


def test_diff_patch_prints_any_patch_applied_or_not(lab: Lab) -> None:
    save_fix_and_notes(lab)
    assert lab.sm("pop").code == 0  # notes is no longer applied

    assert raw(lab.sm("diff", "notes").out) == diff_of(lab, "notes")
    assert raw(lab.sm("diff", "fix.patch").out) == diff_of(lab, "fix")  # NAME or NAME.patch, as quilt takes
    assert raw(lab.sm("diff").out) == diff_of(lab, "fix")  # the top is now fix


def test_diff_output_is_a_patch_git_applies_to_the_base(lab: Lab, tmp_path: Path) -> None:
    """`stackmgr diff P > p.diff; git apply p.diff` on a checkout of the base: the raw bytes, through a real pipe."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    (lab.tree / "latin1.txt").write_bytes(b"caf\xe9\r\n")  # not UTF-8, CRLF: bytes end to end
    assert lab.sm("save", "fix", "-m", "fix").code == 0
    assert lab.sm("reset").code == 0

    proc = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), "diff", "fix"],
                          capture_output=True, env=os.environ.copy())  # fmt: skip

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == diff_of(lab, "fix")
    (tmp_path / "fix.diff").write_bytes(proc.stdout)
    git(lab.tree, "apply", "--check", str(tmp_path / "fix.diff"))
    git(lab.tree, "apply", str(tmp_path / "fix.diff"))
    assert (lab.tree / "latin1.txt").read_bytes() == b"caf\xe9\r\n"


def test_diff_unsaved_shows_only_what_no_patch_keeps_and_touches_nothing(lab: Lab) -> None:
    save_fix_and_notes(lab)
    (lab.tree / "README").write_text("hello\nand more\nand an unsaved line\n")  # on top of notes' README
    (lab.tree / "todo.txt").write_text("untracked, not saved yet\n")
    git(lab.tree, "add", "README")  # something staged: the user's index must keep exactly this
    before = index_and_tree(lab)

    shown = lab.sm("diff", "-z")

    assert shown.code == 0, shown.err
    out = raw(shown.out)
    assert out.startswith(b"diff --git a/README b/README\n")
    assert b"+and an unsaved line\n" in out and b"-hello\n" not in out  # only what is on top of the patches
    assert b"diff --git a/todo.txt b/todo.txt\nnew file mode 100644\n" in out  # an untracked file, as save takes it
    assert b"src/model.py" not in out and b"weights.bin" not in out  # what the applied patches keep
    assert index_and_tree(lab) == before
    assert lab.sm("diff", "--unsaved").out == shown.out
    # It is exactly what lies on top: reversed, it applies to the working tree.
    git(lab.tree, "apply", "--check", "-R", input=out)


def test_diff_unsaved_with_no_series_is_everything_save_would_take(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 3\n")
    (lab.tree / "new.txt").write_text("new\n")
    before = index_and_tree(lab)

    out = raw(lab.sm("diff", "-z").out)

    assert b"diff --git a/src/model.py b/src/model.py\n" in out and b"diff --git a/new.txt b/new.txt\n" in out
    assert index_and_tree(lab) == before


def test_diff_unsaved_with_nothing_unsaved_prints_nothing(lab: Lab) -> None:
    save_fix_and_notes(lab)
    shown = lab.sm("diff", "-z")
    assert shown.code == 0 and shown.out == ""
    assert "nothing" in shown.err


def test_diff_stat_is_a_diffstat(lab: Lab) -> None:
    save_fix_and_notes(lab)

    top = lab.sm("diff", "--stat")
    fix = lab.sm("diff", "fix", "--stat")

    assert top.code == 0, top.err
    assert "README" in top.out and "weights.bin" in top.out and "3 files changed" in top.out
    assert "diff --git" not in top.out
    assert [line.split() for line in fix.out.splitlines()] == [
        ["src/model.py", "|", "2", "+-"],
        ["1", "file", "changed,", "1", "insertion(+),", "1", "deletion(-)"],
    ]


def test_diff_json(lab: Lab) -> None:
    save_fix_and_notes(lab)

    data = json.loads(lab.sm("--json", "diff", "fix").out)

    assert data["schema"] == 1
    assert (data["patch"], data["tree"], data["unsaved"]) == ("fix", "vllm", False)
    assert data["diff"].encode() == diff_of(lab, "fix")
    assert data["stat"]["files"] == 1 and data["stat"]["insertions"] == 1 and data["stat"]["deletions"] == 1
    unsaved = json.loads(lab.sm("diff", "-z", "--json").out)
    assert (unsaved["patch"], unsaved["unsaved"], unsaved["diff"]) == (None, True, "")


def test_diff_json_of_bytes_that_are_not_utf8_is_base64(lab: Lab) -> None:
    import base64

    (lab.tree / "latin1.txt").write_bytes(b"caf\xe9\n")
    assert lab.sm("save", "latin", "-m", "latin-1 text").code == 0

    data = json.loads(lab.sm("diff", "latin", "--json").out)

    assert data["diff"] is None
    assert base64.b64decode(data["diff_base64"]) == diff_of(lab, "latin")


def test_diff_with_nothing_applied_is_one_line_saying_what_to_do(lab: Lab) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "-m", "fix").code == 0  # saved, but no series applied

    refused = lab.sm("diff")

    one_line_error(refused, 3)
    assert "no patch applied" in refused.err and "diff PATCH" in refused.err and "-z" in refused.err


def test_diff_with_the_series_popped_is_one_line(lab: Lab) -> None:
    save_fix_and_notes(lab)
    assert lab.sm("pop", "-a").code == 0

    refused = lab.sm("diff")

    one_line_error(refused, 3)
    assert "no patch applied" in refused.err


def test_diff_of_an_unknown_patch_is_refused_as_show_refuses_it(lab: Lab) -> None:
    save_fix_and_notes(lab)

    refused = lab.sm("diff", "fixx")
    shown = lab.sm("show", "fixx")

    one_line_error(refused, 2)
    assert refused.code == shown.code
    assert "no patch named fixx" in refused.err
    one_line_error(lab.sm("diff", "../outside"), 2)


def test_diff_patch_with_unsaved_is_a_usage_error(lab: Lab) -> None:
    save_fix_and_notes(lab)
    refused = lab.sm("diff", "fix", "-z")
    one_line_error(refused, 2)
    assert "give PATCH or -z, not both" in refused.err


def test_diff_never_reads_through_a_link_a_pull_brought(lab: Lab, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("diff --git a/x b/x\nthe key\n")
    (lab.store / "patches").mkdir(exist_ok=True)
    (lab.store / "patches" / "evil.patch").symlink_to(secret)

    refused = lab.sm("diff", "evil")

    one_line_error(refused, 3)
    assert "the key" not in refused.out + refused.err


def test_diff_is_listed_in_help(lab: Lab) -> None:
    shown = lab.sm("diff", "--help")
    assert shown.code == 0 and "--unsaved" in shown.out and "--stat" in shown.out


def _on_a_terminal(lab: Lab, *args: str, **env: str) -> bytes:
    """What `stackmgr diff ARGS` writes to a terminal (a pseudo-terminal as its stdout)."""
    import pty

    master, slave = pty.openpty()
    argv = [sys.executable, "-m", "stackmgr", "--store", str(lab.store), "diff", *args]
    proc = subprocess.Popen(argv, stdout=slave, stderr=subprocess.PIPE, env={**os.environ, "TERM": "xterm", **env})
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait() == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks)


def test_diff_is_coloured_on_a_terminal_only_and_never_with_no_color(lab: Lab) -> None:
    save_fix_and_notes(lab)

    coloured = _on_a_terminal(lab, "fix")
    plain = _on_a_terminal(lab, "fix", NO_COLOR="1")

    assert b"\x1b[32m+    return 2" in coloured and b"\x1b[31m-    return 1" in coloured
    assert b"\x1b[" not in plain and b"+    return 2" in plain
    assert b"\x1b[" not in raw(lab.sm("diff", "fix").out)  # piped: the patch's bytes
