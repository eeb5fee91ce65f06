"""Creating a store, finding it, registering trees (docs/FORMATS.md#store-layout)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_repo, run_stackmgr

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_init_creates_the_layout_and_is_idempotent(tmp_path: Path) -> None:
    store = tmp_path / "lab"
    first = run_stackmgr("init", str(store))
    assert first.code == 0 and "created store" in first.out
    for sub in ("patches", "series", "links", ".stackmgr"):
        assert (store / sub).is_dir()
    assert (store / ".gitignore").read_bytes() == b".stackmgr/\nstackmgr.local.toml\n"
    config = (store / "stackmgr.toml").read_bytes()
    again = run_stackmgr("init", str(store))
    assert again.code == 0 and "already a store" in again.out
    assert (store / "stackmgr.toml").read_bytes() == config
    assert (store / ".gitignore").read_bytes() == b".stackmgr/\nstackmgr.local.toml\n"


def test_init_keeps_an_existing_gitignore(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_bytes(b"*.pyc")
    run_stackmgr("init", str(tmp_path))
    assert (tmp_path / ".gitignore").read_bytes() == b"*.pyc\n.stackmgr/\nstackmgr.local.toml\n"


def test_store_is_found_by_flag_then_env_then_walking_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run_stackmgr("init", str(a))
    run_stackmgr("init", str(b))
    make_repo(tmp_path / "ta")
    make_repo(tmp_path / "tb")
    run_stackmgr("--store", str(a), "tree", "add", "ta", str(tmp_path / "ta"))
    run_stackmgr("--store", str(b), "tree", "add", "tb", str(tmp_path / "tb"))

    def tree_names(*args: str) -> list[str]:
        result = run_stackmgr(*args, "trees", "--json")
        assert result.code == 0, result.err
        return [t["name"] for t in json.loads(result.out)["trees"]]

    deep = a / "patches" / "sub"
    deep.mkdir()
    monkeypatch.chdir(deep)
    assert tree_names() == ["ta"]
    monkeypatch.setenv("STACKMGR_STORE", str(b))
    assert tree_names() == ["tb"]
    assert tree_names("--store", str(a)) == ["ta"]


def test_a_pyproject_table_is_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.stackmgr]\nmax_untracked_bytes = 10\n')
    tree = make_repo(tmp_path / "src" / "vllm")
    monkeypatch.chdir(tmp_path / "src")
    added = run_stackmgr("tree", "add", "vllm", str(tree))
    assert added.code == 0, added.err
    text = (tmp_path / "pyproject.toml").read_text()
    assert text.endswith("\n[tool.stackmgr.trees.vllm]\n")  # the name is shared; the path is this machine's
    assert f'path = "{tree}"' in (tmp_path / "stackmgr.local.toml").read_text()
    assert '[project]\nname = "x"' in text
    (tree / "big.txt").write_text("eleven bytes")
    status = json.loads(run_stackmgr("status", "--json").out)
    assert status["trees"][0]["unprotected"] == []  # a shared limit never lowers what is protected
    local = tmp_path / "stackmgr.local.toml"
    local.write_text("max_untracked_bytes = 10\n" + local.read_text())  # this machine's own may
    (tree / "big2.txt").write_text("eleven bytes")
    status = json.loads(run_stackmgr("status", "--json").out)
    assert [(u["path"], u["reason"]) for u in status["trees"][0]["unprotected"]] == [("big2.txt", "large")]


def test_a_pyproject_without_the_table_is_not_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    monkeypatch.chdir(tmp_path)
    result = run_stackmgr("status")
    assert result.code == 2 and "no stackmgr store" in result.err


def test_tree_add_records_the_top_level_and_odd_names_are_quoted(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run_stackmgr("init", str(store))
    tree = make_repo(tmp_path / "my tree", {"sub/a.txt": "a\n"})
    added = run_stackmgr("--store", str(store), "tree", "add", "kernels.v2", str(tree / "sub"))
    assert added.code == 0, added.err
    assert '\n[trees."kernels.v2"]\n' in (store / "stackmgr.toml").read_text()
    assert f'[trees."kernels.v2"]\npath = "{tree}"' in (store / "stackmgr.local.toml").read_text()
    trees = json.loads(run_stackmgr("--store", str(store), "--json", "trees").out)["trees"]
    assert trees[0]["name"] == "kernels.v2" and trees[0]["path"] == str(tree)
    assert trees[0]["state"] == "ok" and trees[0]["changes"] == 0


def test_a_config_edit_is_seen_at_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run_stackmgr("init", str(store))
    tree = make_repo(tmp_path / "t")
    run_stackmgr("--store", str(store), "tree", "add", "t", str(tree))
    assert run_stackmgr("--store", str(store), "check").code == 0  # config now cached
    config = store / "stackmgr.toml"
    config.write_text(config.read_text().replace("[trees.t]", "[trees.renamed]"))
    names = json.loads(run_stackmgr("--store", str(store), "trees", "--json").out)["trees"]
    assert [(t["name"], t["state"]) for t in names] == [("renamed", "no path"), ("t", "ok")]  # t: placed here


def test_a_tree_placed_here_stays_guarded_when_a_pull_drops_it_from_the_shared_config(tmp_path: Path) -> None:
    """A teammate's `tree rm` (or an attacker's edit) reaches everyone by pull: the checkout this machine placed
    keeps being checked, so `check` and the shell guard never let a reset destroy its unsaved edits."""
    store = tmp_path / "store"
    run_stackmgr("init", str(store))
    tree = make_repo(tmp_path / "t")
    run_stackmgr("--store", str(store), "tree", "add", "t", str(tree))
    (store / "stackmgr.toml").write_text("# a teammate removed every tree\n")
    (tree / "README").write_text("unsaved work\n")
    assert run_stackmgr("--store", str(store), "check").code == 1
    assert run_stackmgr("--store", str(store), "save", "keep", "-t", "t").code == 0
    assert run_stackmgr("--store", str(store), "tree", "rm", "t").code == 2  # a patch still belongs to it


def test_the_labs_own_config_suggests_its_two_trees_and_uses_neither_until_accepted(tmp_path: Path) -> None:
    """The product's pyproject.toml names the lab's trees with default paths. A default from the shared config is
    only a suggestion (a pull could point it at ~, docs/SECURITY.md): both trees say "no path" and name it.

    The test reads a copy: tests never write into the product's own store, not even its cache.
    """
    copy = tmp_path / "lab"
    copy.mkdir()
    (copy / "pyproject.toml").write_bytes((REPO_ROOT / "pyproject.toml").read_bytes())
    result = run_stackmgr("--store", str(copy), "trees", "--json")
    assert result.code == 0, result.err
    trees = {t["name"]: t for t in json.loads(result.out)["trees"]}
    assert trees["vllm"]["state"] == "no path" and "suggests /home/steve/src/vllm" in trees["vllm"]["error"]
    assert trees["vllm-xpu-kernels"]["state"] == "no path"
    assert "`stackmgr tree set vllm-xpu-kernels` accepts it" in trees["vllm-xpu-kernels"]["error"]
    assert run_stackmgr("--store", str(copy), "check").code == 0
    human = run_stackmgr("--store", str(copy), "trees")
    assert human.code == 0 and human.out.count("no path on this machine") == 2


@pytest.mark.regression("looking for a store in a project with its own pyproject.toml left .stackmgr/cache there")
def test_looking_for_a_store_in_a_project_writes_nothing_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "requests"\n')
    monkeypatch.chdir(project / "src")
    monkeypatch.delenv("STACKMGR_STORE", raising=False)
    result = run_stackmgr("status")
    assert result.code == 2 and "no stackmgr store here" in result.err
    assert sorted(p.name for p in project.rglob("*")) == ["pyproject.toml", "src"]
