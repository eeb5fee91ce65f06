"""The store: where it is, what its config says, and creating one (docs/FORMATS.md#config)."""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.store.fs import atomic_write, atomic_write_all, publish, read_cache, write_cache
from stackmgr.store.names import check_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.journal.operation import Operation

CONFIG_FILE = "stackmgr.toml"
PYPROJECT = "pyproject.toml"
DEFAULT_MAX_UNTRACKED = 50 * 1024 * 1024
STORE_GITIGNORE = b".stackmgr/\n"
Table = dict[str, object]


class TreeConfig:
    __slots__ = ("name", "path")

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path  # absolute


class Store:
    """A store directory and its config (plain class: this is on `check`'s start-up path)."""

    def __init__(
        self,
        root: str,
        config_path: str,
        trees: dict[str, TreeConfig],
        max_untracked_bytes: int = DEFAULT_MAX_UNTRACKED,
    ) -> None:
        self.root = root
        self.config_path = config_path
        self.trees = trees
        self.max_untracked_bytes = max_untracked_bytes
        self.journal: Operation | None = None  # the operation recording this store's changes (journal.operation)

    def write_file(self, path: str, data: bytes, *, durable: bool = True) -> None:
        """Replace a file of the store atomically, recorded by the operation in progress."""
        atomic_write(path, data, durable=durable, journal=self.journal)

    def write_files(self, files: list[tuple[str, bytes]]) -> None:
        """`write_file` of several files, recorded by the operation in progress in one go."""
        atomic_write_all(files, journal=self.journal)

    def publish(self, tmp: str, path: str) -> None:
        """Rename a written temp file over a file of the store, recorded by the operation in progress."""
        publish(tmp, path, journal=self.journal)

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


def _parse(path: str, data: bytes) -> Table:
    import tomllib

    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise StackmgrError(f"{path}: not valid TOML ({exc})", "fix the file by hand") from None


def _stackmgr_table(path: str) -> Table | None:
    """The stackmgr settings in `path` (a stackmgr.toml, or a pyproject.toml's [tool.stackmgr]); None if none.

    Parsed tables are cached in .stackmgr/cache/ keyed by the file's stat data, so `check` skips tomllib.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = [path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    cache = os.path.join(os.path.dirname(path), ".stackmgr", "cache", "config.marshal")
    cached = read_cache(cache)
    if isinstance(cached, list) and len(cached) == 2 and cached[0] == key:
        return cached[1]  # type: ignore[no-any-return]
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(PYPROJECT):
        tool = _parse(path, data).get("tool", {}) if b"[tool.stackmgr" in data else {}
        table = tool.get("stackmgr") if isinstance(tool, dict) else None
    else:
        table = _parse(path, data)
    if table is not None and not isinstance(table, dict):
        raise StackmgrError(f"{path}: the stackmgr config must be a table")
    write_cache(cache, [key, table])
    return table


def _config_path(directory: str) -> str | None:
    for name in (CONFIG_FILE, PYPROJECT):
        path = os.path.join(directory, name)
        if os.path.isfile(path) and (name == CONFIG_FILE or _stackmgr_table(path) is not None):
            return path
    return None


def find_store_root(explicit: str | None, cwd: str | None = None) -> str:
    """--store, then STACKMGR_STORE, then the first directory upward holding a store config."""
    given = explicit or os.environ.get("STACKMGR_STORE")
    if given:
        root = os.path.abspath(given)
        if _config_path(root) is None:
            raise UsageProblem(f"{root} is not a stackmgr store", f"create one with `stackmgr init {given}`")
        return root
    here = os.path.abspath(cwd or os.getcwd())
    while True:
        if _config_path(here) is not None:
            return here
        parent = os.path.dirname(here)
        if parent == here:
            raise UsageProblem(
                "no stackmgr store here or in any parent directory",
                "run `stackmgr init`, pass --store DIR or set STACKMGR_STORE",
            )
        here = parent


def load_store(root: str) -> Store:
    config_path = _config_path(root)
    if config_path is None:
        raise UsageProblem(f"{root} is not a stackmgr store", f"create one with `stackmgr init {root}`")
    table = _stackmgr_table(config_path) or {}
    return Store(root, config_path, _trees(config_path, root, table.get("trees", {})), _limit(config_path, table))


def _limit(config_path: str, table: Table) -> int:
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
    from stackmgr.store.fs import atomic_write

    root = os.path.abspath(directory)
    if os.path.exists(root) and not os.path.isdir(root):
        raise StackmgrError(f"{root} exists and is not a directory", "pick another path")
    already = _config_path(root) is not None
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
    import re


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
    store.write_file(store.config_path, data)
    return load_store(store.root)
