"""The start-up budget, fenced: exactly which stdlib and third-party modules each fast command may load.

`check` runs in shell prompts, the guard before every guarded git command, `save` and `apply` many times a day;
each is held to a small multiple of git's own time, so their paths import nothing heavy: no click, rich or
GitPython, no subprocess, dataclasses or typing anywhere here; no re, enum or json on `check`'s path and the
guard's. A new import on one of these paths fails here, naming it: make it lazy, or, if it is worth its
milliseconds, add it to the set with the reason.
(Modules whose name starts with `_` are C accelerators and interpreter internals, left out.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_repo

# What every fast command below may load, beyond a normal interpreter start (`site` imported, .pth files not run).
CORE = {"errno", "fcntl", "gc", "select"}  # locks; the collector tuned for a short run; draining git's pipes
# `re` (and with it enum, functools, collections…): store/patchfile.py's header regexes, claims, series files.
RE = {"collections", "copyreg", "enum", "functools", "itertools", "keyword", "operator", "re", "re._casefix",
      "re._compiler", "re._constants", "re._parser", "reprlib", "types"}  # fmt: skip
JSON = {"json", "json.decoder", "json.encoder", "json.scanner"}  # .stackmgr/applied.json: which series is applied
ALLOWED = {
    "--version": {"gc"},
    "check (all preserved)": CORE | {"binascii"},  # binascii: sha256 hex digests of patch files
    "check (unpreserved work)": CORE | {"binascii"},
    "status": CORE | {"binascii"} | RE | JSON,  # the series applied and in progress; the patches named
    # save --series records the series applied to the tree; the round trip applied on a thread as git diffs
    "save": CORE | {"binascii", "threading"} | RE | JSON,
    # results built on a thread while the trees are checked; the series hashed on another, by OpenSSL's hashlib
    "apply": CORE | {"binascii", "threading", "hashlib"} | RE | JSON,
    "guard (git status)": {"gc"},
    "guard (git reset --hard)": CORE | {"binascii"},  # asks `check`
}

PROBE = """
import site, sys  # under -S: the modules of a normal start-up, without running the .pth files
before = set(sys.modules)
from stackmgr.cli.entry import main
code = main(sys.argv[1:])
loaded = sorted(m for m in set(sys.modules) - before if not m.startswith(("stackmgr", "_")))
sys.stderr.write("LOADED " + " ".join(loaded) + "\\n")
sys.exit(code)
"""


def loaded_by(*args: str, cwd: Path, site: bool = False) -> tuple[int, set[str]]:
    """Run `stackmgr ARGS` in a fresh interpreter; its exit code and the modules it loaded. Measured runs start
    without `site` (-S), so nothing a .pth file imports at start-up (an editable install's finder imports `re`)
    hides what stackmgr itself loads; third-party packages are then not even importable."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    flags = [] if site else ["-S"]
    argv = [sys.executable, *flags, "-c", PROBE, *args]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED")]
    assert line, f"stackmgr {args}: {proc.stderr}"
    return proc.returncode, set(line[-1].split()[1:])


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, set[str]]]:
    """Each fast command run once on a store with one tree, in the order of a user's day (warm caches)."""
    tmp = tmp_path_factory.mktemp("startup")
    env_names = ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL")
    for name in env_names:
        os.environ.setdefault(name, "Jane Doe" if name.endswith("NAME") else "jane@example.com")
    tree = make_repo(tmp / "vllm", {"README": "hello\n"})
    store = tmp / "store"
    sm = ("--store", str(store))
    results: dict[str, tuple[int, set[str]]] = {}
    assert loaded_by("init", str(store), cwd=tmp, site=True)[0] == 0
    assert loaded_by(*sm, "tree", "add", "vllm", str(tree), cwd=tmp, site=True)[0] == 0
    assert loaded_by(*sm, "check", cwd=tmp)[0] == 0  # the first check seeds the tree's private index
    results["--version"] = loaded_by("--version", cwd=tmp)
    results["check (all preserved)"] = loaded_by(*sm, "check", cwd=tmp)
    (tree / "README").write_text("edited\n")
    results["check (unpreserved work)"] = loaded_by(*sm, "check", cwd=tmp)
    results["status"] = loaded_by(*sm, "status", cwd=tmp)
    results["save"] = loaded_by(*sm, "save", "probe", "--series", "s", "-m", "probe", cwd=tmp)
    assert loaded_by(*sm, "reset", cwd=tmp, site=True)[0] == 0
    results["apply"] = loaded_by(*sm, "apply", "s", cwd=tmp)
    results["guard (git status)"] = loaded_by(*sm, "guard", "--", "status", cwd=tree)
    (tree / "README").write_text("edited again\n")
    results["guard (git reset --hard)"] = loaded_by(*sm, "guard", "--", "reset", "--hard", cwd=tree)
    return results


