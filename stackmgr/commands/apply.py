"""`stackmgr apply SERIES`: rebuild a known tree state from a series.

Everything is checked before anything changes: the series parses, every patch exists, parses and belongs to a
registered tree, every touched tree is fully preserved and not mid-merge, and the result of every tree is
computed in a scratch index (strict `git apply --cached`, no fuzz). Only then are the trees switched, each in one
step from its checked snapshot; if a later tree refuses, the earlier ones are put back.
"""

from __future__ import annotations

import re
import threading

from stackmgr.errors import StackmgrError
from stackmgr.git import refs
from stackmgr.git.repo import open_repo
from stackmgr.git.tempindex import TempIndex
from stackmgr.journal.operation import operation
from stackmgr.safety import claims, tree_move
from stackmgr.safety.assessment import refuse_unpreserved
from stackmgr.safety.preserved import assess
from stackmgr.safety.snapshot import Snapshot, take_snapshot
from stackmgr.store import patchfile
from stackmgr.store.applied import Applied, applied_result, record_applied
from stackmgr.store.config import Store
from stackmgr.store.plan import TreePlan as TreePlan  # (re-exported: `export`, `rebase`, `bisect` plan through it)
from stackmgr.store.plan import plan_series as plan_series
from stackmgr.types import TreeId

TYPE_CHECKING = False  # `collections.abc` stays out of `apply`'s start-up
if TYPE_CHECKING:
    from collections.abc import Callable


class TreeOutcome:
    def __init__(self, plan: TreePlan, changed: bool, before: Applied | None, series: str) -> None:
        self.tree = plan.tree
        self.base = plan.base
        self.patches = [p.name for p in plan.patches]
        self.result = plan.result
        self.changed = changed
        # What left the tree: another series (or measured state) that had patches applied there.
        self.left = (before.series, before.names) if before is not None and before.patches and \
            before.series != series else None  # fmt: skip
        self.head_before = plan.snap.head if plan.snap is not None else ""
        self.remembered = (before.branch or "") if before is not None else ""  # by an earlier apply, push, pop
        self.branch_before: str | None = None  # the branch HEAD was on (None: detached), told by `left_branch`
        self.branch = self.remembered  # the branch `reset` returns to

    def left_branch(self, branch: str | None) -> None:
        """HEAD was on `branch` (None: detached) before the switch: `reset` returns to it, else to the one
        remembered (never a detached intermediate)."""
        self.branch_before = branch
        self.branch = branch or self.remembered

    @property
    def detached(self) -> bool:
        """Whether this apply detaches HEAD from a branch or moves a detached HEAD."""
        return self.branch_before is not None or self.head_before != self.base


def _preflight(store: Store, plan: TreePlan) -> Snapshot:
    plan.snap = preflight(store, plan.tree, plan.base, lambda snap: setattr(plan, "snap", snap))
    plan.snap.tree_id()  # written while the result is still being built: the switch starts from it
    return plan.snap


def preflight(store: Store, tree: str, base: str, taken: Callable[[Snapshot], None] = lambda _s: None,
              already: str | None = None) -> Snapshot:  # fmt: skip
    """The tree's frozen snapshot, once it is known that moving it loses nothing: not mid-operation, every change
    preserved, `base` a commit there. `taken` gets the snapshot as soon as it exists (the caller releases it).
    A tree already at `already` (that tree id, HEAD at `base`) is not moved: it has nothing to preserve."""
    from stackmgr.commands.bisect_state import refuse_if_killed

    refuse_if_killed(store, tree, "moving the tree")
    config = store.tree(tree)
    snap = take_snapshot(tree, config.path, store.max_untracked_bytes, find_special=False, freeze=True,
                         results=config.results, held=applied_result(store, tree))  # fmt: skip
    taken(snap)
    if snap.operation:
        raise StackmgrError(f"tree {tree} is in the middle of {snap.operation}", "finish or abort it first")
    if already is not None and snap.head == base and snap.tree_id() == already:
        return snap
    refuse_unpreserved(tree, assess(store, snap).blockers(snap),
                       "save them (`stackmgr save NAME`), or set them aside (`stackmgr reset --force`)")  # fmt: skip
    if not snap.repo.has_commit(base):
        raise StackmgrError(f"the base {base[:12]} of tree {tree} is not a commit there",
                            f"fetch it into {config.path} (git fetch)")  # fmt: skip
    return snap


