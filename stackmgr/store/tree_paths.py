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
        _name_in_shared_config(store, name)
    return _write_local(store, {**store.local_paths, name: path})


def share_again(store: Store, name: str) -> str | None:
    """A patch is saved for tree NAME, which this machine placed but the shared config no longer names (a
    teammate's `tree rm`, pulled): the name goes back into the shared config, so every clone reads the patch as
    this store's (the path stays here). The note to print, or None when the shared config names it."""
    if name not in store.only_here:
        return None
    _name_in_shared_config(store, name)
    store.only_here.remove(name)
    return (f"tree {name} was no longer in the shared config (a `tree rm` pulled); it is named there again, as "
            f"this patch is for it (`stackmgr tree rm {name}` here forgets it)")


def _name_in_shared_config(store: Store, name: str) -> None:
    with open(store.config_path, "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        data += b"\n"
    data += f"\n[{tree_key(store, name)}]\n".encode()
    _parse(store.config_path, data)  # never write a config that no longer parses
    store.write_file(store.config_path, data)


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


def toml_string(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def tree_key(store: Store, name: str) -> str:
    """The TOML table of tree `name` in the store's shared config (`trees.NAME`, quoted where it must be)."""
    import re

    prefix = "tool.stackmgr.trees" if store.config_path.endswith(PYPROJECT) else "trees"
    return f"{prefix}.{name if re.fullmatch(r'[A-Za-z0-9_-]+', name) else toml_string(name)}"


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


TYPE_CHECKING = False
if TYPE_CHECKING:  # no collections.abc on `save`'s start-up path
    from collections.abc import Callable

    Prefer = tuple[list[str], ...] | Callable[[], tuple[list[str], ...]]


def tree_to_act_on(store: Store, wanted: str | None, *, patch: str | None = None, series: str | None = None,
                   prefer: Prefer = (), nothing: StackmgrError | None = None) -> str:
    """The default tree: the one tree a command acts on when `-t` names none (`trees_to_act_on`, one tree)."""
    return trees_to_act_on(store, (wanted,) if wanted else (), patch=patch, series=series, prefer=prefer,
                           nothing=nothing)[0]  # fmt: skip


def trees_to_act_on(store: Store, wanted: tuple[str, ...], *, patch: str | None = None, series: str | None = None,
                    prefer: Prefer = (), nothing: StackmgrError | None = None, several: bool = False) -> list[str]:
    """The rule for the default tree (docs/FORMATS.md#config), one for every command that acts on a tree:

    1. the trees named (`-t`), each known and placed on this machine;
    2. else the tree whose current series is `series`, or lists `patch` (several: that patch's own tree);
    3. else the only tree of the command's first non-empty `prefer` list (`save`: those with unsaved changes,
       then those with changes; `push`/`pop`/`top`/`refresh`/`run`: those with a current series); several in it
       are refused, or all taken when the command acts on `several` (`run` measures every tree it can); none in
       any, the command's `nothing` error when it gives one (`prefer` may be a function: asked only here);
    4. else the tree the current directory is in;
    5. else the only tree placed on this machine;
    6. else a usage error listing the trees: say which with -t TREE."""
    if wanted:
        for name in wanted:
            store.tree(name)
        return list(dict.fromkeys(wanted))
    if not store.trees and store.unplaced:
        raise UsageProblem(f"no tree of this store has a path on this machine ({', '.join(store.unplaced)})",
                           f"say where yours is: `stackmgr tree set {store.unplaced[0]} PATH`")  # fmt: skip
    if not store.trees:
        raise UsageProblem("the store has no trees", "register one with `stackmgr tree add NAME PATH`")
    from stackmgr.store.applied import load_applied

    current = {t: a for t, a in load_applied(store).items() if t in store.trees}
    holding = sorted(t for t, a in current.items() if series is not None and a.series == series)
    if patch is not None and not holding:
        from stackmgr.store.series import series_listing

        try:
            listing = series_listing(store, patch)
        except StackmgrError:
            listing = []  # the command itself meets the unreadable series, in its own words
        holding = sorted(t for t, a in current.items() if a.series in listing)
        if len(holding) > 1:
            holding = [t for t in holding if t == _tree_of(store, patch)] or holding
    if len(holding) == 1 or (several and holding):
        return holding
    tiers = prefer() if callable(prefer) else prefer
    for candidates in tiers:
        if len(candidates) == 1 or (several and candidates):
            return sorted(candidates)
        if candidates:
            raise UsageProblem(f"which tree? {', '.join(sorted(candidates))} all could be meant",
                               "say which with -t TREE")  # fmt: skip
    if tiers and nothing is not None:
        raise nothing
    here = os.path.realpath(os.getcwd())
    inside = [n for n, c in sorted(store.trees.items())
              if here == (top := os.path.realpath(c.path)) or here.startswith(top + os.sep)]  # fmt: skip
    if inside:
        return inside[:1]
    if len(store.trees) == 1:
        return list(store.trees)
    raise UsageProblem(f"which tree? this store has {', '.join(sorted(store.trees))}", "say which with -t TREE")


def _tree_of(store: Store, patch: str) -> str | None:
    """The tree a patch's header names (None when it cannot be read: the command says why)."""
    from stackmgr.store.fs import read_or_none
    from stackmgr.store.patchfile import parse_header

    base = patch[: -len(".patch")] if patch.endswith(".patch") else patch
    try:
        data = read_or_none(os.path.join(store.patches_dir, base + ".patch"))
        return parse_header(data, f"patches/{base}.patch").tree if data is not None else None
    except (StackmgrError, OSError):
        return None
