"""A stack built in layers (git/layers.py) is the stack built patch by patch: the same tree after every patch and
the same diff, byte for byte, on histories of edits, renames, files becoming directories, binaries, modes and
symlinks; and when the reading of a patch misses a path git touches, the layered way says so instead of
answering."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from stackmgr.git.layers import LayerPatch, apply_in_layers, layers_of
from stackmgr.git.repo import open_repo
from stackmgr.git.scratch import tree_from_patches
from stackmgr.incoming.read import read_inputs
from tests.conftest import commit, git, git_text, make_repo


def one_by_one(top: Path, start: str, files: list[str]) -> tuple[list[str], list[bytes]]:
    """The reference: one `git apply --cached` and one re-diff per patch."""
    repo = open_repo(str(top))
    trees, diffs, below = [], [], start
    for f in files:
        tree, err = tree_from_patches(repo, below, [f])
        assert tree is not None, err
        trees.append(tree)
        diffs.append(repo.diff_trees_with_stat(below, tree))
        below = tree
    return trees, diffs


def patches_of(top: Path, base: str, out: Path, *diff_args: str) -> list[str]:
    """Each commit after `base` as a patch file (git's own diff, with the given options)."""
    out.mkdir(exist_ok=True)
    files = []
    commits = git_text(top, "rev-list", "--reverse", f"{base}..HEAD").split()
    for n, c in enumerate(commits):
        path = out / f"{n:04d}.patch"
        path.write_bytes(git(top, "diff-tree", "-p", "--binary", "--full-index", *diff_args, f"{c}^", c))
        files.append(str(path))
    return files


def layered(top: Path, start: str, files: list[str]) -> tuple[list[str], list[bytes]] | None:
    items, _ = read_inputs(files)
    patches = [LayerPatch(f, 1, item.paths(1)) for f, item in zip(files, items, strict=True)]
    built = apply_in_layers(open_repo(str(top)), start, patches)
    return None if built is None else (built.trees, built.diffs)


def random_history(top: Path, rounds: int, seed: int) -> None:
    """Commits a user's week might make: edits of shared files, new and removed files, renames, modes, symlinks,
    binaries, a file that becomes a directory, names with spaces."""
    rng = random.Random(seed)
    names = [f"src/m{n}.py" for n in range(6)] + ["README", "docs/a b.txt", "bin/tool", "data.bin"]
    for n in range(rounds):
        existing = [p for p in names if (top / p).is_file() or (top / p).is_symlink()]
        changes: dict[str, str | bytes | None] = {}
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["edit", "edit", "edit", "add", "delete", "mode", "link", "binary", "dir"])
            path = rng.choice(existing or names)
            if any(path == q or path.startswith(q + "/") or q.startswith(path + "/") for q in changes):
                continue  # one change per path a round
            if kind == "edit" and path in existing and not (top / path).is_symlink():
                lines = (top / path).read_bytes().split(b"\n")
                at = rng.randrange(len(lines))
                lines.insert(at, f"line {n} {rng.random()}".encode())
                changes[path] = b"\n".join(lines)
            elif kind == "add":
                new = f"src/new{n}.py"
                changes[new] = "".join(f"v{k} = {k * n}\n" for k in range(rng.randint(1, 40)))
                names.append(new)
            elif kind == "delete" and len(existing) > 3:
                changes[path] = None
            elif kind == "binary" and not (top / "data.bin").is_dir():
                changes["data.bin"] = bytes(rng.randrange(256) for _ in range(rng.randint(10, 3000)))
            elif kind == "dir" and path in existing and path not in changes and path != "data.bin":
                changes[path] = None
                changes[path + "/inner.txt"] = f"was a file {n}\n"
                names.append(path + "/inner.txt")
            elif kind == "mode" and path in existing and (top / path).is_file() and not (top / path).is_symlink():
                git(top, "update-index", "--chmod=+x", path)
                os.chmod(top / path, 0o755)
            elif kind == "link":
                link = top / f"link{n}"
                if not link.exists():
                    os.symlink(rng.choice(names), link)
        for path, data in list(changes.items()):
            if data is None and not (top / path).exists():
                del changes[path]
        if not changes:
            changes[f"notes/n{n}.txt"] = f"note {n}\n"
        commit(top, changes, f"change {n}")


