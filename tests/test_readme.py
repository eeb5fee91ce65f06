"""The README works as written: every command of its examples runs, in order, in a scratch store and tree.

The README's examples are ```console blocks of `$ ` lines. The test extracts them mechanically and runs them as one
bash session (so `cd`, `export` and `eval` carry over, as for a reader typing them), with HOME a scratch
directory holding `~/src/vllm` (a git checkout on branch main), `stackmgr` the CLI under test and `vllm` a stand-in
for `vllm bench serve` that prints a throughput line and writes a result JSON. A line whose comment says
`# exit N` must exit N; every other line must exit 0. Left out, on purpose and only these: the Quickstart's two
```sh commands, which create a virtual environment and pip-install (CI runs them verbatim: `.ci/run`).

Also checked: every `stackmgr COMMAND` the README names exists, docs/COMMANDS.md covers every registered command,
and the README's part before its reference links stays under 150 lines.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from stackmgr.cli.app import COMMANDS, cli
from tests.conftest import git_text, make_repo

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
COMMANDS_DOC = ROOT / "docs" / "COMMANDS.md"

# Commands the README documents that are being added: a line using one is skipped only while the command is not
# registered, and runs as soon as it is.
NEEDS = {"diff", "redo", "help"}

# The only README blocks not run: they install (a venv and pip), as a reader does once.
QUICKSTART = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install . && stackmgr demo",
    "python3 -m venv .venv && . .venv/bin/activate && pip install '.[test]' && python -m pytest",
)
GLOBAL_OPTIONS = {"--store": 1, "--json": 0, "--debug": 0}
EXPECTED_EXIT = re.compile(r"\s#\s*exit (\d+)\b")

FAKE_VLLM = """\
import json, os, sys
args = sys.argv[1:]
def arg(name, default):
    return args[args.index(name) + 1] if name in args else default
out = arg("--result-dir", ".")
rate = arg("--request-rate", "inf")
os.makedirs(out, exist_ok=True)
print("Output token throughput (tok/s): 1874.2", flush=True)
result = {"backend": "vllm", "model_id": arg("--model", "m"), "num_prompts": 50, "request_rate": float(rate),
          "output_throughput": 1874.2, "request_throughput": 4.1, "mean_ttft_ms": 41.2}
with open(os.path.join(out, f"vllm-{rate}qps.json"), "w") as f:
    json.dump(result, f)
"""


@dataclass(frozen=True)
class Example:
    line: int  # in README.md
    command: str
    exit_code: int

    @property
    def subcommand(self) -> str | None:
        words = stackmgr_words(self.command)
        return words[0] if words else None


def blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """Every fenced block of a Markdown text: (language, line of its first line, its lines)."""
    found: list[tuple[str, int, list[str]]] = []
    lang: str | None = None
    start, body = 0, list[str]()
    for number, line in enumerate(text.splitlines(), start=1):
        if lang is None and line.startswith("```"):
            lang, start, body = line[3:].strip(), number + 1, []
        elif lang is not None and line.startswith("```"):
            found.append((lang, start, body))
            lang = None
        elif lang is not None:
            body.append(line)
    return found


def examples(text: str) -> list[Example]:
    out = []
    for lang, start, body in blocks(text):
        if lang != "console":
            continue
        for offset, line in enumerate(body):
            assert line.startswith("$ "), f"README.md:{start + offset}: a console block holds only `$ ` commands"
            expected = EXPECTED_EXIT.search(line)
            out.append(Example(start + offset, line[2:], int(expected.group(1)) if expected else 0))
    return out


def stackmgr_words(command: str) -> list[str]:
    """The words after `stackmgr` in a command line, global options left out: `stackmgr --store X tree set A B`
    gives ['tree', 'set', 'A', 'B']."""
    m = re.search(r"(?:^|[\s(\"'`])stackmgr((?:\s+[^\s#)\"'`]+)*)", command)
    if not m:
        return []
    words = m.group(1).split()
    while words and words[0] in GLOBAL_OPTIONS:
        words = words[1 + GLOBAL_OPTIONS[words[0]] :]
    return words


def missing(name: str | None) -> bool:
    return name is not None and name in NEEDS and name not in cli.commands


def _scratch_home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """HOME (the hermetic fixture's) with ~/src/vllm, and PATH with `stackmgr` (this CLI) and a stand-in `vllm`."""
    home = Path(os.environ["HOME"])
    make_repo(home / "src" / "vllm", {"README.md": "# vLLM\n", "vllm/__init__.py": "", "vllm/envs.py": "A = 1\n"})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("stackmgr", f'exec "{sys.executable}" -m stackmgr "$@"\n'),
                       ("vllm", f"exec \"{sys.executable}\" - \"$@\" <<'PY'\n{FAKE_VLLM}PY\n")):  # fmt: skip
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", NO_COLOR="1")
    env.pop("STACKMGR_STORE", None)
    return home, env


