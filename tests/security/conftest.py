"""The attacker's side of a shared store (docs/SECURITY.md).

A `Team` is a store shared through a real bare remote: the victim's clone, with a registered tree, and the
attacker's clone, who can push anything git can carry (force-added ignored files, symlinks, any bytes). The
victim pulls, runs ordinary commands, and the test asserts that the canary files outside the store and the trees
are untouched and unread: same bytes and mtime, and their secret absent from every output and from the report.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import Lab, Result, git, make_repo, run_stackmgr


class Symlink(str):
    """A value of `Team.push`: a symbolic link to this target instead of a file's bytes."""


@dataclass
class Canary:
    """Files outside the store and the trees that nothing may read or write: ~/.bashrc, a private key, a
    secret file in a directory beside the store."""

    secret: str
    files: dict[Path, tuple[bytes, int]] = field(default_factory=dict)
    listings: dict[Path, list[str]] = field(default_factory=dict)

    def plant(self, path: Path, data: bytes) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
        self.files[path] = (data, path.stat().st_mtime_ns)
        return path

    def seal(self) -> None:
        """Remember what the canaries' directories hold: nothing may appear there."""
        self.listings = {d: sorted(os.listdir(d)) for d in {p.parent for p in self.files}}

    def assert_untouched(self, *outputs: str | bytes, sites: tuple[Path, ...] = ()) -> None:
        """Every canary file has its bytes and mtime; no file appeared beside them; the secret is in no output
        and in no file of the given sites (a report directory)."""
        for path, (data, mtime) in self.files.items():
            assert path.exists(), f"{path} was deleted"
            assert path.read_bytes() == data, f"{path} was written"
            assert path.stat().st_mtime_ns == mtime, f"{path} was touched"
        for directory, names in self.listings.items():
            assert sorted(os.listdir(directory)) == names, f"something was created in {directory}"
        for out in outputs:
            text = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
            assert self.secret not in text, "a canary's secret reached the output"
        for site in sites:
            for root, _dirs, names in os.walk(site):
                for name in names:
                    path = Path(root) / name
                    if path.is_symlink():
                        raise AssertionError(f"the site holds a symbolic link: {path}")
                    assert self.secret.encode() not in path.read_bytes(), f"a canary's secret is in {path}"


@dataclass
class Team:
    """The victim's store clone (with a tree), the attacker's clone, the bare remote between them."""

    victim: Lab
    attacker: Path
    remote: Path
    canary: Canary
    home: Path

    def sm(self, *args: str) -> Result:
        """A command as the victim runs it, in the store."""
        return self.victim.sm(*args)

    def push(self, files: Mapping[str, bytes | str | Symlink | None], message: str = "teammate's work") -> None:
        """The attacker writes these files in their clone (None deletes, Symlink links), force-adds them
        (ignored files too: .stackmgr/, stackmgr.local.toml), commits and pushes."""
        for name, value in files.items():
            path = self.attacker / name
            if path.is_symlink() or path.is_file():
                path.unlink()
            if value is None:
                git(self.attacker, "rm", "-q", "--cached", "--ignore-unmatch", "--", name)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(value, Symlink):
                os.symlink(str(value), path)
            else:
                path.write_bytes(value.encode() if isinstance(value, str) else value)
            git(self.attacker, "add", "-f", "--", name)
        git(self.attacker, "commit", "-q", "--allow-empty", "-m", message)
        git(self.attacker, "push", "-q", "origin", "HEAD:main")

    def pull(self) -> None:
        """The victim's `git pull` of the store."""
        git(self.victim.store, "pull", "-q", "--no-rebase", "origin", "main")

    def attack(self, files: Mapping[str, bytes | str | Symlink | None], message: str = "teammate's work") -> None:
        self.push(files, message)
        self.pull()

    def victim_commit(self, message: str = "my work") -> None:
        """The victim commits and pushes their store changes (new patches, series, records)."""
        git(self.victim.store, "add", "-A")
        git(self.victim.store, "commit", "-q", "--allow-empty", "-m", message)
        git(self.victim.store, "push", "-q", "origin", "HEAD:main")
        git(self.attacker, "pull", "-q", "--no-rebase", "origin", "main")


def edited_record(team: Team, tmp_path: Path, old: str, new: str) -> Path:
    """The victim links patch `fix` to a log and pushes the record; the attacker pushes it back with `old`
    replaced by `new` in its text; the victim pulls. The record's path."""
    log = tmp_path / "probe.log"
    log.write_text("throughput 1\n")
    assert team.sm("link", "fix", str(log), "--metric", "tps=1").code == 0
    (record,) = (team.victim.store / "links" / "fix").glob("*.toml")
    team.victim_commit()
    text = record.read_text()
    assert old in text, text
    team.attack({f"links/fix/{record.name}": text.replace(old, new)})
    return record


def attacker_clone(remote: Path, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(remote), str(where)], check=True, capture_output=True)
    return where


@pytest.fixture
def team(tmp_path: Path) -> Iterator[Team]:
    """A store shared through a bare remote; the victim has tree `vllm` registered and one saved patch in series
    `replay`, committed and pushed; canaries in ~ and beside the store."""
    home = Path(os.environ["HOME"])
    canary = Canary(secret="CANARY-" + secrets.token_hex(8))
    canary.plant(home / ".bashrc", f"# {canary.secret} bashrc\n".encode())
    canary.plant(home / ".ssh" / "id_rsa", f"-----BEGIN KEY-----\n{canary.secret}\n".encode())
    canary.plant(tmp_path / "outside" / "secret.txt", f"{canary.secret}\n".encode())

    tree = make_repo(tmp_path / "vllm", {"README": "hello\n", "src/model.py": "def f():\n    return 1\n"})
    store = tmp_path / "store"
    assert run_stackmgr("init", str(store)).code == 0
    git(store, "init", "-q", "-b", "main")
    assert run_stackmgr("--store", str(store), "tree", "add", "vllm", str(tree)).code == 0
    lab = Lab(store, tree)
    (tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    saved = lab.sm("save", "fix", "-m", "return two", "--series", "replay")
    assert saved.code == 0, saved.err
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    git(store, "add", "-A")
    git(store, "commit", "-q", "-m", "the lab's store")
    git(store, "remote", "add", "origin", str(remote))
    git(store, "push", "-q", "origin", "main")
    git(store, "branch", "-q", "--set-upstream-to=origin/main")
    attacker = attacker_clone(remote, tmp_path / "attacker")
    canary.seal()
    yield Team(lab, attacker, remote, canary, home)


def one_line_refusal(result: Result) -> None:
    """Refused the way docs/FORMATS.md#exit-codes says: a non-zero exit, one line on stderr (a hint line may
    follow), no traceback."""
    assert result.code != 0, result.out
    assert "Traceback" not in result.err and "internal error" not in result.err, result.err
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 3, result.err
