"""What `pip install .` installs: every subpackage (a missing `stackmgr.evidence.report` once made an installed
`stackmgr report` fail outside this checkout) and the `stackmgr` command, whose start-up imports nothing heavy."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setuptools() -> dict[str, list[str]]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return dict(tomllib.load(f)["tool"]["setuptools"])


def test_every_subpackage_is_installed() -> None:
    found = sorted(".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "stackmgr").rglob("__init__.py"))
    assert sorted(_setuptools()["packages"]) == found


def test_the_command_imports_only_sys_and_the_entry_point() -> None:
    assert _setuptools()["script-files"] == ["bin/stackmgr"]
    script = (ROOT / "bin" / "stackmgr").read_text()
    assert script.startswith("#!python\n")  # pip points it at the installing interpreter
    imported = {alias.name for node in ast.walk(ast.parse(script)) if isinstance(node, ast.Import | ast.ImportFrom)
                for alias in node.names} | {node.module for node in ast.walk(ast.parse(script))
                                            if isinstance(node, ast.ImportFrom)}  # fmt: skip
    assert imported == {"sys", "main", "stackmgr.cli.entry"}
