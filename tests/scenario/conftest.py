"""A lab month with two engineers: Alice and Bob, each with a store clone of one bare remote (`git-setup` run), each
with their own checkout of the trees `vllm` and `kernels` (`tree set`). Every step of a story asserts exit codes,
tree ids computed with git, and the bytes of patch and series files; `Month.kept` says an edit is still somewhere
(in its tree, or in a patch of the store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Result, git, git_text, make_repo, run_stackmgr

# A fake `vllm bench serve`: prints vllm's line and writes its JSON where it is told (argv: throughput, out dir).
BENCH = """\
import json, os, sys
tok, out = float(sys.argv[1]), sys.argv[2]
os.makedirs(out, exist_ok=True)
json.dump({"backend": "vllm", "model_id": "Qwen/Qwen3.6", "request_rate": "inf", "max_concurrency": 8,
           "num_prompts": 50, "output_throughput": tok, "request_throughput": tok / 250},
          open(os.path.join(out, "bench.json"), "w"))
print(f"Output token throughput (tok/s): {tok}")
"""


@dataclass
class Engineer:
    """One engineer's machine: a store clone and a checkout of each tree."""

    name: str
    store: Path
    trees: dict[str, Path]

    @property
    def tree(self) -> Path:
        return self.trees["vllm"]

    def sm(self, *args: str) -> Result:
        """The CLI in-process on this engineer's store."""
        return run_stackmgr("--store", str(self.store), *args)

    def here(self, where: Path, *args: str, env: dict[str, str] | None = None) -> Result:
        """The CLI in-process started in `where`, with no --store (the store found from there or the env)."""
        old, saved = os.getcwd(), {k: os.environ.get(k) for k in (env or {})}
        os.chdir(where)
        os.environ.update(env or {})
        try:
            return run_stackmgr(*args)
        finally:
            os.chdir(old)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def proc(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """The CLI in a process of its own (runs, bisects: what they start writes where it would)."""
        return subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(self.store), *args],
                              capture_output=True, text=True, cwd=cwd)  # fmt: skip

    def tree_id(self, tree: str = "vllm") -> str:
        """The working tree's id (untracked files included), computed with git alone."""
        path = self.trees[tree]
        index = path / ".git" / "scenario-index"
        env = dict(os.environ, GIT_INDEX_FILE=str(index))
        try:
            subprocess.run(["git", "read-tree", "HEAD"], cwd=path, env=env, check=True)
            subprocess.run(["git", "add", "-A"], cwd=path, env=env, check=True)
            out = subprocess.run(["git", "write-tree"], cwd=path, env=env, check=True, capture_output=True)
            return out.stdout.decode().strip()
        finally:
            index.unlink(missing_ok=True)

    def patch(self, name: str) -> bytes:
        return (self.store / "patches" / f"{name}.patch").read_bytes()

    def series(self, name: str) -> bytes:
        return (self.store / "series" / name).read_bytes()

    def commit(self, message: str) -> None:
        """Commit everything the store holds (what a lab does before pushing)."""
        git(self.store, "add", "-A")
        if subprocess.run(["git", "diff", "--cached", "--quiet"], cwd=self.store).returncode:
            git(self.store, "commit", "-q", "-m", message)

    def push(self, message: str = "work") -> None:
        self.commit(f"{self.name}: {message}")
        git(self.store, "push", "-q", "origin", "main")

    def pull(self, ok: bool = True) -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run(["git", "pull", "-q", "--no-rebase", "--no-edit"], cwd=self.store, capture_output=True)
        if ok:
            assert done.returncode == 0, done.stdout + done.stderr
        return done

    def links(self) -> list[dict[str, Any]]:
        done = self.sm("links", "--json")
        assert done.code == 0, done.err
        return list(json.loads(done.out)["links"])

    def link_by_run(self, run: str) -> dict[str, Any]:
        (found,) = [k for k in self.links() if (k.get("run") or {}).get("name") == run]
        return found


@dataclass
class Month:
    """Alice and Bob, a bare remote, the upstream repositories, and the steps the story has played."""

    alice: Engineer
    bob: Engineer
    remote: Path
    tmp: Path
    bench: Path
    node: pytest.Item
    steps: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)

    def step(self, what: str) -> None:
        """A step of the story begins (counted by the summary line)."""
        self.steps.append(what)
        self.node.user_properties.append(("scenario_step", what))

    def expect(self, ok: object, detail: object) -> bool:
        """An assertion of a finding: a failure is collected with its step and the story goes on (the test fails at
        its end, `Month.verdict`, listing every one), so one broken rule does not hide the next day's."""
        if not ok:
            self.broken.append(f"[{self.steps[-1] if self.steps else 'setup'}] {detail}")
        return bool(ok)

    def verdict(self) -> None:
        broken, self.broken = self.broken, []
        assert not broken, "\n".join(["broken rules:", *broken])

    def kept(self, who: Engineer, path: str, data: bytes, tree: str = "vllm") -> None:
        """No edit lost: `data` is the file in the tree, or every line of it is added by a patch of the store."""
        file = who.trees[tree] / path
        if file.is_file() and file.read_bytes() == data:
            return
        lines = data.splitlines()
        for p in (who.store / "patches").rglob("*.patch"):
            text = set(p.read_bytes().splitlines())
            added = [line for line in lines if b"+" + line in text]
            if added and all(b"+" + line in text or b" " + line in text for line in lines):
                return
        raise AssertionError(f"{who.name}'s edit of {path} ({data!r}) is neither in the tree nor in a patch")


def upstream(tmp: Path) -> dict[str, Path]:
    vllm = make_repo(tmp / "upstream" / "vllm", {"README": "vllm\n", "src/model.py": "def f():\n    return 1\n",
                                                 "src/sched.py": "QUEUE = 8\n"})  # fmt: skip
    kernels = make_repo(tmp / "upstream" / "kernels", {"gemm.cpp": "int tile = 64;\n"})
    return {"vllm": vllm, "kernels": kernels}


@pytest.fixture
def month(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Month]:
    """Day 0: Alice makes the store, registers both trees, shares it; Bob clones it as the README says."""
    ups = upstream(tmp_path)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    people = {}
    for name in ("alice", "bob"):
        trees = {t: tmp_path / name / "src" / t for t in ups}
        for t, path in trees.items():
            git(tmp_path, "clone", "-q", str(ups[t]), str(path))
        people[name] = Engineer(name, tmp_path / name / "store", trees)
    alice, bob = people["alice"], people["bob"]
    assert run_stackmgr("init", str(alice.store)).code == 0
    for t, path in alice.trees.items():
        assert alice.sm("tree", "add", t, str(path)).code == 0
    git(alice.store, "init", "-q", "-b", "main")
    assert alice.sm("git-setup").code == 0
    alice.commit("the lab's store")
    git(alice.store, "remote", "add", "origin", str(remote))
    git(alice.store, "push", "-q", "-u", "origin", "main")
    git(tmp_path, "clone", "-q", str(remote), str(bob.store))
    assert bob.sm("git-setup").code == 0
    for t, path in bob.trees.items():
        assert bob.sm("tree", "set", t, str(path)).code == 0
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH)
    played = Month(alice, bob, remote, tmp_path, bench, request.node)
    yield played
    assert not played.broken, "\n".join(["broken rules (before the story stopped):", *played.broken])


def head(tree: Path) -> str:
    return git_text(tree, "rev-parse", "HEAD")