@pytest.mark.parametrize("command", list(ALLOWED))
def test_a_fast_command_loads_only_its_allowed_modules(measured: dict[str, tuple[int, set[str]]], command: str) -> None:
    code, loaded = measured[command]
    expected_code = 1 if command in ("check (unpreserved work)", "guard (git reset --hard)") else 0
    assert code == expected_code
    extra = sorted(loaded - ALLOWED[command])
    assert extra == [], f"{command} loads more than it may: {extra}"
    assert sorted(ALLOWED[command] - loaded) == [], f"{command} no longer loads these: shrink its set"


HEAVY = {"click", "rich", "git", "subprocess", "unidiff"}  # what the plain `import` and `rebase` never load


def test_plain_import_and_rebase_start_without_click(tmp_path: Path) -> None:
    """`import` and `rebase` are held to `git am` and `git rebase` times: their plain forms skip click too."""
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        os.environ.setdefault(name, "Jane Doe" if name.endswith("NAME") else "jane@example.com")
    tree = make_repo(tmp_path / "vllm", {"README": "hello\n"})
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True).stdout.strip()
    (tree / "README").write_text("hello, patched\n")
    patch = tmp_path / "fix.patch"
    patch.write_bytes(subprocess.run(["git", "diff"], cwd=tree, capture_output=True, check=True).stdout)
    subprocess.run(["git", "checkout", "-q", "README"], cwd=tree, check=True)
    (tree / "NEWS").write_text("upstream news\n")
    subprocess.run(["git", "add", "NEWS"], cwd=tree, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "upstream"], cwd=tree, check=True)
    store = tmp_path / "store"
    sm = ("--store", str(store))
    assert loaded_by("init", str(store), cwd=tmp_path, site=True)[0] == 0
    assert loaded_by(*sm, "tree", "add", "vllm", str(tree), cwd=tmp_path, site=True)[0] == 0
    code, loaded = loaded_by(*sm, "import", "--series", "s", "--base", base, str(patch), cwd=tmp_path)
    assert code == 0 and sorted(loaded & HEAVY) == []
    code, loaded = loaded_by(*sm, "rebase", "s", "--onto", "HEAD", cwd=tmp_path)
    assert code == 0 and sorted(loaded & HEAVY) == []


def test_run_starts_without_click(tmp_path: Path) -> None:
    """`run`'s own overhead counts in every benchmark it captures: its plain form skips click and rich."""
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        os.environ.setdefault(name, "Jane Doe" if name.endswith("NAME") else "jane@example.com")
    tree = make_repo(tmp_path / "vllm", {"README": "hello\n"})
    store = tmp_path / "store"
    sm = ("--store", str(store))
    assert loaded_by("init", str(store), cwd=tmp_path, site=True)[0] == 0
    assert loaded_by(*sm, "tree", "add", "vllm", str(tree), cwd=tmp_path, site=True)[0] == 0
    (tree / "README").write_text("patched\n")
    assert loaded_by(*sm, "save", "fix", "--series", "s", "-m", "fix", cwd=tmp_path)[0] == 0
    code, loaded = loaded_by(*sm, "run", "--name", "bare", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert code == 0 and sorted(loaded & {"click", "rich"}) == []
    assert list((store / "links" / "fix").glob("*.toml")), "the run was recorded"