@pytest.mark.parametrize("seed", range(6))
def test_a_random_week_of_commits_builds_layered_exactly_as_patch_by_patch(tmp_path: Path, seed: int) -> None:
    top = make_repo(tmp_path / "t", {"README": "r\n", **{f"src/m{n}.py": f"x = {n}\n" * 20 for n in range(6)},
                                     "docs/a b.txt": "spaces\n", "bin/tool": "#!/bin/sh\n"})  # fmt: skip
    base = git_text(top, "rev-parse", "HEAD^{tree}")
    base_commit = git_text(top, "rev-parse", "HEAD")
    random_history(top, 25, seed)
    files = patches_of(top, base_commit, tmp_path / "p")
    expected = one_by_one(top, base, files)
    assert expected[0][-1] == git_text(top, "rev-parse", "HEAD^{tree}")
    assert layered(top, base, files) == expected
    assert not git(top, "for-each-ref", "refs/stackmgr"), "the chain's ref is left behind"


def test_renames_and_copies_built_in_layers_give_git_s_trees(tmp_path: Path) -> None:
    top = make_repo(tmp_path / "t", {"a.txt": "".join(f"line {n}\n" for n in range(50)), "b.txt": "b\n"})
    base, base_commit = git_text(top, "rev-parse", "HEAD^{tree}"), git_text(top, "rev-parse", "HEAD")
    git(top, "mv", "a.txt", "moved.txt")
    commit(top, {"moved.txt": "".join(f"line {n}\n" for n in range(50)) + "more\n"}, "rename and edit")
    commit(top, {"a.txt": "a new file where the old one was\n"}, "a new a.txt")
    commit(top, {"b.txt": "b\nb2\n", "moved.txt": "short\n"}, "edit both")
    files = patches_of(top, base_commit, tmp_path / "p", "-M", "-C")
    assert b"rename from a.txt" in Path(files[0]).read_bytes()
    assert layered(top, base, files) == one_by_one(top, base, files)


def test_a_patch_whose_reading_misses_a_path_git_touches_is_not_built_in_layers(tmp_path: Path) -> None:
    top = make_repo(tmp_path / "t", {"a": "1\n", "b": "1\n"})
    base, base_commit = git_text(top, "rev-parse", "HEAD^{tree}"), git_text(top, "rev-parse", "HEAD")
    commit(top, {"a": "2\n", "b": "2\n"}, "both")
    commit(top, {"b": "3\n"}, "b again")
    files = patches_of(top, base_commit, tmp_path / "p")
    repo = open_repo(str(top))
    wrong = [LayerPatch(files[0], 1, [b"a"]), LayerPatch(files[1], 1, [b"b"])]  # the first one's b is missed
    assert layers_of([p.paths for p in wrong]) == [1, 1]
    assert apply_in_layers(repo, base, wrong) is None
    right = [LayerPatch(files[0], 1, [b"a", b"b"]), LayerPatch(files[1], 1, [b"b"])]
    built = apply_in_layers(repo, base, right)
    assert built is not None and built.trees == one_by_one(top, base, files)[0]


def test_layers_follow_shared_paths_and_files_that_become_directories() -> None:
    assert layers_of([[b"a"], [b"b"], [b"a"], [b"c"], [b"a", b"b"]]) == [1, 1, 2, 1, 3]
    assert layers_of([[b"x"], [b"x/y"]]) == [1, 2]  # a file, then a directory of that name
    assert layers_of([[b"d/e/f"], [b"d"]]) == [1, 2]  # a directory's file, then a file where the directory was
    assert layers_of([[b"d/e"], [b"d/f"]]) == [1, 1]  # neighbours in one directory commute
