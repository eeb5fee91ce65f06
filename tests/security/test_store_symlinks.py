"""Symbolic links in a pulled store (docs/SECURITY.md): where the store keeps a directory (`patches/`, `series/`,
`links/`, `artifacts/`, `patches/.versions/`) or a file of its own (a patch, a series, `.gitattributes`), a link
leading out of it is never read or written through: the command refuses in one line naming it, or shows the patch
as missing and goes on. No byte of the file a link names is hashed, shown, exported or copied into the store.
(A patch file that links to another patch beside it in patches/ stays an alias: catalogue row 47.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Result, git, run_stackmgr, stackmgr_process
from tests.security.conftest import Symlink, Team, one_line_refusal


def link_in_store(team: Team, path: str, target: str) -> None:
    """The attacker replaces `path` (a directory or file of the store) by a symbolic link to `target`, pushes;
    the victim pulls."""
    where = team.attacker / path
    if where.exists() and not where.is_symlink():
        git(team.attacker, "rm", "-r", "-q", "--", path)
        if where.is_dir():
            shutil.rmtree(where)
    team.attack({path: Symlink(target)})


def secret_copied_into_store(team: Team) -> list[Path]:
    """The store's regular files (its .git aside) holding the canary's secret."""
    found = []
    for root, dirs, names in os.walk(team.victim.store):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            path = Path(root) / name
            if not path.is_symlink() and team.canary.secret.encode() in path.read_bytes():
                found.append(path)
    return found


def calm(result: Result, args: tuple[str, ...]) -> None:
    assert "Traceback" not in result.err and "internal error" not in result.err, (args, result.err)


def another_change(team: Team) -> None:
    (team.victim.tree / "README").write_text("more work\n")


# --- a directory of the store is a link -----------------------------------------------------------------------


def test_patches_linked_to_the_home_ssh_folder_is_neither_read_nor_written(team: Team, tmp_path: Path) -> None:
    link_in_store(team, "patches", "../home/.ssh")
    another_change(team)
    outputs = []
    for args in (("check",), ("status",), ("series",), ("series", "replay"), ("show", "fix"), ("lint",),
                 ("save", "innocent", "-m", "more"), ("save", "fix", "--update", "-m", "fix"),
                 ("apply", "replay"), ("rebase", "replay", "--onto", "HEAD"), ("interdiff", "fix", "fix"),
                 ("export", "replay", "--mbox", str(tmp_path / "out.mbox"))):  # fmt: skip
        result = team.sm(*args)
        calm(result, args)
        outputs += [result.out, result.err]
        if args[0] in ("save", "apply", "rebase", "interdiff", "export"):
            one_line_refusal(result)
            assert "patches" in result.err and "symbolic link" in result.err, (args, result.err)
    team.canary.assert_untouched(*outputs)
    assert not (tmp_path / "out.mbox").exists()


@pytest.mark.parametrize("place", ["patches", "patches/.versions", "series", "links", "artifacts"])
def test_every_writer_refuses_a_store_directory_that_is_a_link(team: Team, tmp_path: Path, place: str) -> None:
    """save, import and rebase write patches, kept versions and series (and would write results beside them):
    with any of the store's directories a link out of it, each refuses in one line naming it, writing nothing."""
    outside = tmp_path / "outside"
    mail = tmp_path / "mail" / "fix.patch"  # a patch to import, from a colleague's mail
    mail.parent.mkdir()
    shutil.copy(team.victim.store / "patches" / "fix.patch", mail)
    link_in_store(team, place, "../" * (place.count("/") + 1) + "outside")
    another_change(team)
    for args in (("save", "innocent", "-m", "more"), ("import", str(mail)), ("rebase", "replay", "--onto", "HEAD")):
        result = team.sm(*args)
        calm(result, args)
        one_line_refusal(result)
        assert place in result.err and "symbolic link" in result.err, (args, result.err)
        team.canary.assert_untouched(result.out, result.err)
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_kept_versions_are_never_written_through_a_link(team: Team, tmp_path: Path) -> None:
    """`save --update` keeps the replaced version under patches/.versions/NAME/: that folder a link to a folder
    outside, the kept copy would land there."""
    link_in_store(team, "patches/.versions/fix", "../../../outside")
    another_change(team)
    result = team.sm("save", "fix", "--update", "-m", "return two, and more")
    calm(result, ("save",))
    one_line_refusal(result)
    assert "patches/.versions/fix" in result.err and "symbolic link" in result.err
    team.canary.assert_untouched(result.out, result.err)


