"""Catalogue row 58 on real file systems: a full disk (ENOSPC), a read-only one (EROFS), and, injected in-process,
a failing disk (EIO) and an exceeded quota (EDQUOT), under the store or under a tree and its `.git`.

A small tmpfs (2 MiB) is mounted for each test (as root; skipped where mounting is refused) and filled to its last
byte with a filler file. Every command then fails with one line naming the file system's mount point and what to
free (exit 3; `check` fails closed: exit 1 naming the tree, or 3 for a tree named on the command line), leaves no
temp file and nothing half-written, and once the filler is gone the store lints clean, `check` answers as
before and the same command succeeds.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Lab, Result, git, make_repo, run_stackmgr, tree_files
from tests.reliability.conftest import REBUILDABLE, assert_one_line_error, changed_paths, fingerprint

SIZE = "2m"


# --- a small file system ---------------------------------------------------------------------------------------


@dataclass
class Small:
    """A mounted 2 MiB tmpfs and its filler file."""

    mount: Path

    @property
    def filler(self) -> Path:
        return self.mount / "filler"

    def fill(self) -> None:
        """Write the filler until the file system is full to its last byte."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for chunk in (1 << 16, 1 << 12, 1 << 9, 1):
                while True:
                    try:
                        os.write(fd, b"\0" * chunk)
                    except OSError as exc:
                        assert exc.errno == errno.ENOSPC, exc
                        break
        finally:
            os.close(fd)
        assert os.statvfs(self.mount).f_bavail == 0

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def read_only(self) -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(self.mount)], check=True, capture_output=True)

    def read_write(self) -> None:
        subprocess.run(["mount", "-o", "remount,rw", str(self.mount)], check=True, capture_output=True)


@pytest.fixture
def small(tmp_path: Path) -> Iterator[Small]:
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("cannot mount a tmpfs here: not root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode(errors='replace').strip()}")
    try:
        yield Small(mount)
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)
        if os.path.ismount(mount):
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _lab(tmp_path: Path, small: Small, where: str) -> Lab:
    """A store and a tree, one of them (`where`: "store" or "tree") on the small file system."""
    tree_root = small.mount if where == "tree" else tmp_path
    store_root = small.mount if where == "store" else tmp_path
    tree = make_repo(tree_root / "vllm", {"README": "hello\n", "src/model.py": "def f():\n    return 1\n"})
    for hook in (tree / ".git" / "hooks").glob("*.sample"):
        hook.unlink()  # room on the small disk
    store = store_root / "store"
    assert run_stackmgr("init", str(store)).code == 0
    assert run_stackmgr("--store", str(store), "tree", "add", "vllm", str(tree)).code == 0
    return Lab(store, tree)


def _ok(result: Result) -> Result:
    assert result.code == 0, result
    return result


def _temp_files(*roots: Path) -> list[str]:
    return sorted(str(p) for root in roots for p in root.rglob("*") if p.name.endswith(".tmp"))


def _fails_naming(result: Result, code: int, mount: Path, *needles: str) -> None:
    assert result.code == code, result
    assert_one_line_error(result.err, str(mount), *needles)
    assert "internal error" not in result.err and "Traceback" not in result.err, result.err


# --- each command on a full disk -------------------------------------------------------------------------------


