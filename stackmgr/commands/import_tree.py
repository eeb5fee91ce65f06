"""One tree as `import` uses it (import_.py): a scratch index and directory where incoming patches are tried,
the base they apply to is searched, and each is re-diffed to docs/FORMATS.md#patch-file, verified and written.
The user's tree, index and HEAD are never touched."""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError
from stackmgr.git.repo import author_ident, open_repo
from stackmgr.git.tempindex import TempIndex
from stackmgr.incoming.names import failing_hunk
from stackmgr.incoming.read import Incoming, Refused
from stackmgr.store import patchfile
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none
from stackmgr.store.names import inside, refuse_link_above
from stackmgr.types import Change

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

SEARCH_DEPTH = 1000


class Imported:
    def __init__(self, item: Incoming, tree: str, base: str, found_at: str, outcome: str, data: bytes) -> None:
        self.source = item.source
        self.name = item.name
        self.tree = tree
        self.base = base
        self.found_at = found_at  # "HEAD", "HEAD~3", "--base", "series S"
        self.outcome = outcome  # "imported" | "unchanged"
        self.stat = patchfile.stat_totals(data)


class ImportReport:
    def __init__(self) -> None:
        self.imported: list[Imported] = []
        self.refused: list[Refused] = []
        self.skipped: list[Refused] = []  # nothing to import, and no refusal (an empty quilt patch)
        self.series: str | None = None
        self.appended = 0  # how many of the imported patches the series got (a re-import appends none)


class ScratchIndex:
    """A scratch index that knows which tree it holds, so reading that tree into it again costs no git process
    (in a stack, each patch starts where the one below it ended)."""

    def __init__(self, index: TempIndex) -> None:
        self.index = index
        self.holds: str | None = None
        self.stacked: tuple[str, list[int], int] | None = None  # (start, ids of the items, how many applied)

    def read_tree(self, treeish: str) -> None:
        self.stacked = None
        if treeish != self.holds:
            self.holds = None
            self.index.read_tree(treeish)
            self.holds = treeish

    def apply(self, *patch_paths: str, strip: int = 1, meanwhile: Callable[[], object] | None = None
              ) -> tuple[bool, str]:  # fmt: skip
        self.holds = self.stacked = None
        return self.index.apply(*patch_paths, strip=strip, meanwhile=meanwhile)

    def write_tree(self) -> str:
        self.holds = self.index.write_tree()
        return self.holds