def _preflight_while_computing(store: Store, plans: list[TreePlan], three_way: bool) -> None:
    """The results are built in scratch indexes (read-tree, git apply, write-tree) on a thread while the trees
    are snapshotted and assessed: independent git work, overlapped. A preflight refusal wins over a failure to
    build (it says what to do first); nothing is changed either way."""
    built: dict[str, TreeId] = {}
    failed: list[BaseException] = []

    done = threading.Event()

    def build() -> None:
        try:
            for plan in plans:
                built[plan.tree] = compute_result(plan, three_way, store.root, store=store)
        except StackmgrError as exc:
            stale = made_on_older(plan) if "as it records" in exc.message else []
            failed.append(StackmgrError(f"tree {plan.tree}: patch {stale[0]} was made on an older version of a "
                                        "patch below it (refreshed since); nothing was changed",
                                        "`stackmgr push` up to it (by its context, as quilt does), then `stackmgr "
                                        "refresh`") if stale else exc)  # fmt: skip
        except BaseException as exc:  # re-raised on the main thread
            failed.append(exc)
        finally:
            done.set()

    def hash_all() -> None:  # ahead of the build, which compares them with the patch index's
        import hashlib  # OpenSSL's, never the builtin: it holds the GIL (CPython 3.11) and is 2.5x slower

        for plan in plans:
            for ref in plan.patches:
                ref.hash(lambda data: hashlib.sha256(data).hexdigest())

    hasher = threading.Thread(target=hash_all, name="stackmgr-apply-hash", daemon=True)
    hasher.start()
    worker = threading.Thread(target=build, name="stackmgr-apply-build", daemon=True)
    worker.start()
    try:
        for plan in plans:
            _preflight(store, plan)
    finally:
        _wait_out(done)  # the build's git children reaped and its scratch index gone, even on Ctrl-C
        hasher.join()
    if failed:
        raise failed[0]
    for plan in plans:
        plan.result = built[plan.tree]


def _wait_out(done: threading.Event) -> None:
    """Wait for `done` through Ctrl-C, then let the interrupt go on. (`Thread.join` interrupted on Python 3.11
    marks the thread stopped: joined again, it would return at once and leave the thread's git running.)"""
    interrupted: BaseException | None = None
    while True:
        try:
            done.wait()
            break
        except KeyboardInterrupt as exc:
            interrupted = exc
    if interrupted is not None:
        raise interrupted


def compute_result(plan: TreePlan, three_way: bool, store_root: str, loose: bool = False,
                   store: Store | None = None) -> TreeId:  # fmt: skip
    """Apply the tree's patches in order to its base in a scratch index; name the first that fails. The result
    must be what the patches record (claims.py); what they record is read while git applies them. `loose`: the
    contents may differ from what they record (a patch made on an older version of one below), files and modes
    not. With the `store`, a result the patch index can compose is not applied again (apply_compose.py)."""
    repo = open_repo(plan.path)
    if not plan.patches:  # an empty series at its recorded base (store/plan.py): that commit's tree, exactly
        return repo.tree_of(plan.base)
    claimed: list[claims.Claims] = []
    if store is not None and not three_way and not loose:
        from stackmgr.commands.apply_compose import Composition

        composing = Composition(plan, repo)
        try:
            each: list[list[patchfile.PostImage]] = []
            claimed.append(claims.claims(plan.patches, repo, store_root, each))
            result = composing.result(store, each)
        finally:
            composing.close()
        if result is not None:
            claims.check_result(repo, plan.base, result, claimed[0], plan.tree)
            return result
    index = TempIndex.scratch(repo, "apply")
    try:
        index.read_tree(plan.base)

        def read_claims() -> None:  # while git applies (unless read before composing)
            if not claimed:
                claimed.append(claims.claims(plan.patches, repo, store_root))

        ok, _err = index.apply(*(p.path for p in plan.patches), three_way=three_way, meanwhile=read_claims)
        if ok:
            result = _result_tree(index, plan)
            claims.check_result(repo, plan.base, result, claimed[0], plan.tree, merged=three_way or loose)
            return result
        index.read_tree(plan.base)  # one call refused the series: find the first patch that fails, one by one
        for n, patch in enumerate(plan.patches, start=1):
            ok, err = index.apply(patch.path, three_way=three_way)
            if not ok:
                where = _failing_hunk(patch.data, err) + _found_instead(patch.data, err)
                why = index.diagnose(patch.path) if not three_way else "--3way conflicts too"
                raise StackmgrError(
                    f"patch {patch.name} ({n} of {len(plan.patches)} for tree {plan.tree}) does not apply: "
                    f"{where}; {why}; nothing was changed",
                    "refresh the patch (`stackmgr save NAME --update` on a tree where it applies)",
                )
        result = _result_tree(index, plan)
        claims.check_result(repo, plan.base, result, claimed[0], plan.tree, merged=three_way or loose)
        return result
    finally:
        index.discard()


