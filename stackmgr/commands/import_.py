"""`stackmgr import FILE… [-t TREE] [--series S] [--name N] [--base REV]`: adopt patches made elsewhere.

Each patch is applied strictly in a scratch index (the user's tree, index and HEAD are never touched) and the
result re-diffed as in docs/FORMATS.md#patch-file, so an imported patch is full-index, binary-safe and verified like a
saved one. The base, when not given, is the newest commit of the tree's current branch (first parents, at most
SEARCH_DEPTH back) on which the patch applies strictly; only commits that changed the patch's files are tried.

Loose files are imported one by one, each on its own base. With `--series S`, or a quilt directory, the files
are a stack, like `git am` and `quilt push -a`: one base where they apply in order (S's own base and result when
S already has patches of that tree), each patch the difference from the one below.
"""

from __future__ import annotations

import os

from stackmgr import output
from stackmgr.commands.import_tree import SEARCH_DEPTH, ImportReport, Workspace
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.incoming.read import Empty, Incoming, QuiltDir, Refused, read_inputs
from stackmgr.journal.operation import operation
from stackmgr.store import patchfile
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none
from stackmgr.store.names import patch_name, refuse_linked_dirs, valid_name
from stackmgr.store.series import SeriesError, SeriesFile
from stackmgr.types import show_path


def import_patches(
    store: Store, paths: list[str], tree: str | None, series: str | None, name: str | None, base: str | None,
    override: str | None = None,
) -> ImportReport:
    report = ImportReport()
    for path in paths:
        if not os.path.exists(path):
            raise UsageProblem(f"{path} does not exist", "give patch files or a quilt directory")
    if tree is not None:
        store.tree(tree)
    if not store.trees and store.unplaced:
        raise UsageProblem(f"no tree of this store has a path on this machine ({', '.join(store.unplaced)})",
                           f"say where yours is: `stackmgr tree set {store.unplaced[0]} PATH`")  # fmt: skip
    if not store.trees:
        raise UsageProblem("this store has no trees", "register one with `stackmgr tree add NAME PATH`")
    refuse_linked_dirs(store.root)  # nothing is written through a link a pull made (`patches -> ~/.bashrc.d`)
    read, quilt = read_inputs(paths, store.root)
    items = [i for i in read if not isinstance(i, Empty)]  # changes nothing: skipped, the stack goes on
    report.skipped = [*(quilt.empty if quilt is not None else []), *(i for i in read if isinstance(i, Empty))]
    if not items and report.skipped:
        n = len(report.skipped)
        raise StackmgrError(f"nothing to import: every patch given is empty ({n} file{'s' if n != 1 else ''})",
                            "give the patches that change something")  # fmt: skip
    if not read and quilt is not None:  # quilt push: "No patches in series"
        raise StackmgrError(f"nothing to import: the quilt series in {', '.join(paths)} lists no patch; no series "
                            "was made", "give a quilt directory whose series lists patches")  # fmt: skip
    if name is not None and len(items) != 1:
        raise UsageProblem(f"--name names one patch, and {len(items)} were given", "drop --name")
    report.series = series or (quilt.suggested_series if quilt else None)
    if report.series is not None and not valid_name(report.series):
        raise UsageProblem(f"'{report.series}' is not a valid series name", "pass --series NAME")
    good = _named(items, name, report)
    if report.series is not None and report.refused:  # a stack, like `git am`: nothing goes on top of a refusal
        good = _below_first_refusal(items, good, report)
    if not good:
        return report
    from stackmgr import output

    output.progress_total(len(good))
    with operation(store, f"import {' '.join(os.path.basename(p) for p in paths)}"[:200]):
        if report.series is not None:
            _import_stack(store, good, tree, report.series, base, report, quilt, override)
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
        if not valid_name(item.name) or item.name.endswith("."):  # NAME..patch would be no series entry
            report.refused.append(Refused(item.source, f"'{item.name}' is not a usable patch name (pass --name)"))
            continue
        stem, n = item.name, 2
        while item.name in seen:  # two "wip" commits in one mbox: wip, wip-2
            item.name, n = f"{stem[:190]}-{n}", n + 1
        seen.add(item.name)
        good.append(item)
    return good


