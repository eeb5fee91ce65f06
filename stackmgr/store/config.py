"""The store: where it is, what its config says, and creating one (docs/FORMATS.md#config)."""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.store import locate
from stackmgr.store.fs import atomic_write, atomic_write_all, publish, read_cache, write_cache
from stackmgr.store.local_state import claim, local_config_tracked, move_legacy_state, state_dir_for
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
CONFIG_LIMIT = 16 << 20  # a config is a few lines: one bigger was not written by a person (docs/FORMATS.md#limits)
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
        state_dir: str | None = None,
    ) -> None:
        self.root = root
        # local state (journal, lock, applied series, caches): where a pull cannot write it (store/local_state.py)
        self.state_dir = state_dir or os.path.join(root, ".stackmgr")
        self.config_path = config_path
        self.trees = trees
        self.max_untracked_bytes = max_untracked_bytes
        self.journal: Operation | None = None  # the operation recording this store's changes (journal.operation)
        self.unplaced: list[str] = []  # trees the shared config names with no path on this machine
        self.suggested: dict[str, str] = {}  # unplaced tree -> the shared config's default path, not accepted here
        self.local_paths: dict[str, str] = {}  # what stackmgr.local.toml says, as written there
        self.only_here: list[str] = []  # trees placed here that the shared config does not name (a pulled tree rm)
        self.evidence: object = {}  # the config's [evidence] table, read by `headline()` (not on check's path)
        self.run: object = {}  # the config's [run] table (env, metrics): read by `stackmgr run`
        self.local_run: object = {}  # this machine's [run] table (stackmgr.local.toml): trusted, unlike `run`
        self.targets: object = {}  # the config's [targets] table: store/targets_config.py reads it
        self.lab: tuple[object, object] = ({}, {})  # the shared and local configs' tables: store/lab_config.py
        self.by_env = False  # chosen by STACKMGR_STORE (open_store): a change says so when another is in sight
        self.said_which = False

    def write_file(self, path: str, data: bytes, *, durable: bool = True) -> None:
        """Replace a file of the store atomically, recorded by the operation in progress."""
        atomic_write(path, data, durable=durable, journal=self.journal, root=self._untrusted(path))

    def write_files(self, files: list[tuple[str, bytes]]) -> None:
        """`write_file` of several files, recorded by the operation in progress in one go."""
        atomic_write_all(files, journal=self.journal, root=self._untrusted(*(p for p, _ in files)))

    def publish(self, tmp: str, path: str) -> None:
        """Rename a written temp file over a file of the store, recorded by the operation in progress."""
        publish(tmp, path, journal=self.journal, root=self._untrusted(path))

    def makedirs(self, directory: str) -> None:
        """`os.makedirs` of a directory of the store, refused (before anything is created) when a directory on
        the way is a symlink a pull put there: `artifacts -> ~` must not make `~/sha256/`."""
        self.refuse_links_on_the_way(directory)
        os.makedirs(directory, exist_ok=True)

    def refuse_links_on_the_way(self, directory: str) -> None:
        """Refuse, in one line, a symlink among the existing directories from the store's root to `directory`."""
        root = self._untrusted(directory + os.sep)
        if root is not None:
            from stackmgr.store.fs import refuse_links_below

            refuse_links_below(root, directory)

    def _untrusted(self, *paths: str) -> str | None:
        """The store's root, below which no directory on the way to a written file may be a symlink a pull put
        there; None when every path is in the state directory (this machine's own, docs/SECURITY.md)."""
        state = self.state_dir + os.sep
        return None if all(p.startswith(state) for p in paths) else self.root

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
    def lock_path(self) -> str:
        return os.path.join(self.state_dir, "lock")

    @property
    def local_path(self) -> str:
        return os.path.join(self.root, LOCAL_FILE)

    def tree(self, name: str) -> TreeConfig:
        if name in self.unplaced:
            if name in self.suggested:
                raise UsageProblem(f"tree {name} has no path on this machine (the shared config suggests "
                                   f"{_shown(self.suggested[name])}, a path nobody here has accepted)",
                                   f"`stackmgr tree set {name} PATH` with your checkout, or `stackmgr tree set "
                                   f"{name}` to accept that one")  # fmt: skip
            raise UsageProblem(f"tree {name} has no path on this machine",
                               f"say where your checkout is: `stackmgr tree set {name} PATH`")  # fmt: skip
        if name not in self.trees:
            from stackmgr.store.suggest import unknown_tree

            raise unknown_tree(name, [*self.trees, *self.unplaced], "add it with `stackmgr tree add NAME PATH`")
        return self.trees[name]

    def headline(self) -> str:
        """The metric `links`, `compare` and the report lead with (`[evidence] headline`, by default
        output_throughput: the one a serving change moves); a link without it leads with its first metric."""
        return _headline(self.config_path, self.evidence)

    def changing(self) -> None:
        """An operation starts changing the store: say which store, in one line on stderr, once, when
        STACKMGR_STORE chose it over the one the current directory is in (docs/FORMATS.md#store-layout)."""
        if not self.by_env or self.said_which:
            return
        self.said_which = True
        try:
            here = walk_up(os.getcwd())
        except OSError:  # the current directory is gone
            return
        if here is not None and os.path.realpath(here) != os.path.realpath(self.root):
            import sys

            sys.stderr.write(f"stackmgr: acting on store {self.root} (STACKMGR_STORE), not {here} (the current "
                             "directory's); `--store DIR` or `unset STACKMGR_STORE` to choose\n")

    def knows(self, name: str) -> bool:
        """A tree of this store, whether or not it has a path on this machine."""
        return name in self.trees or name in self.unplaced