def made_on_older(plan: TreePlan) -> list[str]:
    """Patches whose recorded pre-image of a file is not what the patches below them leave there: made on an older
    version of one below (refreshed since)."""
    state: dict[bytes, str | None] = {}
    stale = []
    for ref in plan.patches:
        images = patchfile.post_images(patchfile.diff_part(ref.data), ref.name)
        if any(im.path in state and im.old_blob is not None and state[im.path] not in (None, im.old_blob)
               for im in images):  # fmt: skip
            stale.append(ref.name)
        state.update((im.path, im.blob) for im in images)
    return stale


def _result_tree(index: TempIndex, plan: TreePlan) -> TreeId:
    try:
        return index.write_tree()
    except StackmgrError:  # only --3way leaves unmerged entries behind
        raise StackmgrError(f"tree {plan.tree}: --3way left conflicts; nothing was changed",
                            "rebase the series onto this base first") from None  # fmt: skip


_FAILED_AT = re.compile(r"patch failed: (.+):(\d+)")


_NOT_MATCHING = re.compile(r"the patch applies to '(.+)' \(([0-9a-f]+)\), which does not match the current contents")


def _found_instead(data: bytes, err: str) -> str:
    """For a binary pre-image mismatch git names the blob it found: add the one the patch expects."""
    m = _NOT_MATCHING.search(err)
    if not m:
        return ""
    try:
        images = patchfile.post_images(patchfile.diff_part(data), "patch")
    except StackmgrError:
        return ""
    wanted = next((im.old_blob for im in images if im.path == m.group(1).encode()), None)
    return f" (it expects {wanted[:12]}, found {m.group(2)[:12]})" if wanted else ""


def _failing_hunk(data: bytes, err: str) -> str:
    """`path, hunk @@ -a,b +c,d @@` from git's complaint and the patch text; git's line when no hunk matches."""
    m = _FAILED_AT.search(err)
    if not m:
        first = next((ln for ln in err.splitlines() if ln.startswith("error:")), err.splitlines()[0] if err else "")
        return first.removeprefix("error: ") or "git apply failed"
    path, line = m.group(1), m.group(2)
    section = data.find(b"\ndiff --git a/" + path.encode() + b" ")
    hunk = re.compile(rb"^@@ -" + line.encode() + rb"(,\d+)? \+\d+(,\d+)? @@", re.M).search(data, max(section, 0))
    return f"{path}, hunk {hunk.group(0).decode()}" if hunk else f"{path} at line {line}"


