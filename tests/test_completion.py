"""Shell completion of the store's names (click's shell_complete): patches, series, trees, run names and link ids,
as bash asks it (`eval "$(_STACKMGR_COMPLETE=bash_source stackmgr)"`, docs/COMPLETION.md). Completion never
fails, never prints anything but the names, and asks no git."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stackmgr.cli.entry import main
from tests.conftest import Lab


def complete(monkeypatch: pytest.MonkeyPatch, line: str) -> list[str]:
    """What bash is offered for the last word of `line` (an empty last word: a line ending in a space), asked as
    the script `_STACKMGR_COMPLETE=bash_source` prints asks it (click writes the answer as bytes)."""
    words = line.split(" ")
    monkeypatch.setenv("_STACKMGR_COMPLETE", "bash_complete")
    monkeypatch.setenv("COMP_WORDS", line)
    monkeypatch.setenv("COMP_CWORD", str(len(words) - 1))
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([])
    monkeypatch.delenv("_STACKMGR_COMPLETE")
    out.flush()
    said = out.buffer.getvalue().decode()  # type: ignore[attr-defined]
    assert code == 0 and err.getvalue() == "", (code, said, err.getvalue())
    items = [item.partition(",") for item in said.splitlines()]  # bash_complete: "TYPE,VALUE" per line
    return [value for kind, _, value in items if kind == "plain"]


@pytest.fixture
def day(lab: Lab) -> Lab:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fp8-scale", "--series", "fp8-sweep", "-m", "scale").code == 0
    (lab.tree / "README").write_text("hello\nmore\n")
    assert lab.sm("save", "fp8-kernel", "--series", "fp8-sweep", "-m", "kernel").code == 0
    assert lab.sm("series", "new", "baseline").code == 0
    return lab


def test_patch_names_complete_where_a_patch_is_asked(day: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    store = str(day.store)
    for line in (f"stackmgr --store {store} show fp8-", f"stackmgr --store {store} drop fp8-",
                 f"stackmgr --store {store} rename fp8-", f"stackmgr --store {store} link fp8-",
                 f"stackmgr --store {store} interdiff fp8-", f"stackmgr --store {store} pop fp8-",
                 f"stackmgr --store {store} diff fp8-",
                 f"stackmgr --store {store} series add fp8-sweep fp8-",
                 f"stackmgr --store {store} series move fp8-sweep fp8-"):  # fmt: skip
        assert complete(monkeypatch, line) == ["fp8-kernel", "fp8-scale"], line
    assert complete(monkeypatch, f"stackmgr --store {store} show fp8-s") == ["fp8-scale"]


def test_series_names_complete_where_a_series_is_asked(day: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    store = str(day.store)
    for line in (f"stackmgr --store {store} apply ", f"stackmgr --store {store} series show ",
                 f"stackmgr --store {store} series rm ", f"stackmgr --store {store} export ",
                 f"stackmgr --store {store} rebase ", f"stackmgr --store {store} links --series ",
                 f"stackmgr --store {store} save p --series "):  # fmt: skip
        assert complete(monkeypatch, line) == ["baseline", "fp8-sweep"], line
    assert complete(monkeypatch, f"stackmgr --store {store} apply fp") == ["fp8-sweep"]
    assert complete(monkeypatch, f"stackmgr --store {store} series fp") == ["fp8-sweep"]  # `series NAME` shows it


def test_tree_names_complete(day: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    store = str(day.store)
    assert complete(monkeypatch, f"stackmgr --store {store} status v") == ["vllm"]
    assert complete(monkeypatch, f"stackmgr --store {store} push -t ") == ["vllm"]
    assert complete(monkeypatch, f"stackmgr --store {store} reset ") == ["vllm"]


def test_run_names_and_link_ids_complete(day: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = day.sm("run", "--name", "baseline-a100", "--", sys.executable, "-c", "print('tput 1')")
    assert ran.code == 0, ran
    (record,) = list((day.store / "links").rglob("*.toml"))
    import tomllib

    link = str(tomllib.loads(record.read_text())["id"])
    store = str(day.store)
    assert complete(monkeypatch, f"stackmgr --store {store} apply --link base") == ["baseline-a100"]
    assert complete(monkeypatch, f"stackmgr --store {store} apply --link lnk-") == [link]
    assert complete(monkeypatch, f"stackmgr --store {store} link fp8-scale --amends base") == ["baseline-a100"]


def test_completion_finds_the_store_as_commands_do(day: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(day.store / "patches")  # walked up to, as every command finds it
    assert complete(monkeypatch, "stackmgr show fp8-s") == ["fp8-scale"]
    monkeypatch.chdir(day.tree)
    assert complete(monkeypatch, f"stackmgr show --store {day.store} fp8-s") == ["fp8-scale"]  # --store anywhere
    monkeypatch.setenv("STACKMGR_STORE", str(day.store))
    assert complete(monkeypatch, "stackmgr apply fp") == ["fp8-sweep"]


def test_completion_asks_no_git(day: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    day.sm("status")  # the store's caches as a day leaves them
    from stackmgr.git import runner

    def no_git(*_a: object, **_k: object) -> None:
        raise AssertionError("completion ran git")

    for name in ("run", "run_rc", "start"):
        monkeypatch.setattr(runner, name, no_git)
    store = str(day.store)
    assert complete(monkeypatch, f"stackmgr --store {store} show fp8-s") == ["fp8-scale"]
    assert complete(monkeypatch, f"stackmgr --store {store} apply fp") == ["fp8-sweep"]
    assert complete(monkeypatch, f"stackmgr --store {store} status v") == ["vllm"]


def test_completion_offers_only_names_the_lookup_accepts(day: Lab, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:  # fmt: skip
    outside = tmp_path / "evil.patch"
    outside.write_bytes(b"not the store's\n")
    (day.store / "patches" / "fp8-evil.patch").symlink_to(outside)
    (day.store / "patches" / "fp8-\x1b[31mred.patch").write_bytes(b"placeholder\n")
    (day.store / "patches" / "fp8-dir.patch").mkdir()
    assert complete(monkeypatch, f"stackmgr --store {day.store} show fp8-") == ["fp8-kernel", "fp8-scale"]


def test_a_broken_store_completes_nothing_and_says_nothing(day: Lab, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:  # fmt: skip
    (day.store / "stackmgr.toml").write_text("[trees\n")  # a config mid-edit
    assert complete(monkeypatch, f"stackmgr --store {day.store} status ") == []
    assert complete(monkeypatch, f"stackmgr --store {tmp_path / 'nowhere'} show ") == []
    monkeypatch.chdir(tmp_path)
    assert complete(monkeypatch, "stackmgr apply ") == []
    assert complete(monkeypatch, "stackmgr show ") == []


def test_the_documented_bash_setup_works_through_the_console_script(day: Lab) -> None:
    env = {**os.environ, "_STACKMGR_COMPLETE": "bash_source"}
    script = subprocess.run([sys.executable, "-m", "stackmgr"], capture_output=True, text=True, env=env)
    assert script.returncode == 0 and "_STACKMGR_COMPLETE=bash_complete" in script.stdout, script
    line = f"stackmgr --store {day.store} show fp8-s"
    env = {**os.environ, "_STACKMGR_COMPLETE": "bash_complete", "COMP_WORDS": line, "COMP_CWORD": "4"}
    asked = subprocess.run([sys.executable, "-m", "stackmgr"], capture_output=True, text=True, env=env)
    assert (asked.returncode, asked.stdout, asked.stderr) == (0, "plain,fp8-scale\n", "")
    for words in (["check"], ["save", "x"], ["apply", "fp8-sweep"], ["status"]):  # the click-free fast path
        ran = subprocess.run([sys.executable, "-m", "stackmgr", *words], capture_output=True, text=True, env=env,
                             cwd=day.store)  # fmt: skip
        assert ran.stdout == "plain,fp8-scale\n", (words, ran)
