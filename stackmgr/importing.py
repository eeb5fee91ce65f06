"""`stackmgr import FILE… [-t TREE] [--series S] [--name N] [--base REV]`: adopt patches made elsewhere (issue 6).

Each patch is applied strictly in a scratch index (the user's tree, index and HEAD are never touched) and the
result re-diffed with the flags of SPEC §3.1, so an imported patch is full-index, binary-safe and verified like a
saved one. The base, when not given, is the newest commit of the tree's current branch (first parents, at most
SEARCH_DEPTH back) on which the patch applies strictly; only commits that changed the patch's files are tried.

Loose files are imported one by one, each on its own base. With `--series S`, or a quilt directory, the files
are a stack, like `git am` and `quilt push -a`: one base where they apply in order (S's own base and result when
S already has patches of that tree), each patch the difference from the one below.
"""

from __future__ import annotations

import os
import shutil

from stackmgr import git, patchfile, tempindex
from stackmgr.config import Store
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.fsutil import atomic_write, read_or_none
from stackmgr.incoming import Incoming, Refused, read_inputs
from stackmgr.journal import operation
from stackmgr.names import inside, patch_name, valid_name

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
        self.series: str | None = None


def import_patches(
    store: Store, paths: list[str], tree: str | None, series: str | None, name: str | None, base: str | None
) -> ImportReport:
    report = ImportReport()
    for path in paths:
        if not os.path.exists(path):
            raise UsageProblem(f"{path} does not exist", "give patch files or a quilt directory")
    if tree is not None:
        store.tree(tree)
    if not store.trees:
        raise UsageProblem("this store has no trees", "register one with `stackmgr tree add NAME PATH`")
    items, quilt = read_inputs(paths)
    if name is not None and len(items) != 1:
        raise UsageProblem(f"--name names one patch, and {len(items)} were given", "drop --name")
    report.series = series or (quilt.suggested_series if quilt else None)
    if report.series is not None and not valid_name(report.series):
        raise UsageProblem(f"'{report.series}' is not a valid series name", "pass --series NAME")
    good = _named(items, name, report)
    if not good:
        return report
    from stackmgr import output

    output.progress_total(len(good))
    with operation(store, f"import {' '.join(os.path.basename(p) for p in paths)}"[:200]):
        if report.series is not None:
            _import_stack(store, good, tree, report.series, base, report)
        else:
            for item in good:
                _import_alone(store, item, tree, base, report)
    return report


def _named(items: list[Incoming | Refused], name: str | None, report: ImportReport) -> list[Incoming]:
    good, seen = [], set()
    for item in items:
        if isinstance(item, Refused):
            report.refused.append(item)
            continue
        if name is not None:
            item.name = patch_name(name)
        if not valid_name(item.name):
            report.refused.append(Refused(item.source, f"'{item.name}' is not a usable patch name (pass --name)"))
            continue
        stem, n = item.name, 2
        while item.name in seen:  # two "wip" commits in one mbox: wip, wip-2
            item.name, n = f"{stem[:190]}-{n}", n + 1
        seen.add(item.name)
        good.append(item)
    return good


def _import_alone(store: Store, item: Incoming, wanted: str | None, base: str | None, report: ImportReport) -> None:
    trees = _trees_for(store, item, wanted)
    if isinstance(trees, Refused):
        report.refused.append(trees)
        return
    found = []
    for tree in trees:
        try:
            with _Workspace(store, tree) as ws:
                hit = ws.find_base([item], base)
        except StackmgrError as exc:  # no commits, gone, REV unknown there: only an answer if it was the one tree
            if len(trees) == 1:
                report.refused.append(Refused(item.source, exc.message))
                return
            continue
        if hit is not None:
            found.append((tree, hit))
    if not found:
        where = f"tree {trees[0]}" if len(trees) == 1 else f"any of the trees ({', '.join(trees)})"
        at = f"commit {base}" if base else f"HEAD or the {SEARCH_DEPTH} commits before it"
        report.refused.append(Refused(item.source, f"does not apply to {where} at {at} (a patch for another tree?)"))
        return
    if len(found) > 1:
        names = ", ".join(t for t, _ in found)
        report.refused.append(Refused(item.source, f"applies to several trees ({names}); pass -t TREE"))
        return
    tree, (commit, label) = found[0]
    with _Workspace(store, tree) as ws:
        ws.add(item, commit, git.tree_of(ws.repo.top, commit), label, report)


