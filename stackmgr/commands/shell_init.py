"""`stackmgr shell-init bash|zsh` and the hidden `stackmgr guard`: git asks stackmgr before it destroys work.

`eval "$(stackmgr shell-init bash)"` defines a shell function `git` (the same text works in zsh). It decides in
three steps, the first in the shell and the rest in `guard` (`guard_refusal`), the one place that reads a git
command line:

1. In the shell, without starting Python: the subcommand word after git's global options. Only `reset`,
   `checkout`, `restore`, `clean`, `stash`, `switch`, and words that are git aliases (one `git config` lookup,
   for words that are not everyday builtins; git never lets an alias shadow a builtin), go on; everything
   else runs `command git "$@"` at once, so `git status` or `git log` never start stackmgr.
2. `classify`: does the command line discard working-tree changes (`reset --hard`, `checkout -- PATHS`,
   `checkout .`, `checkout -f`, `restore` of the worktree, `clean -f`, `switch -f/--discard-changes`), drop
   stash entries (`stash drop`, `stash clear`), or neither? Aliases are expanded as git does (`!shell` aliases
   cannot be read and pass). Abbreviated long options (`--har`) count as git counts them.
3. Only then: the store (--store given to `shell-init`, STACKMGR_STORE, or walking up from the current
   directory), and the repository the command concerns (`git rev-parse --show-toplevel` with the command's
   own -C/-c/--git-dir/--work-tree). A registered tree is one whose `path` resolves to that top level. No store
   at all, no repository, or a repository that is no registered tree: git runs, silently.

In a registered tree, a command that discards working-tree changes runs `stackmgr check -v TREE` (the whole
tree, whatever paths the command names): all preserved, git runs; otherwise the guard refuses (exit 1) with
check's list and `save them with stackmgr save NAME, or run 'command git ...' to bypass` on stderr.

Stash: a stash entry is a commit only the stash reflog keeps; no patch preserves it, and `check` does not look
at it. So in a registered tree `stash drop`/`stash clear` are always refused while the entries they would drop
exist: the refusal lists them (`stash@{0}: WIP on main: …`) and says how to look, keep (`git stash apply`, then
`stackmgr save`), or confirm (`command git stash drop`). With nothing to drop, git runs and says so itself.

Fail-safe: closed. When stackmgr cannot answer for a destructive command — a store given by --store or
STACKMGR_STORE that is not one, an unreadable config, a tree whose check fails, a crash, stackmgr missing from
PATH — the command is refused with stackmgr's one-line reason and the `command git` bypass. A guard that lets
`reset --hard` through whenever it is broken protects nothing; refusing costs one retyped word. Commands that
step 1 passes never depend on stackmgr working.

Not guarded: `!` shell aliases, `git -C` inside aliases (git forbids it), and other ways to lose work
(`git rm -f`, `git checkout-index -f`, `git read-tree -u --reset`, `git worktree remove --force`).
"""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.git.user_repo import UserRepo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

SHELLS = ("bash", "zsh")
GUARDED = ("reset", "checkout", "restore", "clean", "stash", "switch")
# Everyday builtins the shell passes without asking: an alias can never shadow a builtin.
PLAIN_BUILTINS = (
    "add", "am", "apply", "bisect", "blame", "branch", "cat-file", "cherry-pick", "clone", "commit", "config",
    "describe", "diff", "fetch", "format-patch", "grep", "help", "init", "log", "ls-files", "merge", "mv",
    "notes", "pull", "push", "range-diff", "rebase", "reflog", "remote", "rev-list", "rev-parse", "revert", "rm",
    "shortlog", "show", "show-ref", "status", "submodule", "tag", "version", "worktree",
)  # fmt: skip
# Global options taking the next word as their value (git also accepts `--git-dir=X` forms: one word).
VALUED_GLOBALS = ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--attr-source")
SELECTORS = ("-C", "-c", "--git-dir", "--work-tree", "--config-env", "--bare")  # choose the repository
EXITS_EARLY = ("-h", "--help", "-v", "--version", "--exec-path", "--html-path", "--man-path", "--info-path")
MAX_ALIAS_DEPTH = 16

SAFE, WORKTREE, STASH = "safe", "worktree", "stash"


class GitCommand:
    """A git command line split at its subcommand: the global options that select the repository, the rest.
    (Plain classes here: the guard runs before every guarded git command, and dataclasses costs 18 ms.)"""

    __slots__ = ("args", "exits_early", "selectors", "sub")

    def __init__(
        self, selectors: tuple[str, ...], sub: str | None, args: tuple[str, ...], exits_early: bool = False
    ) -> None:
        self.selectors = selectors
        self.sub = sub
        self.args = args
        self.exits_early = exits_early  # --version, --help, --exec-path: git prints and stops


