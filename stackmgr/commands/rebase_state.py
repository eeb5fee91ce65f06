"""Where a rebase keeps what it needs to stop and go on (rebase.py): the state file
`.stackmgr/rebase/SERIES.json` (created exclusively, validated on every read), the scratch worktree of this
store's rebase of a series, whose path is always worked out from the tree, never read from the file; and what one
run learns once instead of asking for it per patch (`Carried`)."""

from __future__ import annotations

import functools
import json
import os
from contextlib import nullcontext

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git.checked import is_object_id
from stackmgr.git.repo import open_repo, patch_ids, upstream_moves
from stackmgr.git.worktree import ScratchWorktree, remove_worktree
from stackmgr.journal.operation import operation
from stackmgr.store import patchfile
from stackmgr.store.config import Store
from stackmgr.store.fs import atomic_write, locked, read_or_none, sha256_hex
from stackmgr.store.names import check_name, valid_name

TYPE_CHECKING = False  # `typing` stays out of `rebase`'s start-up
if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from typing import Any, TypeVar

    T = TypeVar("T")
    State = dict[str, Any]  # the JSON of .stackmgr/rebase/SERIES.json


def patch_bytes(store: Store, filename: str) -> bytes:
    """A patch file of patches/ as it is now: never read through a symbolic link (`read_or_none` refuses one)."""
    data = read_or_none(os.path.join(store.patches_dir, filename))
    if data is None:
        raise StackmgrError(f"patches/{filename} is gone", "restore it, or `stackmgr rebase --abort`")
    return data


def state_path(store: Store, series: str) -> str:
    return os.path.join(store.state_dir, "rebase", series + ".json")


def in_progress(store: Store) -> list[str]:
    directory = os.path.join(store.state_dir, "rebase")
    try:
        return sorted(n[:-5] for n in os.listdir(directory) if n.endswith(".json"))
    except FileNotFoundError:
        return []


def where(store: Store, tree: str, series: str) -> tuple[str, str]:
    """The tree's top and the scratch worktree of this store's rebase of `series` (named after the store too,
    so two stores rebasing series of one name in one tree never share it)."""
    repo = open_repo(store.tree(tree).path)
    key = sha256_hex(os.path.realpath(store.root).encode())[:8]
    return repo.top, os.path.join(repo.stackmgr_dir, "rebase", f"{series}-{key}")


def running(store: Store, series: str, wait_seconds: float | None = None) -> locked:
    """Held while a rebase of `series` runs (start, --continue, --abort): flock dies with its process, so a
    second one knows whether the first is still at work or was killed."""
    return locked(state_path(store, series)[: -len(".json")] + ".lock", f"the rebase of series {series}",
                  wait_seconds)


def ready_to_go_on(state: State) -> None:
    """After a kill: the locks the killed run's git left in its scratch worktree go (never one a live process
    holds: that one is reported)."""
    if not os.path.isdir(state["worktree"]):
        return
    held = ScratchWorktree(state["worktree"]).drop_dead_locks()
    if held:
        raise StackmgrError(f"{held[0]} is held by a running process (a git at work in the rebase's worktree)",
                            f"let it finish, then `stackmgr rebase {state['series']} --continue`")


KEPT_FOR_CONTINUE = ("conflict resolved", "changed by hand")  # outcomes that hold what the user did (older states)


def settle_killed(store: Store, series: str) -> str | None:
    """A rebase of `series` whose run was killed (the caller holds `running`, so the state file is a dead run's),
    settled. One killed before it ever stopped for the user holds nothing the user did: its scratch worktree and
    state go, and the store is as before the rebase or, when its one journaled write had completed, as after it
    (the journal rolled a half-done write back). One that stopped for the user once (a conflict, a failed --exec:
    `user_work`, set when it stopped, kept by every later save), so may hold what they resolved or edited, or is
    damaged, stands for `--continue` or `--abort`. Returns what was
    done, in words, or None when the state stands."""
    path = state_path(store, series)
    raw = read_or_none(path)
    if raw is None:
        return None
    state: State | None = None
    if raw:  # empty: killed between claiming the series and the first save; nothing was carried yet
        try:
            state = json.loads(raw)
        except ValueError:
            return None
        if not _valid_state(state, series) or state["stopped"] is not None or state["tree"] not in store.trees:
            return None
        if state.get("user_work") or any(step.get("outcome") in KEPT_FOR_CONTINUE for step in state["steps"]):
            return None  # it stopped for the user once: what they did is in its worktree
    for tree in [state["tree"]] if state else list(store.trees):
        try:
            remove_worktree(*where(store, tree, series))
        except StackmgrError:
            continue
    written = state is not None and _rewritten(store, state)
    os.unlink(path)
    if written:
        return f"a rebase of series {series} was killed after writing the patches; its scratch work is removed"
    return f"a rebase of series {series} was killed before it finished; nothing of it was kept (run it again)"


