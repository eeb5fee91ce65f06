"""`stackmgr shell-init bash|zsh`: a real shell evals the function, then types git commands in the lab's tree.

Each scenario runs `bash -c 'eval "$(stackmgr shell-init bash)"; cd vllm; git …'` with the installed `stackmgr`
behind a PATH shim that logs every call, so a test can tell whether stackmgr was consulted at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stackmgr.commands.shell_init import SAFE, STASH, WORKTREE, classify, shell_function, split_command
from stackmgr.git.user_repo import UserRepo
from tests.conftest import Lab, git, git_text, make_repo, run_stackmgr, tree_files
from tests.reliability.conftest import assert_one_line_error

ORIGINAL_MODEL = "def f():\n    return 1\n"
EDITED_MODEL = "def f():\n    return 42  # the routed-GEMM layout fix\n"


def _real_stackmgr(bin_dir: Path) -> str:
    """The venv's console script; without one (package not installed), a wrapper running this checkout."""
    beside = Path(sys.executable).parent / "stackmgr"
    if beside.exists():
        return str(beside)
    found = shutil.which("stackmgr")
    if found:
        return found
    wrapper = bin_dir / "stackmgr-real"
    root = Path(__file__).resolve().parents[2]
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{root}" exec "{sys.executable}" -m stackmgr "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def first_quick(cases: list[Any]) -> list[Any]:
    """A real shell per case takes seconds: the first case runs in the edit loop, the others only in a full run."""
    return [case if n == 0 else pytest.param(*(case if isinstance(case, tuple) else (case,)), marks=pytest.mark.slow)
            for n, case in enumerate(cases)]  # fmt: skip