def apply_series(
    store: Store, name: str, *, only_tree: str | None = None, guards: tuple[str, ...] = (),
    three_way: bool = False, dry_run: bool = False, override: str | None = None, keep_on_top: bool = True,
) -> list[TreeOutcome]:  # fmt: skip
    from stackmgr.store.applied import load_applied

    with operation(store, f"apply {name}"):
        plans = plan_series(store, name, only_tree, guards)
        _refuse_revivals(store, name, plans, override, dry_run)
        try:
            _preflight_while_computing(store, plans, three_way)
            before = load_applied(store)
            for plan in plans if keep_on_top else ():  # bisect puts its own before-state back at the end
                if plan.snap is not None and plan.result is not None:
                    refuse_overwriting_on_top(store, plan.tree, plan.snap, before.get(plan.tree), plan.result, "apply")
            outcomes = [TreeOutcome(p, p.snap is not None and p.snap.tree_id() != p.result, before.get(p.tree),
                                    name) for p in plans]  # fmt: skip
            if dry_run:
                for o, plan in zip(outcomes, plans, strict=True):
                    o.left_branch(refs.symbolic_head(plan.snap.repo) if plan.snap is not None else None)
            else:
                _switch_all(store, name, plans, guards, outcomes)
            return outcomes
        finally:
            for plan in plans:
                if plan.snap is not None:
                    plan.snap.release()


def refuse_overwriting_on_top(store: Store, tree: str, snap: Snapshot, held: Applied | None, target: str,
                              verb: str) -> None:  # fmt: skip
    """Exit 1, nothing changed, when the move would overwrite changes on top of the series the tree holds that no
    current patch keeps (safety/on_top.py)."""
    from stackmgr.errors import NotPreserved
    from stackmgr.safety.assessment import counted, file_lines
    from stackmgr.safety.on_top import overwritten_on_top

    found = overwritten_on_top(snap, held, target, lambda: assess(store, snap).preserved)
    if found:
        series = held.series if held is not None else ""
        raise NotPreserved(f"{verb} refused, nothing changed: tree {tree} has changes on top of series {series} that "
                           f"no patch keeps, in files the {verb} would change ({counted(found)})",
                           f"`stackmgr diff -z` shows them; `stackmgr save NAME` keeps them as a patch on top of "
                           f"{series}, or `stackmgr reset --force` sets the tree aside", file_lines(found))  # fmt: skip


def _refuse_revivals(store: Store, name: str, plans: list[TreePlan], override: str | None, dry_run: bool) -> None:
    """A patch that a do-not-revive link names (by name or patch-id) stops the apply, unless overridden (now, or
    by an override recorded for it; a dry run records none). A patch the tree already holds applied at this
    version brings nothing back (`apply S` again of the series it holds)."""
    from stackmgr.evidence.revival import guard_revival
    from stackmgr.store.applied import load_applied

    held = {(tree, n): sha for tree, a in load_applied(store).items() for n, sha in a.patches}
    brought = [(p.name, p.data) for plan in plans for p in plan.patches
               if held.get((plan.tree, p.name)) is None or held[(plan.tree, p.name)] != p.sha256]  # fmt: skip
    guard_revival(store, brought, override, f"apply {name}", record=not dry_run)


def _switch_all(store: Store, name: str, plans: list[TreePlan], guards: tuple[str, ...],
                outcomes: list[TreeOutcome]) -> None:  # fmt: skip
    """Switch every tree; if one refuses, put the ones already switched back as they were."""
    done: list[tree_move.Moved] = []
    try:
        for plan in plans:
            assert plan.snap is not None and plan.result is not None
            done.append(tree_move.move_tree(plan.snap, plan.result, index_tree=plan.base, head=plan.base,
                                           reason=f"stackmgr apply {name}", op=store.journal))  # fmt: skip
    except BaseException:
        for moved in reversed(done):
            tree_move.move_back(moved, f"stackmgr apply {name}: rolled back")
        raise
    for plan, moved, outcome in zip(plans, done, outcomes, strict=True):
        assert plan.result is not None
        outcome.left_branch(moved.branch)  # what HEAD was on, as the move read it
        applied = Applied(name, plan.base, [(p.name, p.sha256) for p in plan.patches], plan.result,
                          guards=list(guards))  # fmt: skip
        applied.branch = outcome.branch  # the branch before the first apply: `reset` goes back to it
        record_applied(store, plan.tree, applied)
