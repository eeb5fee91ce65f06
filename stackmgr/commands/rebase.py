"""`stackmgr rebase SERIES --onto REV [-t TREE] [--exec CMD]` and `rebase [SERIES] --continue | --abort`:
carry one tree's patches of a series to a new upstream base.

The patches are carried, in order, in a scratch worktree of the tree (under `.git/stackmgr/rebase/`; the user's
working tree, index and HEAD are never touched) the way git's rebase carries commits: a patch whose stable
patch-id equals an upstream commit's between the old base and the new one is dropped (as git's cherry finds
them), any other is merged 3-way between the blob ids it records (git's 3-way apply). Each is committed there
and classified:

- **unchanged**: the diff comes out byte for byte the same (only `Stackmgr-Base` changes);
- **context drift**: the diff is rewritten (moved lines, new blob ids) but its stable patch-id is equal, so
  its links stay "equivalent";
- **merged (3-way)**: the merge succeeded and the change now reads differently (its context changed);
- **conflict resolved**: the merge conflicted and the user resolved it in the worktree (`--continue`);
- **already upstream**: upstream has the change (a commit with its patch-id, or a merge that changes nothing);
  the patch file is kept and its series line commented out, so the series still applies.

A conflict (or a failing `--exec` command) stops with the state in `.stackmgr/rebase/SERIES.json`; nothing in
the store changes until every patch is carried, and then all the patches and the series are rewritten in one
journaled operation (`stackmgr undo` reverts it; the replaced versions are kept for `interdiff NAME@prev`).
"""

from __future__ import annotations

import os
import shutil

from stackmgr.commands import rebase_state
from stackmgr.commands.rebase_empty import keep_base, move_base
from stackmgr.commands.rebase_fast import carry_at_once
from stackmgr.commands.rebase_merge import carry_by_merge, squash_merged
from stackmgr.commands.rebase_shared import own_copies, refuse_shared
from stackmgr.commands.rebase_state import Carried, claim, load_state, save_state, state_path, where
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git.repo import open_repo, patch_id
from stackmgr.git.worktree import DISCARD_TRACKED_LINE, ScratchWorktree, add_worktree, remove_worktree, soft_reset_line
from stackmgr.journal.operation import operation
from stackmgr.store import patchfile
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none, sha256_hex
from stackmgr.store.names import refuse_link_above, refuse_linked_dirs
from stackmgr.store.plan import plan_series

TYPE_CHECKING = False  # `typing` stays out of `rebase`'s start-up
if TYPE_CHECKING:
    from stackmgr.commands.rebase_state import State

OUTCOMES = ("unchanged", "context drift", "merged (3-way)", "conflict resolved", "changed by hand", "already upstream")


class Outcome:
    def __init__(self, state: State, done: bool, stop: str = "", notes: list[str] | None = None) -> None:
        self.state = state
        self.done = done
        self.stop = stop  # why it stopped: the one line to show
        self.notes = notes or []  # what happened besides (a killed rebase settled first)

    def to_json(self) -> State:
        s = self.state
        return {"schema": 1, "series": s["series"], "tree": s["tree"], "onto": s["onto"], "done": self.done,
                "stopped": self.stop or None, "worktree": None if self.done else s["worktree"],
                "patches": [{"name": st["name"], "outcome": st["outcome"]} for st in s["steps"]],
                "own_copies": s.get("copies", {})}  # fmt: skip