class Shell:
    """A shell with the stackmgr function installed, stackmgr behind a shim that logs its arguments."""

    def __init__(self, lab: Lab, tmp_path: Path) -> None:
        self.lab = lab
        self.bin = tmp_path / "shim-bin"
        self.bin.mkdir()
        self.log = tmp_path / "stackmgr-calls.log"
        self.log.touch()
        real = _real_stackmgr(self.bin)
        shim = self.bin / "stackmgr"
        shim.write_text(f'#!/bin/sh\nprintf \'%s\\n\' "$*" >> "{self.log}"\nexec "{real}" "$@"\n')
        shim.chmod(0o755)
        self.env = dict(os.environ)  # already hermetic (tests/conftest.py)
        self.env["STACKMGR_STORE"] = str(lab.store)
        self.env["PATH"] = f"{self.bin}{os.pathsep}{self.env.get('PATH', '')}"

    def run(self, script: str, *, shell: str = "bash", cwd: Path | None = None, init: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        install = init if init is not None else f'eval "$(stackmgr shell-init {shell})"'
        argv = ["zsh", "-f", "-c"] if shell == "zsh" else ["bash", "--norc", "--noprofile", "-c"]
        return subprocess.run([*argv, f"{install}\n{script}"], cwd=cwd or self.lab.tree.parent,
                              env=env or self.env, capture_output=True, text=True, timeout=60)  # fmt: skip

    def guard_calls(self) -> list[str]:
        """The `stackmgr guard` calls the function made (the eval's own `shell-init` call is not one)."""
        return [ln for ln in self.log.read_text().splitlines() if ln.split(" ")[:1] == ["guard"]]


@pytest.fixture
def sh(lab: Lab, tmp_path: Path) -> Shell:
    return Shell(lab, tmp_path)


def dirty(lab: Lab) -> dict[str, tuple[int, bytes]]:
    """Unpreserved work of every kind the forms destroy: an edit, an untracked file, an untracked directory."""
    (lab.tree / "src" / "model.py").write_text(EDITED_MODEL)
    (lab.tree / "notes.txt").write_text("do not revive the 2-stage lane\n")
    (lab.tree / "scratch").mkdir()
    (lab.tree / "scratch" / "probe.log").write_text("107.77 tok/s\n")
    return tree_files(lab.tree)


def model(lab: Lab) -> str:
    return (lab.tree / "src" / "model.py").read_text()


def edit_undone(lab: Lab) -> bool:
    return model(lab) == ORIGINAL_MODEL


def untracked_files_gone(lab: Lab) -> bool:
    return not (lab.tree / "notes.txt").exists() and model(lab) == EDITED_MODEL


def untracked_dirs_gone(lab: Lab) -> bool:
    return not (lab.tree / "notes.txt").exists() and not (lab.tree / "scratch").exists()


DESTRUCTIVE = [
    ("git reset --hard", edit_undone),
    ("git reset --hard HEAD", edit_undone),
    ("git reset -q --hard", edit_undone),
    ("git reset --har", edit_undone),  # git takes unambiguous abbreviations
    ("git checkout -- src/model.py", edit_undone),
    ("git checkout HEAD -- src/model.py", edit_undone),
    ("git checkout .", edit_undone),
    ("git checkout src/model.py", edit_undone),
    ("git checkout -f", edit_undone),
    ("git checkout --force main", edit_undone),
    ("git restore src/model.py", edit_undone),
    ("git restore --worktree .", edit_undone),
    ("git restore -W src/model.py", edit_undone),
    ("git restore --staged --worktree src/model.py", edit_undone),
    ("git clean -f", untracked_files_gone),
    ("git clean -fd", untracked_dirs_gone),
    ("git clean --force -d", untracked_dirs_gone),
    ("git switch --discard-changes main", edit_undone),
    ("git switch -f main", edit_undone),
    ("git switch --force main", edit_undone),
    ("git -c core.quotePath=false reset --hard", edit_undone),
    ("git --no-pager checkout -- .", edit_undone),
]


@pytest.mark.parametrize(("command", "_effect"), first_quick(DESTRUCTIVE), ids=[c for c, _ in DESTRUCTIVE])
def test_destructive_form_refused_while_work_is_unpreserved(sh: Shell, lab: Lab, command: str, _effect: object) -> None:
    """Each destructive form, typed in an unpreserved registered tree: refused (exit 1) before git runs, with
    check's list of the unpreserved files and the save/bypass hint on stderr; the tree's bytes and HEAD unchanged."""
    before, head = dirty(lab), git_text(lab.tree, "rev-parse", "HEAD")
    proc = sh.run(f"cd vllm && {command}")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert "vllm: src/model.py (modified)" in proc.stderr
    assert "vllm: notes.txt (added)" in proc.stderr
    assert "stackmgr save NAME -t vllm" in proc.stderr
    assert f"run `command {command}` to bypass" in proc.stderr
    assert tree_files(lab.tree) == before
    assert git_text(lab.tree, "rev-parse", "HEAD") == head


@pytest.mark.parametrize(("command", "effect"), first_quick(DESTRUCTIVE), ids=[c for c, _ in DESTRUCTIVE])
def test_destructive_form_runs_once_the_work_is_saved(sh: Shell, lab: Lab, command: str, effect: object) -> None:
    """The same forms after `stackmgr save`: the guard stays silent and git really runs (its effect is seen)."""
    dirty(lab)
    assert lab.sm("save", "wip", "-t", "vllm", "-m", "wip").code == 0
    proc = sh.run(f"cd vllm && {command}")
    assert proc.returncode == 0, proc.stderr
    assert "stackmgr" not in proc.stderr
    assert callable(effect) and effect(lab)
    assert len(sh.guard_calls()) == 1


@pytest.mark.slow
def test_everyday_commands_never_start_stackmgr(sh: Shell, lab: Lab) -> None:
    """Non-destructive subcommands are decided in the shell: stackmgr is never called, git gets the exact
    arguments (a message with spaces and quotes), and git's own exit code comes back."""
    dirty(lab)
    proc = sh.run(
        "cd vllm\n"
        "git status --short || exit 10\n"
        "git log --oneline -1 || exit 11\n"
        "git diff --stat || exit 12\n"
        "git add src/model.py || exit 13\n"
        "git commit -q -m \"layout fix: 'two' words\" || exit 14\n"
        "git branch feature || exit 15\n"
        "git --version >/dev/null || exit 16\n"
        'git rev-parse --verify -q no-such-branch; echo "rc=$?"\n'
    )
    assert proc.returncode == 0, proc.stderr
    assert "?? notes.txt" in proc.stdout and "rc=1" in proc.stdout
    assert git_text(lab.tree, "log", "-1", "--format=%s") == "layout fix: 'two' words"
    assert sh.guard_calls() == []


SAFE_WITH_GUARDED_WORD = [
    "git reset",
    "git reset --soft HEAD",
    "git checkout -b feature",
    "git checkout main",
    "git restore --staged src/model.py",
    "git restore -S src/model.py",
    "git clean -n",
    "git clean -f --dry-run",
    "git stash list",
    "git switch -c feature",
    "git reset -h >/dev/null; [ $? = 129 ]",
]


@pytest.mark.parametrize("command", first_quick(SAFE_WITH_GUARDED_WORD))
def test_guarded_word_that_discards_nothing_passes_quietly(sh: Shell, lab: Lab, command: str) -> None:
    """reset/checkout/restore/clean/stash/switch forms that keep the working tree: git runs, nothing is said,
    the working-tree bytes stay as they were (the unpreserved work included)."""
    before = dirty(lab)
    git(lab.tree, "add", "src/model.py")
    proc = sh.run(f"cd vllm && {command}")
    assert proc.returncode == 0, proc.stderr
    assert "stackmgr" not in proc.stderr
    assert tree_files(lab.tree) == before


@pytest.mark.slow
def test_repository_that_is_no_registered_tree_passes(sh: Shell, lab: Lab, tmp_path: Path) -> None:
    """A dirty repository the store does not register: `reset --hard` and `clean -fd` run silently, and a
    plain `git status` there never consults stackmgr."""
    other = make_repo(tmp_path / "other", {"a.txt": "one\n"})
    (other / "a.txt").write_text("two\n")
    (other / "junk").mkdir()
    (other / "junk" / "x").write_text("x\n")
    proc = sh.run("cd other && git status --short >/dev/null && git reset -q --hard && git clean -q -fd")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert (other / "a.txt").read_text() == "one\n" and not (other / "junk").exists()
    assert [c.split(" ")[2:] for c in sh.guard_calls()] == [["reset", "-q", "--hard"], ["clean", "-q", "-fd"]]


@pytest.mark.slow
def test_outside_any_repository_git_speaks_for_itself(sh: Shell, lab: Lab, tmp_path: Path) -> None:
    """A destructive command outside any git repository passes to git, which gives its own error and code."""
    proc = sh.run("git reset --hard", cwd=tmp_path / "cwd")
    assert proc.returncode == 128
    assert "not a git repository" in proc.stderr and "stackmgr" not in proc.stderr


@pytest.mark.slow
def test_command_git_bypasses_the_function(sh: Shell, lab: Lab) -> None:
    """`command git reset --hard` is the user's bypass: git runs, stackmgr is not asked, the edit is gone."""
    dirty(lab)
    proc = sh.run("cd vllm && command git reset -q --hard")
    assert proc.returncode == 0, proc.stderr
    assert edit_undone(lab)
    assert sh.guard_calls() == []


@pytest.mark.slow
def test_dash_c_from_elsewhere_is_guarded(sh: Shell, lab: Lab, tmp_path: Path) -> None:
    """`git -C TREE reset --hard` (relative and absolute, with -c before it) from another directory: the -C
    repository is the one looked up, and the reset is refused with the tree unchanged."""
    before = dirty(lab)
    for command in ("git -C ../vllm reset --hard", f"git -c core.quotePath=false -C {lab.tree} checkout -- ."):
        proc = sh.run(command, cwd=tmp_path / "cwd")
        assert proc.returncode == 1, proc.stderr
        assert "vllm: src/model.py (modified)" in proc.stderr
    assert tree_files(lab.tree) == before


@pytest.mark.slow
def test_subdirectory_paths_are_read_from_the_subdirectory(sh: Shell, lab: Lab) -> None:
    """From `src/`, `git checkout model.py` (a path, no `--`) and `git restore .` are refused: the tree is
    found from the subdirectory, and the bare word is recognised as a path there."""
    before = dirty(lab)
    for command in ("git checkout model.py", "git restore ."):
        proc = sh.run(f"cd vllm/src && {command}")
        assert proc.returncode == 1, proc.stderr
    assert tree_files(lab.tree) == before


@pytest.mark.slow
def test_aliases_are_followed(sh: Shell, lab: Lab) -> None:
    """`git co -- .` with `alias.co = checkout` is refused like `git checkout -- .`; `git co main` passes."""
    before = dirty(lab)
    git(lab.tree, "config", "alias.co", "checkout")
    git(lab.tree, "config", "alias.nuke", "-c core.quotePath=false reset --hard")
    for command in ("git co -- .", "git nuke"):
        proc = sh.run(f"cd vllm && {command}")
        assert proc.returncode == 1, proc.stderr
        assert "vllm: src/model.py (modified)" in proc.stderr
    assert sh.run("cd vllm && git co -q main").returncode == 0
    assert tree_files(lab.tree) == before


@pytest.mark.slow
def test_stash_drop_and_clear_list_what_they_would_drop(sh: Shell, lab: Lab) -> None:
    """`git stash` (push, with a message of two words) runs; `stash drop`, `stash drop 1` and `stash clear` are
    refused listing exactly the entries they would drop, which stay; `command git stash drop` drops one."""
    dirty(lab)
    proc = sh.run('cd vllm && git stash push -q -m "first try" && echo again > README && git stash push -q')
    assert proc.returncode == 0, proc.stderr
    entries = git_text(lab.tree, "stash", "list")
    assert "On main: first try" in entries and entries.count("\n") == 1
    drop = sh.run("cd vllm && git stash drop")
    assert drop.returncode == 1
    assert "stash@{0}: WIP on main" in drop.stderr and "first try" not in drop.stderr
    assert "run `command git stash drop` to drop anyway" in drop.stderr
    drop_one = sh.run("cd vllm && git stash drop -q 1")
    assert drop_one.returncode == 1 and "stash@{1}: On main: first try" in drop_one.stderr
    assert "stash@{0}" not in drop_one.stderr.split("would drop:")[1].split("stackmgr:")[0]
    clear = sh.run("cd vllm && git stash clear")
    assert clear.returncode == 1
    assert "stash@{0}: WIP on main" in clear.stderr and "stash@{1}: On main: first try" in clear.stderr
    assert git_text(lab.tree, "stash", "list") == entries
    assert sh.run("cd vllm && command git stash drop -q").returncode == 0
    assert git_text(lab.tree, "stash", "list").count("\n") == 0


@pytest.mark.slow
def test_stash_drop_with_nothing_to_drop_is_git_s_business(sh: Shell, lab: Lab) -> None:
    """With no stash entries, `git stash drop` goes to git, which refuses with its own message."""
    proc = sh.run("cd vllm && git stash drop")
    assert proc.returncode == 1
    assert "No stash entries found" in proc.stderr and "stackmgr" not in proc.stderr


@pytest.mark.slow
def test_no_store_found_passes_silently_and_store_can_be_baked_in(sh: Shell, lab: Lab) -> None:
    """Without --store, STACKMGR_STORE or a store above the current directory, nothing is managed: git runs
    (shell-init itself notes once that it found no store).
    `stackmgr --store DIR shell-init bash` bakes the store into the function, which then guards without the
    variable."""
    before = dirty(lab)
    env = {k: v for k, v in sh.env.items() if k != "STACKMGR_STORE"}
    baked = sh.run("cd vllm && git reset --hard", init=f'eval "$(stackmgr --store {lab.store} shell-init bash)"',
                   env=env)  # fmt: skip
    assert baked.returncode == 1 and "vllm: src/model.py (modified)" in baked.stderr
    assert tree_files(lab.tree) == before
    proc = sh.run("cd vllm && git reset -q --hard", env=env)
    assert proc.returncode == 0 and proc.stderr.startswith("stackmgr: note: no store found from here")
    assert proc.stderr.count("\n") == 1, "shell-init says once that the guard has no store; git itself is quiet"
    assert edit_undone(lab)


@pytest.mark.slow
def test_broken_store_fails_closed(sh: Shell, lab: Lab) -> None:
    """Fail-safe: a store config that no longer parses, or STACKMGR_STORE naming no store, refuses destructive
    commands with stackmgr's one-line reason and the bypass; `git status` still works without stackmgr."""
    before = dirty(lab)
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + "[trees\n")
    proc = sh.run("cd vllm && git reset --hard")
    assert proc.returncode == 1
    assert "not valid TOML" in proc.stderr and "run `command git reset --hard` to bypass" in proc.stderr
    wrong = sh.run("cd vllm && git clean -f", env=dict(sh.env, STACKMGR_STORE=str(lab.tree / "src")))
    assert wrong.returncode == 1 and "is not a stackmgr store" in wrong.stderr
    assert tree_files(lab.tree) == before
    status = sh.run("cd vllm && git status --short")
    assert status.returncode == 0 and "notes.txt" in status.stdout


