"""`stackmgr help [COMMAND [SUB]]` and `stackmgr help --man`: the help texts `--help` shows, and the man page
(docs/stackmgr.1) generated from the same click commands, so neither can say something the other does not."""

from __future__ import annotations

import sys

import click

from stackmgr import output
from stackmgr.errors import UsageProblem

# The exit codes (docs/FORMATS.md#exit-codes), as the group's `--help` and the man page say them.
EXIT_CODES = (
    ("0", "success"),
    ("1", "a check said no: unpreserved work, lint findings, a refused reset or apply"),
    ("2", "usage error: unknown command, option, tree, patch or series"),
    ("3", "the operation failed and nothing was changed"),
    ("130", "interrupted"),
)
EPILOG = ("Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES) + ". With --json, an "
          "error is one JSON line on stderr. `stackmgr help COMMAND` shows a command's help.")  # fmt: skip
NO_STORE = ("init", "demo", "help")  # commands that take no `--store` (init takes its directory)


def command_context(root: click.Context, words: tuple[str, ...]) -> click.Context:
    """The click context `stackmgr WORDS --help` would show the help of; a one-line usage error (exit 2) with a
    did-you-mean when a word names no command."""
    ctx = root
    for i, word in enumerate(words):
        group = ctx.command
        if not isinstance(group, click.Group):
            raise UsageProblem(f"`{ctx.command_path}` has no subcommands", f"see `stackmgr help {words[0]}`")
        command = group.get_command(ctx, word)
        if command is None:
            import difflib

            said = " ".join(words[: i + 1])
            close = difflib.get_close_matches(word, group.list_commands(ctx), n=1, cutoff=0.6)
            guess = f" (did you mean '{close[0]}'?)" if close else ""
            raise UsageProblem(f"no command '{said}'{guess}", f"see `{ctx.command_path} --help`")
        ctx = click.Context(command, info_name=word, parent=ctx)
    return ctx


@click.command("help")
@click.argument("words", metavar="[COMMAND [SUB]]", nargs=-1)
@click.option("--man", is_flag=True, help="Print the man page (roff), generated from these help texts.")
@click.pass_context
def help_cmd(ctx: click.Context, words: tuple[str, ...], man: bool) -> None:
    """Show the help of stackmgr, of COMMAND or of COMMAND SUB (the same text as `--help`)."""
    root = ctx.find_root()
    if man:
        group = root.command
        assert isinstance(group, click.Group)
        output.raw_stream(sys.stdout).write(man_page(group))
        return
    output.out(command_context(root, words).get_help())


def man_page(group: click.Group) -> str:
    """The man page of `group` (roff, section 1): its help, every command's usage, help and options, as `--help`
    says them, and the exit codes. No date and no terminal width: the same commands give the same bytes."""
    root = click.Context(group, info_name="stackmgr", **group.context_settings)
    lines = [".TH STACKMGR 1 \"\" \"stackmgr\" \"User Commands\"", ".SH NAME",
             "stackmgr \\- " + _roff(_paragraphs(group)[0][0]), ".SH SYNOPSIS", ".B stackmgr",
             "[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...", ".SH DESCRIPTION"]  # fmt: skip
    lines += _text(group)
    lines += [".SH OPTIONS", *_options(group, root), ".SH COMMANDS"]
    for ctx in _commands(root):
        usage = " ".join([ctx.command_path, *ctx.command.collect_usage_pieces(ctx)])
        lines += [f'.SS "{_roff(usage)}"', *_text(ctx.command), *_options(ctx.command, ctx, skip=("store", "help"))]
    lines.append(".SH EXIT STATUS")
    for code, meaning in EXIT_CODES:
        lines += [".TP", f".B {code}", _roff(meaning)]
    lines += [".PP", _roff("With --json, an error is one JSON line on stderr (docs/FORMATS.md, JSON output)."),
              ".SH SEE ALSO", _roff("git(1), quilt(1), stg(1); docs/FORMATS.md and docs/ARCHITECTURE.md in the "
                                    "stackmgr sources.")]  # fmt: skip
    return "\n".join(lines) + "\n"


def _commands(ctx: click.Context) -> list[click.Context]:
    """Every visible command below `ctx`, depth first, in `--help`'s order (a group before its subcommands)."""
    group = ctx.command
    found: list[click.Context] = []
    if not isinstance(group, click.Group):
        return found
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = click.Context(command, info_name=name, parent=ctx)
        found += [sub, *_commands(sub)]
    return found


def _paragraphs(command: click.Command) -> list[list[str]]:
    """The command's help as `--help` takes it (up to a `\\f`), in paragraphs of lines."""
    import inspect

    text = inspect.cleandoc(command.help or "").partition("\f")[0]
    return [p.splitlines() for p in text.split("\n\n") if p.strip()] or [[""]]


def _text(command: click.Command) -> list[str]:
    lines: list[str] = []
    for paragraph in _paragraphs(command):
        verbatim = paragraph[0].strip() == "\b"  # click's mark for a paragraph not to rewrap
        lines += [".PP", *([".nf"] if verbatim else [])]
        lines += [_roff(line.strip() if not verbatim else line) for line in paragraph[1 if verbatim else 0 :]]
        lines += [".fi"] if verbatim else []
    return lines


def _options(command: click.Command, ctx: click.Context, skip: tuple[str, ...] = ()) -> list[str]:
    """The options as `--help` lists them (but `skip`: what every command takes, said once under OPTIONS)."""
    lines: list[str] = []
    for param in command.get_params(ctx):
        shown = isinstance(param, click.Option) and not param.hidden and param.name not in skip
        record = param.get_help_record(ctx) if shown else None
        if record is not None:
            names, help_text = record
            lines += [".TP", "\\fB" + _roff(names).replace("-", "\\-") + "\\fR", _roff(" ".join(help_text.split()))]
    return lines


def _roff(text: str) -> str:
    """One line of text, safe in roff: backslashes escaped, no line that starts as a request."""
    line = text.replace("\\", "\\e")
    return "\\&" + line if line.startswith((".", "'")) else line