def _rewritten(store: Store, state: State) -> bool:
    """Whether the series or one of its patches is no longer what the rebase started from."""
    if sha256_hex(read_or_none(os.path.join(store.series_dir, state["series"])) or b"") != state["series_sha256"]:
        return True
    return any(sha256_hex(read_or_none(os.path.join(store.patches_dir, step["file"])) or b"") != step["sha256"]
               for step in state["steps"])  # fmt: skip


def settle_killed_rebases(store: Store) -> list[str]:
    """`settle_killed` for every rebase in progress that no running process holds (`recover`)."""
    notes = []
    for series in in_progress(store):
        if not valid_name(series):
            continue
        try:
            with running(store, series, wait_seconds=0):
                note = settle_killed(store, series)
        except StackmgrError:  # running: a live rebase is its own
            continue
        if note is None:
            note = (f"a rebase of series {series} is in progress: `stackmgr rebase {series} --continue` goes on, "
                    "`--abort` drops it")  # fmt: skip
        notes.append(note)
    return notes


def claim(store: Store, series: str) -> None:
    """Create the state file, exclusively: two `rebase S --onto` at once cannot both start."""
    path = state_path(store, series)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        raise UsageProblem(f"a rebase of series {series} is in progress",
                           f"`stackmgr rebase {series} --continue` or `--abort`") from None


