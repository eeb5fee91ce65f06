"""The operation record of the journal (`.stackmgr/ops/<ms time>-<id>/op`): a small tab-separated text file,
readable without imports on any start-up path and stable across Python versions (unlike marshal)."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.store.config import Store

FORMAT = "stackmgr-op 1"
OPS_DIR = "ops"  # .stackmgr/ops/: one directory per operation
CURRENT = "CURRENT"  # .stackmgr/ops/CURRENT: names the operation in progress
ANCHOR_PREFIX = "refs/stackmgr/ops/"  # refs/stackmgr/ops/<op id>/<tree>/{before,after,head-before}
STATE = "@state/"  # a recorded file of the store's state directory (applied.json), wherever that directory is


def _esc(value: str) -> str:
    return value.replace("%", "%25").replace("\t", "%09").replace("\n", "%0A")


def _unesc(value: str) -> str:
    return value.replace("%0A", "\n").replace("%09", "\t").replace("%25", "%")


class FileChange:
    """A store file the operation replaced or removed: did it exist before (backup under files/), and the stat
    of what the operation left (inode, size, mtime) so `undo` can tell whether anyone changed it since."""

    def __init__(self, path: str, existed: bool, after: str = "-") -> None:
        self.path = path  # relative to the store root, or `@state/NAME` in its state directory
        self.existed = existed
        self.after = after  # "ino:size:mtime_ns", "-" when the operation left no file, "?" before the rename


class TreeMove:
    """A tree the operation moved: from the checked snapshot `before` to `target`."""

    FIELDS = ("tree", "path", "before", "target", "head_before", "head_after", "branch", "index", "lock", "state")

    def __init__(self, **values: str) -> None:
        self.tree = self.path = self.before = self.target = ""
        self.head_before = self.head_after = ""
        self.branch = "-"  # the branch HEAD was on, or "-" when detached
        self.index = "-"  # "saved" when the real index before the move is kept under index/<tree>
        self.lock = "-"  # "mark:<marker>" of the index.lock it takes (git/real_index.py), until released; older
        # records: its "dev:ino"
        # planned: recorded, lock not yet taken or no file changed | moving: git's switch may be under way |
        # switched: git's switch completed | moved | put-back (after a failure, in the same process)
        self.state = "moving"
        for key, value in values.items():
            setattr(self, key, value)


class Record:
    """The parsed `op` file."""

    def __init__(self, name: str, command: str, started: int, state: str = "running") -> None:
        self.name = name  # the directory name: <ms time>-<id>
        self.id = name.split("-", 1)[-1]
        self.command = command
        self.started = started
        self.state = state  # running | done | rolled-back
        self.undoes = "-"  # the id of the operation this one undid
        self.files: list[FileChange] = []
        self.trees: list[TreeMove] = []
        self.notes: list[tuple[str, str, str]] = []  # (tree, snapshot tree id, HEAD) of trees it did not move
        self.failed_after: tuple[int, str] | None = None  # on an undo's record: (time, command) that failed since
        self.left: list[str] = []  # not stored: what a rollback just left as it is (rollback.roll_back), as notes

    def render(self) -> bytes:
        lines = [FORMAT, f"command\t{_esc(self.command)}", f"started\t{self.started}", f"state\t{self.state}",
                 f"undoes\t{self.undoes}"]  # fmt: skip
        lines += [f"file\t{int(f.existed)}\t{f.after}\t{_esc(f.path)}" for f in self.files]
        lines += ["tree\t" + "\t".join(_esc(getattr(t, k)) for k in TreeMove.FIELDS) for t in self.trees]
        lines += [f"note\t{_esc(tree)}\t{snap}\t{head}" for tree, snap, head in self.notes]
        if self.failed_after is not None:
            lines.append(f"failed\t{self.failed_after[0]}\t{_esc(self.failed_after[1])}")
        return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")

    @classmethod
    def parse(cls, name: str, data: bytes) -> Record:
        text = data.decode("utf-8", "surrogateescape")
        lines = text.split("\n")
        if lines[0] != FORMAT or not text.endswith("\n"):
            raise ValueError("not an operation record")
        fields = {ln.split("\t", 1)[0]: ln.split("\t", 1)[-1] for ln in lines[1:5]}
        rec = cls(name, _unesc(fields["command"]), int(fields["started"]), fields["state"])
        rec.undoes = fields.get("undoes", "-")
        for line in lines[5:]:
            kind, _, rest = line.partition("\t")
            parts = rest.split("\t")
            if kind == "file":
                rec.files.append(FileChange(_recorded_path(_unesc(parts[2])), parts[0] == "1", parts[1]))
            elif kind == "tree":
                rec.trees.append(TreeMove(**{k: _unesc(v) for k, v in zip(TreeMove.FIELDS, parts, strict=True)}))
            elif kind == "note":
                rec.notes.append((_unesc(parts[0]), parts[1], parts[2]))
            elif kind == "failed":
                rec.failed_after = (int(parts[0]), _unesc(parts[1]))
        return rec


def _recorded_path(rel: str) -> str:
    """A file path of a record: relative, no `..`, no NUL, never into `.git` (a record written by stackmgr
    never names anything else; one that does was not, and is refused whole)."""
    inner = rel[len(STATE):] if rel.startswith(STATE) else rel
    parts = inner.split("/")
    if (not inner or inner.startswith("/") or "\0" in inner or "\\" in inner or ".." in parts
            or any(p.lower() == ".git" for p in parts)):  # fmt: skip
        raise ValueError("a record naming a file outside the store")
    return rel


def store_file(store: Store, rel: str) -> str:
    """The path of a recorded store file."""
    if rel.startswith(STATE):
        return os.path.join(store.state_dir, rel[len(STATE):])
    return os.path.join(store.root, rel)


def recorded_name(store: Store, path: str) -> str | None:
    """How a store file about to be replaced is named in a record; None for files never recorded (caches, the
    journal itself) and for anything outside the store."""
    real = os.path.realpath(path)
    state = os.path.realpath(store.state_dir)
    if real.startswith(state + os.sep):
        inner = os.path.relpath(real, state)
        if inner.split(os.sep, 1)[0] in ("cache", OPS_DIR):
            return None
        return STATE + inner.replace(os.sep, "/")
    rel = os.path.relpath(real, os.path.realpath(store.root))
    if rel == "." or rel.split(os.sep, 1)[0] in ("..", ".git", ".stackmgr"):
        return None
    return rel.replace(os.sep, "/")


# -- the ops directory --------------------------------------------------------------------------------------


def ops_dir(store: Store) -> str:
    return os.path.join(store.state_dir, OPS_DIR)


def read_record(store: Store, name: str) -> Record:
    with open(os.path.join(ops_dir(store), name, "op"), "rb") as f:
        return Record.parse(name, f.read())


def op_names(store: Store) -> list[str]:
    """Operation directory names (`<13-digit ms time>-<12 hex>`), oldest first."""
    try:
        names = os.listdir(ops_dir(store))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names if _op_name(n))


def _op_name(name: str) -> bool:
    """`<13-digit ms time>-<12 hex>`, as `operation` names its directories."""
    return (len(name) == 26 and name[13] == "-" and name[:13].isascii() and name[:13].isdigit()
            and all(c in "0123456789abcdef" for c in name[14:]))


def newest_done(store: Store) -> Record | None:
    """The newest operation that completed (records rolled back or unreadable are passed over)."""
    for name in reversed(op_names(store)):
        try:
            record = read_record(store, name)
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            continue
        if record.state == "done":
            return record
    return None


def interrupted_name(store: Store) -> str | None:
    """The directory name of an operation whose command died before finishing, if any (no lock needed to ask;
    the caller holding the store lock knows its writer is gone)."""
    try:
        with open(os.path.join(ops_dir(store), CURRENT), "rb") as f:
            name = f.read(256).decode().strip()
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        return None
    return name if _op_name(name) else None  # never a path: `../..` would steer a rollback elsewhere


def stat_key(path: str) -> str:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "-"
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def remove_current(store: Store) -> None:
    try:
        os.unlink(os.path.join(ops_dir(store), CURRENT))
    except FileNotFoundError:
        pass