def _prepare(lab: Lab, command: str) -> tuple[str, ...]:
    """The state `command` needs (made while there is room), and its arguments."""
    (lab.tree / "README").write_text("hello, patched\n")
    _ok(lab.sm("save", "p1", "-t", "vllm", "-m", "readme", "--series", "replay"))
    _ok(lab.sm("reset", "vllm"))
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    _ok(lab.sm("save", "p2", "-t", "vllm", "-m", "model", "--series", "other"))
    _ok(lab.sm("reset", "vllm"))
    results = lab.store / "results"
    results.mkdir()
    (results / "probe.log").write_text("Output token throughput (tok/s): 107.77\n")
    if command == "save":
        (lab.tree / "NEW").write_text("new work\n")
        return ("save", "p3", "-t", "vllm", "-m", "new")
    if command == "save-update":
        (lab.tree / "README").write_text("hello, patched again\n")
        return ("save", "p1", "-t", "vllm", "-m", "readme", "--update")
    if command == "reset":
        _ok(lab.sm("apply", "replay"))
        return ("reset", "vllm")
    if command == "reset-force":
        (lab.tree / "README").write_text("unsaved\n")
        return ("reset", "vllm", "--force")
    if command == "apply":
        return ("apply", "replay")
    if command == "link":
        return ("link", "p1", str(results / "probe.log"), "--metric", "output_throughput=107.77tok/s")
    if command == "run":
        return ("run", "-t", "vllm", "--link", "p1", "--", "echo", "107.77")
    if command == "undo":
        _ok(lab.sm("apply", "replay"))
        return ("undo",)
    if command in ("check", "check-tree", "status"):
        (lab.tree / "README").write_text("edited\n")
        return {"check": ("check",), "check-tree": ("check", "vllm"), "status": ("status", "vllm")}[command]
    if command == "series-add":
        return ("series", "add", "replay", "p2")
    if command == "recover":
        (lab.tree / "README").write_text("unsaved\n")
        result = _ok(lab.sm("reset", "vllm", "--force"))
        rid = result.err.split("stackmgr recover ")[1].split("`")[0].split()[0]
        return ("recover", rid)
    raise AssertionError(command)


COMMANDS = ["save", "save-update", "reset", "reset-force", "apply", "link", "run", "undo", "check", "check-tree",
            "status", "series-add", "recover"]  # fmt: skip

# What may succeed on a full disk because it needs to write nothing there: (command, where the disk is full).
NEEDS_NO_WRITE = {("check", "store"), ("check-tree", "store"), ("status", "store"), ("link", "tree"),
                  ("series-add", "tree")}  # fmt: skip


def _after_baseline(lab: Lab, command: str) -> None:
    """For the read-only commands: an edit the private index has not seen, so looking needs a write (git hashes
    the new content) and cannot be answered from what is cached."""
    if command in ("check", "check-tree", "status"):
        (lab.tree / "README").write_text("edited once more\n")


def _nothing_left(lab: Lab, before: dict[str, tuple[int, bytes]]) -> None:
    """Nothing changed but rebuildable state; the journal holds at most a rolled-back record (with, for a tree
    moved and put back, its anchor and git's reflog of the two moves), and no marker."""
    journal = ("/.stackmgr/ops/", "/.git/refs/stackmgr/ops/", "/.git/logs/")
    changed = changed_paths(before, fingerprint(lab.store, lab.tree), (*REBUILDABLE, *journal))
    assert changed == []
    assert not (lab.store / ".stackmgr" / "ops" / "CURRENT").exists()
    for record in (lab.store / ".stackmgr" / "ops").glob("*/op"):
        if str(record.parent) not in before:
            assert b"\nstate\trolled-back\n" in record.read_bytes(), record.read_bytes()


def _expected_code(command: str, where: str) -> int:
    if command == "check":
        return 1  # a tree that could not be looked at fails the check, named on stderr (invariant 4)
    return 3