def test_a_series_folder_linked_outside_is_neither_listed_nor_written(team: Team) -> None:
    link_in_store(team, "series", "../outside")
    outputs = []
    for args in (("series",), ("series", "secret.txt"), ("series", "new", "evil"), ("apply", "secret.txt"),
                 ("status",), ("lint",)):  # fmt: skip
        result = team.sm(*args)
        calm(result, args)
        outputs += [result.out, result.err]
        if args[0] == "series" or args[0] == "apply":
            one_line_refusal(result)
            assert "series" in result.err and "symbolic link" in result.err, (args, result.err)
    team.canary.assert_untouched(*outputs)


def test_links_of_a_patch_linked_outside_are_not_moved_by_rename(team: Team) -> None:
    """`rename` moves links/OLD/ to links/NEW/ and removes the old files: through a link, it would copy a folder
    outside into the store and delete what is there."""
    link_in_store(team, "links/fix", "../../outside")
    result = team.sm("rename", "fix", "fixed")
    calm(result, ("rename",))
    one_line_refusal(result)
    assert "links/fix" in result.err and "symbolic link" in result.err
    team.canary.assert_untouched(result.out, result.err)
    assert secret_copied_into_store(team) == []
    assert (team.victim.store / "patches" / "fix.patch").is_file()  # nothing of the rename stayed
    assert not (team.victim.store / "patches" / "fixed.patch").exists()


# --- a file of the store is a link ----------------------------------------------------------------------------


def test_a_patch_file_linked_to_the_private_key_is_never_read(team: Team, tmp_path: Path) -> None:
    link_in_store(team, "patches/fix.patch", "../../home/.ssh/id_rsa")
    another_change(team)
    quilt = tmp_path / "quilt"
    outputs = []
    for args in (("check",), ("status",), ("series", "replay"), ("show", "fix"), ("lint",), ("apply", "replay"),
                 ("export", "replay", "--mbox", str(tmp_path / "out.mbox")),
                 ("export", "replay", "--quilt", str(quilt)), ("interdiff", "fix", "fix"),
                 ("rebase", "replay", "--onto", "HEAD"), ("rename", "fix", "renamed"),
                 ("save", "fix", "--update", "-m", "fix"), ("drop", "fix")):  # fmt: skip
        result = team.sm(*args)
        calm(result, args)
        outputs += [result.out, result.err]
    team.canary.assert_untouched(*outputs)
    assert secret_copied_into_store(team) == []
    for exported in [tmp_path / "out.mbox", *quilt.rglob("*")]:
        assert not exported.is_file() or team.canary.secret.encode() not in exported.read_bytes()
    assert (team.victim.store / "patches" / "fix.patch").is_symlink()  # left as it came, for the user to see


def test_a_pulled_gitattributes_linked_to_the_key_is_not_copied_by_git_setup(team: Team) -> None:
    link_in_store(team, ".gitattributes", "../home/.ssh/id_rsa")
    result = team.sm("git-setup")
    calm(result, ("git-setup",))
    one_line_refusal(result)
    assert ".gitattributes" in result.err and "symbolic link" in result.err
    team.canary.assert_untouched(result.out, result.err)
    assert secret_copied_into_store(team) == []


def test_a_pulled_quilt_folder_with_links_is_imported_without_reading_them(team: Team) -> None:
    """A teammate pushes a quilt series to import (`incoming/`): its `series` file, or a patch it lists, a link
    to a private file. The series is refused, the patch is refused; what they link to is never read or shown."""
    team.attack({"incoming/series": Symlink("../../home/.ssh/id_rsa")})
    first = team.sm("import", str(team.victim.store / "incoming"))
    team.attack({"incoming/series": "secret.patch\n", "incoming/secret.patch": Symlink("../../outside/secret.txt")})
    second = team.sm("import", str(team.victim.store / "incoming"))
    for result in (first, second):
        calm(result, ("import",))
        assert result.code != 0 and "symbolic link" in result.out + result.err, result
    team.canary.assert_untouched(first.out, first.err, second.out, second.err)
    assert secret_copied_into_store(team) == []


# --- found by the fresh-eyes review -----------------------------------------------------------------------------


