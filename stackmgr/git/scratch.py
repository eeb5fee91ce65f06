"""Trees built in throwaway indexes, never touching a working tree: what patches make of a base, a tree with a
few entries changed. For verification (safety/preserved.py), rollback (journal/rollback.py), lint, export and
interdiff."""

from __future__ import annotations

import os

from stackmgr.git.checked import patch_file_for_git
from stackmgr.git.runner import finish
from stackmgr.git.tempindex import TempIndex
from stackmgr.types import TreeId

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from stackmgr.git.process import Process
    from stackmgr.git.repo import Repo


def apply_to_entries(
    repo: Repo, before: Sequence[tuple[str, str, bytes]], patch_path: str
) -> tuple[dict[bytes, tuple[str, str]] | None, str]:
    """Apply a patch file strictly to an index holding only `before` (mode, blob, path): the files it touches
    at its base. Returns what that index then holds, path -> (mode, blob), or (None, git's complaint)."""
    with TempIndex.scratch(repo, "verify") as index:
        index.set_entries({path: (mode, blob) for mode, blob, path in before})
        if os.lstat(patch_file_for_git(patch_path)).st_size <= PART:
            ok, err = index.apply(patch_path)
        else:  # git apply holds a whole patch, its pre- and post-images in memory: a part at a time
            ok, err = True, ""
            for part in file_sections(patch_path, PART):
                ok, err = index.apply_bytes(part)
                if not ok:
                    break
        if not ok:
            return None, err.splitlines()[0] if err else "does not apply"
        return index.entries(), ""


def apply_disjoint(
    repo: Repo, jobs: Sequence[tuple[Sequence[tuple[str, str, bytes]], str, frozenset[bytes]]]
) -> list[dict[bytes, tuple[str, str]] | None]:
    """`apply_to_entries` of several patches that touch disjoint paths, in one git call: each job is (its `before`
    entries, its patch file, the paths it touches). What each job's paths end as; all None when git refused."""
    with TempIndex.scratch(repo, "verify") as index:
        index.set_entries({path: (mode, blob) for before, _patch, _paths in jobs for mode, blob, path in before})
        ok, _err = index.apply(*(patch for _before, patch, _paths in jobs))
        if not ok:
            return [None] * len(jobs)
        entries = index.entries()
    return [{p: e for p, e in entries.items() if p in paths} for _before, _patch, paths in jobs]


PART = 8 << 20  # bytes of patch per `git apply` when verifying a big one


