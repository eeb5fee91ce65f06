"""Where each tree lives: `tree add`, `tree set`, `tree rm` edit the shared config's tree names and this machine's
stackmgr.local.toml (docs/FORMATS.md#config). A tree path comes from this machine, never from the shared config
alone (docs/SECURITY.md): `tree set NAME` without a path accepts the shared default once, by writing it here."""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.store.config import (
    LOCAL_FILE,
    PYPROJECT,
    Store,
    _parse,
    load_store,
    read_gitignore,
    toml_string,
    tree_key,
)
from stackmgr.store.names import check_name


def add_tree(store: Store, name: str, path: str) -> Store:
    """Register tree NAME at `path` on this machine: its name in the shared config (appended when new, with no
    path: each machine has its own), its path in stackmgr.local.toml. A tree the shared config names already
    (a teammate's) only gets its path here; one with a path here already is refused."""
    check_name("tree", name)
    if name in store.local_paths:
        raise UsageProblem(f"tree '{name}' is already registered here ({store.trees[name].path})",
                           f"`stackmgr tree set {name} PATH` moves it, or pick another name")  # fmt: skip
    if not store.knows(name):
        with open(store.config_path, "rb") as f:
            data = f.read()
        if data and not data.endswith(b"\n"):
            data += b"\n"
        data += f"\n[{tree_key(store, name)}]\n".encode()
        _parse(store.config_path, data)  # never write a config that no longer parses
        store.write_file(store.config_path, data)
    return _write_local(store, {**store.local_paths, name: path})


def set_tree_path(store: Store, name: str, path: str | None) -> Store:
    """Where tree NAME lives on this machine (stackmgr.local.toml); no path: accept the shared config's default."""
    if not store.knows(name):
        store.tree(name)  # the usual "unknown tree" refusal
    if path is None:
        if name not in store.suggested:
            raise UsageProblem(f"the shared config suggests no path for tree {name}",
                               f"say where your checkout is: `stackmgr tree set {name} PATH`")  # fmt: skip
        path = store.suggested[name]
    return _write_local(store, {**store.local_paths, name: path})


def remove_tree(store: Store, name: str) -> Store:
    """Forget tree NAME: its table in the shared config and its path here."""
    if not store.knows(name):
        store.tree(name)
    with open(store.config_path, "rb") as f:
        lines = f.read().split(b"\n")
    header = f"[{tree_key(store, name)}]".encode()
    kept, skipping = [], False
    for line in lines:
        if line.strip().startswith(b"["):
            skipping = line.strip().split(b"#", 1)[0].strip() == header
        if not skipping:
            kept.append(line)
    data = b"\n".join(kept)
    table: object = _parse(store.config_path, data)
    for key in (["tool", "stackmgr"] if store.config_path.endswith(PYPROJECT) else []) + ["trees"]:
        table = table.get(key, {}) if isinstance(table, dict) else {}
    if isinstance(table, dict) and name in table:
        raise StackmgrError(f"{store.config_path}: tree {name}'s table is not one `tree rm` can find",
                            "remove it by hand")  # fmt: skip
    if data != b"\n".join(lines):
        store.write_file(store.config_path, data)
    return _write_local(store, {n: p for n, p in store.local_paths.items() if n != name})


def _write_local(store: Store, paths: dict[str, str]) -> Store:
    """stackmgr.local.toml with these paths (it is stackmgr's own file: written whole), and the store's
    .gitignore listing it, so it is never shared."""
    top, tables = _kept(store.local_path)
    out = [*_HEADER, *top]
    for name in sorted(paths):
        out += ["", f"[trees.{toml_string(name)}]", f"path = {toml_string(paths[name])}"]
    data = ("\n".join(out) + "\n" + tables).encode()
    _parse(store.local_path, data)
    _ignore_local(store)  # first: the file is never there unignored (a `git add -A` would share it)
    store.write_file(store.local_path, data)
    return load_store(store.root)


_HEADER = ("# Where each tree of this store lives on this machine; never shared (git-ignored).",
           "# Change with `stackmgr tree set NAME PATH`.")  # fmt: skip


def _kept(path: str) -> tuple[list[str], str]:
    """What the local file says besides tree paths, kept as the user wrote it: its top-level keys
    (`max_untracked_bytes`), which must stay above every table, and its other tables (`[run] env_by_value`)."""
    from stackmgr.store.fs import read_or_none

    top: list[str] = []
    tables: list[str] = []
    section, in_trees = top, False
    for line in (read_or_none(path) or b"").decode("utf-8", "replace").split("\n"):
        head = line.strip()
        if head.startswith("["):
            name = head.lstrip("[").split("]", 1)[0].strip()
            in_trees = name == "trees" or name.startswith(("trees.", 'trees."'))
            section = tables
        if not in_trees and line not in _HEADER:
            section.append(line)
    text = "\n".join(tables).strip("\n")
    return [line for line in top if line.strip()], ("\n" + text + "\n") if text else ""


def _ignore_local(store: Store) -> None:
    gitignore = os.path.join(store.root, ".gitignore")
    existing = read_gitignore(store.root)
    if LOCAL_FILE.encode() not in existing.splitlines():
        store.write_file(gitignore, existing + (b"\n" if existing and not existing.endswith(b"\n") else b"")
                         + LOCAL_FILE.encode() + b"\n")  # fmt: skip