class Workspace:
    """One tree's repository, two scratch indexes (where patches are tried, where their normalised versions are
    checked) and a directory for the patches being tried."""

    def __init__(self, store: Store, tree: str) -> None:
        self.store = store
        self.tree = tree
        self.repo = open_repo(store.tree(tree).path)
        self.dir = os.path.join(self.repo.stackmgr_dir, f"import.{os.getpid()}")
        self.index = ScratchIndex(TempIndex(self.repo, f"import.{os.getpid()}/index"))  # beside the files
        self.check_index = ScratchIndex(TempIndex(self.repo, f"import.{os.getpid()}/check-index"))
        self.files: dict[int, str] = {}
        self._ident: tuple[str, str] | None = None
        self._trees: dict[str, str] = {}  # commit -> its tree, for those asked
        self._written: list[tuple[str, bytes]] = []  # patch files this import wrote, each verified

    def __enter__(self) -> Workspace:
        if self.repo.head_commit() is None:
            raise StackmgrError(f"tree {self.tree} has no commits", "make a first commit")
        os.makedirs(self.dir, exist_ok=True)
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        import shutil  # only as the workspace goes: its own start-up is import's

        shutil.rmtree(self.dir, ignore_errors=True)
        if kind is None and self._written:
            self._record_verified()

    def _record_verified(self) -> None:
        """What each written patch ends its files with, into the patch index as `save` records it: the bytes
        were just verified to rebuild their result, so `apply` and `check` need not apply them again to know."""
        from stackmgr.safety.preserved import PatchIndex

        index = PatchIndex.load(self.store)
        recorded = False
        for filename, data in self._written:
            images = patchfile.post_images(patchfile.diff_part(data), filename)
            mode_only = patchfile.mode_only(images)
            changes = [Change(im.path, im.old_mode, im.mode, im.old_blob or "", im.blob or "")
                       for im in images if im.mode and (im.blob is not None or im.path in mode_only)]  # fmt: skip
            if len(changes) == len(images):  # a mode-only change is recorded as such (no blob: see record_saved)
                index.record_saved(filename, data, changes, self.repo, save=False)
                recorded = True
        if recorded:
            index.save()  # once for them all

    def file(self, item: Incoming) -> str:
        path = self.files.get(id(item))
        if path is None:
            path = os.path.join(self.dir, f"{len(self.files)}.diff")
            with open(path, "wb") as f:
                f.write(item.diff)
            self.files[id(item)] = path
        return path

    def strip(self, item: Incoming) -> int:
        """A traditional diff's -p level when none was given: the one under which more of its files exist."""
        if item.strip < 0:
            item.strip = 1
            names = {p: [b"/".join(n.split(b"/")[p:]) for n in item.paths_raw()] for p in (0, 1)}
            dirs = {p: [n.rsplit(b"/", 1)[0] for n in names[p] if b"/" in n] for p in (0, 1)}
            asked = [*names[0], *names[1], *dirs[0], *dirs[1]]
            listed = self.repo.tracked_names("HEAD", asked)
            held = {d for p in (0, 1) for d in dirs[p] if any(f.startswith(d + b"/") for f in listed)}

            def score(p: int) -> tuple[int, int]:  # files that exist, then directories new files would go into
                return sum(n in listed for n in names[p]), sum(d in held for d in dirs[p])

            if score(0) > score(1):
                item.strip = 0
        return item.strip

    def applies(self, start: str, items: list[Incoming]) -> int:
        """How many of `items` apply in order, strictly, to tree-ish `start` (all of them when the result is
        len(items)); the index then holds the result of that many."""
        ids, key = [id(i) for i in items], self._trees.get(start, start)  # a commit and its tree: one start
        if self.index.stacked is not None and self.index.stacked[:2] == (key, ids):
            return self.index.stacked[2]  # asked just before: the index holds the answer already
        applying = self._applies(start, items)
        self.index.stacked = (key, ids, applying)
        return applying

    def tree_of(self, commit: str) -> str:
        """The commit's tree (remembered: `applies` then knows the commit and its tree for one start)."""
        tree = self.repo.tree_of(commit)
        self._trees[commit] = tree
        held = self.index.stacked
        if held is not None and held[0] == commit:
            self.index.stacked = (tree, held[1], held[2])
        return tree

    def _applies(self, start: str, items: list[Incoming]) -> int:
        self.index.read_tree(start)
        strips = {self.strip(i) for i in items}
        if len(strips) == 1 and len(items) > 1:
            ok, _ = self.index.apply(*map(self.file, items), strip=strips.pop())
            if ok:
                return len(items)
            self.index.read_tree(start)
        for n, item in enumerate(items):
            ok, _ = self.index.apply(self.file(item), strip=self.strip(item))
            if not ok:
                return n
        return len(items)

    def find_base(self, items: list[Incoming], explicit: str | None) -> tuple[str, str] | None:
        """(commit, how it was found): the newest candidate where all items apply, else the newest where the
        most of them apply in order; None when not even the first applies anywhere."""
        if explicit is not None:
            commit = self.repo.resolve_commit(explicit)
            return (commit, "--base") if self.applies(commit, items[:1]) else None
        paths = sorted({p for i in items for p in self._paths(i)})
        best: tuple[int, str, str] | None = None
        for candidate, label in self._candidates(paths):
            n = self.applies(candidate, items)
            if n == len(items):
                return candidate, label
            if n and (best is None or n > best[0]):
                best = (n, candidate, label)
        return (best[1], best[2]) if best else None

    def _paths(self, item: Incoming) -> list[bytes]:
        return item.paths(self.strip(item))

    def _candidates(self, paths: list[bytes]) -> list[tuple[str, str]]:
        """HEAD, and the parent of every first-parent commit that changed one of `paths`: each the newest commit
        with that state of the files (only those decide whether a patch applies)."""
        chain = self.repo.first_parents(SEARCH_DEPTH)
        touching = set(self.repo.first_parents(SEARCH_DEPTH, paths)) if paths else set()
        found = [(chain[0].decode(), "HEAD")]
        for n, commit in enumerate(chain[:-1]):
            if commit in touching:
                found.append((chain[n + 1].decode(), f"HEAD~{n + 1}"))
        return found

    def rebuild(self, base: str, patch_files: list[str]) -> tuple[str | None, str]:
        from stackmgr.git.scratch import tree_from_patches

        return tree_from_patches(self.repo, base, patch_files)

    def add(self, item: Incoming, base: str, start: str, label: str, report: ImportReport) -> str | None:
        """Apply `item` to tree-ish `start`, write the normalised patch (recording `base`); the result tree, or
        None with the refusal added to the report."""
        from stackmgr import output

        output.tick()
        if self.applies(start, [item]) != 1:
            _, err = self.why_not(start, item)
            report.refused.append(Refused(item.source, f"does not apply on {label}: {err}"))
            return None
        result = self.index.write_tree()
        ready = self._prepare(item, base, start, result, self.repo.diff_trees_with_stat(start, result), label, report)
        if ready is None:
            return None
        problem = self._verify(ready.data, start, result)
        if problem:
            report.refused.append(Refused(item.source, problem))
            return None
        return self._keep([ready], report)

    def add_stack(self, items: list[Incoming], base: str, start: str, label: str, report: ImportReport
                  ) -> tuple[list[Incoming], int, str] | None:  # fmt: skip
        """`add` the first of `items` in order from `start`, with a few git calls for the whole stack
        (git/layers.py) instead of several each: (the items kept, how many were dealt with, the tree after the
        last one kept). A refused one is the last dealt with; one that does not apply is left to `add`, which
        says why. None, with nothing done, when the stack cannot be built that way: the caller then adds them
        one by one."""
        from stackmgr import output
        from stackmgr.git.layers import LayerPatch, Stacked, apply_in_layers

        def layered(todo: list[Incoming]) -> Stacked | None:
            return apply_in_layers(self.repo, start, [LayerPatch(self.file(i), self.strip(i), self._paths(i))
                                                      for i in todo])  # fmt: skip

        built: list[Stacked | None] = []
        strips = {self.strip(i) for i in items}
        key = (self._trees.get(start, start), [id(i) for i in items])
        if len(strips) == 1 and (self.index.stacked is None or self.index.stacked[:2] != key):
            self.index.read_tree(start)  # git's own answer for the whole stack, while the layers are built
            ok, _ = self.index.apply(*map(self.file, items), strip=strips.pop(),
                                     meanwhile=lambda: built.append(layered(items)))  # fmt: skip
            self.index.stacked = (*key, len(items)) if ok else None
        applying = self.applies(start, items)
        if applying == 0:
            return None
        final = self.index.write_tree()  # patch after patch, in one git call
        todo = items[:applying]
        if applying < len(items) or not built:
            built = [layered(todo)]
        stack = built[0]
        if stack is None or stack.trees[-1] != final:
            return None
        readies: list[Ready] = []
        refused_before, below, belows = len(report.refused), start, []
        for item, result, stat_and_diff in zip(todo, stack.trees, stack.diffs, strict=True):
            ready = self._prepare(item, base, below, result, stat_and_diff, label, report)
            if ready is None:
                break
            readies.append(ready)
            belows.append(below)
            below = result
        if readies and self._verify_all([r.data for r in readies], start, below) is not None and any(
                self._verify(r.data, under, r.result) for r, under in zip(readies, belows, strict=True)):  # fmt: skip
            del report.refused[refused_before:]
            return None  # one of them does not reproduce: the one-by-one way names it
        if readies:
            output.tick(len(readies))
            self._keep(readies, report)
        return [r.item for r in readies], len(readies) + (len(report.refused) > refused_before), below

    def _prepare(self, item: Incoming, base: str, start: str, result: str, stat_and_diff: bytes, label: str,
                 report: ImportReport) -> Ready | None:  # fmt: skip
        """The patch file `item` becomes (not yet verified or written), or None with its refusal reported."""
        if not stat_and_diff:
            report.refused.append(Refused(item.source, f"changes nothing on {label} (already applied there?)"))
            return None
        target = inside(self.store.patches_dir, item.name + ".patch")
        existing = read_or_none(target)
        data = self._render(item, base, stat_and_diff, existing)
        if existing is not None and existing != data:
            report.refused.append(Refused(item.source, f"patches/{item.name}.patch already exists (pass --name, "
                                                       "or import it under another name)"))  # fmt: skip
            return None
        return Ready(item, base, label, target, data, existing is None, result)

    def _keep(self, readies: list[Ready], report: ImportReport) -> str:
        """Write verified patch files (those not there already, byte for byte) in one journaled write; the
        result tree of the last."""
        new = [r for r in readies if r.new]
        if new:
            os.makedirs(self.store.patches_dir, exist_ok=True)
            self.store.write_files([(refuse_link_above(self.store.root, r.target), r.data) for r in new])
            self._written.extend((r.item.name + ".patch", r.data) for r in new)
        for ready in readies:
            report.imported.append(Imported(ready.item, self.tree, ready.base, ready.label,
                                            "imported" if ready.new else "unchanged", ready.data))  # fmt: skip
        return readies[-1].result

    def why_not(self, start: str, item: Incoming) -> tuple[bool, str]:
        """Whether `item` applies to tree-ish `start`, and git's own first line when it does not (file, line, and
        the hunk that is)."""
        self.index.read_tree(start)
        ok, err = self.index.apply(self.file(item), strip=self.strip(item))
        return ok, failing_hunk(item.diff, self.strip(item), err)

    def _render(self, item: Incoming, base: str, stat_and_diff: bytes, existing: bytes | None) -> bytes:
        """The patch file; an input that already is this very patch (an export) is kept byte for byte. Where the
        input names no author or date, a patch of that name already imported keeps its own (a re-import of the
        same file is then a no-op), else the tree's git identity and the file's time are used."""
        if (item.trailer_tree == self.tree and item.trailer_base == base and item.original.endswith(stat_and_diff)
                and item.original.startswith(patchfile.FROM_LINE)):  # fmt: skip
            return item.original
        author = item.author
        date = item.date
        if existing is not None and not (author and date):
            try:
                header = patchfile.parse_header(existing, "existing patch")
                author, date = author or header.author, date or header.date
            except StackmgrError:
                pass
        if not author or not date:
            if self._ident is None:  # once per import: git's identity does not change meanwhile
                name, email, _, _ = author_ident(self.repo.start_author_ident())
                self._ident = name, email
            name, email = self._ident
            author = author or f"{name} <{email}>"
            date = date or patchfile.rfc2822(int(item.mtime), "+0000")
        who, _, mail = author.rpartition(" <")
        try:
            subject, body = patchfile.check_message(item.subject + ("\n\n" + item.body if item.body else ""))
        except StackmgrError:
            subject, body = item.name, item.body
        return patchfile.render(tree=self.tree, base=base, subject=subject, body=body, name=who, email=mail[:-1],
                                date=date, stat_and_diff=stat_and_diff, original=item.header,
                                original_name=item.quilt_name)  # fmt: skip

    def _verify(self, data: bytes, start: str, result: str) -> str | None:
        """The written bytes, applied to where they start, must give exactly the result (in the second index: in
        a stack it holds `start` already, the result of the patch below)."""
        return self._verify_all([data], start, result)

    def _verify_all(self, datas: list[bytes], start: str, result: str) -> str | None:
        """Patch files applied in order to `start`, in one git call, must give exactly `result`. Each one's diff
        is git's own between the trees below and above it, so this checks what the rendering added. (One call
        is not always patch after patch: git refuses a path below a symlink an earlier file of the call made,
        though a later one replaced it; `add_stack` then checks them one by one.)"""
        paths = []
        for n, data in enumerate(datas):
            paths.append(os.path.join(self.dir, f"normalised.{n}.patch"))
            with open(paths[-1], "wb") as f:
                f.write(data)
        self.check_index.read_tree(start)
        ok, err = self.check_index.apply(*paths)
        if not ok or self.check_index.write_tree() != result:
            return f"the normalised patch does not reproduce the result ({err or 'different tree'}); please report this"
        return None


class Ready:
    """A patch file made from an incoming patch, waiting to be verified and written."""

    def __init__(self, item: Incoming, base: str, label: str, target: str, data: bytes, new: bool, result: str
                 ) -> None:  # fmt: skip
        self.item, self.base, self.label, self.target, self.data, self.new = item, base, label, target, data, new
        self.result = result