class Verdict:
    __slots__ = ("kind", "stash_target")

    def __init__(self, kind: str, stash_target: str | None = None) -> None:
        self.kind = kind  # SAFE | WORKTREE | STASH
        self.stash_target = stash_target  # STASH: the entry `stash drop` names (None: stash@{0}); "*" for clear


def split_command(argv: list[str] | tuple[str, ...]) -> GitCommand:
    selectors: list[str] = []
    early = False
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        word, name = argv[i], argv[i].partition("=")[0]
        early = early or word in EXITS_EARLY
        width = 2 if word in VALUED_GLOBALS and i + 1 < len(argv) else 1
        if name in SELECTORS:
            selectors += argv[i : i + width]
        i += width
    if i >= len(argv):
        return GitCommand(tuple(selectors), None, (), early)
    return GitCommand(tuple(selectors), argv[i], tuple(argv[i + 1 :]), early)


class Scan:
    """A subcommand's arguments read the way git's parse-options reads them, for the options that matter here."""

    def __init__(self, args: tuple[str, ...], short_valued: str = "", longs: tuple[str, ...] = (),
                 long_valued: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.flags: set[str] = set()  # short letters ("f") and long names ("--force")
        self.positionals: list[str] = []
        self.paths: list[str] = []  # after "--"
        self.dashdash = False
        known = longs + long_valued
        words = list(args)
        while words:
            word = words.pop(0)
            if word == "--":
                self.dashdash, self.paths = True, words
                break
            if word.startswith("--"):
                name, eq, _ = word.partition("=")
                name = _unabbreviate(name, known)
                self.flags.add(name)
                if name in long_valued and not eq and words:
                    words.pop(0)
            elif word.startswith("-") and word != "-":
                for j, letter in enumerate(word[1:], 2):
                    self.flags.add(letter)
                    if letter in short_valued:  # the rest of the word, or the next word, is its value
                        if j >= len(word) and words:
                            words.pop(0)
                        break
            else:
                self.positionals.append(word)

    def has(self, *flags: str) -> bool:
        return any(f in self.flags for f in flags)


def _unabbreviate(name: str, known: tuple[str, ...]) -> str:
    """git accepts any unambiguous prefix of a long option: `--har` is `--hard`."""
    if name in known:
        return name
    matches = [k for k in known if k.startswith(name)] if len(name) > 2 else []
    return matches[0] if len(matches) == 1 else name


def _reset(args: tuple[str, ...], _repo: UserRepo, _cwd: str) -> Verdict:
    scan = Scan(args, longs=("--hard",), long_valued=("--pathspec-from-file",))
    return Verdict(WORKTREE if scan.has("--hard") else SAFE)


def _checkout(args: tuple[str, ...], repo: UserRepo, cwd: str) -> Verdict:
    scan = Scan(args, "bB", ("--force", "--patch"), ("--orphan", "--conflict", "--pathspec-from-file"))
    if scan.has("f", "--force", "p", "--patch", "--pathspec-from-file") or scan.paths:
        return Verdict(WORKTREE)
    if scan.dashdash or scan.has("b", "B", "--orphan") or not scan.positionals:
        return Verdict(SAFE)  # a branch to switch to or create; git carries the changes or refuses
    if len(scan.positionals) > 1:
        return Verdict(WORKTREE)  # `checkout REV PATH…`
    word = scan.positionals[0]  # a branch, or a path: git's own rule is "a commit first"
    if word == "-" or repo.commit(word) is not None:
        return Verdict(SAFE)
    pathlike = word.startswith(":") or any(c in word for c in "*?[") or os.path.lexists(_from(cwd, repo, word))
    return Verdict(WORKTREE if pathlike else SAFE)  # neither: git makes a branch from a remote one, or errs


def _from(cwd: str, repo: UserRepo, path: str) -> str:
    """`path` as the user's git sees it: relative to the directory after its -C options."""
    here = cwd
    for i, word in enumerate(repo.selectors[:-1]):
        if word == "-C" and repo.selectors[i + 1]:
            here = os.path.join(here, repo.selectors[i + 1])
    return os.path.join(here, path)


def _restore(args: tuple[str, ...], _repo: UserRepo, _cwd: str) -> Verdict:
    scan = Scan(args, "s", ("--worktree", "--staged", "--patch"), ("--source", "--conflict", "--pathspec-from-file"))
    if scan.has("S", "--staged") and not scan.has("W", "--worktree"):
        return Verdict(SAFE)  # the index only
    named = scan.positionals or scan.paths or scan.has("--pathspec-from-file", "p", "--patch")
    return Verdict(WORKTREE if named else SAFE)  # no paths: git refuses by itself


def _clean(args: tuple[str, ...], repo: UserRepo, _cwd: str) -> Verdict:
    scan = Scan(args, "e", ("--force", "--dry-run", "--interactive"), ("--exclude",))
    if scan.has("n", "--dry-run"):
        return Verdict(SAFE)
    if scan.has("f", "--force", "i", "--interactive"):
        return Verdict(WORKTREE)
    required = (repo.config("clean.requireForce") or "true").lower()
    return Verdict(WORKTREE if required in ("false", "no", "off", "0") else SAFE)


def _stash(args: tuple[str, ...], _repo: UserRepo, _cwd: str) -> Verdict:
    words = [a for a in args if a not in ("-q", "--quiet")]
    if not words or words[0] not in ("drop", "clear"):
        return Verdict(SAFE)  # push, pop, apply, list, show…: nothing is thrown away
    if words[0] == "clear":
        return Verdict(STASH, "*")
    named = [w for w in words[1:] if not w.startswith("-")]
    return Verdict(STASH, named[0] if named else None)


def _switch(args: tuple[str, ...], _repo: UserRepo, _cwd: str) -> Verdict:
    scan = Scan(args, "cC", ("--force", "--discard-changes"), ("--create", "--force-create", "--orphan", "--conflict"))
    return Verdict(WORKTREE if scan.has("f", "--force", "--discard-changes") else SAFE)


RULES = {"reset": _reset, "checkout": _checkout, "restore": _restore, "clean": _clean, "stash": _stash,
         "switch": _switch}  # fmt: skip


def classify(command: GitCommand, repo: UserRepo, cwd: str) -> Verdict:
    """What the command would throw away, if it ran in `repo` (aliases expanded as git expands them)."""
    for _ in range(MAX_ALIAS_DEPTH):
        if command.exits_early or command.sub is None:
            return Verdict(SAFE)
        if command.sub in GUARDED or command.sub in PLAIN_BUILTINS:
            break
        expansion = repo.config(f"alias.{command.sub}")
        if expansion is None or expansion.lstrip().startswith("!"):
            return Verdict(SAFE)
        try:
            import shlex  # only for aliases: it imports re

            words = shlex.split(expansion)
        except ValueError:
            return Verdict(SAFE)  # git cannot split it either
        command = split_command([*words, *command.args])
    else:
        return Verdict(SAFE)  # an alias loop: git refuses it
    if command.args[:1] in (("-h",), ("--help",)):
        return Verdict(SAFE)
    rule = RULES.get(command.sub or "")
    return rule(command.args, repo, cwd) if rule else Verdict(SAFE)


_UNQUOTED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


def shell_quote(word: str) -> str:
    """`shlex.quote` without `re` (which shlex imports: the guard runs before every guarded git command)."""
    if not word:
        return "''"
    if all(c in _UNQUOTED for c in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def guard_refusal(
    store_dir: str | None, argv: list[str], cwd: str, check_report: Callable[[str, tuple[str, ...]], list[str] | None]
) -> list[str] | None:
    """The lines to refuse `git ARGV` with, run from `cwd`; None when git may run. Fails closed (see above).
    `check_report(store root, trees)` is what `check -v` says when something is unpreserved, else None."""
    shown = "git" + "".join(" " + shell_quote(word) for word in argv)  # as typed, for the refusal line
    try:
        command = split_command(argv)
        repo = UserRepo(cwd, command.selectors)
        verdict = classify(command, repo, cwd)
        if verdict.kind == SAFE:
            return None
        managed = _managed_trees(store_dir, repo)
        if managed is None:
            return None
        root, names = managed
        if verdict.kind == STASH:
            return _stash_refusal(repo, verdict, names[0], shown)
        return _check_refusal(check_report(root, tuple(names)), names, shown)
    except StackmgrError as exc:
        return [f"stackmgr: cannot tell whether `{shown}` is safe: {exc}",
                f"stackmgr: not running it; fix that, or run `command {shown}` to bypass"]  # fmt: skip


def _managed_trees(store_dir: str | None, repo: UserRepo) -> tuple[str, list[str]] | None:
    """(store root, the trees whose path is the repository's top level); None when the repository is no tree.
    Unpinned, the nearest store above that registers the tree: a `stackmgr.toml` in the tree itself (a
    teammate's patch, the tree's upstream) must not hide the store that guards it."""
    from stackmgr.store.config import find_store_root, load_store

    top = repo.toplevel()
    pinned = store_dir is not None or bool(os.environ.get("STACKMGR_STORE"))
    here = os.getcwd()
    while top is not None:  # (not in a working tree: git will say so itself)
        try:  # a store named and not one is an error, not "unmanaged"
            root = find_store_root(store_dir, here)
        except UsageProblem:
            if pinned:
                raise
            return None  # no store anywhere: nothing is managed here
        names = [name for name, tree in load_store(root).trees.items() if os.path.realpath(tree.path) == top]
        if names or pinned or os.path.dirname(root) == root:
            return (root, names) if names else None
        here = os.path.dirname(root)
    return None


def _check_refusal(report: list[str] | None, names: list[str], shown: str) -> list[str] | None:
    if report is None:
        return None
    which = ", ".join(names)
    return [
        f"stackmgr: refusing `{shown}`: not everything in tree {which} is preserved in a patch",
        *report,
        f"stackmgr: save them with `stackmgr save NAME -t {names[0]}`, or run `command {shown}` to bypass",
    ]


def _stash_refusal(repo: UserRepo, verdict: Verdict, tree: str, shown: str) -> list[str] | None:
    entries = repo.stash_entries()
    if verdict.stash_target == "*":
        doomed = entries
    else:
        target = verdict.stash_target or "stash@{0}"
        commit = repo.commit(f"stash@{{{target}}}" if target.isdigit() else target)
        doomed = [e for e in entries if e[0] == commit]
    if not doomed:
        return None  # nothing to drop: git says so itself
    shown_entries = [f"  {name}: {subject}" for _commit, name, subject in doomed[:20]]
    if len(doomed) > 20:
        shown_entries.append(f"  … and {len(doomed) - 20} more")
    first = doomed[0][1]
    return [
        f"stackmgr: refusing `{shown}`: stash entries are not preserved by any patch; this would drop:",
        *shown_entries,
        f"stackmgr: look with `git stash show -p {first}`; keep it with `git stash apply {first}` then "
        f"`stackmgr save NAME -t {tree}`, or run `command {shown}` to drop anyway",
    ]


_FUNCTION = r"""function git {
    local __stackmgr_word __stackmgr_sub= __stackmgr_value= __stackmgr_rc
    local -a __stackmgr_global
    __stackmgr_global=()
    for __stackmgr_word in "$@"; do
        if [ -n "$__stackmgr_value" ]; then
            __stackmgr_global+=("$__stackmgr_word")
            __stackmgr_value=
            continue
        fi
        case $__stackmgr_word in
            @VALUED@) __stackmgr_global+=("$__stackmgr_word"); __stackmgr_value=1 ;;
            -*) __stackmgr_global+=("$__stackmgr_word") ;;
            *) __stackmgr_sub=$__stackmgr_word; break ;;
        esac
    done
    case $__stackmgr_sub in
        @GUARDED@) ;;
        ''|@PLAIN@) command git "$@"; return ;;
        *) command git "${__stackmgr_global[@]}" config --get "alias.$__stackmgr_sub" >/dev/null 2>&1 ||
               { command git "$@"; return; } ;;
    esac
    command stackmgr@STORE@ guard -- "$@"
    __stackmgr_rc=$?
    case $__stackmgr_rc in
        0) command git "$@" ;;
        1|130) return $__stackmgr_rc ;;
        *) printf 'stackmgr: could not check before `git %s` (stackmgr exited %s); not running it\n' \
               "$__stackmgr_sub" "$__stackmgr_rc" >&2
           printf 'stackmgr: fix that, or run `command git ...` to bypass\n' >&2
           return 1 ;;
    esac
}
"""


def pinned_store(shell: str, store_dir: str | None) -> tuple[str | None, bool]:
    """The store the function should always ask, and whether one was looked for in vain: --store, else (with no
    STACKMGR_STORE) the store `shell-init` runs inside, so the function keeps asking it wherever the user is."""
    if shell not in SHELLS or store_dir is not None or os.environ.get("STACKMGR_STORE"):
        return store_dir, False
    from stackmgr.store.config import find_store_root

    try:
        return find_store_root(None), False
    except UsageProblem:
        return None, True


def shell_function(shell: str, store_dir: str | None) -> str:
    """The text `eval "$(stackmgr shell-init SHELL)"` runs; the same function serves bash and zsh."""
    if shell not in SHELLS:
        raise UsageProblem(
            f"unsupported shell '{shell}'", "use `stackmgr shell-init bash` or `stackmgr shell-init zsh`"
        )
    store = f" --store {shell_quote(os.path.abspath(store_dir))}" if store_dir else ""
    body = (
        _FUNCTION.replace("@VALUED@", "|".join(VALUED_GLOBALS))
        .replace("@GUARDED@", "|".join(GUARDED))
        .replace("@PLAIN@", "|".join(PLAIN_BUILTINS))
        .replace("@STORE@", store)
    )
    rcfile = "~/.bashrc" if shell == "bash" else "~/.zshrc"
    return (
        f"# stackmgr shell-init {shell}: git asks `stackmgr check` before it destroys work in a managed tree.\n"
        f'# Put `eval "$(stackmgr shell-init {shell})"` in {rcfile}; `command git ...` bypasses it once.\n' + body
    )