def file_sections(patch_path: str, size: int) -> Iterator[bytes]:
    """A patch file in consecutive parts of about `size` bytes or more, each cut where a file's section starts
    (`\ndiff --git `) and holding at least one, so applying them in turn is applying the whole. A file's sections
    are never split (a type change's two sections may fall in two parts: in order, that is the same)."""
    with os.fdopen(os.open(patch_file_for_git(patch_path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
        buf = b""
        while block := f.read(size):
            buf += block
            first, cut = buf.find(b"\ndiff --git "), buf.rfind(b"\ndiff --git ")
            if first >= 0 and cut > first:
                yield buf[: cut + 1]
                buf = buf[cut + 1 :]
        if buf:
            yield buf


STREAM_PART = 1 << 20  # bytes of a diff per `git apply` while git is still writing the diff
WAITING_PARTS = 4  # parts read ahead of the applying thread, at most


def apply_while_diffing(
    repo: Repo, before: Sequence[tuple[str, str, bytes]], diff: Process
) -> tuple[bytes, dict[bytes, tuple[str, str]] | None, str]:
    """What `diff` (a started `git diff -p`) writes, applied as it comes, so git applies while git diffs: each
    part, cut where a file's section starts, goes in order to a `git apply --cached` on a thread, to a scratch
    index holding only `before` (mode, blob, path: the files at their base). Returns (the diff's bytes, what the
    index then holds, "") or (the bytes, None, git's complaint)."""
    import threading

    parts: list[bytes | None] = []  # handed to the thread under `ready`; None: the diff has ended
    ready = threading.Condition()
    failure: list[str] = []
    made: list[bytes] = []  # every part, in order: the diff's bytes
    raised: list[Exception] = []  # what the thread's git call raised (a full disk), raised again here

    def put(part: bytes | None) -> None:
        with ready:  # at most a few parts wait for the thread: git's diff waits on its pipe meanwhile
            ready.wait_for(lambda: len(parts) < WAITING_PARTS)
            parts.append(part)
            ready.notify_all()

    def get() -> bytes | None:
        with ready:
            ready.wait_for(lambda: bool(parts))
            part = parts.pop(0)
            ready.notify_all()
            return part

    with TempIndex.scratch(repo, "verify") as index:
        index.set_entries({path: (mode, blob) for mode, blob, path in before})

        def applier() -> None:  # takes every part to the end, whatever happens, so `put` never waits forever
            while (part := get()) is not None:
                if failure:
                    continue
                try:
                    ok, err = index.apply_bytes(part)
                except Exception as exc:  # a full disk under the scratch index: raised below, never a stuck save
                    raised.append(exc)
                    failure.append(str(exc))
                    continue
                if not ok:
                    failure.append(err.splitlines()[0] if err else "does not apply")

        worker = threading.Thread(target=applier, name="stackmgr-verify", daemon=True)
        worker.start()
        try:
            pending: list[bytes] = []
            size = 0
            for block in diff.stream():
                pending.append(block)
                size += len(block)
                if size >= STREAM_PART:
                    buf = b"".join(pending)
                    first, cut = buf.find(b"\ndiff --git "), buf.rfind(b"\ndiff --git ")
                    if first >= 0 and cut > first:
                        made.append(buf[: cut + 1])
                        put(made[-1])
                        buf = buf[cut + 1 :]
                    pending, size = [buf], len(buf)
            if size:
                made.append(b"".join(pending))
                put(made[-1])
        finally:
            put(None)
            worker.join()
            finish(diff)  # the diff's own failure (git's error, a full disk) raised as any git call's
        if raised:
            raise raised[0]
        data = b"".join(made)
        if failure:
            return data, None, failure[0]
        return data, (index.entries() if data else {}), ""


def tree_from_patches(repo: Repo, base: str, patch_files: Sequence[str], together: bool = False) -> tuple[
        TreeId | None, str]:  # fmt: skip
    """Apply patch files in order to `base` in a scratch index; (tree id, "") or (None, what failed). `together`
    tries one git call for all of them first (as `apply` builds a series), one call each only if that fails."""
    with TempIndex.scratch(repo, "rebuild") as index:
        index.read_tree(base)
        if together and len(patch_files) > 1:
            if index.apply(*patch_files)[0]:
                return index.write_tree(), ""
            index.read_tree(base)
        for patch in patch_files:
            ok, err = index.apply(patch)
            if not ok:
                return None, f"{os.path.basename(patch)}: {err.splitlines()[0] if err else 'does not apply'}"
        return index.write_tree(), ""


def tree_from_what_applies(repo: Repo, base: str, patch_files: Sequence[str]) -> tuple[TreeId, list[bool]]:
    """Apply patch files in order to `base`, each that applies on what the ones before left, skipping those that
    do not (`git apply --cached` changes nothing when it refuses); (tree id, which applied). One call first."""
    with TempIndex.scratch(repo, "measure") as index:
        index.read_tree(base)
        if not patch_files:
            return index.write_tree(), []
        if index.apply(*patch_files)[0]:
            return index.write_tree(), [True] * len(patch_files)
        index.read_tree(base)
        applied = [index.apply(patch)[0] for patch in patch_files]
        return index.write_tree(), applied


def tree_with_entries(repo: Repo, base: str, entries: dict[bytes, tuple[str, str] | None]) -> TreeId:
    """Tree `base` with some paths set to (mode, blob), or removed where None (a scratch index; no file touched)."""
    with TempIndex.scratch(repo, "compose") as index:
        index.read_tree(base)
        index.set_entries(entries)
        return index.write_tree()


def merge_blobs(repo: Repo, base: str, ours: str, theirs: str) -> str | None:
    """git's own three-way merge of one file's versions (`git merge-file`, as `git checkout -m` and `git stash pop`
    merge a change carried across a switch): the merged blob, written to the repository; None when the versions
    conflict or are not text git merges."""
    import tempfile

    from stackmgr.git.runner import run, run_rc

    with tempfile.TemporaryDirectory(prefix="stackmgr-merge-") as tmp:
        files = []
        for name, blob in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(run(repo.top, ["cat-file", "blob", repo.object_id(blob)]))
            files.append(path)
        rc, out, _ = run_rc(tmp, ["merge-file", "-p", "-L", "yours", "-L", "before", "-L", "the patches", *files])
    return repo.write_blob(out) if rc == 0 else None
