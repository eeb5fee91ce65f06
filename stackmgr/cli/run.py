"""`stackmgr run … -- CMD…`: run a benchmark, show its output, and record it as a draft link."""

from __future__ import annotations

import click

from stackmgr.cli.context import Context, pass_context
from stackmgr.store.config import open_store


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-t", "--tree", "trees", multiple=True, metavar="TREE",
              help="A tree to measure (repeatable); default: those with a series applied.")
@click.option("--link", "link", metavar="PATCH", help="Link the result to this patch.")
@click.option("--series", metavar="S", help="Link it to the last patch of S in each measured tree.")
@click.option("--name", metavar="N", help="A name for the run (`--baseline N`, `apply --link N`).")
@click.option("--result-dir", "result_dirs", multiple=True, metavar="DIR",
              help="Keep the files the command writes here (repeatable); default: the trees' declared results.")
@click.option("--from-json", "from_json", multiple=True, metavar="GLOB",
              help="vllm bench JSON to take metrics from, wherever it is (repeatable).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_context
def run_cmd(ctx: Context, trees: tuple[str, ...], link: str | None, series: str | None, name: str | None,
            result_dirs: tuple[str, ...], from_json: tuple[str, ...], command: tuple[str, ...]) -> None:  # fmt: skip
    """Run CMD (after `--`), tee its output to a log, record the measured state before and after, the command,
    its exit code, times, environment, host and accelerators, the files written under the result directories
    and the metrics in them, as a draft (experimental) link; exit with CMD's own code."""
    from stackmgr import output
    from stackmgr.commands.run import RunRequest, run, say

    argv = list(command[1:] if command[:1] == ("--",) else command)
    outcome = run(open_store(ctx.store), RunRequest(argv, trees=trees, link=link, series=series, name=name,
                                                    result_dirs=result_dirs, from_json=from_json))  # fmt: skip
    if ctx.json:
        output.emit_json({"schema": 1, "exit_code": outcome.exit_code, "tainted": outcome.tainted,
                          "links": [k.id for k in outcome.links], "warnings": outcome.warnings})  # fmt: skip
    say(outcome)
    raise SystemExit(outcome.exit_code)