@pytest.mark.slow
def test_stackmgr_crashing_or_missing_fails_closed(sh: Shell, lab: Lab, tmp_path: Path) -> None:
    """Fail-safe: when `stackmgr guard` crashes (exit 3) or stackmgr is not on PATH (127), the function refuses
    and says so; git runs for everyday commands all the same."""
    before = dirty(lab)
    function = tmp_path / "function.sh"
    function.write_text(shell_function("bash", None))
    crashing = tmp_path / "crash-bin"
    crashing.mkdir()
    (crashing / "stackmgr").write_text("#!/bin/sh\necho 'stackmgr: internal error: boom' >&2\nexit 3\n")
    (crashing / "stackmgr").chmod(0o755)
    git_dir = str(Path(shutil.which("git") or "/usr/bin/git").parent)
    for path, code in ((f"{crashing}{os.pathsep}{git_dir}", "3"), (git_dir, "127")):
        env = dict(sh.env, PATH=path)
        proc = sh.run("cd vllm && git reset --hard", init=f". {function}", env=env)
        assert proc.returncode == 1
        assert f"stackmgr exited {code}" in proc.stderr and "command git ...` to bypass" in proc.stderr
        assert sh.run("cd vllm && git status --short >/dev/null", init=f". {function}", env=env).returncode == 0
    assert tree_files(lab.tree) == before


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_parses_and_guards_with_the_same_function(sh: Shell, lab: Lab) -> None:
    """zsh: `zsh -n` parses the text; in zsh the reset is refused, `git status` does not start stackmgr, and
    after a save the reset runs."""
    text = run_stackmgr("shell-init", "zsh").out
    assert subprocess.run(["zsh", "-n"], input=text, text=True, capture_output=True).returncode == 0
    before = dirty(lab)
    refused = sh.run("cd vllm && git status --short >/dev/null && git -C . reset --hard", shell="zsh")
    assert refused.returncode == 1 and "vllm: src/model.py (modified)" in refused.stderr
    assert tree_files(lab.tree) == before
    assert len(sh.guard_calls()) == 1
    assert lab.sm("save", "wip", "-t", "vllm").code == 0
    passed = sh.run("cd vllm && git reset -q --hard && git stash list", shell="zsh")
    assert passed.returncode == 0, passed.stderr
    assert edit_undone(lab)