@rebase_state.while_running
def start(store: Store, series: str, onto: str, tree: str | None, exec_cmd: str | None,
          own_copy: bool = False) -> Outcome:  # fmt: skip
    notes = []
    if os.path.exists(state_path(store, series)):  # a killed run's, or one stopped for the user
        with operation(store, f"rebase {series} (settle a killed one)"):  # a half-done write is rolled back first
            settled = rebase_state.settle_killed(store, series)
        notes += [settled] if settled else []
    if os.path.exists(state_path(store, series)):
        raise UsageProblem(f"a rebase of series {series} is in progress",
                           f"`stackmgr rebase {series} --continue` or `--abort`")  # fmt: skip
    from stackmgr.store.series import SeriesFile

    guarded = [e.name for e in SeriesFile.load(store, series).entries if e.guards]
    if guarded:
        raise UsageProblem(f"series {series} has guarded patches ({guarded[0]}…)",
                           "rebase does not carry MQ guards yet; rebase a series without them")  # fmt: skip
    refuse_linked_dirs(store.root)  # nothing is written through a link a pull made (`patches -> ~/.bashrc.d`)
    plans = plan_series(store, series, tree, ())
    if len(plans) > 1:
        raise UsageProblem(f"series {series} has patches for several trees ({', '.join(p.tree for p in plans)})",
                           "rebase one tree's patches at a time with -t TREE")  # fmt: skip
    plan = plans[0]
    if not plan.patches:  # an empty series: its base line moves (rebase_empty.py)
        return Outcome(move_base(store, series, plan, onto), True, notes=notes)
    files = [os.path.basename(p.path) for p in plan.patches]
    copies = own_copies(store, series, files) if own_copy else {}
    if not own_copy:
        refuse_shared(store, series, files)
    repo = open_repo(store.tree(plan.tree).path)
    if not repo.has_commit(plan.base):
        raise StackmgrError(f"the base {plan.base[:12]} of series {series} is not a commit of tree {plan.tree}",
                            "fetch it first: 3-way merges need the patches' original blobs")  # fmt: skip
    try:
        new_base = repo.resolve_commit(onto)
    except StackmgrError:
        raise UsageProblem(f"{onto} is not a commit of tree {plan.tree}", "fetch it, or name another") from None
    top, worktree = where(store, plan.tree, series)
    claim(store, series)
    state = {
        "series": series, "tree": plan.tree, "top": top, "onto": new_base, "old_base": plan.base,
        "worktree": worktree, "exec": exec_cmd, "position": 0, "stopped": None, "copies": copies,
        "series_sha256": sha256_hex(read_or_none(os.path.join(store.series_dir, series)) or b""),
        "steps": [{"name": p.name, "file": os.path.basename(p.path), "sha256": sha256_hex(p.data),
                   "outcome": None, "commit": None} for p in plan.patches],
    }  # fmt: skip
    try:
        save_state(store, state)  # what a killed run is settled from (rebase_state.settle_killed)
        carried = carry_at_once(store, state) if exec_cmd is None else None
        if carried is not None:  # every patch carried cleanly: no worktree needed
            _finish(store, state, carried, scratch=False)
            return Outcome(state, True, notes=notes)
        remove_worktree(top, worktree)
        os.makedirs(os.path.dirname(worktree), exist_ok=True)
        add_worktree(top, worktree, new_base)
    except BaseException:
        if os.path.exists(state_path(store, series)):
            os.unlink(state_path(store, series))
        raise
    save_state(store, state)
    outcome = _run(store, state)
    outcome.notes[:0] = notes
    return outcome


