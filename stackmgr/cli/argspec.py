"""Options of the commands that must start fast (`check`, `status`, `save`, `apply`, `import`, `rebase`, `run`),
and `--json`, declared once.

context.py turns these into click options (help, completion, errors); entry.py parses the same declarations
directly, without importing click, for the plain forms people type and scripts run. Anything unusual (`--help`,
bundled short flags, `--` but before `run`'s command, an unknown option) falls through to click. Either way the
values land in one `Values` mapping (dest -> str, True, or a tuple of str), read into each command's typed
arguments record (CheckArgs, SaveArgs, ApplyArgs) with `text`, `flag` and `texts`.
"""

from __future__ import annotations


class Opt:
    __slots__ = ("dest", "flags", "help", "metavar", "multiple", "takes_value")

    def __init__(
        self, flags: tuple[str, ...], dest: str, takes_value: bool, help: str, metavar: str = "",
        multiple: bool = False,
    ) -> None:  # fmt: skip
        self.flags = flags
        self.dest = dest
        self.takes_value = takes_value
        self.help = help
        self.metavar = metavar
        self.multiple = multiple  # may be given several times; the values form a tuple


# `--json`, at every level that takes it (`stackmgr --json CMD`, `GROUP --json SUB`, `CMD --json`): one flag.
JSON = Opt(("--json",), "as_json", False, "Machine-readable output (schema 1).")

# `--store DIR`, like `--json`, before or after the command (`stackmgr status --store X`, `series --store X show`;
# `run` takes it before its command only): one option, given at every level.
STORE = Opt(("--store",), "store", True, "The store directory (default: $STACKMGR_STORE, then walk up).", "DIR")
ANYWHERE = (STORE,)  # what every command takes besides its own options (JSON: those that print JSON declare it)

GLOBAL = (
    STORE,
    Opt(JSON.flags, JSON.dest, False, "Machine-readable output on listing commands."),  # JSON, as `--help` says it
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
    Opt(("--series",), "series", True, "Append the patch to this series (default: the applied one; a new one only "
        "while none is applied, else --new-series).", "S"),
    Opt(("--new-series",), "new_series", True, "Start this series on what the tree holds, with the patch.", "S"),
    Opt(("--base",), "base", True, "Diff from REV instead of HEAD (keeps local commits).", "REV"),
    Opt(("--update",), "update", False, "Replace an existing patch (the old one is kept for interdiff)."),
    Opt(
        ("--allow-conflict-markers",),
        "allow_conflict_markers",
        False,
        "Save even if added lines look like conflict markers.",
    ),
    Opt(("--override",), "override", True, "Save a do-not-revive lane into --series anyway, saying why.", "REASON"),
    JSON,
)

APPLY = (
    Opt(("-t", "--tree"), "only_tree", True, "Apply only this tree's patches of the series.", "TREE"),
    Opt(("--guard",), "guards", True, "Activate an MQ guard (#+GUARD / #-GUARD lines).", "GUARD", multiple=True),
    Opt(("--3way",), "three_way", False, "Fall back to 3-way merges using the full blob ids."),
    Opt(("--dry-run",), "dry_run", False, "Check and compute everything; change nothing."),
    Opt(("--override",), "override", True, "Apply a do-not-revive lane anyway, saying why.", "REASON"),
    Opt(("--link",), "link", True, "Rebuild the exact trees a result was measured on (instead of SERIES).", "LINK"),
    JSON,
)

IMPORT = (
    Opt(("-t", "--tree"), "tree", True, "The tree the patches are for (needed when several could be).", "TREE"),
    Opt(("--series",), "series", True, "Import the files as a stack, in order, appended to series S.", "S"),
    Opt(("--name",), "name", True, "The patch name (one file only); else from the file name or subject.", "N"),
    Opt(("--base",), "base", True, "The commit the patches apply to; else the newest one they apply to.", "REV"),
    Opt(("--override",), "override", True, "Import a do-not-revive lane into --series anyway, saying why.", "REASON"),
    JSON,
)

