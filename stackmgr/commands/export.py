"""`stackmgr export SERIES --quilt DIR | --mbox FILE | --git BRANCH`: hand a series to quilt, `git am` or a branch.
The patch files are written as they are, bytes untouched: a stackmgr patch already is a `git format-patch` mail
that quilt and `git am` take (docs/FORMATS.md#patch-file).
"""

from __future__ import annotations

import os

from stackmgr.commands.apply import TreePlan, plan_series
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git import refs
from stackmgr.git.checked import BadGitValue
from stackmgr.git.repo import open_repo
from stackmgr.safety import claims
from stackmgr.store import patchfile
from stackmgr.store.config import Store
from stackmgr.store.fs import atomic_write
from stackmgr.store.series import SeriesFile


def export_quilt(store: Store, series: str, directory: str, guards: tuple[str, ...] = ()) -> tuple[list[str],
                                                                                                    list[str]]:
    """DIR/<patch files> and DIR/series: `quilt push -a` (QUILT_PATCHES=DIR) applies them. A patch imported from a
    quilt series gets back the name it had there (`fix.diff`, `debian/x`), the others their store name. Returns
    the names written, and those holding a binary change (GNU patch, and so quilt, cannot apply those). Refuses
    to write into a directory that holds anything but an earlier export of this series (only the files this
    export writes, and a `series` listing nothing else): nothing of someone's own quilt directory is lost."""
    plans = _single_tree(store, series, guards)
    names = _quilt_names(plans[0])
    if os.path.exists(directory):
        if not os.path.isdir(directory):
            raise UsageProblem(f"{directory} is a file", "export into a new directory")
        stray = _not_ours(directory, set(names.values()))
        if stray:
            raise UsageProblem(f"{directory} holds {stray}, which this export would not write",
                               "export into a new directory (or empty that one)")  # fmt: skip
    os.makedirs(directory, exist_ok=True)
    for p in plans[0].patches:
        target = os.path.join(directory, *names[os.path.basename(p.path)].split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        atomic_write(target, quilt_patch(p.data))
    atomic_write(os.path.join(directory, "series"), _quilt_series(store, series, names))
    binary = [names[os.path.basename(p.path)] for p in plans[0].patches if b"\nGIT binary patch\n" in p.data]
    return list(names.values()), binary


def _not_ours(directory: str, names: set[str]) -> str:
    """The first thing in `directory` an export writing `names` (and `series`) would not write, or ""."""
    for root, dirs, files in os.walk(directory):
        for filename in sorted(files):
            rel = os.path.relpath(os.path.join(root, filename), directory).replace(os.sep, "/")
            if rel != "series" and rel not in names:
                return rel
        dirs[:] = [d for d in sorted(dirs) if any(n.startswith(os.path.relpath(os.path.join(root, d), directory)
                                                             .replace(os.sep, "/") + "/") for n in names)]  # fmt: skip
        for d in sorted(set(os.listdir(root)) - set(files) - set(dirs)):
            return os.path.relpath(os.path.join(root, d), directory).replace(os.sep, "/")
    try:
        with open(os.path.join(directory, "series"), "rb") as f:
            listed = [ln.split()[0].decode("utf-8", "replace") for ln in f.read().splitlines()
                      if ln.strip() and not ln.startswith(b"#")]  # fmt: skip
    except OSError:
        return ""
    return next((f"series (it lists {n})" for n in listed if n not in names), "")


def _quilt_names(plan: TreePlan) -> dict[str, str]:
    """Each patch file's name in the exported directory: the one its quilt series gave it, when that is a plain
    relative path and no other patch takes it; else its store name."""
    files = [os.path.basename(p.path) for p in plan.patches]
    names: dict[str, str] = {}
    for filename, p in zip(files, plan.patches, strict=True):
        wanted = patchfile.original_name(p.data)
        plain = wanted and wanted.isprintable() and not any(c.isspace() for c in wanted) and all(
            c and c not in (".", "..") and c.lower() not in (".pc", ".git") for c in wanted.split("/")
        )  # a name a pulled patch gives: one word of a quilt series, a file inside DIR and none of git's
        free = wanted not in names.values() and (wanted == filename or wanted not in files)
        names[filename] = wanted if plain and free and wanted != "series" else filename
    return names


def _quilt_series(store: Store, series: str, names: dict[str, str]) -> bytes:
    """The series file quilt reads: the store's series line for line (comments, blank lines, `-p1` and trailing
    comments as written; quilt reads ` #+guard` as a comment), less the entries guards left out, each entry under
    its exported name."""
    sf = SeriesFile.load(store, series)
    out = []
    for ln in sf.lines:
        if ln.entry is None:
            out.append(ln.text)
        elif ln.entry.patch in names:
            at = ln.text.find(ln.entry.patch)
            out.append(ln.text[:at] + names[ln.entry.patch] + ln.text[at + len(ln.entry.patch) :])
    return "".join(text + "\n" for text in out).encode("utf-8", "surrogateescape")


def quilt_patch(data: bytes) -> bytes:
    """A patch as quilt gets it: an imported one with the header it came with (byte for byte) above the stored
    diff; any other as it is (a `git format-patch` mail, which quilt reads too)."""
    header = patchfile.original_header(data)
    return data if header is None else header + patchfile.diff_part(data)


def export_mbox(store: Store, series: str, path: str, guards: tuple[str, ...] = ()) -> list[str]:
    """One mbox: each patch a message, in series order; `git am --keep-cr FILE` makes one commit per patch."""
    plans = _single_tree(store, series, guards)
    if os.path.exists(path):
        raise UsageProblem(f"{path} already exists", "give a new file name")
    if not plans[0].patches:  # an mbox of no message: `git am` finds no patch in it
        raise StackmgrError(f"series {series} has no patches: it is empty at its base {plans[0].base[:12]}",
                            f"`stackmgr export {series} --git BRANCH` makes a branch at that base")  # fmt: skip
    parts = [p.data if p.data.endswith(b"\n") else p.data + b"\n" for p in plans[0].patches]
    atomic_write(path, b"".join(parts))
    return [p.name for p in plans[0].patches]


def export_git(store: Store, series: str, branch: str, guards: tuple[str, ...] = ()) -> list[str]:
    """A new branch in the tree, one commit per patch on the series' base (author, date and message from each
    patch), made with plumbing: the working tree, the index and HEAD are not touched."""
    plans = _single_tree(store, series, guards)
    plan = plans[0]
    repo = open_repo(store.tree(plan.tree).path)
    ref = f"refs/heads/{branch}"
    if not refs.valid_branch_name(repo, branch):
        raise UsageProblem(f"'{branch}' is not a valid branch name", "pick another name")
    if repo.ref_commit(ref) is not None:
        raise UsageProblem(f"branch {branch} already exists in tree {plan.tree}", "pick a new branch name")
    if not repo.has_commit(plan.base):
        raise StackmgrError(f"the base {plan.base[:12]} of series {series} is not a commit of tree {plan.tree}",
                            "fetch it first")  # fmt: skip
    from stackmgr.git.scratch import tree_from_patches

    parent, done = plan.base, []
    for n, p in enumerate(plan.patches, start=1):
        tree, failure = tree_from_patches(repo, parent, [p.path])
        if tree is None:
            raise StackmgrError(f"patch {p.name} ({n} of {len(plan.patches)}) does not apply: {failure}; "
                                "no branch was made", "refresh the patch first")  # fmt: skip
        claims.check_result(repo, parent, tree, claims.claims([p], repo, store.root), plan.tree)
        source = f"patches/{os.path.basename(p.path)}"
        header = patchfile.parse_header(p.data, source)
        message = header.subject + ("\n\n" + header.body if header.body else "") + "\n"
        try:
            parent = refs.commit_as(repo, tree, parent, message, header.author, header.date)
        except BadGitValue as exc:  # its author or date would reach git's environment
            raise StackmgrError(f"{source}: {exc.message}; no branch was made", exc.hint) from None
        done.append(p.name)
    refs.update_ref(repo, ref, parent, f"stackmgr export {series}")
    return done


def _single_tree(store: Store, series: str, guards: tuple[str, ...]) -> list[TreePlan]:
    """Export hands one tree's patches on: a series mixing trees is refused (export it per tree with -t)."""
    plans = plan_series(store, series, None, guards)
    if len(plans) != 1:
        trees = ", ".join(p.tree for p in plans)
        raise UsageProblem(f"series {series} mixes trees ({trees})", "quilt, git am and a branch take one tree")
    return plans

