"""Local state never travels (docs/SECURITY.md): the journal, locks, applied series and caches live in the store
repository's git directory, where no pull writes; a force-added `.stackmgr/` is never obeyed, and `lint` names
it. Tree paths come from this machine: a pulled `stackmgr.local.toml` or a shared default path is not used."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import git, make_repo, run_stackmgr
from tests.security.conftest import Team, one_line_refusal

OP = "1796529254965-0123456789ab"


def planted_journal(target: str, *, tree_path: str = "", applied: bool = True) -> dict[str, str]:
    """An interrupted operation as an attacker writes it: a record whose rollback would put `target` back from a
    backup the attacker supplies (and, with `tree_path`, move that directory as a tree)."""
    record = ["stackmgr-op 1", "command\tsave innocent", "started\t1", "state\trunning", "undoes\t-",
              f"file\t1\t?\t{target}"]  # fmt: skip
    if tree_path:
        record.append("\t".join(["tree", "vllm", tree_path, "0" * 40, "1" * 40, "0" * 40, "0" * 40, "-", "-", "-",
                                 "moving"]))  # fmt: skip
    planted = {
        f".stackmgr/ops/{OP}/op": "\n".join(record) + "\n",
        f".stackmgr/ops/{OP}/files/{target.lstrip('/')}": "echo pwned\n",
        ".stackmgr/ops/CURRENT": OP + "\n",
    }
    if applied:
        planted[".stackmgr/applied.json"] = json.dumps({"vllm": {"series": "evil", "base": "0" * 40}})
    return planted


def test_a_pulled_journal_is_never_rolled_back_by_any_command(team: Team) -> None:
    home = str(team.home)
    team.attack(planted_journal("../outside/secret.txt"))
    team.attack(planted_journal("../../home/.bashrc", tree_path=home))
    outputs = []
    for args in (["check"], ["status"], ["save", "more", "--series", "replay"], ["pop"], ["push"], ["recover"],
                 ["undo"], ["log"], ["apply", "replay"]):
        if args[0] == "save":
            (team.victim.tree / "new.txt").write_text("more work\n")
        result = team.sm(*args)
        assert "Traceback" not in result.err and "internal error" not in result.err, (args, result.err)
        assert "innocent" not in result.out + result.err, (args, "the planted operation was obeyed")
        outputs += [result.out, result.err]
    team.canary.assert_untouched(*outputs)
    assert (team.victim.store / ".stackmgr" / "ops" / "CURRENT").read_text() == OP + "\n"  # left as it came


def test_lint_names_every_tracked_file_of_stackmgr_state(team: Team) -> None:
    team.attack(planted_journal("../outside/secret.txt"))
    result = team.sm("lint")
    tracked = {line.split(":", 1)[0].strip() for line in result.out.splitlines()
               if "tracked by the store's git repository" in line}  # fmt: skip
    assert tracked == set(git(team.attacker, "ls-files", ".stackmgr").decode().split()), result.out
    assert "git rm -r --cached .stackmgr" in result.out
    team.canary.assert_untouched(result.out, result.err)


def test_the_state_lives_in_the_store_repository_s_git_directory(team: Team) -> None:
    assert team.sm("pop").code == 0 and team.sm("push").code == 0
    state = team.victim.store / ".git" / "stackmgr-store"
    assert (state / "applied.json").is_file() and (state / "ops").is_dir()
    assert not (team.victim.store / ".stackmgr").exists()
    assert git(team.victim.store, "status", "--porcelain", "--ignored") == b"!! stackmgr.local.toml\n"


def test_an_old_store_s_state_moves_on_first_use_and_a_pulled_copy_beside_it_stays_unread(team: Team) -> None:
    """A store made before the move kept `.stackmgr/` in its folder; the user's own state (the applied series,
    the journal) moves into .git; what a teammate force-added there stays where git put it, unread."""
    assert team.sm("pop").code == 0
    state = team.victim.store / ".git" / "stackmgr-store"
    os.rename(state, team.victim.store / ".stackmgr")  # as an older stackmgr left it
    applied = (team.victim.store / ".stackmgr" / "applied.json").read_bytes()
    team.attack(planted_journal("../outside/secret.txt", applied=False))
    status = team.sm("status", "--json")
    assert status.code == 0, status.err
    assert (state / "applied.json").read_bytes() == applied  # the user's own state moved
    assert not (state / "ops" / "CURRENT").exists()  # the attacker's did not
    assert (team.victim.store / ".stackmgr" / "ops" / "CURRENT").exists()
    assert team.sm("push").code == 0  # the position in the series is still known: 1 of 1
    team.canary.assert_untouched(status.out, status.err)


def test_an_old_store_with_nothing_tracked_moves_in_one_rename(team: Team) -> None:
    state = team.victim.store / ".git" / "stackmgr-store"
    os.rename(state, team.victim.store / ".stackmgr")
    inode = (team.victim.store / ".stackmgr").stat().st_ino
    assert team.sm("check").code == 0
    assert state.stat().st_ino == inode and not (team.victim.store / ".stackmgr").exists()


def test_a_pulled_local_config_is_refused_not_obeyed(team: Team) -> None:
    """git overwrites an ignored file with a tracked one: a teammate's stackmgr.local.toml replaces yours."""
    home = str(team.home)
    team.attack({"stackmgr.local.toml": f'[trees.vllm]\npath = "{home}"\n'})
    for args in (["check"], ["status"], ["apply", "replay"], ["trees"]):
        result = team.sm(*args)
        one_line_refusal(result)
        assert "stackmgr.local.toml is tracked by the store's git repository" in result.err
        team.canary.assert_untouched(result.out, result.err)
    assert not (team.home / ".git").exists()