def _git_reason(ws: Workspace, item: Incoming, base: str | None) -> str:
    """git's own first complaint (file and line) about `item` at --base, else at HEAD."""
    start = ws.repo.resolve_commit(base) if base else "HEAD"
    return f"at {'--base' if base else 'HEAD'}: " + ws.why_not(start, item)[1]


def _below_first_refusal(items: list[Incoming | Refused], good: list[Incoming], report: ImportReport) -> list[Incoming]:
    """The patches of a stack below its first refused one; those above it are reported as not imported."""
    refused = {r.source for r in report.refused}
    first = next(n for n, item in enumerate(items) if item.source in refused)
    above = {id(item) for item in items[first + 1 :]}
    report.refused.extend(Refused(item.source, "not imported: an earlier patch of the stack was refused")
                          for item in good if id(item) in above)  # fmt: skip
    return [item for item in good if id(item) not in above]


def _import_alone(store: Store, item: Incoming, wanted: str | None, base: str | None, report: ImportReport) -> None:
    trees = _trees_for(store, item, wanted)
    if isinstance(trees, Refused):
        report.refused.append(trees)
        return
    found = []
    why = ""
    for tree in trees:
        try:
            with Workspace(store, tree) as ws:
                hit = ws.find_base([item], base)
                if hit is None and len(trees) == 1:
                    why = _git_reason(ws, item, base)
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
        said = why if "(hunk " in why else f"{why}; a patch for another tree?" if why else "a patch for another tree?"
        report.refused.append(Refused(item.source, f"does not apply to {where} at {at} ({said})"))
        return
    if len(found) > 1:
        names = ", ".join(t for t, _ in found)
        report.refused.append(Refused(item.source, f"applies to several trees ({names}); pass -t TREE"))
        return
    tree, (commit, label) = found[0]
    with Workspace(store, tree) as ws:
        ws.add(item, commit, ws.repo.tree_of(commit), label, report)


def _import_stack(
    store: Store,
    items: list[Incoming],
    wanted: str | None,
    series: str,
    base: str | None,
    report: ImportReport,
    quilt: QuiltDir | None,
    override: str | None = None,
) -> None:
    trees = _trees_for(store, items[0], wanted)
    if isinstance(trees, Refused):
        report.refused.extend(Refused(i.source, trees.reason) for i in items)
        return
    sf = SeriesFile.load_or_new(store, series)
    tree = _stack_tree(store, sf, items, trees, base)
    below = _series_patches(store, sf, tree)
    with Workspace(store, tree) as ws:
        whole = base is not None and len(items) > 1 and not below  # add_stack tries them whole at --base
        if below:
            if base is not None:
                raise UsageProblem(f"--base does not combine with series {series}, which has patches for tree {tree}",
                                   "drop --base: the series' own base is used")  # fmt: skip
            commit, label = patchfile.parse_header(below[0][1], "series patch").base, f"series {series}"
            current = _rebuilt(ws, series, commit, [p for p, _ in below])
            if quilt is not None and not _read_as_gnu_patch(ws, items, current, report):
                return
        else:
            if quilt is not None and not _read_as_gnu_patch(ws, items, ws.repo.resolve_commit(base or "HEAD"), report):
                return
            hit = (ws.repo.resolve_commit(base), "--base") if whole and base else ws.find_base(items, base)
            if hit is None:
                _refuse_stack(ws, items, tree, base, report)
                return
            commit, label = hit
            current = ws.tree_of(commit)
        added: list[tuple[str, Incoming]] = []
        names = [os.path.basename(p) for p, _ in below]
        refused_before = len(report.refused)
        fresh = all(i.name + ".patch" not in names for i in items)
        stacked = ws.add_stack(items, commit, current, label, report) if fresh and len(items) > 1 else None
        if stacked is None and whole and ws.applies(current, items[:1]) == 0:  # the first alone, only now
            _refuse_stack(ws, items, tree, base, report)
            return
        rest = items
        if stacked is not None:  # the stack's first patches, built together
            kept, dealt, current = stacked
            added.extend((i.name + ".patch", i) for i in kept)
            rest = items[dealt:]
        for n, item in enumerate(rest):
            if len(report.refused) > refused_before:  # like git am: nothing goes on top of a refused patch
                report.refused.extend(Refused(i.source, "not imported: an earlier patch of the stack was refused")
                                      for i in rest[n:])  # fmt: skip
                break
            filename = item.name + ".patch"
            if filename in names:  # already in the series: compared where it stands there (a re-import)
                place = names.index(filename)
                ws.add(item, commit, _rebuilt(ws, series, commit, [p for p, _ in below[:place]]), label, report)
                continue
            result = ws.add(item, commit, current, label, report)
            if result is not None:
                current = result
                added.append((filename, item))
    report.appended = len(added)
    if added:  # the series brings their changes back: a do-not-revive lane is refused as `series add` refuses it
        from stackmgr.evidence.revival import guard_revival

        guard_revival(store, [(f[: -len(".patch")], read_or_none(os.path.join(store.patches_dir, f)) or b"")
                              for f, _item in added], override, f"import --series {series}")  # fmt: skip
        for filename, item in added:
            _append(sf, filename, item, quilt)
        if quilt is not None and added[-1][1] is items[-1]:  # the whole stack is in: the series' last comments
            for text in quilt.trailing:
                sf.append_line(text)
        sf.write()


