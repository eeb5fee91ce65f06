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
LOCAL_FILE = "stackmgr.local.toml"  # where each tree lives on this machine; git-ignored, never shared
PYPROJECT = "pyproject.toml"
DEFAULT_MAX_UNTRACKED = 50 * 1024 * 1024
DEFAULT_HEADLINE = "output_throughput"  # `vllm bench serve`'s; request_throughput hides what a serving change moves
STORE_GITIGNORE = b".stackmgr/\nstackmgr.local.toml\n"
Table = dict[str, object]


class TreeConfig:
    __slots__ = ("name", "path", "results")

    def __init__(self, name: str, path: str, results: tuple[bytes, ...] = ()) -> None:
        self.name = name
        self.path = path  # absolute
        self.results = results  # directories of results and notes in the tree: never work to preserve


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
        self.unplaced: list[str] = []  # trees the shared config names with no path on this machine
        self.local_paths: dict[str, str] = {}  # what stackmgr.local.toml says, as written there
        self.evidence: object = {}  # the config's [evidence] table, read by `headline()` (not on check's path)
        self.run: object = {}  # the config's [run] table (env, metrics): read by `stackmgr run`

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

    @property
    def local_path(self) -> str:
        return os.path.join(self.root, LOCAL_FILE)

    def tree(self, name: str) -> TreeConfig:
        if name in self.unplaced:
            raise UsageProblem(f"tree {name} has no path on this machine",
                               f"say where your checkout is: `stackmgr tree set {name} PATH`")  # fmt: skip
        if name not in self.trees:
            known = ", ".join(sorted([*self.trees, *self.unplaced])) or "none yet"
            raise UsageProblem(f"unknown tree '{name}' (known: {known})", "add it with `stackmgr tree add NAME PATH`")
        return self.trees[name]

    def headline(self) -> str:
        """The metric `links`, `compare` and the report lead with (`[evidence] headline`, by default
        output_throughput: the one a serving change moves); a link without it leads with its first metric."""
        return _headline(self.config_path, self.evidence)

    def knows(self, name: str) -> bool:
        """A tree of this store, whether or not it has a path on this machine."""
        return name in self.trees or name in self.unplaced


def _parse(path: str, data: bytes) -> Table:
    import tomllib

    if b"<<<<<<<" in data:
        from stackmgr.store.conflicts import refuse_conflicted

        refuse_conflicted(data, os.path.basename(path))  # a config sits at the store's top: named as in `lint`
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise StackmgrError(f"{path}: not valid TOML ({exc})", "fix the file by hand") from None


def _stackmgr_table(path: str, cache_name: str = "config.marshal") -> Table | None:
    """The stackmgr settings in `path` (a stackmgr.toml, or a pyproject.toml's [tool.stackmgr]); None if none.

    Parsed tables are cached in .stackmgr/cache/ keyed by the file's stat data, so `check` skips tomllib.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = [path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    cache = os.path.join(os.path.dirname(path), ".stackmgr", "cache", cache_name)
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
    if table is not None or not path.endswith(PYPROJECT):  # a project's own pyproject.toml, no store: left alone
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
    local_file = os.path.join(root, LOCAL_FILE)
    local = _stackmgr_table(local_file, "local-config.marshal") or {}
    shared, mine = _tree_table(config_path, table.get("trees", {})), _tree_table(local_file, local.get("trees", {}))
    trees, unplaced = {}, []
    for name in sorted(shared):  # a path here for a tree the shared config no longer names is stale: ignored
        path = mine.get(name) or shared.get(name)
        if path is None:
            unplaced.append(name)
        else:
            results = _results(config_path, table.get("trees", {}), name) + _results(
                local_file, local.get("trees", {}), name)  # fmt: skip
            trees[name] = TreeConfig(name, os.path.normpath(os.path.join(root, os.path.expanduser(path))),
                                     tuple(dict.fromkeys(results)))  # fmt: skip
    store = Store(root, config_path, trees, _limit(config_path, table))
    store.unplaced = unplaced
    store.evidence = table.get("evidence", {})
    store.run = table.get("run", {})
    store.local_paths = {name: path for name, path in mine.items() if path is not None and name in shared}
    return store


def _limit(config_path: str, table: Table) -> int:
    value = table.get("max_untracked_bytes", DEFAULT_MAX_UNTRACKED)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise StackmgrError(f"{config_path}: max_untracked_bytes must be a whole number of bytes")
    return value


def _headline(config_path: str, evidence: object) -> str:
    """`[evidence] headline`: a metric name (output_throughput when the config names none)."""
    value = evidence.get("headline", DEFAULT_HEADLINE) if isinstance(evidence, dict) else ""
    name = value if isinstance(value, str) else ""
    if not (0 < len(name) <= 100 and name.isascii() and (name[0].isalpha() or name[0] == "_")
            and all(c.isalnum() or c in "_.:-" for c in name)):  # fmt: skip
        raise StackmgrError(f"{config_path}: [evidence] headline must be a metric name, e.g. \"output_throughput\"",
                            "fix the config")  # fmt: skip
    return name


def _tree_table(config_path: str, raw: object) -> dict[str, str | None]:
    """name -> path as written (None: the tree is named with no path) of a config's [trees] table."""
    if not isinstance(raw, dict):
        raise StackmgrError(f"{config_path}: [trees] must be a table of tables")
    trees: dict[str, str | None] = {}
    for name, entry in raw.items():
        try:
            check_name("tree", name)
        except UsageProblem as exc:
            raise StackmgrError(f"{config_path}: {exc.message}", exc.hint) from None
        if not isinstance(entry, dict) or not isinstance(entry.get("path", ""), str):
            raise StackmgrError(f"{config_path}: tree '{name}' needs a path = \"...\" string, or none (each "
                                "machine's own: `stackmgr tree set`)")  # fmt: skip
        trees[name] = entry.get("path")
    return trees


