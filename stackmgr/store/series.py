"""Series files (docs/FORMATS.md#series-file): the intersection of quilt's and Mercurial MQ's grammar.

    # comment lines start in column 0
    first-fix.patch
    kernel-tweak.patch -p1 #+xpu

Parsing keeps every line as written, so edits rewrite only the entries they touch and comments survive. A comment
`# stackmgr-base TREE COMMIT` records the base of a series with no patch of that tree (`base_lines`).
"""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.store.config import Store
from stackmgr.store.fs import read_or_none
from stackmgr.store.inside import OutsideStore
from stackmgr.store.names import (
    LINK_OUT,
    NOT_A_FILE,
    check_name,
    inside,
    patch_name,
    patch_stat,
    refuse_link_above,
    refuse_linked_dirs,
)
from stackmgr.store.series_grammar import (
    BASE_LINE,
    BLANKS,
    Entry,
    Line,
    SeriesError,
    active,
    is_base_line,
    parse_base_line,
    parse_entry,
)

__all__ = ["Entry", "Line", "SeriesError", "active", "parse_entry"]  # (re-exported: read through this module)


class SeriesFile:
    def __init__(self, store: Store, name: str, lines: list[Line], exists: bool) -> None:
        self.store = store
        self.name = name
        self.path = series_path(store, name)
        self.lines = lines
        self.exists = exists

    @classmethod
    def load(cls, store: Store, name: str) -> SeriesFile:
        path = series_path(store, name)
        if not os.path.exists(path):
            raise no_series(store, name)
        return cls._read(store, name, path)

    @classmethod
    def load_or_new(cls, store: Store, name: str) -> SeriesFile:
        path = series_path(store, name)
        if os.path.exists(path):
            return cls._read(store, name, path)
        return cls(store, name, [], exists=False)

    @classmethod
    def _read(cls, store: Store, name: str, path: str) -> SeriesFile:
        data = read_or_none(path)  # `series_path` refused a link; this never follows one made since
        if data is None or not os.path.isfile(path):
            raise StackmgrError(f"{path} is not a regular file", "replace it with a series file")
        rel = os.path.relpath(path, store.root)
        if b"<<<<<<<" in data:
            from stackmgr.store.conflicts import refuse_conflicted

            refuse_conflicted(data, rel, store.root)
        text = data.decode("utf-8", "surrogateescape")
        lines = []
        seen: dict[str, int] = {}
        bases: dict[str, int] = {}
        # Only "\n" ends a line, as for quilt and editors (str.splitlines also splits on \f, \x85, \u2028).
        raws = text.split("\n")
        ended = len(raws) - 1  # lines with a "\n"; the text after the last one is a final unterminated line
        for lineno, raw in enumerate(raws if raws[-1] else raws[:-1], start=1):
            body, ending = raw, "\n" if lineno <= ended else ""
            if ending and body.endswith("\r"):
                body, ending = body[:-1], "\r\n"
            entry = parse_entry(rel, lineno, body)
            if entry is None and is_base_line(body):
                tree, _commit = parse_base_line(rel, lineno, body)
                if tree in bases:
                    raise SeriesError(rel, lineno, f"a second base line for tree {tree} (first on line {bases[tree]})",
                                      "delete one of the two lines")  # fmt: skip
                bases[tree] = lineno
            if entry is not None:
                if entry.patch in seen:
                    first = seen[entry.patch]
                    raise SeriesError(rel, lineno, f"'{entry.patch}' is listed twice (first on line {first})",
                                      "remove one of the two lines")  # fmt: skip
                seen[entry.patch] = lineno
            lines.append(Line(body, ending, entry))
        return cls(store, name, lines, exists=True)

    @property
    def entries(self) -> list[Entry]:
        return [ln.entry for ln in self.lines if ln.entry is not None]

    def base_lines(self) -> dict[str, tuple[str, int]]:
        """tree -> (commit, line number) of each `# stackmgr-base TREE COMMIT` line: the base a series with no
        patch of that tree applies to (docs/FORMATS.md#series-file). Read checked every line."""
        rel = os.path.relpath(self.path, self.store.root)
        found = {}
        for lineno, line in enumerate(self.lines, start=1):
            if line.entry is None and is_base_line(line.text):
                tree, commit = parse_base_line(rel, lineno, line.text)
                found[tree] = (commit, lineno)
        return found

    def set_base(self, tree: str, commit: str) -> None:
        """Record `commit` as the base of the series' `tree`: its base line rewritten in place, else one more at
        the end (a later save appends below it)."""
        line_text = f"{BASE_LINE} {tree} {commit}"
        parse_base_line(os.path.relpath(self.path, self.store.root), len(self.lines) + 1, line_text)
        for line in self.lines:
            if line.entry is None and is_base_line(line.text) and line.text.split(" ")[2] == tree:
                line.text = line_text
                return
        self._place(Line(line_text, self._newline()), len(self.entries) + 1)

    def patch_names(self) -> list[str]:
        return [e.name for e in self.entries]

    def missing_patches(self) -> list[Entry]:
        """Entries with no patch file there (a symbolic link counts only as an alias of a patch beside it)."""
        return [e for e in self.entries if patch_stat(self.store.patches_dir, e.patch)[0] is None]

    def check_files(self) -> None:
        """Missing patch files are an error before anything is touched (quilt would apply them as empty); so are
        patch files that are symbolic links (never followed: `fix.patch -> ~/.ssh/id_rsa`)."""
        refuse_linked_dirs(self.store.root, ("patches",))
        rel = os.path.relpath(self.path, self.store.root)
        refused = [
            (e, why)
            for e in self.entries
            for why in [patch_stat(self.store.patches_dir, e.patch)[1]]
            if why in (LINK_OUT, NOT_A_FILE)
        ]
        if refused:  # the patch-by-name rule (names.patch_stat), each named with its line
            said = ", ".join(f"patches/{e.patch} is {why} ({rel} line {e.lineno})" for e, why in refused)
            raise OutsideStore(f"{said}; stackmgr does not follow it",
                               "replace it with the patch file itself (or remove it)")  # fmt: skip
        missing = self.missing_patches()
        if missing:
            names = ", ".join(f"{e.patch} (line {e.lineno})" for e in missing)
            raise StackmgrError(f"{rel}: missing patch files: {names}", "restore them or remove those lines")

    def _find(self, patch: str) -> int:
        wanted = patch_name(patch) + ".patch"
        for i, line in enumerate(self.lines):
            if line.entry is not None and line.entry.patch in (wanted, patch):
                return i
        from stackmgr.store.suggest import did_you_mean

        listed = [entry.name for entry in self.entries]
        raise UsageProblem(
            f"'{patch}' is not in series {self.name}",
            did_you_mean(patch_name(patch), listed, f"see `stackmgr series {self.name}`"),
        )

    def append(self, filename: str) -> None:
        self.insert(filename, len(self.entries))

    def append_line(self, text: str) -> None:
        """A line at the end, kept as written: a comment, a blank line, or an entry with its `-p1`, guards and
        comment (import keeps a quilt series' layout so). A line the grammar refuses raises SeriesError."""
        entry = parse_entry(os.path.relpath(self.path, self.store.root), len(self.lines) + 1, text)
        if entry is not None and entry.patch in (e.patch for e in self.entries):
            raise UsageProblem(f"'{entry.patch}' is already in series {self.name}", "each patch appears once")
        self._place(Line(text, self._newline(), entry), len(self.entries))

    def insert(self, filename: str, position: int) -> None:
        """Insert `filename` so that it becomes entry number `position` (0-based); past the end appends."""
        if filename in (e.patch for e in self.entries):
            raise UsageProblem(f"'{filename}' is already in series {self.name}", "each patch appears once")
        entry = Entry(filename, 0)
        self._place(Line(entry.render(), self._newline(), entry), position)

    def _place(self, line: Line, position: int) -> None:
        """Put `line` just above the entry now at `position` (below its comments), or at the file's end."""
        entries = self.entries
        if position >= len(entries):
            at = len(self.lines)
        else:
            target = entries[max(position, 0)]
            at = next(i for i, ln in enumerate(self.lines) if ln.entry is target)
        if at == len(self.lines) and self.lines and not self.lines[-1].ending:
            self.lines[-1].ending = self._newline()
        if at < len(self.lines) and not line.ending:
            line.ending = self._newline()
        self.lines.insert(at, line)

    def _newline(self) -> str:
        """The line ending this file mostly uses, so an edit never mixes CRLF and LF."""
        crlf = sum(ln.ending == "\r\n" for ln in self.lines)
        return "\r\n" if crlf * 2 > sum(bool(ln.ending) for ln in self.lines) else "\n"

    def remove(self, patch: str) -> Entry:
        line = self.lines.pop(self._find(patch))
        assert line.entry is not None
        return line.entry

    def comment_out(self, patch: str, why: str) -> None:
        """Keep the entry's line, as a comment saying why (`# fix.patch  (already upstream in 4b1e…)`)."""
        line = self.lines[self._find(patch)]
        line.text, line.entry = f"# {line.text}  ({why})", None

    def rename(self, old: str, new: str) -> bool:
        """Point the entry (and a history comment) of patch file `old` at `new`, keeping the rest of each line as
        written; whether the series named it."""
        found = False
        for line in self.lines:
            if line.entry is not None and line.entry.patch == old:
                lead = len(line.text) - len(line.text.lstrip(BLANKS))  # the grammar allows leading blanks
                assert line.text[lead:].startswith(old)
                line.entry.patch, line.text = new, line.text[:lead] + new + line.text[lead + len(old) :]
                found = True
            elif line.entry is None and line.text.startswith(f"# {old} "):
                line.text = f"# {new}" + line.text[len(old) + 2 :]
                found = True
        return found

    def kept_as_history(self) -> list[str]:
        """Patches whose lines `comment_out` turned into comments (a rebase found them upstream): the series'
        history, which still names them."""
        kept = []
        for line in self.lines:
            if line.entry is None and line.text.startswith("# ") and line.text.endswith(")") and "  (" in line.text:
                words = line.text[2:].split()
                if words and words[0].endswith(".patch"):
                    kept.append(words[0])
        return kept

    @property
    def description(self) -> str:
        """The series' topic: its leading `## ` comment lines, before the first entry (docs/FORMATS.md#series-file;
        quilt and MQ read them as comments), without the `## `; "" for none."""
        return "\n".join(ln.text[3:] if ln.text.startswith("## ") else "" for ln in self._described())

    def describe(self, text: str) -> None:
        """Replace the description (`""` removes it): one `## ` line per line of `text`, at the file's top."""
        said = [ln.rstrip(BLANKS) for ln in text.replace("\r\n", "\n").split("\n")]
        while said and not said[-1]:
            said.pop()
        for line in self._described():
            self.lines.remove(line)
        ending = self._newline()
        self.lines[:0] = [Line(f"## {ln}" if ln else "##", ending) for ln in said]

    def _described(self) -> list[Line]:
        found = []
        for line in self.lines:
            if line.entry is not None or not (line.text.startswith("## ") or line.text == "##"):
                break
            found.append(line)
        return found

    def move(self, patch: str, position: int) -> None:
        """Move the entry to number `position` (0-based, clamped), keeping its line as written."""
        index = self._find(patch)
        entry = self.lines[index].entry
        assert entry is not None
        entries = self.entries
        if entries.index(entry) == min(max(position, 0), len(entries) - 1):
            return  # already there: leave the file byte for byte as it is
        self._place(self.lines.pop(index), position)

    def render(self) -> bytes:
        return "".join(ln.text + ln.ending for ln in self.lines).encode("utf-8", "surrogateescape")

    def write(self) -> None:
        """Replace the file atomically, unless it already holds exactly these bytes (a no-op edit writes nothing)."""
        data = self.render()
        if self.exists and read_or_none(self.path) == data:
            return
        refuse_linked_dirs(self.store.root, ("series",))
        os.makedirs(self.store.series_dir, exist_ok=True)
        self.store.write_file(refuse_link_above(self.store.root, self.path), data)
        self.exists = True