def _read_as_gnu_patch(ws: Workspace, items: list[Incoming], at: str, report: ImportReport) -> bool:
    """Quilt is the reference for a quilt series: `_as_gnu_patch_reads`; False when a patch had to be refused (it
    and the rest are, in `report`, as quilt push stops there)."""
    stop = _as_gnu_patch_reads(ws, items, at)
    if stop is None:
        return True
    n, why = stop
    report.refused.append(Refused(items[n].source, why))
    report.refused.extend(Refused(i.source, "not imported: an earlier patch of the stack was refused")
                          for i in items[n + 1 :])  # fmt: skip
    del items[n:]
    return bool(items)


def _as_gnu_patch_reads(ws: Workspace, items: list[Incoming], at: str) -> tuple[int, str] | None:
    """The quilt series' patches read as GNU patch reads them where git reads them otherwise (incoming/gnu_patch.py),
    against the tree-ish `at` (`--base`, HEAD, or the series' result the patches go on): an all-added hunk against
    a file that exists; a `---` name that is not there; a hunk git pins where GNU patch looks for it. The first
    patch that cannot be read so, and why (the caller refuses it and the rest)."""
    from stackmgr.incoming.gnu_patch import old_names_as_git_header, prepend_creations, unpin_hunks

    touched: set[bytes] = set()
    after: dict[int, str | None] = {}  # the tree the first n patches make at `at` (None: they do not apply)
    for n, item in enumerate(items):
        if b"diff --git a/" in item.diff and ws.strip(item) == 1:
            item.diff, renamed = old_names_as_git_header(item.diff, lambda p: ws.repo.file_bytes(at, p) is not None)
            for path in renamed:
                output.err(output.show_text(f"stackmgr: note: {item.source}: its `---` line names a file that is "
                                            f"not there; {show_path(path)}, as its `diff --git` line says, is "
                                            "patched, as GNU patch (quilt) does"))  # fmt: skip
        if b"@@ -0,0 +1" in item.diff:
            strip = ws.strip(item)
            item.diff, done = prepend_creations(item.diff, strip, lambda p: None if p in touched else
                                                ws.repo.file_bytes(at, p))  # fmt: skip
            for path in done:
                output.err(output.show_text(f"stackmgr: note: {item.source}: its hunk creating {show_path(path)}, "
                                            "which is there already, puts its lines above the file's own, as GNU "
                                            "patch (quilt) does"))  # fmt: skip
        def now(p: bytes, above: int = n) -> bytes | None:  # the file as the patches above leave it
            if p not in touched:
                return ws.repo.file_bytes(at, p)
            if above not in after:
                after[above] = ws.index.write_tree() if ws.applies(at, items[:above]) == above else None
            if after[above] is None:
                raise LookupError(p)
            return ws.repo.file_bytes(after[above] or "", p)

        item.diff, floated, unsure = unpin_hunks(item.diff, ws.strip(item), now)
        if unsure:  # git could put the hunk elsewhere than GNU patch: refused, never a silently different tree
            return n, (f"a hunk of {show_path(unsure[0])} (at line 1, or with no context below its change) where git "
                       "would pin it to the file's start or end, and GNU patch (quilt) looks for it from its line; "
                       "stackmgr cannot tell where quilt puts it (an earlier part of the series changed the file and "
                       "does not apply strictly)")  # fmt: skip
        for path in floated:
            output.err(output.show_text(f"stackmgr: note: {item.source}: a hunk of {show_path(path)} that git would "
                                        "pin to the file's start or end is applied where its lines are, as GNU patch "
                                        "(quilt) does"))  # fmt: skip
        touched.update(item.paths(ws.strip(item)))
    return None


