"""Which files of the store its own git repository tracks: state that steers stackmgr must never be one of them
(docs/SECURITY.md), since a `git pull` writes whatever is tracked."""

from __future__ import annotations

from stackmgr.git.runner import run_rc, zsplit


def tracked_under(directory: str, paths: list[str]) -> list[str] | None:
    """The tracked files at or below `paths` (relative to `directory`), as `git ls-files` lists them relative to
    `directory`; None when `directory` is in no git repository (or git cannot say)."""
    rc, out, _ = run_rc(directory, ["ls-files", "-z", "--full-name", "--", *(":(literal)" + p for p in paths)])
    if rc != 0:
        return None
    rc, prefix, _ = run_rc(directory, ["rev-parse", "--show-prefix"])
    if rc != 0:
        return None
    lead = prefix.strip()
    return [p[len(lead):].decode("utf-8", "surrogateescape") for p in zsplit(out) if p.startswith(lead)]
