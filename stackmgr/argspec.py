"""Options of the commands that must start fast (`check`, `save`), declared once.

cli.py turns these into click options (help, completion, errors); entry.py parses the same declarations
directly, without importing click, for the plain forms people type and scripts run. Anything unusual
(`--help`, bundled short flags, `--`, an unknown option) falls through to click.
"""

from __future__ import annotations


class Opt:
    __slots__ = ("dest", "flags", "help", "metavar", "takes_value")

    def __init__(self, flags: tuple[str, ...], dest: str, takes_value: bool, help: str, metavar: str = "") -> None:
        self.flags = flags
        self.dest = dest
        self.takes_value = takes_value
        self.help = help
        self.metavar = metavar


JSON = Opt(("--json",), "as_json", False, "Machine-readable output (schema 1).")

GLOBAL = (
    Opt(("--store",), "store", True, "The store directory (default: $STACKMGR_STORE, then walk up).", "DIR"),
    Opt(("--json",), "as_json", False, "Machine-readable output on listing commands."),
    Opt(("--debug",), "debug", False, "Show tracebacks of internal errors."),
)

CHECK = (
    Opt(("-v", "--verbose"), "verbose", False, "List the unpreserved changes."),
    Opt(("-q", "--quiet"), "quiet", False, "Print nothing (the default)."),
    JSON,
)

SAVE = (
    Opt(("-t", "--tree"), "tree", True, "The tree to save from (needed when several have changes).", "TREE"),
    Opt(("-m", "--message"), "message", True, "Description: first line is the subject.", "MSG"),
    Opt(("--series",), "series", True, "Append the patch to this series (created when missing).", "SERIES"),
    Opt(("--base",), "base", True, "Diff from REV instead of HEAD (keeps local commits).", "REV"),
    Opt(("--update",), "update", False, "Replace an existing patch (the old one is kept for interdiff)."),
    Opt(
        ("--allow-conflict-markers",),
        "allow_conflict_markers",
        False,
        "Save even if added lines look like conflict markers.",
    ),
    JSON,
)

FAST_COMMANDS = {"check": CHECK, "save": SAVE}

Values = dict[str, object]


def _take(argv: list[str], i: int, specs: tuple[Opt, ...], values: Values) -> int | None:
    """Consume the option at argv[i] into `values`; the next index, or None when it is not a plain known one."""
    word = argv[i]
    name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
    for opt in specs:
        if name not in opt.flags:
            continue
        if not opt.takes_value:
            if eq:
                return None
            values[opt.dest] = True
            return i + 1
        if eq:
            values[opt.dest] = inline
            return i + 1
        if i + 1 >= len(argv):
            return None
        values[opt.dest] = argv[i + 1]
        return i + 2
    return None


def parse_fast(argv: list[str]) -> tuple[str, Values, list[str]] | None:
    """(command, option values, positionals) for a plain `check`/`save` command line; else None."""
    values: Values = {}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        nxt = _take(argv, i, GLOBAL, values)
        if nxt is None:
            return None
        i = nxt
    if i >= len(argv) or argv[i] not in FAST_COMMANDS:
        return None
    command, specs = argv[i], FAST_COMMANDS[argv[i]]
    positionals: list[str] = []
    i += 1
    while i < len(argv):
        if argv[i].startswith("-") and argv[i] != "-":
            nxt = _take(argv, i, specs, values)
            if nxt is None:
                return None
            i = nxt
        else:
            positionals.append(argv[i])
            i += 1
    return command, values, positionals