def _import_stack(
    store: Store, items: list[Incoming], wanted: str | None, series: str, base: str | None, report: ImportReport
) -> None:
    from stackmgr.series import SeriesFile

    trees = _trees_for(store, items[0], wanted)
    if isinstance(trees, Refused):
        report.refused.extend(Refused(i.source, trees.reason) for i in items)
        return
    sf = SeriesFile.load_or_new(store, series)
    tree = _stack_tree(store, sf, items, trees, base)
    below = _series_patches(store, sf, tree)
    with _Workspace(store, tree) as ws:
        if below:
            if base is not None:
                raise UsageProblem(f"--base does not combine with series {series}, which has patches for tree {tree}",
                                   "drop --base: the series' own base is used")  # fmt: skip
            commit, label = patchfile.parse_header(below[0][1], "series patch").base, f"series {series}"
            current = _rebuilt(ws, series, commit, [p for p, _ in below])
        else:
            hit = ws.find_base(items, base)
            if hit is None:
                at = f"commit {base}" if base else f"HEAD or the {SEARCH_DEPTH} commits before it"
                for item in items:
                    report.refused.append(Refused(item.source, f"does not apply to tree {tree} at {at}"))
                return
            commit, label = hit
            current = git.tree_of(ws.repo.top, commit)
        added = []
        names = [os.path.basename(p) for p, _ in below]
        refused_before = len(report.refused)
        for n, item in enumerate(items):
            if len(report.refused) > refused_before:  # like git am: nothing goes on top of a refused patch
                report.refused.extend(Refused(i.source, "not imported: an earlier patch of the stack was refused")
                                      for i in items[n:])  # fmt: skip
                break
            filename = item.name + ".patch"
            if filename in names:  # already in the series: compared where it stands there (a re-import)
                place = names.index(filename)
                ws.add(item, commit, _rebuilt(ws, series, commit, [p for p, _ in below[:place]]), label, report)
                continue
            result = ws.add(item, commit, current, label, report)
            if result is not None:
                current = result
                added.append(filename)
    if added:
        for filename in added:
            sf.append(filename)
        sf.write()


def _rebuilt(ws: _Workspace, series: str, base: str, patch_files: list[str]) -> str:
    if not patch_files:
        return git.tree_of(ws.repo.top, base)
    tree, failure = ws.rebuild(base, patch_files)
    if tree is None:
        raise StackmgrError(f"series {series} does not rebuild on its base ({failure})",
                            "refresh it first (`stackmgr lint` says more)")  # fmt: skip
    return tree


def _stack_tree(store: Store, sf: object, items: list[Incoming], trees: list[str], base: str | None) -> str:
    """The one tree a stack is for: the only candidate, the tree the series already has patches of, or the one
    tree where the stack applies."""
    if len(trees) == 1:
        return trees[0]
    having = [t for t in trees if _series_patches(store, sf, t)]
    if len(having) == 1:
        return having[0]
    fits = []
    for tree in trees:
        try:
            with _Workspace(store, tree) as ws:
                if ws.find_base(items, base) is not None:
                    fits.append(tree)
        except StackmgrError:
            continue
    if len(fits) != 1:
        which = f"applies to {', '.join(fits)}" if fits else "applies to none of the trees"
        raise UsageProblem(f"this stack {which}", "pass -t TREE to say which tree the series is for")
    return fits[0]


def _series_patches(store: Store, sf: object, tree: str) -> list[tuple[str, bytes]]:
    from stackmgr.series import SeriesFile

    assert isinstance(sf, SeriesFile)
    sf.check_files()
    out = []
    for entry in sf.entries:
        path = os.path.join(store.patches_dir, entry.patch)
        with open(path, "rb") as f:
            data = f.read()
        if patchfile.parse_header(data, f"patches/{entry.patch}").tree == tree:
            out.append((path, data))
    return out


def _trees_for(store: Store, item: Incoming, wanted: str | None) -> list[str] | Refused:
    named = item.trailer_tree
    if wanted is not None:
        if named and named != wanted and named in store.trees:
            return Refused(item.source, f"a patch for tree {named} (its Stackmgr-Tree), not {wanted}")
        return [wanted]
    if named:
        if named not in store.trees:
            return Refused(item.source, f"a patch for tree {named}, which this store does not know (pass -t TREE)")
        return [named]
    return sorted(store.trees)


