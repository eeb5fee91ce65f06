"""The temporary-index technique, in one class: every index stackmgr reads or writes besides looking at the
user's own (the private snapshot index in `.git/stackmgr/`, frozen copies, scratch indexes that rebuild or verify
a state), and the one sanctioned way to touch a working tree: a two-way `read-tree -m -u` from the state just
checked, which refuses per file if anything moved since.

Git runs through runner.py (same pinned configuration, environment and bytes contract).
"""

from __future__ import annotations

import os

from stackmgr.errors import DiskError, StackmgrError, disk_error
from stackmgr.git.checked import BadGitValue, patch_file_for_git, path_bytes, revision
from stackmgr.git.process import Process
from stackmgr.git.runner import (
    DIFF_FLAGS,
    finish,
    meanwhile_run,
    parse_raw,
    pathspec,
    raise_disk_failure,
    run,
    run_rc,
    start,
    zsplit,
)  # fmt: skip
from stackmgr.store.fs import read_cache, write_cache
from stackmgr.types import GITLINK_MODE, Change, TreeId, show_path

TYPE_CHECKING = False  # mypy treats this as true; `collections.abc` stays out of `check`'s start-up
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from stackmgr.git.repo import Repo


_made: list[None] = []  # scratch indexes made by this process


class TempIndex:
    """A private index for one tree, kept in `.git/stackmgr/` so later snapshots are warm.

    It is seeded once from the real index (stat data, sparse and intent-to-add entries) and then owned by
    stackmgr; the user's real index is never written by it.
    """

    def __init__(self, repo: Repo, name: str = "index") -> None:
        self.repo = repo
        self.path = os.path.join(repo.stackmgr_dir, name)

    @classmethod
    def scratch(cls, repo: Repo, purpose: str) -> TempIndex:
        """A new, empty throwaway index (removed with `discard`), its own even beside another thread's."""
        os.makedirs(repo.stackmgr_dir, exist_ok=True)
        _made.append(None)  # list.append is atomic: a number no other scratch index of this process has
        return cls(repo, f"{purpose}-{len(_made)}.{os.getpid()}.index")

    def seed(self) -> None:
        """Make sure the index exists; copy2 keeps the real index's mtime, so racy-git checks stay sound.

        It is seeded again when the sparse-checkout setup changed since (its skip-worktree bits came from the real
        index then: stale bits would hide edits in paths that are no longer sparse)."""
        signature = _sparse_signature(self.repo)
        if os.path.exists(self.path):
            if read_cache(self.path + ".sig") == signature:
                return
            self.discard()
        os.makedirs(self.repo.stackmgr_dir, exist_ok=True)
        write_cache(self.path + ".sig", signature)
        real = os.path.join(self.repo.git_dir, "index")
        if os.path.exists(real):
            import shutil

            tmp = self.path + ".seed"
            try:
                shutil.copy2(real, tmp)
                if any(name.startswith("sharedindex.") for name in os.listdir(self.repo.git_dir)):
                    # a split real index: the copy is made whole, never to need a file git may expire
                    run(self.repo.top, ["update-index", "--no-split-index"], index=tmp)
                os.replace(tmp, self.path)
            except OSError as exc:
                _remove(tmp)
                raise _index_write_error(exc, self.path) from None
            except BaseException:
                _remove(tmp)
                raise
        else:
            self.read_tree("HEAD")

    def discard(self) -> None:
        """Forget the private index (and a lock a killed git left on it: stackmgr's tree lock is held here)."""
        for path in (self.path, self.path + ".lock"):
            if os.path.exists(path):
                os.unlink(path)

    def __enter__(self) -> TempIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        """`with TempIndex.scratch(repo, purpose) as index:` discards it however the block ends."""
        self.discard()

    def set_entries(self, entries: dict[bytes, tuple[str, str] | None]) -> None:
        """Set paths to (mode, blob), or remove them where None (removals first: a file may become a directory;
        by name, as a null id's length depends on the repository's hash)."""
        for path, e in entries.items():  # NUL-separated records: a NUL, a bad mode or id would forge another
            path_bytes(path)
            if e is not None and not (len(e[0]) == 6 and not e[0].strip("01234567")):
                raise BadGitValue(f"'{e[0]}' is not a file mode", "the patch names a mode git never writes")
            if e is not None:
                self.repo.object_id(e[1])
        gone = [path for path, e in entries.items() if e is None]
        put = b"".join(f"{e[0]} {e[1]}\t".encode() + path + b"\0" for path, e in entries.items() if e is not None)
        if gone and not put:
            run(self.repo.top, ["update-index", "-z", "--force-remove", "--stdin"], index=self.path,
                stdin=b"".join(path + b"\0" for path in gone))  # fmt: skip
        elif put:  # one call: a mode-0 line removes a path, its null id as long as the blobs' ids
            null = "0" * len(next(e[1] for e in entries.values() if e is not None))
            removals = b"".join(f"0 {null}\t".encode() + path + b"\0" for path in gone)
            run(self.repo.top, ["update-index", "-z", "--index-info"], index=self.path, stdin=removals + put)

    def entries(self) -> dict[bytes, tuple[str, str]]:
        """What this index holds: path -> (mode, blob)."""
        held = {}
        for rec in zsplit(run(self.repo.top, ["ls-files", "-s", "-z"], index=self.path)):
            meta, path = rec.split(b"\t", 1)
            mode, blob, _stage = meta.decode().split(" ")
            held[path] = (mode, blob)
        return held

    def read_tree(self, treeish: str) -> None:
        run(self.repo.top, ["read-tree", revision(treeish)], index=self.path)

    def start_read_tree(self, treeish: str) -> Process:
        """`read_tree`, started: `finish` it before the next use of this index."""
        return start(self.repo.top, ["read-tree", revision(treeish)], index=self.path)

    def start_status(self) -> Process:
        # `--no-ahead-behind`: only `branch.oid` is read, so no walk of the commits between HEAD and its upstream.
        # status.showUntrackedFiles=all: an untracked cache (when the user has core.untrackedCache on) is kept for
        # `-uall` in this index; made for git's default `-unormal`, git would never use it for `-uall`.
        args = ["-c", "status.showUntrackedFiles=all", "status", "--porcelain=v2", "--branch", "--no-ahead-behind",
                "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=none"]  # fmt: skip
        return start(self.repo.top, args, index=self.path)

    def update(self, add: Sequence[bytes], remove: Sequence[bytes]) -> None:
        """Record the working-tree state of `add` (hashing them into the object store) and drop `remove`."""
        if remove:
            run(self.repo.top, ["update-index", "-z", "--force-remove", "--stdin"], index=self.path,
                stdin=b"".join(p + b"\0" for p in remove))  # fmt: skip
        if add:
            run(self.repo.top, ["update-index", "-z", "--add", "--remove", "--replace", "--stdin"], index=self.path,
                stdin=b"".join(p + b"\0" for p in add))  # fmt: skip

    def changes_against(self, commit: str) -> list[Change]:
        out = run(self.repo.top, ["diff-index", "--cached", "-r", "-z", "--raw", "--no-renames", "--full-index",
                                  "--ignore-submodules=none", revision(commit)], index=self.path)  # fmt: skip
        return parse_raw(out)

    def eol_info(self, paths: Sequence[bytes]) -> list[bytes]:
        """`ls-files --eol` records (`i/lf w/crlf attr/…\tpath`) of `paths` as this index holds them."""
        return zsplit(run(self.repo.top, ["ls-files", "--eol", "-z", *pathspec(paths)], index=self.path))

    def write_tree(self) -> TreeId:
        return self.repo.write_tree(self.path)

    def freeze(self, purpose: str = "frozen") -> TempIndex:
        """A copy of this index that no later snapshot will touch (the caller removes it with `discard`)."""
        frozen = TempIndex(self.repo, f"{purpose}.{os.getpid()}.index")
        try:
            with open(self.path, "rb") as src, open(frozen.path, "wb") as dst:
                dst.write(src.read())
        except OSError as exc:
            _remove(frozen.path)
            raise _index_write_error(exc, frozen.path) from None
        return frozen

    def install_as(self, other: TempIndex) -> None:
        """Make `other` a copy of this index (an atomic rename of a fresh copy)."""
        copy = self.freeze("install")
        try:
            os.replace(copy.path, other.path)
        except OSError as exc:
            _remove(copy.path)
            raise _index_write_error(exc, other.path) from None

    def switch(self, old: str, new: str, changes: list[Change] | None = None) -> None:
        """Move the working tree from tree `old` (what this index describes, as checked) to tree `new`.

        A two-way `read-tree -m -u`: before writing anything git refuses if a file it would touch differs from
        this index (it changed since the check) or an untracked file is in the way; ignored files in the way are
        refused here first (git would overwrite them). Files in neither tree are never touched. `changes`, when
        given, is the raw diff old → new (asked for earlier, alongside other work)."""
        if changes is None:
            changes = parse_raw(finish(start_tree_diff(self.repo, old, new))[1])
        from stackmgr.git.room import room_for_switch, things_in_the_way  # only when a tree moves

        in_way = things_in_the_way(self.repo, changes)
        if in_way:
            from stackmgr.errors import listed
            from stackmgr.output import plural

            raise WorkingTreeMoved(f"untracked or ignored files in the way ({plural(len(in_way), 'path')})",
                                   listed([show_path(p) for p in in_way]))  # fmt: skip
        room_for_switch(self.repo, changes, self.path)
        gitlinks = [c for c in changes if GITLINK_MODE in (c.old_mode, c.new_mode)]
        if gitlinks:  # their checkouts move with their pointers (git/submodules.py): refused here, or moved below
            from stackmgr.git.submodules import follow_pointers, refuse_unmovable

            refuse_unmovable(self.repo, gitlinks)
        # Never into submodules (submodule.recurse): not stackmgr's. Over 100 files: a writer per core (1.4x on 2).
        switch = ["-c", "checkout.workers=0", "read-tree", "--no-recurse-submodules", "-m", "-u", revision(old),
                  revision(new)]  # fmt: skip
        try:
            rc, _, err = run_rc(self.repo.top, switch, index=self.path)
        except DiskError as exc:  # filled up since room_for_switch: git may have written some files already
            raise StackmgrError(f"{exc.message}: the switch of {self.repo.top} failed part way (git writes files "
                                "first, the index last)", "free some space there, then `stackmgr status`: what it "
                                "overwrote was checked as preserved first") from None  # fmt: skip
        if rc != 0:
            raise WorkingTreeMoved(_refusal(err))
        if gitlinks:
            follow_pointers(self.repo, self.path, (old, new), gitlinks)

    def hidden_paths(self, changes: list[Change]) -> list[bytes]:
        """Paths a move along `changes` (from what this index holds) would record without writing them. With
        sparse checkout on, `read-tree -u` decides that from the patterns for every path it writes (a path this
        index marks skip-worktree counts too: the patterns may have been edited without a reapply); without it,
        git writes every path, skip-worktree bit or not. Deletions are fine: a hidden file is not on disk."""
        written = [c for c in changes if c.new_mode != "000000"]
        inside = sparse_checkout(self.repo) if written else None
        if inside is None:
            return []
        hidden = {c.path for c in written if not inside(c.path, GITLINK_MODE in (c.old_mode, c.new_mode))}
        kept = {c.path for c in written if c.old_mode != "000000"} - hidden
        if kept:  # the whole index: a long list of paths could overflow the command line
            out = run(self.repo.top, ["ls-files", "-t", "-z"], index=self.path)
            hidden.update(rec[2:] for rec in zsplit(out) if rec[:2] == b"S " and rec[2:] in kept)
        return sorted(hidden)

    def retarget(
        self, old: str, new: str, *, keep: set[bytes] | None = None, changes: list[Change] | None = None
    ) -> None:
        """This index from tree `old` to tree `new` without touching files: only the entries that differ are
        rewritten (`update-index --index-info`), so all others keep their stat data. Paths in `keep` stay as
        `old` has them; `changes`, when given, is the raw diff old → new already asked for."""
        if old == new:
            return
        if changes is None:
            changes = parse_raw(finish(start_tree_diff(self.repo, old, new))[1])
        changes = [c for c in changes if c.path not in (keep or ())]
        gone = [c for c in changes if c.new_mode == "000000"]  # removals first: a file may become a directory
        info = b"".join(b"0 " + c.old_blob.encode() + b"\t" + c.path + b"\0" for c in gone)
        info += b"".join(
            f"{c.new_mode} {c.new_blob}\t".encode() + c.path + b"\0" for c in changes if c.new_mode != "000000"
        )
        run(self.repo.top, ["update-index", "-z", "--index-info"], index=self.path, stdin=info)

    def apply(
        self, *patch_paths: str, three_way: bool = False, meanwhile: Callable[[], object] | None = None, strip: int = 1
    ) -> tuple[bool, str]:
        """Apply patches strictly to this index, in order (no fuzz, no recount, no whitespace fixing). One git
        call takes them all: each sees the result of the ones before it. `meanwhile` runs while git works."""
        return _apply(
            self.repo.top, self.path, *patch_paths, three_way=three_way, meanwhile=meanwhile, strip=strip
        )

    def apply_bytes(self, patch: bytes) -> tuple[bool, str]:
        """`apply` of a patch given as bytes (git reads it from its stdin)."""
        return _apply(self.repo.top, self.path, data=patch)

    def diagnose(self, patch_path: str) -> str:
        """Why a patch that failed here fails: already applied, or would apply with --3way, or neither."""
        top, path = self.repo.top, patch_file_for_git(patch_path)
        if run_rc(top, ["apply", "--cached", "--check", "-R", "-p1", path], index=self.path)[0] == 0:
            return "it is already applied (it reverse-applies)"
        rc, out, err = run_rc(top, ["apply", "--cached", "--check", "--3way", "-p1", path], index=self.path)
        if rc == 0 and b"with conflicts" not in out + err:
            return "it would apply with --3way"
        return "--3way would conflict too" if rc == 0 else "no 3-way merge is possible (blobs missing)"

    def format_diff(self, base: str, paths: Sequence[bytes] = ()) -> bytes:
        """What `git format-patch` puts below `---` (diffstat, summary, a blank line, then the binary-safe,
        full-index patch), from commit `base` to this index; empty when nothing differs."""
        return finish(self.start_format_diff(base, paths))[1]

    def start_format_diff(self, base: str, paths: Sequence[bytes] = ()) -> Process:
        args = ["diff-index", "--cached", "-r", "-p", "--stat=72", "--summary", *DIFF_FLAGS, revision(base),
                *pathspec(paths)]  # fmt: skip
        return start(self.repo.top, args, index=self.path)

    def start_diff_raw(self, base: str, paths: Sequence[bytes] = ()) -> Process:
        args = ["diff-index", "--cached", "-r", "-z", "--raw", "--no-renames", "--full-index", revision(base),
                *pathspec(paths)]  # fmt: skip
        return start(self.repo.top, args, index=self.path)


