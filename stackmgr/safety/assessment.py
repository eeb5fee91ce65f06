"""The answer to "is every change of this tree preserved?" (safety/preserved.py and safety/shards.py give it),
the names it reports patches by, and the one refusal every destructive command gives while work is unpreserved."""

from __future__ import annotations

from stackmgr.errors import NotPreserved
from stackmgr.store.names import VERSIONS

TYPE_CHECKING = False  # mypy treats this as true; `typing` stays out of `check`'s start-up
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, TypeVar

    Entry = TypeVar("Entry", bound=tuple[Any, ...])  # (mode, blob, patch file, …)

    from stackmgr.safety.snapshot import Snapshot
    from stackmgr.types import Change


class Assessment:
    """The answer for one tree: which changes are preserved (and by which patches), which are not."""

    def __init__(self) -> None:
        self.preserved: dict[bytes, list[str]] = {}
        self.unpreserved: list[Change] = []
        self.presence: dict[str, tuple[int, int]] = {}  # patch -> (entries present, entries)
        self.conflicted: list[str] = []  # store patches left mid-merge, which might hold an unpreserved change

    def blockers(self, snap: Snapshot) -> list[tuple[bytes, str]]:
        """Everything that keeps the tree from being safe to reset, as (path, why)."""
        out = [(c.path, c.kind) for c in self.unpreserved]
        out += [(p, STAGED_DIFFERS) for p in snap.staged_differs]
        out += [(p, "unmerged") for p in snap.unmerged]
        out += [(p, "LF line endings a checkout would turn to CRLF (core.autocrlf=true): save cannot keep these "
                    "bytes; set core.autocrlf=input or write CRLF") for p in snap.eol_unstable]  # fmt: skip
        if snap.local_commits:
            n = len(snap.local_commits)
            out.append((b"HEAD", f"{n} local commit{'s' if n > 1 else ''} on no branch, "
                                 f"{snap.local_commits[0][:12]}: keep with `git branch NAME`"))  # fmt: skip
        if self.unpreserved and self.conflicted:  # why a change a teammate saved may not count: named, once
            out.append((self.conflicted[0].encode(), "in the store: unresolved merge conflict; what it holds counts "
                        "as preserved once it is resolved" + (f" (and {len(self.conflicted) - 1} more: "
                        "`stackmgr lint`)" if len(self.conflicted) > 1 else "")))  # fmt: skip
        return out


def conflicted_patches(records: dict[str, dict[str, object]]) -> list[str]:
    """The store's patch files left mid-merge (`git pull`), from the patch index's records."""
    return [f"patches/{name}" for name, rec in sorted(records.items())
            if str(rec.get("error") or "").startswith("unresolved merge conflict")]  # fmt: skip


def owners(entries: Iterable[Entry], mode: str, blob: str | None, head_blob: str | None = None) -> list[Entry]:
    """The patch entries (mode, blob, patch file, …) of one path that preserve its state (mode, blob): one with
    both, or else a mode-only entry (blob None: a patch that changes only the mode, so its index lines name no
    content) together with one that has the content under another mode, or with the content HEAD has already
    (`head_blob`, committed: the mode-only patch applies to any content). What is needed to put the state back
    is named."""
    entries = list(entries)
    whole = [e for e in entries if e[0] == mode and e[1] == blob]
    if whole:
        return whole
    moded = [e for e in entries if e[0] == mode and e[1] is None]
    content = [e for e in entries if e[1] == blob and e[1] is not None]
    if moded and not content and blob is not None and blob == head_blob:
        return moded
    return moded + content if moded and content else []


def shown_name(filename: str) -> str:
    """`fix.patch` → `fix`; a kept version `.versions/fix/0a1b2c3d4e5f.patch` → `fix@0a1b2c3d4e5f` (as interdiff
    names it)."""
    if filename.startswith(VERSIONS + "/"):
        _, name, version = filename.split("/", 2)
        return f"{name}@{version[: -len('.patch')]}"
    return filename[: -len(".patch")]


def file_name(shown: str) -> str:
    name, _, version = shown.partition("@")
    return f"{VERSIONS}/{name}/{version}.patch" if version else f"{name}.patch"


def describe(blockers: list[tuple[bytes, str]], limit: int = 6) -> str:
    """`path (why), …` for a one-line refusal."""
    from stackmgr.types import show_path

    shown = ", ".join(f"{show_path(p)} ({why})" for p, why in blockers[:limit])
    return shown + (f" and {len(blockers) - limit} more" if len(blockers) > limit else "")


def file_lines(found: list[tuple[bytes, str]]) -> list[str]:
    """A refusal's files, one per line, as `check -v` lists them: `path (why)` (`StackmgrError.details`)."""
    from stackmgr.errors import listed
    from stackmgr.types import show_path

    return listed([f"{show_path(p)} ({why})" for p, why in found])


def counted(found: list[tuple[bytes, str]]) -> str:
    """`1 path`, `3 paths`: how many files a refusal lists."""
    from stackmgr.output import plural

    return plural(len({p for p, _why in found}), "path")


STAGED_DIFFERS = "staged and unstaged versions differ"


def staged_hint(blockers: list[tuple[bytes, str]], hint: str) -> str:
    """A staged version that differs from the file is in no snapshot (a snapshot takes the file as it is on disk):
    `save` cannot keep it, git can (stage the file, or drop the staged version)."""
    if not any(why == STAGED_DIFFERS for _p, why in blockers):
        return hint
    return ("a staged version that differs from the file is git's to keep: `git add PATH` stages the file as it is "
            "(then `stackmgr save NAME`), `git restore --staged PATH` drops the staged version; " + hint)


def refuse_unpreserved(tree: str, blockers: list[tuple[bytes, str]], hint: str) -> None:
    """Raise the exit-1 refusal every destructive command gives while a tree holds unpreserved work."""
    if blockers:
        raise NotPreserved(f"tree {tree} has changes no patch preserves ({counted(blockers)})",
                           staged_hint(blockers, hint), file_lines(blockers))  # fmt: skip