def _parse(path: str, data: bytes) -> Table:
    from stackmgr.store.bounded import load_toml  # nesting bounded: a pulled config is untrusted input

    if b"<<<<<<<" in data:
        from stackmgr.store.conflicts import refuse_conflicted

        refuse_conflicted(data, os.path.basename(path))  # a config sits at the store's top: named as in `lint`
    try:
        return load_toml(data, path)
    except ValueError as exc:  # rtoml's and tomllib's errors are ValueErrors, as is an integer of over 4,300 digits
        raise StackmgrError(f"{path}: not valid TOML ({str(exc)[:200]})", "fix the file by hand") from None


def _stackmgr_table(path: str, cache_name: str = "config.marshal", state_dir: str | None = None) -> Table | None:
    """The stackmgr settings in `path` (a stackmgr.toml, or a pyproject.toml's [tool.stackmgr]); None if none.

    Parsed tables are cached in the store's state directory keyed by the file's stat data, so `check` skips
    tomllib.
    """
    try:
        st = os.lstat(path)  # a symlink is refused below, never followed out of the store
    except OSError:
        return None
    key = [path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode]
    cache = os.path.join(state_dir or state_dir_for(os.path.dirname(path))[0], "cache", cache_name)
    cached = read_cache(cache)
    if isinstance(cached, list) and len(cached) == 2 and cached[0] == key:
        return cached[1]  # type: ignore[no-any-return]
    from stackmgr.store.inside import read_inside

    try:
        data = read_inside(os.path.dirname(path), os.path.basename(path), CONFIG_LIMIT)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StackmgrError(f"cannot read {path}: {exc.strerror}") from None
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


def is_store(directory: str) -> bool:
    """Whether `directory` holds a store config (stackmgr.toml, or a pyproject.toml with [tool.stackmgr])."""
    return _config_path(directory) is not None


def find_store_root(explicit: str | None, cwd: str | None = None) -> str:
    """--store, then STACKMGR_STORE, then the first directory upward holding a store config (a command that
    changes a store STACKMGR_STORE chose says so when the current directory is in another: `Store.changing`);
    a path that is no store, or none found, said as store/locate.py says it."""
    return locate.find_store_root(explicit, cwd, is_store)


def walk_up(start: str) -> str | None:
    """The first directory from `start` upward holding a store config; None when none does."""
    return locate.walk_up(start, is_store)