@rebase_state.while_running
def resume(store: Store, series: str | None) -> Outcome:
    state = load_state(store, series)
    rebase_state.ready_to_go_on(state)  # a killed run's git left its locks in the scratch worktree
    wt = state["worktree"]
    if not os.path.isdir(wt):
        raise StackmgrError(f"the rebase worktree {wt} is gone", f"`stackmgr rebase {state['series']} --abort`")
    if state["stopped"] is None:  # stackmgr itself was stopped mid-patch (killed): start that patch again
        pos = state["position"]
        below = state["steps"][pos - 1]["commit"] if pos else state["onto"]
        ScratchWorktree(wt).reset_hard(below)  # the scratch worktree only, never the user's tree
        return _run(store, state)
    step = state["steps"][state["position"]]
    expected = step["commit"] if state["stopped"] == "exec" else step["parent"]
    work, carried = ScratchWorktree(wt), Carried(store, state)
    if work.head() != expected:  # the user committed the resolution there, as git's rebase allows: keep its content
        if not work.head_descends_from(expected):
            raise StackmgrError(f"the worktree's HEAD moved away from {expected[:12]}",
                                f"`{soft_reset_line(expected[:12])}` in {wt}, then --continue")  # fmt: skip
        work.reset_soft(expected)
    parent = work.head()
    tree = work.stage_tracked()  # tracked files as the user left them; new files count once added to git's index
    if state["stopped"] == "exec":  # the patch was carried; the command failed; take what the user changed
        if tree != work.tree_of(parent):
            below = step["parent"]
            if tree == work.tree_of(below):
                step["outcome"], step["commit"] = "already upstream", below
                work.go_to(below)
            else:
                step["commit"] = work.commit(tree, below, step["name"] + "\n")
                step["outcome"] = _classify(store, state, step, below, step["commit"], "changed by hand", carried)
        state["position"] += 1
    else:
        markers = _conflict_markers(wt, parent)
        if markers:
            raise StackmgrError(f"{markers} still has conflict markers", f"resolve it in {wt}, then --continue")
        if tree == work.tree_of(parent):
            step["outcome"] = "already upstream"
        else:
            commit = work.commit(tree, parent, step["name"] + "\n")
            step["outcome"] = _classify(store, state, step, parent, commit, "conflict resolved", carried)
        step["parent"], step["commit"] = parent, work.head()
        stop = _exec(state, step)
        state["position"] += 1
        if stop:
            state["position"] -= 1
            state["stopped"] = state["user_work"] = "exec"
            save_state(store, state)
            return Outcome(state, False, stop)
    state["stopped"] = None
    save_state(store, state)
    return _run(store, state)


def _run(store: Store, state: State) -> Outcome:
    from stackmgr import output

    wt = state["worktree"]
    steps = state["steps"]
    output.progress_total(len(steps))
    output.tick(state["position"])
    work = ScratchWorktree(wt)
    upstream = work.patch_ids(state["old_base"], state["onto"])  # as git's cherry sees them
    carried = Carried(store, state)
    head = at = work.head()  # the commit the patches so far make, and where HEAD is (moved when someone looks)
    merged: dict[tuple[str, int], set[int]] = {}  # the merged test's walks (squash_merged)
    while state["position"] < len(steps):
        output.tick()
        step = steps[state["position"]]
        path = os.path.join(store.patches_dir, step["file"])
        parent = step["parent"] = head
        how = "already upstream" if upstream and carried.old_patch_id(step) in upstream else _carry(wt, path, carried)
        if _stuck(how) and squash_merged(work, store, steps, state["position"], merged):
            work.go_to(parent)  # StGit's rule: the stack from here up is in upstream already (a squash merge)
            how = "already upstream"
        if (how == "conflict" or how.startswith("no merge")) and carry_by_merge(store, state, work, parent):
            how = "applied"  # git's merge, renames followed, carried it
        if how.startswith("no merge") and work.has_unmerged():
            how = "conflict"  # git's merge left one to resolve (in a file upstream moved)
        if how == "conflict" or how.startswith("no merge"):
            if at != parent:  # the user resolves on top of it
                work.set_head(parent)
            state["stopped"] = state["user_work"] = "conflict"  # from now on the worktree may hold theirs
            save_state(store, state)
            return Outcome(state, False, _stop_line(state, step, how))
        if how == "already upstream":
            step["outcome"], step["commit"] = how, parent
        else:
            tree = work.write_tree()
            if tree == carried.tree_of(parent):
                step["outcome"], step["commit"] = "already upstream", parent
            else:
                step["commit"] = work.commit_index(tree, parent, step["name"] + "\n")
                carried.trees[step["commit"]] = tree
                step["outcome"] = _classify(store, state, step, parent, step["commit"], how, carried)
        head = step["commit"]
        if state["exec"] and at != head:  # the command runs on it
            work.set_head(head)
            at = head
        stop = _exec(state, step)
        if stop:
            state["stopped"] = state["user_work"] = "exec"
            save_state(store, state)
            return Outcome(state, False, stop)
        if state["exec"]:  # the command may have committed
            head = at = work.head()
        state["position"] += 1
        save_state(store, state)
    _finish(store, state, carried)
    return Outcome(state, True)