def test_a_shared_default_tree_path_is_only_a_suggestion(team: Team, tmp_path: Path) -> None:
    """`[trees.X] path = "~"` pulled from the shared config: a machine that never placed X uses nothing, and says
    how to accept it."""
    config = (team.attacker / "stackmgr.toml").read_text()
    team.attack({"stackmgr.toml": config + '\n[trees.dotfiles]\npath = "~"\n'})
    for args in (["check"], ["status"], ["trees"], ["apply", "replay"], ["check", "dotfiles"]):
        result = team.sm(*args)
        assert "Traceback" not in result.err
        team.canary.assert_untouched(result.out, result.err)
    status = team.sm("status", "--json")
    dotfiles = next(t for t in json.loads(status.out)["trees"] if t["name"] == "dotfiles")
    assert dotfiles["state"] == "no path" and "suggests ~" in dotfiles["error"]
    assert not (team.home / ".git").exists()
    refused = team.sm("save", "x", "-t", "dotfiles")
    one_line_refusal(refused)
    assert "`stackmgr tree set dotfiles` to accept that one" in refused.err


def test_a_journal_record_naming_a_file_outside_the_store_is_refused_even_locally(team: Team) -> None:
    """Defence in depth: a record in this machine's own state directory (an unpacked archive's, a bug's) that
    names a path out of the store, an op name that is a path, or a tree at another directory, moves nothing."""
    state = team.victim.store / ".git" / "stackmgr-store"
    for rel, data in planted_journal("../../outside/secret.txt", tree_path=str(team.home)).items():
        path = state / rel.removeprefix(".stackmgr/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data)
    for args in (["save", "more", "--series", "replay"], ["recover"], ["undo"], ["check"], ["log"]):
        (team.victim.tree / "new.txt").write_text("more work\n")
        result = team.sm(*args)
        assert "Traceback" not in result.err and "internal error" not in result.err, result.err
        team.canary.assert_untouched(result.out, result.err)
    (state / "ops" / "CURRENT").write_text("../../../../outside\n")
    result = team.sm("recover")
    assert "Traceback" not in result.err
    team.canary.assert_untouched(result.out, result.err)


def test_a_store_outside_git_keeps_its_state_beside_it(tmp_path: Path) -> None:
    store = tmp_path / "plain"
    assert run_stackmgr("init", str(store)).code == 0
    assert (store / ".stackmgr").is_dir() and ".stackmgr/" in (store / ".gitignore").read_text()


def test_a_store_in_a_subdirectory_of_a_repository_has_state_of_its_own(tmp_path: Path) -> None:
    repo = tmp_path / "lab"
    repo.mkdir()
    git(repo, "init", "-q")
    for sub in ("a", "b/c"):
        assert run_stackmgr("init", str(repo / sub)).code == 0
    git_dir = repo / ".git" / "stackmgr-stores"
    assert sorted(os.listdir(git_dir)) == ["a", "b%2Fc"]
    assert not (repo / "a" / ".stackmgr").exists()
    shutil.rmtree(repo / ".git")


@pytest.mark.regression("a store made again at the same path below its repository's top inherited the old journal")
def test_a_store_made_again_in_the_same_place_starts_with_a_fresh_state(tmp_path: Path) -> None:
    repo = tmp_path / "lab"
    repo.mkdir()
    git(repo, "init", "-q")
    tree = make_repo(tmp_path / "vllm")
    store = repo / "store"
    assert run_stackmgr("init", str(store)).code == 0
    assert run_stackmgr("--store", str(store), "tree", "add", "vllm", str(tree)).code == 0
    state = repo / ".git" / "stackmgr-stores" / "store"
    assert (state / "ops").is_dir()
    (state / "ops" / "CURRENT").write_text("1796529254965-0123456789ab\n")  # an interrupted operation, say
    shutil.rmtree(store)
    made = run_stackmgr("init", str(store))
    listed = run_stackmgr("--store", str(store), "trees")
    assert made.code == listed.code == 0 and "the state of an earlier store" in made.err + listed.err
    assert not (state / "ops").exists()
    (aside,) = (repo / ".git" / "stackmgr-stores").glob("store.before-*")
    assert (aside / "ops" / "CURRENT").exists()
    shutil.rmtree(store)
    again = run_stackmgr("init", str(store))  # nothing interrupted this time: simply gone
    assert again.code == 0 and run_stackmgr("--store", str(store), "trees").err == again.err == ""