@pytest.mark.slow
def test_every_command_of_the_readme_runs_in_order_with_its_documented_exit_code(tmp_path: Path) -> None:
    home, env = _scratch_home(tmp_path)
    runnable = [e for e in examples(README.read_text(encoding="utf-8")) if not missing(e.subcommand)]
    logs = tmp_path / "logs"
    logs.mkdir()
    script = ["cd ~"]
    for i, example in enumerate(runnable):
        script += [f"{{ {example.command}", f'}} >"{logs}/{i}" 2>&1 </dev/null', f'echo $? >"{logs}/{i}.rc"']
    (tmp_path / "session.sh").write_text("\n".join(script) + "\n")
    subprocess.run(["bash", "--noprofile", "--norc", str(tmp_path / "session.sh")], env=env, cwd=home, check=True,
                   timeout=600)  # fmt: skip

    for i, example in enumerate(runnable):
        code = int((logs / f"{i}.rc").read_text())
        assert code == example.exit_code, (
            f"README.md:{example.line}: `{example.command}` exited {code}, the README says {example.exit_code}:\n"
            + (logs / str(i)).read_text(errors="replace")
        )

    store, tree = home / "lab-store", home / "src" / "vllm"
    assert (store / "series" / "replay").read_text().split() == ["decode-boundary.patch", "replay-notes.patch"]
    assert b"+DECODE_REPLAY_BOUNDARY = 64\n" in (store / "patches" / "decode-boundary.patch").read_bytes()
    notes = (store / "patches" / "replay-notes.patch").read_bytes()
    assert b"+the boundary moves with the block size\n" in notes and b"vllm/envs.py" not in notes, "only what is new"
    assert len(list((store / "links" / "replay-notes").glob("*.toml"))) >= 2, "the two runs"
    assert (home / "lab-report" / "index.html").is_file()
    assert git_text(tree, "rev-parse", "HEAD") == git_text(tree, "rev-parse", "main"), "never moved off the base"


def test_the_readme_runs_everything_but_the_quickstart_install() -> None:
    """Nothing escapes the session test: every fenced block is a console session, the diagram (text), or one of the
    Quickstart's two install commands; and CI runs the test command verbatim."""
    others = [(lang, body) for lang, _start, body in blocks(README.read_text(encoding="utf-8"))
              if lang not in ("console", "text")]  # fmt: skip
    assert [body for _lang, body in others] == [[QUICKSTART[0]], [QUICKSTART[1]]]
    assert [lang for lang, _body in others] == ["sh", "sh"]
    assert QUICKSTART[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _named_commands(text: str) -> list[tuple[str, list[str]]]:
    """(where, words) for every `stackmgr …` in the README's code: its console lines and its `code spans`."""
    found = [(f"README.md:{e.line}", stackmgr_words(e.command)) for e in examples(text)]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    found += [(f"`{span}`", stackmgr_words(span)) for span in re.findall(r"`([^`\n]+)`", prose)]
    return [(where, words) for where, words in found if words]


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_commands_the_readme_documents_ahead_are_registered(name: str) -> None:
    """Skipped while the command is still being added (the session test skips its lines meanwhile)."""
    if name not in cli.commands:
        pytest.skip(f"`stackmgr {name}` is not registered yet: the README's lines using it are not run")


def test_every_command_the_readme_names_exists() -> None:
    wrong = []
    for where, words in _named_commands(README.read_text(encoding="utf-8")):
        name, rest = words[0], words[1:]
        command = cli.commands.get(name)
        if command is None:
            if name not in NEEDS:
                wrong.append(f"{where}: no command `stackmgr {name}`")
        elif isinstance(command, click.Group) and rest and rest[0] not in command.commands and name != "series":
            wrong.append(f"{where}: no command `stackmgr {name} {rest[0]}`")  # `series NAME` shows a series
    assert not wrong, "\n".join(wrong)


def _first_cells(doc: str) -> list[set[str]]:
    """The words of the first cell of each table row of docs/COMMANDS.md (`series new/add/remove/move` gives
    series, new, add, remove, move)."""
    cells = [re.split(r"(?<!\\)\|", line)[1] for line in doc.splitlines() if line.startswith("| `")]  # `\|` is a |
    return [set(re.findall(r"[a-z][a-z-]*", cell)) for cell in cells]


def test_docs_commands_covers_every_registered_command() -> None:
    rows = _first_cells(COMMANDS_DOC.read_text(encoding="utf-8"))
    uncovered = []
    for command in COMMANDS:
        assert command.name is not None
        if not any(command.name in row for row in rows):
            uncovered.append(command.name)
        if isinstance(command, click.Group):  # and its subcommands (`series NAME` is the hidden `series show`)
            subs = [sub for sub, c in command.commands.items() if not c.hidden and sub != "show"]
            uncovered += [f"{command.name} {sub}" for sub in subs if not any({command.name, sub} <= r for r in rows)]
    assert not uncovered, "docs/COMMANDS.md has no row for: " + ", ".join(uncovered)


def test_the_readme_makes_a_new_user_productive_in_under_150_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert "## Reference" in lines
    assert lines.index("## Reference") < 150
