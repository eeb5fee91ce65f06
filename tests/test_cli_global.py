"""The command line as a whole: `--store` anywhere (on the fast path and through click alike), honest store-path
errors, errors as JSON under `--json`, bare `stackmgr`, `stackmgr help` and the man page generated from the same
help texts (docs/FORMATS.md#exit-codes, #json-output)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stackmgr.cli import entry
from tests.conftest import Lab, git, make_repo, one_line_error, run_stackmgr

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["fast", "click"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each command line twice: as the click-free fast path parses it, and as click does."""
    if request.param == "click":
        monkeypatch.setattr(entry, "_fast", lambda argv: None)
    return str(request.param)


# --- 1. `--store DIR` anywhere, as `--json` ---------------------------------------------------------------------


def test_store_after_the_command_is_the_same_as_before_it(lab: Lab, path: str) -> None:
    (lab.tree / "README").write_text("changed\n")
    before = run_stackmgr("--store", str(lab.store), "--json", "status")
    after = run_stackmgr("status", "--store", str(lab.store), "--json")
    inline = run_stackmgr("status", f"--store={lab.store}", "vllm", "--json")
    assert before.code == after.code == inline.code == 0, (after, inline)
    assert json.loads(after.out) == json.loads(before.out) == json.loads(inline.out)
    assert json.loads(after.out)["trees"][0]["changes"][0]["path"] == "README"
    saved = run_stackmgr("save", "readme-fix", "--store", str(lab.store), "-m", "fix the readme")
    assert saved.code == 0, saved
    assert (lab.store / "patches" / "readme-fix.patch").is_file()
    checked = run_stackmgr("check", "-v", "--store", str(lab.store))
    assert checked.code == 0, checked


def test_the_last_store_given_wins_on_both_paths(lab: Lab, tmp_path: Path, path: str) -> None:
    result = run_stackmgr("--store", str(tmp_path / "nowhere"), "status", "--store", str(lab.store))
    assert result.code == 0, result


def test_store_after_a_group_subcommand(lab: Lab) -> None:
    (lab.tree / "README").write_text("changed\n")
    assert lab.sm("save", "p1", "--new-series", "s1", "-m", "one").code == 0
    shown = run_stackmgr("series", "--store", str(lab.store), "show", "s1")
    assert shown.code == 0 and "p1" in shown.out, shown
    deep = run_stackmgr("series", "show", "s1", "--store", str(lab.store))
    assert deep.code == 0 and deep.out == shown.out, deep
    trees = run_stackmgr("tree", "set", "vllm", str(lab.tree), "--store", str(lab.store))
    assert trees.code == 0, trees


def test_run_takes_store_before_its_command_only(lab: Lab, tmp_path: Path, path: str) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    said = tmp_path / "argv.txt"
    script = f"import sys; open({str(said)!r}, 'w').write(' '.join(sys.argv[1:]))"
    ran = run_stackmgr("run", "--store", str(lab.store), "--", sys.executable, "-c", script, "--store", "X")
    assert ran.code == 0, ran
    assert said.read_text() == "--store X"  # after `--` it is the command's own argument
    assert len(list((lab.store / "links" / "fix").glob("*.toml"))) == 1


# --- 2. honest store-path errors --------------------------------------------------------------------------------


def test_a_store_that_does_not_exist_is_said_so(tmp_path: Path, path: str) -> None:
    missing = tmp_path / "no" / "such"
    result = run_stackmgr("status", "--store", str(missing))
    one_line_error(result, 2)
    assert f"store {missing} does not exist" in result.err
    assert f"`stackmgr init {missing}`" in result.err  # nothing is there: creating one is what may be meant
    assert not missing.exists()


def test_a_typo_of_a_store_beside_it_is_named_before_init_is_offered(lab: Lab, path: str) -> None:
    typo = lab.store.parent / (lab.store.name[:-1] + lab.store.name[-1] * 2)  # `store` -> `storee`
    result = run_stackmgr("status", "--store", str(typo))
    one_line_error(result, 2)
    assert f"store {typo} does not exist, but {lab.store} beside it is a store" in result.err
    assert f"give --store {lab.store};" in result.err and not typo.exists()