@pytest.mark.slow
def test_shell_init_text_and_usage(sh: Shell, lab: Lab) -> None:
    """`shell-init bash` prints a function `bash -n` accepts; an unknown shell is a one-line usage error
    (exit 2) naming the supported ones."""
    text = run_stackmgr("shell-init", "bash")
    assert text.code == 0 and "function git {" in text.out
    assert subprocess.run(["bash", "-n"], input=text.out, text=True).returncode == 0
    bad = run_stackmgr("shell-init", "fish")
    assert bad.code == 2
    assert_one_line_error(bad.err, "unsupported shell 'fish'", "shell-init zsh")


class FakeRepo(UserRepo):
    """Answers classification's questions without git: `main` is a commit, `alias.co` is checkout."""

    def __init__(self, config: dict[str, str] | None = None) -> None:
        super().__init__("/nonexistent", ())
        self.settings = {"alias.co": "checkout", **(config or {})}

    def commit(self, rev: str) -> str | None:
        return "1" * 40 if rev in ("main", "HEAD") else None

    def config(self, key: str) -> str | None:
        return self.settings.get(key)


CLASSIFIED = [
    ("reset --hard", WORKTREE), ("reset --mixed", SAFE), ("reset --h", WORKTREE), ("reset -p", SAFE),
    ("--no-pager -C x reset --hard", WORKTREE), ("--version reset --hard", SAFE), ("reset -h --hard", SAFE),
    ("checkout main", SAFE), ("checkout -", SAFE), ("checkout -b x", SAFE), ("checkout -bx main", SAFE),
    ("checkout --orphan x", SAFE), ("checkout -B x main", SAFE), ("checkout main --", SAFE),
    ("checkout nosuch-remote-branch", SAFE), ("checkout :/model.py", WORKTREE), ("checkout '*.py'", WORKTREE),
    ("checkout main src/a.py", WORKTREE), ("checkout -p", WORKTREE), ("checkout -fb x", WORKTREE),
    ("checkout --pathspec-from-file=list", WORKTREE), ("co -- .", WORKTREE), ("co main", SAFE),
    ("restore -S a", SAFE), ("restore -SW a", WORKTREE), ("restore --source main --staged a", SAFE),
    ("restore -s main a", WORKTREE), ("restore", SAFE), ("restore -p", WORKTREE),
    ("clean -fn", SAFE), ("clean -nf", SAFE), ("clean -e '*.o' -f", WORKTREE), ("clean -x", SAFE),
    ("clean -i", WORKTREE), ("clean --for", WORKTREE),
    ("stash", SAFE), ("stash pop", SAFE), ("stash -q drop", STASH), ("stash clear", STASH),
    ("switch -c new", SAFE), ("switch --discard-changes main", WORKTREE), ("switch -fc x", WORKTREE),
    ("-C", SAFE), ("status", SAFE), ("unknown-word", SAFE),
]  # fmt: skip