def _results(config_path: str, raw: object, name: str) -> tuple[bytes, ...]:
    """`results = ["results", "notes"]` of a tree's table: directories (relative to the tree) whose untracked
    files are outputs, not work: never unpreserved, never saved, left alone by every move (but for the files
    the applied series holds there: safety/outputs.py)."""
    entry = raw.get(name) if isinstance(raw, dict) else None
    value = entry.get("results", []) if isinstance(entry, dict) else []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip("/") for v in value):
        raise StackmgrError(f"{config_path}: tree '{name}': results must be a list of directories in the tree, "
                            'e.g. results = ["results", "notes"]')  # fmt: skip
    dirs = []
    for v in value:
        parts = v.strip("/").split("/")
        if ".." in parts or v.startswith("/") or ".git" in parts:
            raise StackmgrError(f"{config_path}: tree '{name}': results entry '{v}' must be a directory inside "
                                "the tree (relative, no '..', not .git)")  # fmt: skip
        inside_tree = "/".join(p for p in parts if p not in ("", "."))
        if not inside_tree:
            raise StackmgrError(f"{config_path}: tree '{name}': results entry '{v}' is the whole tree",
                                "name the directories results and notes go to")  # fmt: skip
        dirs.append(inside_tree.encode())
    return tuple(dirs)


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
    missing = [line for line in STORE_GITIGNORE.splitlines() if line not in existing.splitlines()]
    if missing:
        atomic_write(
            gitignore,
            existing + (b"\n" if existing and not existing.endswith(b"\n") else b"")
            + b"".join(m + b"\n" for m in missing),
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


def set_tree_path(store: Store, name: str, path: str) -> Store:
    """Where tree NAME lives on this machine (stackmgr.local.toml)."""
    if not store.knows(name):
        store.tree(name)  # the usual "unknown tree" refusal
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


def tree_key(store: Store, name: str) -> str:
    """The TOML table of tree `name` in the store's shared config (`trees.NAME`, quoted where it must be)."""
    import re

    prefix = "tool.stackmgr.trees" if store.config_path.endswith(PYPROJECT) else "trees"
    return f"{prefix}.{name if re.fullmatch(r'[A-Za-z0-9_-]+', name) else _toml_string(name)}"


def _write_local(store: Store, paths: dict[str, str]) -> Store:
    """stackmgr.local.toml with these paths (it is stackmgr's own file: written whole), and the store's
    .gitignore listing it, so it is never shared."""
    out = ["# Where each tree of this store lives on this machine; never shared (git-ignored).",
           "# Change with `stackmgr tree set NAME PATH`."]  # fmt: skip
    for name in sorted(paths):
        out += ["", f"[trees.{_toml_string(name)}]", f"path = {_toml_string(paths[name])}"]
    data = ("\n".join(out) + "\n").encode()
    _parse(store.local_path, data)
    store.write_file(store.local_path, data)
    _ignore_local(store)
    return load_store(store.root)


def _ignore_local(store: Store) -> None:
    gitignore = os.path.join(store.root, ".gitignore")
    try:
        with open(gitignore, "rb") as f:
            existing = f.read()
    except FileNotFoundError:
        existing = b""
    if LOCAL_FILE.encode() not in existing.splitlines():
        store.write_file(gitignore, existing + (b"\n" if existing and not existing.endswith(b"\n") else b"")
                         + LOCAL_FILE.encode() + b"\n")  # fmt: skip