def _apply(
    top: str,
    index: str,
    *patch_paths: str,
    three_way: bool = False,
    meanwhile: Callable[[], object] | None = None,
    strip: int = 1,
    data: bytes | None = None,
) -> tuple[bool, str]:
    """Strictly apply patch files (or `data`) in order to a (temporary) index: no fuzz, recount, whitespace fixing."""
    extra = ["--3way"] if three_way else []
    paths = [patch_file_for_git(p) for p in patch_paths]
    argv = ["apply", "--cached", "--whitespace=nowarn", *extra, f"-p{strip}", *paths]
    proc = start(top, argv, index=index, stdin=data is not None)
    meanwhile_run(proc, meanwhile)
    _, err = proc.communicate(data)
    if proc.wait() == 0:
        return True, ""
    raise_disk_failure(err, top, index)  # a full disk is not a patch that does not apply
    return False, err.decode("utf-8", "replace").strip()


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _index_write_error(exc: OSError, path: str) -> StackmgrError:
    return disk_error(exc, path) or StackmgrError(f"cannot write {path}: {exc.strerror}", "check that directory")


class WorkingTreeMoved(StackmgrError):
    """The working tree changed between the check and the destructive step; nothing was touched."""

    def __init__(self, detail: str, details: list[str] | None = None) -> None:
        super().__init__(f"refused, nothing changed: {detail}", "check again (`stackmgr status`) and retry", details)