def save_state(store: Store, state: State) -> None:
    path = state_path(store, state["series"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, json.dumps(state, indent=1).encode(), durable=False)


def load_state(store: Store, series: str | None) -> State:
    if series is not None:
        check_name("series", series)
    if series is None:
        going = in_progress(store)
        if len(going) != 1:
            raise UsageProblem("no rebase is in progress" if not going else f"rebases in progress: {', '.join(going)}",
                               "start one with `stackmgr rebase SERIES --onto REV`" if not going
                               else "name the series: `stackmgr rebase SERIES --continue`")  # fmt: skip
        series = going[0]
    raw = read_or_none(state_path(store, series))
    if raw is None:
        raise UsageProblem(f"no rebase of series {series} is in progress", f"`stackmgr rebase {series} --onto REV`")
    try:
        state = json.loads(raw)
    except ValueError:
        raise StackmgrError(f"the rebase state of {series} is damaged",
                            f"`stackmgr rebase {series} --abort` removes it") from None  # fmt: skip
    if not _valid_state(state, series) or state["tree"] not in store.trees:
        raise StackmgrError(f"the rebase state of {series} is damaged",
                            f"`stackmgr rebase {series} --abort` removes it")  # fmt: skip
    checked: State = state
    checked["top"], checked["worktree"] = where(store, checked["tree"], series)  # never a path from the file
    return checked


def _valid_state(state: object, series: str) -> bool:
    """Every value the rebase hands to git or joins to a path is what it must be (docs/SECURITY.md): names by the
    name rule, commits as object ids (never an option such as `--index-output=…`), patch files inside patches/."""
    if not isinstance(state, dict):
        return False
    kinds = {"series": str, "tree": str, "onto": str, "old_base": str, "position": int, "steps": list,
             "series_sha256": str}  # fmt: skip
    if not all(isinstance(state.get(k), t) for k, t in kinds.items()) or state.get("stopped") not in (
        None, "conflict", "exec"
    ):
        return False
    if state["series"] != series or not valid_name(state["tree"]) or not all(
        is_object_id(state[k]) for k in ("onto", "old_base")
    ):
        return False
    copies = state.get("copies", {})
    if not isinstance(copies, dict) or not all(_patch_file(k) and _patch_file(v) for k, v in copies.items()):
        return False
    steps = state["steps"]
    return 0 <= state["position"] <= len(steps) and all(
        isinstance(st, dict) and isinstance(st.get("name"), str) and isinstance(st.get("file"), str)
        and isinstance(st.get("sha256"), str) and _patch_file(st["file"])
        and st["name"] == st["file"].removesuffix(".patch")
        and all(st.get(k) is None or is_object_id(st.get(k)) for k in ("commit", "parent")) for st in steps
    )  # fmt: skip


def _patch_file(name: object) -> bool:
    """A patch file's name in patches/ (NAME or NAME.patch, NAME by the name rule)."""
    return isinstance(name, str) and valid_name(name.removesuffix(".patch"))


def old_series_applied(store: Store, state: State) -> bool:
    """Whether the rebased series' tree still holds the series as applied before (`apply` moves it)."""
    from stackmgr.store.applied import load_applied

    applied = load_applied(store).get(state["tree"])
    return applied is not None and applied.series == state["series"]


class Carried:
    """What one run learns once instead of asking for it per patch: the old patches' patch-ids (one call for
    all, `repo.patch_ids`), the tree of each commit it made, and the re-diff of each carried patch (for
    `_finish`)."""

    def __init__(self, store: Store, state: State) -> None:
        self.store, self.wt = store, state["worktree"]
        self.steps = state["steps"]
        self.trees: dict[str, str] = {}
        self.diffs: dict[tuple[str, str], bytes] = {}
        self._old_ids: dict[str, str] | None = None
        self._moved: dict[bytes, bytes] | None = None
        self.old_base, self.onto = state["old_base"], state["onto"]

    def old_patch_id(self, step: State) -> str:
        """The patch-id of a patch file as it is now; the first call reads this step's and the later ones'."""
        if self._old_ids is None or step["file"] not in self._old_ids:
            files = [s["file"] for s in self.steps[self.steps.index(step):]]
            diffs = []
            for name in files:
                diffs.append(patchfile.diff_part(patch_bytes(self.store, name)))
            self._old_ids = dict(zip(files, patch_ids(self.wt, diffs), strict=True))
        return self._old_ids[step["file"]]

    def moved(self) -> dict[bytes, bytes]:
        """The paths rename detection finds moved between the old base and the new one (asked once)."""
        if self._moved is None:
            self._moved = upstream_moves(self.wt, self.old_base, self.onto)
        return self._moved

    def tree_of(self, commit: str) -> str:
        if commit not in self.trees:
            self.trees[commit] = ScratchWorktree(self.wt).tree_of(commit)
        return self.trees[commit]

    def stat_and_diff(self, parent: str, commit: str) -> bytes:
        if (parent, commit) not in self.diffs:
            self.diffs[parent, commit] = ScratchWorktree(self.wt).stat_and_diff(parent, commit)
        return self.diffs[parent, commit]


def abort(store: Store, series: str | None) -> str:
    """Remove the worktree and the state; a damaged state is removed too (its worktree found from the name). A
    rewrite of the patches that was killed half-way is rolled back first (the operation does that on entry), so
    "nothing was changed" is true."""
    with _running_one(store, series), operation(store, f"rebase {series or ''} --abort".replace("  ", " ")):
        return _abort(store, series)


def _abort(store: Store, series: str | None) -> str:
    try:
        state = load_state(store, series)
    except UsageProblem:
        raise
    except StackmgrError:
        assert series is not None or len(in_progress(store)) == 1
        name = series or in_progress(store)[0]
        for tree in store.trees:
            try:
                remove_worktree(*where(store, tree, name))
            except StackmgrError:
                continue
        os.unlink(state_path(store, name))
        return name
    remove_worktree(state["top"], state["worktree"])
    os.unlink(state_path(store, state["series"]))
    return str(state["series"])


def _running_one(store: Store, series: str | None) -> AbstractContextManager[object]:
    """`running` for the series named, or the one rebase in progress (none to hold when that is not clear)."""
    going = in_progress(store)
    name = series or (going[0] if len(going) == 1 else None)
    return running(store, name) if name and valid_name(name) else nullcontext()


def while_running(fn: Callable[..., T]) -> Callable[..., T]:
    """`start(store, series, …)` and `resume(store, series)` run holding `running` for their series."""

    @functools.wraps(fn)
    def wrapper(store: Store, series: str | None, *args: Any, **kwargs: Any) -> T:
        with _running_one(store, series):
            return fn(store, series, *args, **kwargs)

    return wrapper


def refuse_changed_since(store: Store, state: State) -> None:
    now = sha256_hex(read_or_none(os.path.join(store.series_dir, state["series"])) or b"")
    if now != state["series_sha256"]:
        raise StackmgrError(f"series {state['series']} was edited during the rebase",
                            f"`stackmgr rebase {state['series']} --abort`, then start again")  # fmt: skip
    for step in state["steps"]:
        data = read_or_none(os.path.join(store.patches_dir, step["file"]))
        if data is None or sha256_hex(data) != step["sha256"]:
            raise StackmgrError(f"patch {step['name']} changed during the rebase",
                                f"`stackmgr rebase {state['series']} --abort`, then start again")  # fmt: skip
