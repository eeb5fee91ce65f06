"""The store: where it is, what its config says, and creating one (SPEC §2)."""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.fsutil import atomic_write
from stackmgr.names import check_name

CONFIG_FILE = "stackmgr.toml"
PYPROJECT = "pyproject.toml"
DEFAULT_MAX_UNTRACKED = 50 * 1024 * 1024
STORE_GITIGNORE = b".stackmgr/\n"


@dataclass(frozen=True)
class TreeConfig:
    name: str
    path: str  # absolute


@dataclass(frozen=True)
class Store:
    root: str
    config_path: str
    trees: dict[str, TreeConfig] = field(default_factory=dict)
    max_untracked_bytes: int = DEFAULT_MAX_UNTRACKED

    @property
    def patches_dir(self) -> str:
        return os.path.join(self.root, "patches")

    @property
    def series_dir(self) -> str:
        return os.path.join(self.root, "series")

    @property
    def links_dir(self) -> str:
        return os.path.join(self.root, "links")

    @property
    def state_dir(self) -> str:
        return os.path.join(self.root, ".stackmgr")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.state_dir, "lock")

    def tree(self, name: str) -> TreeConfig:
        if name not in self.trees:
            known = ", ".join(sorted(self.trees)) or "none yet"
            raise UsageProblem(f"unknown tree '{name}' (known: {known})", "add it with `stackmgr tree add NAME PATH`")
        return self.trees[name]


def _has_stackmgr_table(pyproject: str) -> bool:
    try:
        with open(pyproject, "rb") as f:
            data = f.read()
    except OSError:
        return False
    tool = _parse(pyproject, data).get("tool", {}) if b"[tool.stackmgr" in data else {}
    return isinstance(tool, dict) and "stackmgr" in tool


def _parse(path: str, data: bytes) -> dict[str, object]:
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise StackmgrError(f"{path}: not valid TOML ({exc})", "fix the file by hand") from None


def find_store_root(explicit: str | None, cwd: str | None = None) -> str:
    """--store, then STACKMGR_STORE, then the first directory upward holding a store config."""
    given = explicit or os.environ.get("STACKMGR_STORE")
    if given:
        root = os.path.abspath(given)
        if not (os.path.isfile(os.path.join(root, CONFIG_FILE)) or _has_stackmgr_table(os.path.join(root, PYPROJECT))):
            raise UsageProblem(f"{root} is not a stackmgr store", f"create one with `stackmgr init {given}`")
        return root
    here = os.path.abspath(cwd or os.getcwd())
    while True:
        if os.path.isfile(os.path.join(here, CONFIG_FILE)) or _has_stackmgr_table(os.path.join(here, PYPROJECT)):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            raise UsageProblem(
                "no stackmgr store here or in any parent directory",
                "run `stackmgr init`, pass --store DIR or set STACKMGR_STORE",
            )
        here = parent


def load_store(root: str) -> Store:
    config_path = os.path.join(root, CONFIG_FILE)
    if os.path.isfile(config_path):
        with open(config_path, "rb") as f:
            table: object = _parse(config_path, f.read())
    else:
        config_path = os.path.join(root, PYPROJECT)
        with open(config_path, "rb") as f:
            tool = _parse(config_path, f.read()).get("tool", {})
        table = tool.get("stackmgr", {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise StackmgrError(f"{config_path}: the stackmgr config must be a table")
    return Store(root, config_path, _trees(config_path, root, table.get("trees", {})), _limit(config_path, table))


def _limit(config_path: str, table: dict[str, object]) -> int:
    value = table.get("max_untracked_bytes", DEFAULT_MAX_UNTRACKED)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise StackmgrError(f"{config_path}: max_untracked_bytes must be a whole number of bytes")
    return value


def _trees(config_path: str, root: str, raw: object) -> dict[str, TreeConfig]:
    if not isinstance(raw, dict):
        raise StackmgrError(f"{config_path}: [trees] must be a table of tables")
    trees = {}
    for name, entry in raw.items():
        try:
            check_name("tree", name)
        except UsageProblem as exc:
            raise StackmgrError(f"{config_path}: {exc.message}", exc.hint) from None
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise StackmgrError(f"{config_path}: tree '{name}' needs a path = \"...\" entry")
        path = os.path.expanduser(entry["path"])
        trees[name] = TreeConfig(name, os.path.normpath(os.path.join(root, path)))
    return trees


def open_store(explicit: str | None) -> Store:
    return load_store(find_store_root(explicit))


def init_store(directory: str) -> tuple[str, bool]:
    """Create the store layout in `directory`; return (root, created). Existing stores are left as they are."""
    root = os.path.abspath(directory)
    if os.path.exists(root) and not os.path.isdir(root):
        raise StackmgrError(f"{root} exists and is not a directory", "pick another path")
    already = os.path.isfile(os.path.join(root, CONFIG_FILE)) or _has_stackmgr_table(os.path.join(root, PYPROJECT))
    try:
        for sub in ("patches", "series", "links", ".stackmgr"):
            os.makedirs(os.path.join(root, sub), exist_ok=True)
    except OSError as exc:
        raise StackmgrError(f"cannot create the store in {root}: {exc.strerror}", "check the permissions") from None
    if not already:
        atomic_write(os.path.join(root, CONFIG_FILE), b"# stackmgr store: register trees with `stackmgr tree add`\n")
    gitignore = os.path.join(root, ".gitignore")
    existing = b""
    if os.path.exists(gitignore):
        with open(gitignore, "rb") as f:
            existing = f.read()
    if b".stackmgr/" not in existing.splitlines():
        atomic_write(
            gitignore,
            existing + (b"\n" if existing and not existing.endswith(b"\n") else b"") + STORE_GITIGNORE,
        )
    return root, not already


def _toml_string(value: str) -> str:
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


def add_tree(store: Store, name: str, path: str) -> Store:
    """Append a [trees.NAME] table to the store config; refuse a name already taken."""
    check_name("tree", name)
    if name in store.trees:
        raise UsageProblem(f"tree '{name}' is already registered ({store.trees[name].path})", "pick another name")
    prefix = "tool.stackmgr.trees" if store.config_path.endswith(PYPROJECT) else "trees"
    with open(store.config_path, "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        data += b"\n"
    key = name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _toml_string(name)
    data += f"\n[{prefix}.{key}]\npath = {_toml_string(path)}\n".encode()
    _parse(store.config_path, data)  # never write a config that no longer parses
    atomic_write(store.config_path, data)
    return load_store(store.root)