def _refusal(err: bytes) -> str:
    """git's per-file refusal as one line: which files changed since the check, which are in the way."""
    changed, in_way, other = [], [], []
    lines = err.decode("utf-8", "replace").splitlines()
    for line in lines:
        quoted = line.split("'")[1] if line.count("'") >= 2 else ""
        if "not uptodate" in line and quoted:
            changed.append(quoted)
        elif quoted and ("would be overwritten" in line or "would be removed" in line):
            in_way.append(quoted)
        elif line.startswith("\t"):
            in_way.append(line.strip())
        elif line.startswith(("error:", "fatal:")) and "would be" not in line and "Aborting" not in line:
            other.append(line.split(":", 1)[1].strip())
    parts = []
    if changed:
        parts.append(f"changed after the check: {', '.join(changed[:5])}" + (" …" if len(changed) > 5 else ""))
    if in_way:
        parts.append(f"untracked files in the way: {', '.join(in_way[:5])}" + (" …" if len(in_way) > 5 else ""))
    return "; ".join(parts or other or ["git read-tree refused"])


def sparse_checkout(repo: Repo) -> Callable[[bytes, bool], bool] | None:
    """Whether `read-tree -u` would write a path it adds (path, is a directory entry) in this tree; None when the
    tree has no sparse checkout (no git call then, unless a sparse-checkout file is there)."""
    try:
        with open(os.path.join(repo.git_dir, "info", "sparse-checkout"), "rb") as f:
            lines = f.read().split(b"\n")
    except OSError:
        return None  # git applies no patterns without the file
    _rc, out, _ = run_rc(repo.top, ["config", "-z", "--type=bool", "--get-regexp",
                                    r"^core\.(sparsecheckout|sparsecheckoutcone|ignorecase)$"])  # fmt: skip
    on = {key: value == b"true" for key, _, value in (rec.partition(b"\n") for rec in zsplit(out))}
    if not on.get(b"core.sparsecheckout"):
        return None
    from stackmgr.git.sparse import checked_out

    return checked_out(lines, on.get(b"core.sparsecheckoutcone", False), on.get(b"core.ignorecase", False))


def _sparse_signature(repo: Repo) -> list[object]:
    """Stat data of what decides skip-worktree bits: the sparse-checkout file and the config files."""
    places = [os.path.join(repo.git_dir, "info", "sparse-checkout"), os.path.join(repo.git_dir, "config"),
              os.path.join(repo.git_dir, "config.worktree")]  # fmt: skip
    common = repo.common_dir
    if common != repo.git_dir:
        places.append(os.path.join(common, "config"))
    signature: list[object] = []
    for place in places:
        try:
            st = os.stat(place)
            signature.append([st.st_mtime_ns, st.st_size])
        except OSError:
            signature.append(None)
    return signature


def start_tree_diff(repo: Repo, old: str, new: str) -> Process:
    return start(repo.top, ["diff-tree", "-r", "-z", "--raw", "--no-renames", "--full-index", revision(old),
                            revision(new)])  # fmt: skip
