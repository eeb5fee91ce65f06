"""The store's own git repository, where a team shares it (docs/FORMATS.md#store-layout): whether the store is
in one, the merge driver's registration in its config, and `git merge-file` for the driver itself."""

from __future__ import annotations

from stackmgr.git.runner import run, run_rc

DRIVER = "stackmgr-series"  # the name in .gitattributes (`series/* merge=stackmgr-series`) and in git config


def in_repository(directory: str) -> bool:
    return run_rc(directory, ["rev-parse", "--is-inside-work-tree"])[0] == 0


def register_merge_driver(directory: str, command: str) -> None:
    """This clone's git config names the series merge driver (git does not clone config: each clone runs it)."""
    run(directory, ["config", f"merge.{DRIVER}.name", "stackmgr: merge appends to a series file"])
    run(directory, ["config", f"merge.{DRIVER}.driver", command])


def merge_driver_registered(directory: str) -> bool | None:
    """Whether this clone's own git config names the series merge driver; None when `directory` is in no git
    repository (`git config --local` refuses to run there)."""
    rc, out, _ = run_rc(directory, ["config", "--local", "--get", f"merge.{DRIVER}.driver"])
    if rc == 0:
        return bool(out.strip())
    return False if rc == 1 else None


def lfs_version(directory: str) -> str | None:
    """`git lfs version`, or None when git-lfs is not installed."""
    rc, out, _ = run_rc(directory, ["lfs", "version"])
    return out.decode("utf-8", "replace").strip() if rc == 0 else None


def lfs_install_here(directory: str) -> None:
    """git-lfs's hooks and filters in this clone only (`git lfs install --local`)."""
    run(directory, ["lfs", "install", "--local"])


def merge_file_diff3(ours: str, base: str, theirs: str) -> tuple[int, bytes]:
    """`git merge-file -p --diff3` of three files (no repository needed): (conflicts, merged text with
    `<<<<<<< ours` / `||||||| base` / `=======` / `>>>>>>> theirs` blocks where it could not merge)."""
    import os

    rc, out, err = run_rc(os.path.dirname(os.path.abspath(ours)) or ".",
                          ["merge-file", "-p", "--diff3", "-L", "ours", "-L", "base", "-L", "theirs", ours, base,
                           theirs])  # fmt: skip
    if rc < 0 or rc > 127:
        from stackmgr.errors import StackmgrError

        raise StackmgrError(f"git merge-file failed: {err.decode('utf-8', 'replace').strip()}")
    return rc, out