class _Workspace:
    """One tree's repository, a scratch index and a directory for the patches being tried."""

    def __init__(self, store: Store, tree: str) -> None:
        self.store = store
        self.tree = tree
        self.repo = git.open_repo(store.tree(tree).path)
        self.dir = os.path.join(self.repo.stackmgr_dir, f"import.{os.getpid()}")
        self.index = os.path.join(self.dir, "index")
        self.files: dict[int, str] = {}

    def __enter__(self) -> _Workspace:
        if git.head_commit(self.repo.top) is None:
            raise StackmgrError(f"tree {self.tree} has no commits", "make a first commit")
        os.makedirs(self.dir, exist_ok=True)
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

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
            listed = set(git.zsplit(git.run(self.repo.top, ["ls-tree", "-r", "-z", "--name-only", "HEAD", "--",
                                                           *git.pathspec(asked)])))  # fmt: skip
            held = {d for p in (0, 1) for d in dirs[p] if any(f.startswith(d + b"/") for f in listed)}

            def score(p: int) -> tuple[int, int]:  # files that exist, then directories new files would go into
                return sum(n in listed for n in names[p]), sum(d in held for d in dirs[p])

            if score(0) > score(1):
                item.strip = 0
        return item.strip

    def applies(self, start: str, items: list[Incoming]) -> int:
        """How many of `items` apply in order, strictly, to tree-ish `start` (all of them when the result is
        len(items)); the index then holds the result of that many."""
        git.run(self.repo.top, ["read-tree", start], index=self.index)
        strips = {self.strip(i) for i in items}
        if len(strips) == 1 and len(items) > 1:
            ok, _ = tempindex.apply_to_index(self.repo.top, self.index, *map(self.file, items), strip=strips.pop())
            if ok:
                return len(items)
            git.run(self.repo.top, ["read-tree", start], index=self.index)
        for n, item in enumerate(items):
            ok, _ = tempindex.apply_to_index(self.repo.top, self.index, self.file(item), strip=self.strip(item))
            if not ok:
                return n
        return len(items)

    def find_base(self, items: list[Incoming], explicit: str | None) -> tuple[str, str] | None:
        """(commit, how it was found): the newest candidate where all items apply, else the newest where the
        most of them apply in order; None when not even the first applies anywhere."""
        if explicit is not None:
            commit = git.resolve_commit(self.repo.top, explicit)
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
        strip = self.strip(item)
        return [b"/".join(n.split(b"/")[strip:]) for n in item.paths_raw() if n.count(b"/") >= strip]

    def _candidates(self, paths: list[bytes]) -> list[tuple[str, str]]:
        """HEAD, and the parent of every first-parent commit that changed one of `paths`: each the newest commit
        with that state of the files (only those decide whether a patch applies)."""
        top = self.repo.top
        chain = git.run(top, ["rev-list", "--first-parent", f"--max-count={SEARCH_DEPTH}", "HEAD"]).split()
        touching = set(git.run(top, ["rev-list", "--first-parent", f"--max-count={SEARCH_DEPTH}", "HEAD", "--",
                                     *git.pathspec(paths)]).split()) if paths else set()  # fmt: skip
        found = [(chain[0].decode(), "HEAD")]
        for n, commit in enumerate(chain[:-1]):
            if commit in touching:
                found.append((chain[n + 1].decode(), f"HEAD~{n + 1}"))
        return found

    def rebuild(self, base: str, patch_files: list[str]) -> tuple[str | None, str]:
        from stackmgr.scratch import tree_from_patches

        return tree_from_patches(self.repo, base, patch_files)

    def add(self, item: Incoming, base: str, start: str, label: str, report: ImportReport) -> str | None:
        """Apply `item` to tree-ish `start`, write the normalised patch (recording `base`); the result tree, or
        None with the refusal added to the report."""
        from stackmgr import output

        output.tick()
        top = self.repo.top
        if self.applies(start, [item]) != 1:
            _, err = self._why(start, item)
            report.refused.append(Refused(item.source, f"does not apply on {label}: {err}"))
            return None
        result = git.write_tree(top, self.index)
        stat_and_diff = git.run(top, ["diff-tree", "-r", "-p", "--stat=72", "--summary", *git.DIFF_FLAGS, start,
                                      result])  # fmt: skip
        if not stat_and_diff:
            report.refused.append(Refused(item.source, f"changes nothing on {label} (already applied there?)"))
            return None
        target = inside(self.store.patches_dir, item.name + ".patch")
        existing = read_or_none(target)
        data = self._render(item, base, stat_and_diff, existing)
        problem = self._verify(data, start, result)
        if problem:
            report.refused.append(Refused(item.source, problem))
            return None
        if existing is not None and existing != data:
            report.refused.append(Refused(item.source, f"patches/{item.name}.patch already exists (pass --name, "
                                                       "or import it under another name)"))  # fmt: skip
            return None
        if existing is None:
            os.makedirs(self.store.patches_dir, exist_ok=True)
            atomic_write(target, data)
        report.imported.append(Imported(item, self.tree, base, label, "imported" if existing is None else "unchanged",
                                        data))  # fmt: skip
        return result

    def _why(self, start: str, item: Incoming) -> tuple[bool, str]:
        git.run(self.repo.top, ["read-tree", start], index=self.index)
        ok, err = tempindex.apply_to_index(self.repo.top, self.index, self.file(item), strip=self.strip(item))
        return ok, (err.splitlines()[0] if err else "does not apply")

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
            name, email, _, _ = git.author_ident(git.start_author_ident(self.repo.top))
            author = author or f"{name} <{email}>"
            date = date or patchfile.rfc2822(int(item.mtime), "+0000")
        who, _, mail = author.rpartition(" <")
        try:
            subject, body = patchfile.check_message(item.subject + ("\n\n" + item.body if item.body else ""))
        except StackmgrError:
            subject, body = item.name, item.body
        return patchfile.render(tree=self.tree, base=base, subject=subject, body=body, name=who, email=mail[:-1],
                                date=date, stat_and_diff=stat_and_diff)  # fmt: skip

    def _verify(self, data: bytes, start: str, result: str) -> str | None:
        """The written bytes, applied to where they start, must give exactly the result."""
        path = os.path.join(self.dir, "normalised.patch")
        with open(path, "wb") as f:
            f.write(data)
        git.run(self.repo.top, ["read-tree", start], index=self.index)
        ok, err = tempindex.apply_to_index(self.repo.top, self.index, path)
        if not ok or git.write_tree(self.repo.top, self.index) != result:
            return f"the normalised patch does not reproduce the result ({err or 'different tree'}); please report this"
        return None