@pytest.mark.parametrize(("command", "kind"), CLASSIFIED, ids=[c for c, _ in CLASSIFIED])
def test_classify_reads_git_command_lines_as_git_does(command: str, kind: str) -> None:
    """The classifier alone, on command lines git parses in non-obvious ways: bundled short options with values
    (`-bx`), abbreviations, `-h`, options before the subcommand, aliases, pathspec magic."""
    import shlex

    assert classify(split_command(shlex.split(command)), FakeRepo(), "/nonexistent").kind == kind


def test_clean_without_force_is_guarded_when_git_does_not_require_force() -> None:
    """`git clean` alone deletes when `clean.requireForce` is false: then it is a destructive form too."""
    lenient = FakeRepo({"clean.requireForce": "false"})
    assert classify(split_command(["clean", "-d"]), lenient, "/nonexistent").kind == WORKTREE
    assert classify(split_command(["clean", "-d"]), FakeRepo(), "/nonexistent").kind == SAFE


@pytest.mark.slow
def test_shell_init_run_inside_a_store_keeps_asking_that_store(sh: Shell, lab: Lab) -> None:
    """`eval "$(stackmgr shell-init bash)"` run inside a store (no --store, no STACKMGR_STORE) bakes that store
    in: the guard then protects its trees from anywhere, as in the lab where trees live outside the store."""
    before = dirty(lab)
    env = {k: v for k, v in sh.env.items() if k != "STACKMGR_STORE"}
    init = f'cd {lab.store} && eval "$(stackmgr shell-init bash)" && cd - >/dev/null'
    proc = sh.run("cd vllm && git reset --hard", init=init, env=env)
    assert proc.returncode == 1 and "vllm: src/model.py (modified)" in proc.stderr
    assert tree_files(lab.tree) == before


def test_the_refusal_quotes_words_as_shlex_does() -> None:
    """The guard quotes the command it refuses without importing shlex (which imports re)."""
    import shlex

    from stackmgr.commands.shell_init import shell_quote

    for word in ["", "a", "a b", "it's", "x;y", "ü", "-f", "stash@{0}", "a\nb", "%+=:,./-_@", "$HOME", "*"]:
        assert shell_quote(word) == shlex.quote(word)