@pytest.mark.catalogue(58)
@pytest.mark.regression("a full disk was an internal error (OSError ENOSPC from the lock, the private index)")
@pytest.mark.parametrize("where", ["store", "tree"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_full_disk_fails_with_one_line_naming_it_and_changes_nothing(
    tmp_path: Path, small: Small, where: str, command: str
) -> None:
    """Row 58: the store, or a tree with its `.git`, on a file system with no byte free: every command fails with
    one line naming the mount point and what to do (exit 3; `check` exit 1), writes nothing there that is not
    rebuildable, leaves no temp file; once space is back the store lints clean, `check` answers as before and the
    same command succeeds. What needs no write on the full file system just works."""
    lab = _lab(tmp_path, small, where)
    args = _prepare(lab, command)
    checked = lab.sm("check").code
    _after_baseline(lab, command)
    before = fingerprint(lab.store, lab.tree)
    small.fill()
    result = lab.sm(*args)
    done = (command, where) in NEEDS_NO_WRITE and "stackmgr: " not in result.err
    if done:
        assert result.code == (checked if command.startswith("check") else 0), result
    else:
        _fails_naming(result, _expected_code(command, where), small.mount, "no space left on")
        _nothing_left(lab, before)
    assert _temp_files(lab.store, lab.tree) == []
    small.free()
    assert lab.sm("lint").code == 0, lab.sm("lint")
    assert lab.sm("check").code == checked
    if not done:
        again = lab.sm(*args)
        assert again.code == (checked if command.startswith("check") else 0), again
    assert _temp_files(lab.store, lab.tree) == []


@pytest.mark.catalogue(58)
@pytest.mark.parametrize("where", ["store", "tree"])
@pytest.mark.parametrize("command", ["save", "reset-force", "apply", "series-add", "check"])
def test_a_read_only_file_system_fails_with_one_line_naming_it(
    tmp_path: Path, small: Small, where: str, command: str
) -> None:
    """Row 58: the store or the tree on a file system remounted read-only: one line naming the mount point (exit
    3; `check` exit 1), nothing changed; read-write again, the command succeeds."""
    lab = _lab(tmp_path, small, where)
    args = _prepare(lab, command)
    checked = lab.sm("check").code
    _after_baseline(lab, command)
    before = fingerprint(lab.store, lab.tree)
    small.read_only()
    try:
        result = lab.sm(*args)
        done = (command, where) in NEEDS_NO_WRITE and "stackmgr: " not in result.err
        if done:
            assert result.code == (checked if command.startswith("check") else 0), result
        else:
            _fails_naming(result, _expected_code(command, where), small.mount, "read-only")
            _nothing_left(lab, before)
    finally:
        small.read_write()
    assert lab.sm("lint").code == 0
    assert lab.sm("check").code == checked
    if not done:
        assert lab.sm(*args).code == (checked if command.startswith("check") else 0)


@pytest.mark.catalogue(58)
@pytest.mark.regression("a rollback on the full disk that failed the operation rewrote files, and failed too")
@pytest.mark.parametrize(("where", "command"), [("store", "save"), ("store", "save-update"), ("store", "series-add"),
                                                ("store", "apply"), ("store", "reset"), ("tree", "save"),
                                                ("tree", "apply"), ("tree", "reset-force")])  # fmt: skip
def test_a_few_pages_free_run_out_mid_operation_and_it_is_rolled_back(
    tmp_path: Path, small: Small, where: str, command: str
) -> None:
    """Row 58: with a page or a few left, a command gets part way (its journal, a patch, a renamed series) and runs
    out later: for each amount of room until it succeeds, it is rolled back without needing room to do so (the
    saved file linked back, no record rewritten when nothing had changed): one line naming the file system,
    no marker, no temp file, nothing changed."""
    lab = _lab(tmp_path, small, where)
    args = _prepare(lab, command)
    if command == "save":
        args = (*args, "--series", "fresh")  # a patch, a new series, the applied state
    small.fill()
    size = os.path.getsize(small.filler)
    result = None
    for pages in range(1, 40):
        with open(small.filler, "r+b") as f:  # give back `pages` pages of the filler
            f.truncate(size - pages * 4096)
        before = fingerprint(lab.store, lab.tree)
        result = lab.sm(*args)
        if result.code == 0:
            break
        _fails_naming(result, 3, small.mount, "no space left on")
        assert "failed too" not in result.err
        _nothing_left(lab, before)
        assert _temp_files(lab.store, lab.tree) == []
        for record in (lab.store / ".stackmgr" / "ops").glob("*/op"):  # rolled back (checked): its page back
            if str(record.parent) not in before:
                shutil.rmtree(record.parent)
    assert result is not None and result.code == 0, result
    small.free()
    assert lab.sm("lint").code == 0
    assert lab.sm("check").code == 0


# --- EIO and EDQUOT, injected ----------------------------------------------------------------------------------


def _failing(monkeypatch: pytest.MonkeyPatch, name: str, code: int, only: Callable[[int], bool],
             times: int = 1 << 30) -> None:  # fmt: skip
    """os.NAME fails with `code` for the file descriptors `only` picks, the first `times` times."""
    real = getattr(os, name)
    left = [times]

    def fail(fd: int, *rest: object) -> object:
        if left[0] > 0 and only(fd):
            left[0] -= 1
            raise OSError(code, os.strerror(code))
        return real(fd, *rest)

    monkeypatch.setattr(os, name, fail)


def _is_dir(fd: int) -> bool:
    return stat.S_ISDIR(os.fstat(fd).st_mode)


@pytest.fixture
def stacked(lab: Lab) -> Lab:
    _prepare(lab, "save")
    assert lab.sm("check").code == 1
    return lab


@pytest.mark.catalogue(58)
@pytest.mark.parametrize("code", [errno.EIO, errno.EDQUOT], ids=["EIO", "EDQUOT"])
def test_a_failing_fsync_of_a_new_patch_is_one_line_and_nothing_is_left(
    stacked: Lab, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """Row 58: fsync of the new patch file fails (a failing disk; a quota, as NFS reports it at fsync): exit 3,
    one line naming the file and the mount point, no patch, no temp file, the change still unpreserved."""
    lab = stacked
    before = fingerprint(lab.store, lab.tree)
    faults = pytest.MonkeyPatch()  # its own: undoing it keeps the hermetic git environment (tests/conftest.py)
    _failing(faults, "fsync", code, lambda fd: not _is_dir(fd))
    result = lab.sm("save", "p3", "-t", "vllm", "-m", "new")
    faults.undo()
    words = "I/O error on" if code == errno.EIO else "disk quota exceeded on"
    from stackmgr.errors import mount_point

    _fails_naming(result, 3, Path(mount_point(str(lab.store))), words, "p3.patch")
    assert changed_paths(before, fingerprint(lab.store, lab.tree), REBUILDABLE) == []
    assert _temp_files(lab.store) == []
    assert lab.sm("check").code == 1
    _ok(lab.sm("save", "p3", "-t", "vllm", "-m", "new"))


@pytest.mark.catalogue(58)
def test_eio_syncing_the_directory_after_the_rename_is_rolled_back(
    stacked: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row 58: the rename is done, then the directory's fsync fails (EIO): the journal puts the old series file
    back, one line names the failure, and nothing of the operation is left."""
    lab = stacked
    series = (lab.store / "series" / "replay").read_bytes()
    before = fingerprint(lab.store, lab.tree)
    faults = pytest.MonkeyPatch()  # its own: undoing it keeps the hermetic git environment (tests/conftest.py)
    _failing(faults, "fsync", errno.EIO, _is_dir, times=1)
    result = lab.sm("series", "add", "replay", "p2")
    faults.undo()
    assert result.code == 3, result
    assert_one_line_error(result.err, "I/O error on", "series/replay")
    assert (lab.store / "series" / "replay").read_bytes() == series
    _nothing_left(lab, before)
    _ok(lab.sm("series", "add", "replay", "p2"))


@pytest.mark.catalogue(58)
def test_eio_writing_the_lock_holder_does_not_stop_a_check(stacked: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """Row 58: the lock's holder line is for messages only; a failed write of it is no reason to stop a command
    that can do its work (here `check`, which writes nothing else)."""
    lab = stacked
    _failing(monkeypatch, "pwrite", errno.ENOSPC, lambda fd: True)
    assert lab.sm("check").code == 1


@pytest.mark.regression("an OSError a write site did not map was an internal error")
def test_the_cli_maps_any_disk_oserror_to_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The safety net (cli/entry.py): an unmapped OSError with ENOSPC, EDQUOT, EROFS or EIO is one line naming
    the file's file system, exit 3; any other OSError stays an internal error (a bug to report)."""
    import stackmgr.cli.entry as entry
    from stackmgr.errors import mount_point

    target = tmp_path / "somewhere" / "file"
    for code, words in ((errno.ENOSPC, "no space left on"), (errno.EDQUOT, "disk quota exceeded on"),
                        (errno.EROFS, "is mounted read-only"), (errno.EIO, "I/O error on")):  # fmt: skip

        def boom(argv: list[str], code: int = code) -> int:
            raise OSError(code, os.strerror(code), str(target))

        monkeypatch.setattr(entry, "_fast", boom)
        result = run_stackmgr("check")
        assert result.code == 3, result
        assert_one_line_error(result.err, words, mount_point(str(target)), str(target))


@pytest.mark.catalogue(58)
@pytest.mark.regression("a switch on a nearly full disk wrote some files, then failed: a half-switched tree")
@pytest.mark.parametrize("command", ["apply", "undo"])
def test_a_switch_with_no_room_for_its_files_is_refused_before_any_file_changes(
    tmp_path: Path, small: Small, command: str
) -> None:
    """Row 58: room for the snapshot and the journal, not for the files the switch writes (a big file the series
    adds): `read-tree -u` would write some files and then fail to write the index, so the move is refused
    before it starts: one line naming the tree's file system, every file as it was."""
    lab = _lab(tmp_path, small, "tree")
    (lab.tree / "README").write_text("hello, patched\n")
    (lab.tree / "big.txt").write_text("".join(f"line {i % 10}\n" for i in range(60_000)))  # 420 KB, packs small
    _ok(lab.sm("save", "big", "-t", "vllm", "-m", "big", "--series", "S"))
    _ok(lab.sm("reset", "vllm"))
    if command == "undo":
        _ok(lab.sm("apply", "S"))
        _ok(lab.sm("reset", "vllm"))
    args = ("apply", "S") if command == "apply" else ("undo",)
    assert lab.sm("check").code == 0
    files = tree_files(lab.tree)
    status = git(lab.tree, "status", "--porcelain", "--untracked-files=all")
    small.fill()
    with open(small.filler, "r+b") as f:  # room for the journal's refs and a copy of the index, not for big.txt
        f.truncate(os.path.getsize(small.filler) - 128 * 1024)
    result = lab.sm(*args)
    _fails_naming(result, 3, small.mount, "no space left on")
    assert tree_files(lab.tree) == files
    assert git(lab.tree, "status", "--porcelain", "--untracked-files=all") == status
    small.free()
    assert lab.sm("check").code == 0
    _ok(lab.sm(*args))
    assert (lab.tree / "big.txt").exists()


@pytest.mark.catalogue(58)
@pytest.mark.regression("seeding the private index on a full .git was an internal error, even for check")
@pytest.mark.parametrize("args", [("check",), ("check", "vllm"), ("status", "vllm")], ids=["check", "check-tree",
                                                                                            "status-tree"])
def test_seeding_the_private_index_on_a_full_git_dir_fails_closed(
    tmp_path: Path, small: Small, args: tuple[str, ...]
) -> None:
    """Row 58: no private index yet (a fresh clone, or one removed) and no room in `.git` to seed it: `check` fails
    closed (exit 1, one line naming the tree and the mount point; 3 for a tree named on the command line), and no
    seed file is left half-copied."""
    lab = _lab(tmp_path, small, "tree")
    private = lab.tree / ".git" / "stackmgr"
    for name in ("index", "index.sig"):
        (private / name).unlink(missing_ok=True)
    small.fill()
    result = lab.sm(*args)
    _fails_naming(result, 1 if args == ("check",) else 3, small.mount, "no space left on", str(private / "index"))
    assert not (private / "index").exists() and not (private / "index.seed").exists()
    small.free()
    assert lab.sm(*args).code == 0


@pytest.mark.catalogue(58)
@pytest.mark.parametrize(("stderr", "code", "names"), [
    (b"fatal: sha1 file '{top}/.git/priv.lock' write error. Out of diskspace\n", errno.ENOSPC, "/.git/priv.lock"),
    (b"fatal: unable to write loose object file: No space left on device\n", errno.ENOSPC, "/.git"),
    (b"error: unable to create temporary file: Read-only file system\nfatal: Unable to add b to database\n",
     errno.EROFS, "/.git"),
    (b"fatal: Unable to create '{top}/.git/index.lock': Read-only file system\n", errno.EROFS, "/.git/index.lock"),
    (b"error: unable to write file big\nfatal: Input/output error\n", errno.EIO, "/.git"),
    (b"fatal: unable to write sha1 file: Disk quota exceeded\n", errno.EDQUOT, "/.git"),
], ids=["out-of-diskspace", "loose-object", "ro-object", "ro-lock", "eio", "edquot"])  # fmt: skip
def test_git_saying_its_disk_failed_is_a_disk_error(tmp_path: Path, stderr: bytes, code: int, names: str) -> None:
    """Row 58: git's own wording for a failed write (as git 2.x prints it under LC_ALL=C, seen on a full and a
    read-only tmpfs) is read as the file system's failure, naming the file git names, else the repository; any
    other failure stays git's."""
    from stackmgr.errors import DiskError
    from stackmgr.git.runner import raise_disk_failure

    top = str(make_repo(tmp_path / "r"))
    with pytest.raises(DiskError) as caught:
        raise_disk_failure(stderr.replace(b"{top}", top.encode()), top, None)
    assert caught.value.errno == code
    assert caught.value.path == top + names
    raise_disk_failure(b"error: patch failed: README:1\nerror: README: patch does not apply\n", top, None)