def series_path(store: Store, name: str) -> str:
    return inside(store.series_dir, check_name("series", name))


def list_series(store: Store) -> list[str]:
    refuse_linked_dirs(store.root, ("series",))
    try:
        names = os.listdir(store.series_dir)
    except FileNotFoundError:
        return []
    # Files whose names cannot be series (editor backups such as `name~`, `.name.swp`) are not listed.
    return sorted(n for n in names if _is_name(n) and os.path.isfile(os.path.join(store.series_dir, n)))


def no_series(store: Store, name: str) -> UsageProblem:
    """The refusal of a series name no series file answers (exit 2), with the closest names (store/suggest.py)."""
    from stackmgr.store.suggest import did_you_mean

    return UsageProblem(
        f"no series named '{name}'", did_you_mean(name, series_names(store), "list them with `stackmgr series`")
    )


def series_names(store: Store) -> list[str]:
    """The series a lookup by name accepts (`list_series` less those that resolve out of series/), for
    did-you-mean and shell completion; [] when series/ cannot be listed. Never raises."""
    try:
        names = list_series(store)
        real = os.path.realpath(store.series_dir)
    except (OSError, StackmgrError):
        return []
    return [n for n in names if os.path.dirname(os.path.realpath(os.path.join(store.series_dir, n))) == real]


def series_listing(store: Store, patch: str) -> list[str]:
    """The rule for which series list a patch (NAME or NAME.patch), one for every command that asks: the series
    of the store with a line for it, by name. A series that cannot be read (mid-merge, a bad line) is refused in
    its own one line (exit 3), never skipped: it may list the patch, and a `drop` or a `rename` told "no series"
    would leave it a line naming nothing. `stackmgr lint` lists every such file."""
    base = patch[: -len(".patch")] if patch.endswith(".patch") else patch
    return [name for name, listed in series_listings(store).items() if base in listed]


def series_listings(store: Store) -> dict[str, list[str]]:
    """Every series of the store and the patches it lists, in order: the same reading as `series_listing`, for a
    command that asks about every patch at once (an unreadable series refused the same way)."""
    return {name: SeriesFile.load(store, name).patch_names() for name in list_series(store)}


def _is_name(name: str) -> bool:
    try:
        check_name("series", name)
    except UsageProblem:
        return False
    return True