def _refuse_stack(ws: Workspace, items: list[Incoming], tree: str, base: str | None, report: ImportReport) -> None:
    """Not even the first patch applies anywhere: say why, as git would; the rest are not imported."""
    at = f"commit {base}" if base else f"HEAD or the {SEARCH_DEPTH} commits before it"
    why = _git_reason(ws, items[0], base)
    report.refused.append(Refused(items[0].source, f"does not apply to tree {tree} at {at} ({why})"))
    report.refused.extend(Refused(i.source, "not imported: an earlier patch of the stack was refused")
                          for i in items[1:])  # fmt: skip


def _append(sf: SeriesFile, filename: str, item: Incoming, quilt: QuiltDir | None) -> None:
    """The patch's series line; from a quilt series, with the comments above it and its own line's `-p1` and
    comment as written there."""
    if quilt is None or id(item) not in quilt.suffix:
        sf.append(filename)
        return
    for text in quilt.above[id(item)]:
        sf.append_line(text)
    try:
        sf.append_line(filename + quilt.suffix[id(item)])
    except SeriesError:  # a trailing comment stackmgr would read as a bad guard (`#+`): the name alone
        sf.append(filename)


def _rebuilt(ws: Workspace, series: str, base: str, patch_files: list[str]) -> str:
    if not patch_files:
        return ws.repo.tree_of(base)
    tree, failure = ws.rebuild(base, patch_files)
    if tree is None:
        raise StackmgrError(f"series {series} does not rebuild on its base ({failure})",
                            "refresh it first (`stackmgr lint` says more)")  # fmt: skip
    return tree


def _stack_tree(store: Store, sf: SeriesFile, items: list[Incoming], trees: list[str], base: str | None) -> str:
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
            with Workspace(store, tree) as ws:
                if ws.find_base(items, base) is not None:
                    fits.append(tree)
        except StackmgrError:
            continue
    if len(fits) != 1:
        which = f"applies to {', '.join(fits)}" if fits else "applies to none of the trees"
        raise UsageProblem(f"this stack {which}", "pass -t TREE to say which tree the series is for")
    return fits[0]


def _series_patches(store: Store, sf: SeriesFile, tree: str) -> list[tuple[str, bytes]]:
    sf.check_files()
    out = []
    for entry in sf.entries:
        path = os.path.join(store.patches_dir, entry.patch)
        data = read_or_none(path) or b""  # `check_files` refused links: never read through one
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
        if named in store.unplaced:
            return Refused(item.source, f"a patch for tree {named}, which has no path on this machine "
                                        f"(`stackmgr tree set {named} PATH`)")  # fmt: skip
        if named not in store.trees:
            return Refused(item.source, f"a patch for tree {named}, which this store does not know (pass -t TREE)")
        return [named]
    return sorted(store.trees)
