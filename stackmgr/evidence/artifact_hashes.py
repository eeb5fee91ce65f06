"""The sha256 of the artifacts records name, as they are now (a link whose artifact changed is broken:
evidence/states.py), cached by stat data."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from typing import BinaryIO

from stackmgr.evidence import artifacts as kept_artifacts
from stackmgr.store.config import Store
from stackmgr.store.fs import read_cache, write_cache
from stackmgr.store.inside import OutsideStore

FIRST_HASHING_IN_WORKERS = 2000  # artifacts never hashed, at the least, before worker processes share them


class ArtifactHashes:
    """sha256 of artifact files, cached by stat data in .stackmgr/cache (always safe to delete). An artifact is a
    file in the store, opened without leaving it (store/inside.py) and hashed a block at a time: a record naming
    an absolute path (an original outside path is information only), or a path through a symbolic link, or
    something that is not a regular file (a FIFO, /dev/zero) has no hash, and `why` says so."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.path = os.path.join(store.state_dir, "cache", "artifacts.marshal")
        cached = read_cache(self.path)
        self.cache: dict[str, list[object]] = cached if isinstance(cached, dict) else {}
        self.seen: dict[str, tuple[str | None, str]] = {}
        self.folders: dict[str, bool] = {}  # store folder -> a real folder (no symbolic link)
        self.dirty = False

    def sha256(self, recorded: str) -> str | None:
        """The file's sha256 now, or None when it is gone, outside the store or not a regular file (asked once
        per command: many links share an artifact)."""
        return self._look(recorded)[0]

    def why(self, recorded: str) -> str:
        """Why `sha256` is None, in a few words ("is missing", "is outside the store: never read", …)."""
        return self._look(recorded)[1] or "is missing"

    def open(self, recorded: str) -> BinaryIO:
        """The artifact opened for reading, inside the store only (OutsideStore, OSError otherwise)."""
        return kept_artifacts.open_kept(self.store.root, recorded)

    def first_hashing(self, recorded: Iterable[str]) -> None:
        """Hash the artifacts never hashed here (a fresh clone: every one) in worker processes when there are
        thousands (store/workers.py); `sha256` then finds them as if hashed one by one."""
        todo = sorted({r for r in recorded if r not in self.cache and r not in self.seen})
        if len(todo) < FIRST_HASHING_IN_WORKERS:
            return
        from stackmgr.store.workers import fork_map

        chunks = [todo[i : i + 256] for i in range(0, len(todo), 256)]

        def hash_chunk(i: int) -> list[tuple[str, tuple[str | None, str], list[object] | None]]:
            return [(r, self._sha256(r), self.cache.get(r)) for r in chunks[i]]

        for done in fork_map(hash_chunk, len(chunks)):
            for r, seen, cached in done:
                self.seen[r] = seen
                if cached is not None:
                    self.cache[r] = cached
                    self.dirty = True

    def _look(self, recorded: str) -> tuple[str | None, str]:
        if recorded not in self.seen:
            self.seen[recorded] = self._sha256(recorded)
        return self.seen[recorded]

    def _sha256(self, recorded: str) -> tuple[str | None, str]:
        outside = kept_artifacts.outside(recorded)
        if outside:
            return None, outside
        if (known := self._unchanged(recorded)) is not None:
            return known, ""
        try:
            f = self.open(recorded)
        except OutsideStore:
            return None, kept_artifacts.refusal(self.store.root, recorded)
        except OSError:
            return None, "is missing"
        with f:
            st = os.fstat(f.fileno())
            hit = self.cache.get(recorded)
            if hit is not None and hit[0] == st.st_size and hit[1] == st.st_mtime_ns and hit[2] == st.st_ctime_ns \
                    and hit[3] == st.st_ino:  # fmt: skip
                return str(hit[4]), ""
            digest = kept_artifacts.hash_file(f)[0]
        self.cache[recorded] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest]
        self.dirty = True
        return digest, ""

    def _unchanged(self, recorded: str) -> str | None:
        """The cached sha256 of an artifact whose stat data is as cached, found without opening it: each folder
        on the way a real folder (no symbolic link, as `open` walks it; each looked at once per command), the
        file a regular file. None: `open` and hash it."""
        hit = self.cache.get(recorded)
        if hit is None:
            return None
        folder = recorded.rpartition("/")[0]
        if (real := self.folders.get(folder)) is None:
            real = self.folders[folder] = self._real_folder(folder)
        if not real:
            return None
        try:
            st = os.lstat(f"{self.store.root}/{recorded}")
        except OSError:
            return None
        if stat.S_ISREG(st.st_mode) and [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino] == hit[:4]:
            return str(hit[4])
        return None

    def _real_folder(self, folder: str) -> bool:
        path = self.store.root
        for part in folder.split("/") if folder else []:
            path = os.path.join(path, part)
            try:
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    return False
            except OSError:
                return False
        return True

    def save(self) -> None:
        if self.dirty:
            write_cache(self.path, self.cache)
            self.dirty = False