def load_store(root: str) -> Store:
    config_path = _config_path(root)
    if config_path is None:
        raise locate.not_a_store(root, is_store)
    state_dir, in_git, below_top = state_dir_for(root)
    if in_git and not os.path.isdir(state_dir):
        move_legacy_state(root, state_dir)
    if below_top:
        claim(root, state_dir)
    table = _stackmgr_table(config_path, state_dir=state_dir) or {}
    local_file = os.path.join(root, LOCAL_FILE)
    if in_git and local_config_tracked(root, state_dir):
        raise StackmgrError(f"{local_file} is tracked by the store's git repository, so a pull can write it: its "
                            "tree paths are not this machine's",
                            f"check the paths in it, then `git rm --cached {LOCAL_FILE}` and commit")  # fmt: skip
    local = _stackmgr_table(local_file, "local-config.marshal", state_dir) or {}
    shared, mine = _tree_table(config_path, table.get("trees", {})), _tree_table(local_file, local.get("trees", {}))
    trees, unplaced = {}, []
    suggested: dict[str, str] = {}
    # A tree placed on this machine stays registered (and guarded) even when a pulled config no longer names it:
    # a teammate's `tree rm`, or an attacker's, must not make `check` and the shell guard let a reset through.
    for name in sorted({*shared, *(n for n, p in mine.items() if p is not None)}):
        path = mine.get(name)  # never the shared default alone: a pull could point it at ~ (docs/SECURITY.md)
        if path is None:
            unplaced.append(name)
            default = shared.get(name)
            if default is not None:
                suggested[name] = default
        else:
            results = _results(config_path, table.get("trees", {}), name) + _results(
                local_file, local.get("trees", {}), name)  # fmt: skip
            trees[name] = TreeConfig(name, os.path.normpath(os.path.join(root, os.path.expanduser(path))),
                                     tuple(dict.fromkeys(results)))  # fmt: skip
    # a pulled config may raise the limit (more is protected), never lower it: files over a limit are left out of
    # every snapshot, so `check` and the shell guard would let `git clean` delete them (docs/SECURITY.md)
    limit = _limit(local_file, local) if "max_untracked_bytes" in local else max(_limit(config_path, table),
                                                                                  DEFAULT_MAX_UNTRACKED)
    store = Store(root, config_path, trees, limit, state_dir)
    store.unplaced = unplaced
    store.suggested = suggested
    store.evidence = table.get("evidence", {})
    store.run = table.get("run", {})
    store.local_run = local.get("run", {})
    store.targets = table.get("targets", {})
    store.lab = (table, local)
    store.local_paths = {name: path for name, path in mine.items() if path is not None}
    store.only_here = [name for name in trees if name not in shared]  # placed here, named by no shared config
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
    store = load_store(find_store_root(explicit))
    store.by_env = not explicit and bool(os.environ.get("STACKMGR_STORE"))
    return store


def init_store(directory: str) -> tuple[str, bool]:
    """Create the store layout in `directory`; return (root, created). Existing stores are left as they are."""
    from stackmgr.store.fs import atomic_write

    root = os.path.abspath(directory)
    if os.path.exists(root) and not os.path.isdir(root):
        raise StackmgrError(f"{root} exists and is not a directory", "pick another path")
    already = _config_path(root) is not None
    try:
        for sub in ("patches", "series", "links"):
            os.makedirs(os.path.join(root, sub), exist_ok=True)
        os.makedirs(state_dir_for(root)[0], exist_ok=True)
    except OSError as exc:
        raise StackmgrError(f"cannot create the store in {root}: {exc.strerror}", "check the permissions") from None
    if not already:
        atomic_write(os.path.join(root, CONFIG_FILE), b"# stackmgr store: register trees with `stackmgr tree add`\n")
    gitignore = os.path.join(root, ".gitignore")
    existing = read_gitignore(root)
    missing = [line for line in STORE_GITIGNORE.splitlines() if line not in existing.splitlines()]
    if missing:
        atomic_write(
            gitignore,
            existing + (b"\n" if existing and not existing.endswith(b"\n") else b"")
            + b"".join(m + b"\n" for m in missing),
            root=root,
        )
    return root, not already


def read_gitignore(root: str) -> bytes:
    """The store's `.gitignore` (b"" when there is none), never read through a symlink: a pulled
    `.gitignore -> ~/.ssh/id_rsa` would otherwise be copied into the store and pushed."""
    from stackmgr.store.inside import read_inside

    try:
        return read_inside(root, ".gitignore", CONFIG_LIMIT)
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise StackmgrError(f"cannot read {os.path.join(root, '.gitignore')}: {exc.strerror}") from None


def _shown(text: str) -> str:
    """A path from the shared config, safe to print (it came by git)."""
    return text.encode("unicode_escape").decode("ascii")[:200]