def _stuck(how: str) -> bool:
    """Not carried by its blobs: a conflict, or no merge, except a deletion of a file upstream moved (git decides)."""
    return how == "conflict" or (how.startswith("no merge") and not how.endswith("was moved upstream"))


def _carry(wt: str, patch: str, carried: Carried) -> str:
    """Carry one patch onto the worktree's HEAD as git's rebase does: a 3-way merge of the change between the
    full blob ids the patch records, tried first, so a change that is already there merges to no change (git's
    "already applied upstream") instead of an offset carrying its hunk onto a copy of itself; the
    patch is applied directly only when those blobs are missing. "applied", "already upstream", "conflict" or "no merge"
    (the merge could not even start and the patch does not apply)."""
    work = ScratchWorktree(wt)
    merged, err = work.apply_3way(patch)
    if merged:
        return "applied"  # the caller finds "no change" (already upstream) by comparing the trees
    if work.has_unmerged():
        return "conflict"
    if work.reverse_applies(patch):
        data = read_or_none(patch) or b""  # never through a symbolic link
        images = patchfile.post_images(patchfile.diff_part(data), os.path.basename(patch))
        if not any(im.mode == "000000" and im.path in carried.moved() for im in images):
            return "already upstream"
        return "no merge: a file it deletes was moved upstream"  # git's merge decides (a rename/delete conflict)
    lines = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.startswith("error:")]
    return "no merge: " + (lines[-1][7:] if lines else "git's 3-way apply could not merge it")


def _classify(store: Store, state: State, step: State, parent: str, commit: str, how: str, carried: Carried) -> str:
    old = rebase_state.patch_bytes(store, step["file"])
    new = carried.stat_and_diff(parent, commit)
    if how == "applied" and old.endswith(new):
        return "unchanged"
    if carried.old_patch_id(step) == patch_id(state["worktree"], new):
        return "context drift"
    return "merged (3-way)" if how == "applied" else how


def _exec(state: State, step: State) -> str:
    """Run --exec in the worktree after a patch; the stop line when it fails."""
    if not state["exec"]:
        return ""
    wt = state["worktree"]
    rc = ScratchWorktree(wt).run_shell(state["exec"])
    if rc != 0:
        return (f"`{state['exec']}` failed (exit {rc}) after {step['name']}; fix it in {wt} and "
                f"`stackmgr rebase {state['series']} --continue` (edits join that patch), or --abort")  # fmt: skip
    if ScratchWorktree(wt).tracked_changed():
        return (f"`{state['exec']}` changed tracked files after {step['name']}; `stackmgr rebase "
                f"{state['series']} --continue` keeps the changes (they join that patch), or undo them in {wt} "
                f"first ({DISCARD_TRACKED_LINE})")  # fmt: skip
    return ""


def _stop_line(state: State, step: State, how: str) -> str:
    n, total = state["position"] + 1, len(state["steps"])
    if how.startswith("no merge"):
        return (f"{step['name']} ({n} of {total}) does not apply to {state['onto'][:12]} and cannot be merged "
                f"({how[10:]}); make its change by hand in {state['worktree']}, then "
                f"`stackmgr rebase {state['series']} --continue`, or --abort")  # fmt: skip
    files = ScratchWorktree(state["worktree"]).unmerged_names()
    shown = ", ".join(files[:3]) + (" …" if len(files) > 3 else "")
    return (f"{step['name']} ({n} of {total}) conflicts in {shown}; resolve in {state['worktree']}, then "
            f"`stackmgr rebase {state['series']} --continue`, or --abort")  # fmt: skip