def test_a_source_checkout_given_as_store_is_never_told_to_init(lab: Lab, path: str) -> None:
    result = run_stackmgr("status", "--store", str(lab.tree))
    one_line_error(result, 2)
    assert f"{lab.tree} is not a stackmgr store (no stackmgr.toml)" in result.err
    assert "source tree" in result.err and "stackmgr tree add NAME" in result.err
    assert "init" not in result.err
    assert not (lab.tree / "stackmgr.toml").exists()
    assert git(lab.tree, "status", "--porcelain", "--ignored") == b""


def test_stackmgr_store_at_a_source_checkout_says_which_variable(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    monkeypatch.setenv("STACKMGR_STORE", str(lab.tree))
    result = run_stackmgr("check")
    one_line_error(result, 2)
    assert "STACKMGR_STORE" in result.err and "source tree" in result.err and "init" not in result.err


def test_a_plain_directory_is_not_a_store(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("x\n")
    result = run_stackmgr("--store", str(plain), "trees")
    one_line_error(result, 2)
    assert f"{plain} is not a stackmgr store (no stackmgr.toml)" in result.err and "init" not in result.err
    empty = tmp_path / "empty"
    empty.mkdir()
    fresh = run_stackmgr("--store", str(empty), "trees")
    one_line_error(fresh, 2)
    assert f"`stackmgr init {empty}`" in fresh.err  # an empty directory: nothing a store would overwrite


def test_no_store_found_from_inside_a_source_tree_does_not_suggest_init_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = make_repo(tmp_path / "src" / "vllm")
    (tree / "sub").mkdir()
    monkeypatch.chdir(tree / "sub")
    result = run_stackmgr("status")
    one_line_error(result, 2)
    assert "no stackmgr store here or in any parent directory" in result.err
    assert f"{tree} is a source tree" in result.err and f"stackmgr tree add NAME {tree}" in result.err
    assert "`stackmgr init`" not in result.err


def test_a_tree_path_missing_on_this_machine_says_how_to_place_it(lab: Lab, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    lab.tree.rename(moved)
    status = lab.sm("status")
    assert status.code == 0
    assert "does not exist" in status.out and "`stackmgr tree set vllm PATH`" in status.out
    named = lab.sm("status", "vllm")
    one_line_error(named, 3)
    assert "`stackmgr tree set vllm PATH`" in named.err
    assert lab.sm("tree", "set", "vllm", str(moved)).code == 0
    assert lab.sm("status", "vllm").code == 0


# --- 3. errors as JSON under --json -----------------------------------------------------------------------------


def _json_error(result_err: str) -> dict[str, object]:
    lines = result_err.splitlines()
    assert len(lines) == 1, result_err
    data = json.loads(lines[0])
    assert list(data) == ["schema", "error"] and data["schema"] == 1
    error = data["error"]
    assert isinstance(error, dict) and list(error) == ["message", "hint", "exit_code", "kind", "details"]
    return error


def test_a_refusal_under_json_is_one_json_line_on_stderr(lab: Lab, path: str) -> None:
    result = lab.sm("status", "nosuch", "--json")
    assert result.code == 2 and result.out == ""
    error = _json_error(result.err)
    assert error["exit_code"] == 2 and error["kind"] == "usage"
    assert error["message"] == "unknown tree 'nosuch' (known: vllm)"
    assert error["hint"] == "add it with `stackmgr tree add NAME PATH`"
    before = lab.sm("--json", "save", "nothing-here")
    assert before.code == 3 or before.code == 2, before
    assert _json_error(before.err)["exit_code"] == before.code


def test_a_usage_error_under_json_is_json_too(lab: Lab, path: str) -> None:
    result = lab.sm("--json", "status", "--bogus")
    assert result.code == 2
    error = _json_error(result.err)
    assert error["kind"] == "usage" and "--bogus" in str(error["message"])
    assert error["hint"] == "see `stackmgr status --help`"
    unknown = lab.sm("--json", "serie")
    assert unknown.code == 2 and "series" in str(_json_error(unknown.err)["message"])


def test_json_after_runs_double_dash_is_the_commands_own(lab: Lab) -> None:
    result = lab.sm("run", "--", "no-such-program-here", "--json")
    assert result.code == 2 and not result.err.startswith("{"), result


# --- 4. bare `stackmgr`, 5. `stackmgr help`, the man page, 6. usage errors --------------------------------------


def test_bare_stackmgr_prints_the_help_on_stdout(lab: Lab) -> None:
    result = run_stackmgr()
    assert result.code == 0 and result.err == "", result
    assert result.out.startswith("Usage: stackmgr [OPTIONS] COMMAND [ARGS]...")
    assert result.out == run_stackmgr("--help").out == run_stackmgr("help").out


def test_help_command_is_the_commands_own_help(lab: Lab) -> None:
    for words in (["status"], ["series", "show"], ["tree", "add"], ["run"]):
        asked = run_stackmgr("help", *words)
        own = run_stackmgr(*words, "--help")
        assert asked.code == own.code == 0, asked
        assert asked.out == own.out and asked.out.startswith(f"Usage: stackmgr {' '.join(words)} ")


def test_help_of_an_unknown_command_says_did_you_mean(lab: Lab) -> None:
    result = run_stackmgr("help", "seris")
    one_line_error(result, 2)
    assert "no command 'seris'" in result.err and "did you mean 'series'" in result.err
    sub = run_stackmgr("help", "series", "shwo")
    one_line_error(sub, 2)
    assert "did you mean 'show'" in sub.err


def test_the_committed_man_page_is_current() -> None:
    generated = run_stackmgr("help", "--man")
    assert generated.code == 0 and generated.err == ""
    assert generated.out.startswith(".TH STACKMGR 1")
    for section in (".SH NAME", ".SH SYNOPSIS", ".SH COMMANDS", ".SH EXIT STATUS", "stackmgr series show"):
        assert section in generated.out
    committed = (ROOT / "docs" / "stackmgr.1").read_text()
    assert committed == generated.out, "docs/stackmgr.1 is stale: `stackmgr help --man > docs/stackmgr.1`"


def test_the_man_page_is_valid_roff(tmp_path: Path) -> None:
    man = subprocess.run(["man", "--version"], capture_output=True)
    if man.returncode != 0:
        pytest.skip("no man(1) here")
    page = tmp_path / "stackmgr.1"
    page.write_text(run_stackmgr("help", "--man").out)
    shown = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True, env={"MANPAGER": "cat",
                           "PATH": "/usr/bin:/bin", "COLUMNS": "100"})  # fmt: skip
    assert shown.returncode == 0 and "stackmgr save" in shown.stdout, shown.stderr


def test_usage_errors_are_one_line_naming_the_commands_help(lab: Lab) -> None:
    extra = lab.sm("apply", "a", "b")
    one_line_error(extra, 2)
    assert extra.err == "stackmgr: Got unexpected extra argument (b); see `stackmgr apply --help`\n"
    typo = lab.sm("serie")
    one_line_error(typo, 2)
    assert typo.err == "stackmgr: No such command 'serie'. Did you mean 'series'? See `stackmgr --help`\n"


def test_json_after_any_command_gives_its_errors_as_json(lab: Lab) -> None:
    """`--json` after a command whose output is text (rename, drop, export, interdiff): accepted, errors as JSON."""
    for args in (("rename", "nope", "other"), ("drop", "nope"), ("interdiff", "nope", "other")):
        said = lab.sm(*args, "--json")
        assert said.code == 2, (args, said)
        error = json.loads(said.err)["error"]
        assert error["exit_code"] == 2 and "nope" in error["message"], (args, error)
