"""`stackmgr interdiff A B` and `interdiff PATCH --against REV|FILE`: the real difference between two versions of
a change. Each version is applied strictly to its own base in a scratch index and the two
results are diffed, over the files either version touches: not a diff of diffs, so moved context, refreshed
hunks and re-bases that change nothing show as nothing.

A version is `NAME` (patches/NAME.patch), `NAME@prev` (the version `save --update` replaced last), `NAME@HEX`
(a kept version by its sha256 prefix), or a path to a patch file.
"""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git.repo import Repo, open_repo
from stackmgr.git.scratch import tree_from_patches
from stackmgr.store import patchfile
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none
from stackmgr.store.names import VERSIONS, inside, no_patch, patch_name, refuse_link_inside, refuse_linked_dirs


class Version:
    def __init__(self, label: str, path: str, shown: str = "") -> None:
        self.label = label
        self.path = path
        if shown:  # a file of the store: never read through a symbolic link
            self.data = read_or_none(path) or b""
        else:  # a file the user named
            with open(path, "rb") as f:
                self.data = f.read()
        self.header = patchfile.parse_header(self.data, shown or label)
        self.paths = [im.path for im in patchfile.post_images(patchfile.diff_part(self.data), label)]


def resolve(store: Store, spec: str) -> Version:
    """A version named as the module docstring says; a usage error names what was not found."""
    name, _, which = spec.partition("@")
    if not which and os.path.isfile(spec) and not os.path.isfile(os.path.join(store.patches_dir, spec + ".patch")):
        return Version(spec, spec)
    name = patch_name(name)
    refuse_linked_dirs(store.root, ("patches", f"patches/{VERSIONS}"))
    if not which:
        path = inside(store.patches_dir, name + ".patch")
        if not os.path.isfile(path):
            raise no_patch(store, name, f"no patch named {name} (nor a file {name} here)")
        return Version(f"{name}.patch", path, f"patches/{name}.patch")
    kept = refuse_link_inside(store.root, os.path.join(store.patches_dir, VERSIONS, name))
    versions = sorted((os.path.join(kept, v) for v in os.listdir(kept) if v.endswith(".patch")),
                      key=os.path.getmtime) if os.path.isdir(kept) else []  # fmt: skip
    hits = versions[-1:] if which == "prev" else [v for v in versions if os.path.basename(v).startswith(which.lower())]
    if len(hits) != 1:
        raise UsageProblem(f"no single kept version {spec}",
                           f"`save {name} --update` keeps what it replaces in patches/.versions/{name}/")  # fmt: skip
    return Version(f"{name}@{os.path.basename(hits[0])[:12]}", hits[0], os.path.relpath(hits[0], store.root))


def interdiff(store: Store, a: Version, b: Version | None, against_rev: str | None) -> bytes:
    """The patch from A's result to B's (or to REV's tree), over the files either touches."""
    tree = a.header.tree
    if b is not None and b.header.tree != tree:
        raise UsageProblem(f"{a.label} is for tree {tree}, {b.label} for tree {b.header.tree}",
                           "compare two versions of one tree's change")  # fmt: skip
    repo = open_repo(store.tree(tree).path)
    old = _result(repo, a)
    if b is not None:
        new = _result(repo, b)
        paths = sorted(set(a.paths) | set(b.paths))
    else:
        assert against_rev is not None
        new = repo.tree_of(repo.resolve_commit(against_rev))
        paths = sorted(set(a.paths))
    return repo.diff_trees(old, new, paths)


def _result(repo: Repo, version: Version) -> str:
    base = version.header.base
    if not repo.has_commit(base):
        raise StackmgrError(f"{version.label}: its base {base[:12]} is not a commit of its tree", "fetch it first")
    result, failure = tree_from_patches(repo, base, [os.path.abspath(version.path)])
    if result is None:
        raise StackmgrError(f"{version.label} does not apply to its base {base[:12]}: {failure}",
                            "it needs the earlier patches of its series; compare versions saved alone")  # fmt: skip
    return result


def compare(
    store: Store, a: str, b: str | None, against: str | None
) -> tuple[Version, Version | None, str | None, bytes]:
    """`interdiff A B` or `interdiff A --against REV|FILE` (an existing file is a patch, else a revision):
    (A, B or None, the revision or None, the diff; empty when there is no difference)."""
    first = resolve(store, a)
    rev = against if against is not None and not os.path.isfile(against) else None
    second = resolve(store, b if b is not None else str(against)) if rev is None else None
    return first, second, rev, interdiff(store, first, second, rev)