REBASE = (
    Opt(("--onto",), "onto", True, "The new base commit (a commit of the series' tree).", "REV"),
    Opt(("-t", "--tree"), "tree", True, "Which tree's patches to carry, when the series mixes trees.", "TREE"),
    Opt(("--exec",), "exec_cmd", True, "Run CMD (a shell command) in the worktree after each patch.", "CMD"),
    Opt(("--continue",), "go_on", False, "Go on after resolving a conflict in the worktree."),
    Opt(("--abort",), "abort", False, "Give up: remove the worktree; nothing was changed."),
    Opt(("--own-copy",), "own_copy", False,
        "A patch other series also list is written as this series' own copy (NAME--SERIES)."),
    JSON,
)

RUN = (
    Opt(("-t", "--tree"), "trees", True, "A tree to measure (repeatable); default: those with a series applied.",
        "TREE", multiple=True),
    Opt(("--link",), "link", True, "Link the result to this patch.", "PATCH"),
    Opt(("--series",), "series", True, "Link it to the last patch of S in each measured tree.", "S"),
    Opt(("--name",), "name", True, "A name for the run (`--baseline N`, `apply --link N`).", "N"),
    Opt(("--result-dir",), "result_dirs", True,
        "Keep the files the command writes here (repeatable); default: the trees' declared results.", "DIR",
        multiple=True),
    Opt(("--from-json",), "from_json", True, "vllm bench JSON to take metrics from, wherever it is (repeatable).",
        "GLOB", multiple=True),
    Opt(("--cwd",), "cwd", True, "Run CMD in DIR; default: the measured tree (where you stand when inside it).",
        "DIR"),
    Opt(("--repeat",), "repeat", True, "Run it N times, one record each, as one run group; stops at a failed run.",
        "N"),
    JSON,
)

STATUS = (JSON,)

FAST_COMMANDS = {"check": CHECK, "status": STATUS, "save": SAVE, "apply": APPLY, "import": IMPORT, "rebase": REBASE,
                 "run": RUN}  # fmt: skip
COMMAND_AFTER_OPTIONS = {"run"}  # `run [OPTIONS] [--] CMD…`: the first word that is no option starts CMD

Values = dict[str, object]


def text(values: Values, dest: str) -> str | None:
    """The value of an option that takes one, or None when it was not given."""
    value = values.get(dest)
    return value if isinstance(value, str) else None


def flag(values: Values, dest: str) -> bool:
    return bool(values.get(dest))


def texts(values: Values, dest: str) -> tuple[str, ...]:
    """The values of a `multiple` option, in order."""
    value = values.get(dest)
    return tuple(str(v) for v in value) if isinstance(value, tuple) else ()


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
        if not eq and i + 1 >= len(argv):
            return None
        value = inline if eq else argv[i + 1]
        if opt.multiple:
            previous = values.get(opt.dest, ())
            values[opt.dest] = (*previous, value) if isinstance(previous, tuple) else (value,)
        else:
            values[opt.dest] = value
        return i + 1 if eq else i + 2
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
        if command in COMMAND_AFTER_OPTIONS and (argv[i] == "--" or not argv[i].startswith("-")):
            positionals = argv[i:]  # a leading `--` kept, as click keeps it: the body drops it
            break
        if argv[i].startswith("-") and argv[i] != "-":
            nxt = _take(argv, i, specs, values)
            if nxt is None:
                nxt = _take(argv, i, ANYWHERE, values)
            if nxt is None:
                return None
            i = nxt
        else:
            positionals.append(argv[i])
            i += 1
    return command, values, positionals


def json_asked(argv: list[str]) -> bool:
    """Whether `--json` is one of stackmgr's own words in argv (not `run`'s command's, nor after `--`): an error
    is then said as JSON on stderr."""
    i, command = 0, None
    while i < len(argv) and argv[i] != "--":
        word = argv[i]
        if word == "--json":
            return True
        if word.startswith("-"):
            nxt = _take(argv, i, (*GLOBAL, *RUN) if command in COMMAND_AFTER_OPTIONS else GLOBAL, {})
            i = nxt if nxt is not None else i + 1
            continue
        if command in COMMAND_AFTER_OPTIONS:
            return False  # `run`'s command starts here
        command = command or word
        i += 1
    return False