def _finish(store: Store, state: State, carried: Carried, scratch: bool = True) -> None:
    """Every patch carried: verify the rewritten series, write patches and series at once; the scratch goes."""
    from stackmgr.git.scratch import tree_from_patches

    wt, onto = state["worktree"], state["onto"]
    rewritten: dict[str, bytes] = {}
    parent = onto
    for step in state["steps"]:
        if step["outcome"] == "already upstream":
            continue
        old = rebase_state.patch_bytes(store, step["file"])
        new_diff = carried.stat_and_diff(parent, step["commit"])
        rewritten[step["file"]] = _rebased_bytes(old, onto, new_diff)
        parent = step["commit"]
    repo = open_repo(state["top"])
    tmp_dir = os.path.join(os.path.dirname(wt), state["series"] + ".check")
    os.makedirs(tmp_dir, exist_ok=True)
    try:
        files = []
        for name, data in rewritten.items():
            files.append(os.path.join(tmp_dir, name))
            with open(files[-1], "wb") as f:
                f.write(data)
        expected = carried.tree_of(parent)
        result, failure = tree_from_patches(repo, onto, files, together=True)
        if result != expected:  # the verdict is that of one apply per patch (`tree_from_patches`), as it always was
            result, failure = tree_from_patches(repo, onto, files)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    if result != expected:
        raise StackmgrError(f"the rewritten series does not rebuild the worktree's result ({failure or 'other tree'})",
                            "nothing was written; please report this")  # fmt: skip
    copies = state.get("copies", {})
    written = all(read_or_none(os.path.join(store.patches_dir, copies.get(n, n))) == d for n, d in rewritten.items())
    with operation(store, f"rebase {state['series']} --onto {onto[:12]}"):
        if not (written and rewritten):  # else a run killed after its write: only the clean-up is left
            _write_rewritten(store, state, rewritten)
    if scratch:
        remove_worktree(state["top"], wt)
    os.unlink(state_path(store, state["series"]))


def _write_rewritten(store: Store, state: State, rewritten: dict[str, bytes]) -> None:
    """Patch files first (each replaced version kept for interdiff), the series last."""
    from stackmgr.commands.save import keep_previous
    from stackmgr.store.series import SeriesFile

    rebase_state.refuse_changed_since(store, state)
    copies = {old: new for old, new in state.get("copies", {}).items() if old in rewritten}
    files = []  # written together: one journal entry, patches/ synced once
    for name, data in rewritten.items():
        path = refuse_link_above(store.root, os.path.join(store.patches_dir, copies.get(name, name)))
        before = read_or_none(path)
        if name in copies:  # the series' own copy; the other series keep the original
            files.append((path, data))
        elif before is not None and before != data:
            keep_previous(store, name, before)
            files.append((path, data))
    store.write_files(files) if files else None
    sf = SeriesFile.load(store, state["series"])
    for filename in [s["file"] for s in state["steps"] if s["outcome"] == "already upstream"]:
        sf.comment_out(filename, f"already upstream in {state['onto'][:12]}")
    for old, new in copies.items():
        sf.rename(old, new)
    keep_base(sf, state)  # the base of a series left empty, or a base line moved with the patches
    sf.write()


def _rebased_bytes(old: bytes, onto: str, stat_and_diff: bytes) -> bytes:
    """The old header, byte for byte (an imported file's own header below `---` too), with the new base; then
    the new diff."""
    import re

    m = re.search(rb"\nStackmgr-Base: *[0-9a-f]{40,64} *\n---\n", old)  # whatever base it was saved at
    if m is None:
        raise StackmgrError("a patch's header has no `Stackmgr-Base: … ---` line", "save it again, then rebase")
    kept = patchfile.original_block_of(old)
    return old[: m.start()] + f"\nStackmgr-Base: {onto}\n---\n".encode() + kept + stat_and_diff


def _conflict_markers(wt: str, parent: str) -> str:
    diff = ScratchWorktree(wt).staged_diff(parent)
    for marker in (b"\n+<<<<<<< ", b"\n+>>>>>>> "):  # a lone ======= is a heading underline
        at = diff.find(marker)
        if at >= 0:
            start = diff.rfind(b"\ndiff --git ", 0, at)
            return diff[start + 12 : diff.find(b"\n", start + 1)].decode("utf-8", "replace").split(" b/")[0][2:]
    return ""