@pytest.mark.regression("a pulled .gitignore -> ~/.ssh/id_rsa was read and written back, key and all")
@pytest.mark.parametrize("command", [("tree", "add", "other", "{other}"), ("init", "{store}")])
def test_a_gitignore_linked_to_the_key_is_never_copied_into_the_store(
        team: Team, tmp_path: Path, command: tuple[str, ...]) -> None:  # fmt: skip
    link_in_store(team, ".gitignore", "../home/.ssh/id_rsa")
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    git(other, "commit", "-q", "--allow-empty", "-m", "x")
    args = [a.format(other=other, store=team.victim.store) for a in command]
    result = team.sm(*args) if args[0] != "init" else run_stackmgr(*args)
    one_line_refusal(result)
    assert ".gitignore in the store is a symbolic link" in result.err
    assert (team.victim.store / ".gitignore").is_symlink()
    assert not secret_copied_into_store(team)
    assert not (team.victim.store / "stackmgr.local.toml").read_text().count("other")  # nothing half-written
    team.canary.assert_untouched(result.out, result.err)


@pytest.mark.regression("lint of a store with a conflicted config opened every file following links: /dev/zero")
def test_lint_of_a_conflicted_store_never_follows_a_link(team: Team) -> None:
    config = (team.attacker / "stackmgr.toml").read_text()
    team.attack({"stackmgr.toml": f"<<<<<<< ours\n{config}=======\n{config}>>>>>>> theirs\n",
                 "series/zero": Symlink("/dev/zero"), "series/key": Symlink("../../home/.ssh/id_rsa")})
    done = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(team.victim.store), "lint"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1 and "stackmgr.toml: unresolved merge conflict" in done.stdout, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    team.canary.assert_untouched(done.stdout, done.stderr)


@pytest.mark.regression("a results directory a pulled patch made a link to ~ had its files copied into the store")
def test_a_results_directory_linked_out_of_the_tree_is_never_collected(team: Team) -> None:
    config = (team.attacker / "stackmgr.toml").read_text()
    team.attack({"stackmgr.toml": config.replace("[trees.vllm]", '[trees.vllm]\nresults = ["out"]')})
    os.symlink(team.home, team.victim.tree / "out")  # as a pulled patch's symlink leaves it after `apply`
    writes = f"import os; open({str(team.home / 'note.txt')!r}, 'w').write(os.environ['NOTE'])"
    done = stackmgr_process(team.victim.store, "run", "--", sys.executable, "-c", writes, NOTE=team.canary.secret)
    assert done.returncode == 0, done.stderr
    os.unlink(team.home / "note.txt")  # the user's own command wrote it; stackmgr must not have kept it
    assert not secret_copied_into_store(team)
    team.canary.assert_untouched(done.stdout, done.stderr)


@pytest.mark.regression("artifacts -> ~: `link` refused, but only after making ~/sha256/XX/")
def test_a_refused_write_through_a_linked_folder_creates_nothing_outside(team: Team, tmp_path: Path) -> None:
    link_in_store(team, "artifacts", "../home")
    log = tmp_path / "probe.log"
    log.write_text("throughput 1\n")
    result = team.sm("link", "fix", str(log), "--metric", "tps=1")
    one_line_refusal(result)
    assert "artifacts in the store is a symbolic link" in result.err
    team.canary.assert_untouched(result.out, result.err)


@pytest.mark.regression("a report kept in the store with `index.html.<pid>.tmp -> ~/.bashrc` overwrote ~/.bashrc")
def test_a_pulled_report_directory_with_planted_temp_links_writes_nothing_outside(team: Team) -> None:
    site = team.victim.store / "site"
    assert team.sm("report", "-o", str(site)).code == 0
    team.victim_commit("the report, kept with the store")
    planted = {f"site/{page}.{pid}.tmp": Symlink("../../home/.bashrc")
               for page in ("index.html", ".stackmgr-report") for pid in range(os.getpid() - 2, os.getpid() + 60)}
    team.attack({**planted, "site/.stackmgr-report": Symlink("/dev/zero")})
    result = team.sm("report", "-o", str(site))
    assert result.code == 0, result.err
    team.canary.assert_untouched(result.out, result.err)


@pytest.mark.regression("`import incoming/fix.patch` followed a pulled link to a private file (and /dev/zero)")
def test_import_of_a_pulled_file_that_links_out_reads_nothing(team: Team) -> None:
    (team.home / "private.patch").write_text(f"diff --git a/x b/x\n{team.canary.secret}\n")
    team.canary.plant(team.home / "private.patch", (team.home / "private.patch").read_bytes())
    team.canary.seal()
    team.attack({"incoming/fix.patch": Symlink("../../home/private.patch"), "incoming/z.mbox": Symlink("/dev/zero")})
    for name in ("incoming/fix.patch", "incoming/z.mbox"):
        result = team.sm("import", str(team.victim.store / name))
        one_line_refusal(result)
        assert "symbolic link in the store" in result.err
        team.canary.assert_untouched(result.out, result.err)
    assert not secret_copied_into_store(team)
