"""A stack of patches applied with a few git calls instead of several per patch (`import`, `rebase`).

Patches that touch none of each other's paths commute, so a stack is applied in *layers*: layer 1 holds every
patch that touches nothing an earlier patch touched, layer k every patch whose latest earlier neighbour on one of
its paths is in layer k-1. One `git apply --cached` per layer (git's own strict apply, the patches in stack order)
gives, per path, the state after the one patch of the layer that touches it; one `ls-files` per layer reads those
states. One `fast-import` then commits the tree after each patch as a chain and one `diff-tree --stdin` re-diffs
the whole chain. The paths a patch touches come from reading it; git checks them: the names git's `--numstat`
reports for a layer must each belong to exactly one of its patches, and every path that changed must be one the
layer claimed. Any doubt (a name not claimed, a name twice, a patch that does not apply) answers None, and the
caller goes patch by patch as before. A cost: `layers` calls, not `patches`.
"""

from __future__ import annotations

import os
import shutil

from stackmgr.git.checked import object_id, patch_file_for_git
from stackmgr.git.runner import DIFF_FLAGS, finish, run_rc, start, zsplit
from stackmgr.git.tempindex import TempIndex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from stackmgr.git.repo import Repo

    Entry = tuple[str, str] | None  # (mode, blob), or None: not there


_SIDE_BY_SIDE = 8  # git checks run at once when a layer is sorted out patch by patch


class LayerPatch:
    """One patch of the stack: its file, its -p level, and every tree path its text names (a superset of what
    git will touch is fine: it only puts the patch in a later layer)."""

    __slots__ = ("deletes", "file", "paths", "strip")

    def __init__(self, file: str, strip: int, paths: Collection[bytes], deletes: Collection[bytes] = ()) -> None:
        self.file, self.strip, self.paths = file, strip, paths
        self.deletes = deletes  # files it deletes that upstream moved: never "there already" (see `skip_applied`)


class Stacked:
    """The tree after each patch, a commit of it (a chain from a root commit of the start tree, stackmgr's, on
    no branch), and each patch's diff from the tree below it (diffstat, summary and the full-index patch, as
    `Repo.diff_trees_with_stat` gives it)."""

    __slots__ = ("commits", "diffs", "trees")

    def __init__(self, trees: list[str], commits: list[str], diffs: list[bytes]) -> None:
        self.trees, self.commits, self.diffs = trees, commits, diffs


def layers_of(paths: Sequence[Collection[bytes]]) -> list[int]:
    """The layer (1, 2, …) of each patch: one more than the latest layer of an earlier patch that touches the same
    path, a directory above one of its paths, or a path below one of its paths (a file that becomes a directory)."""
    exact: dict[bytes, int] = {}  # path -> latest layer that touched it
    under: dict[bytes, int] = {}  # directory -> latest layer that touched something below it
    out = []
    for names in paths:
        layer = 1
        for p in names:
            layer = max(layer, exact.get(p, 0) + 1, under.get(p, 0) + 1)
            for parent in _parents(p):
                layer = max(layer, exact.get(parent, 0) + 1)
        for p in names:
            exact[p] = layer
            for parent in _parents(p):
                under[parent] = max(under.get(parent, 0), layer)
        out.append(layer)
    return out


def _parents(path: bytes) -> list[bytes]:
    parts = path.split(b"/")
    return [b"/".join(parts[:n]) for n in range(1, len(parts))]


def apply_in_layers(
    repo: Repo, start_tree: str, patches: Sequence[LayerPatch], three_way: bool = False, skip_applied: bool = False
) -> Stacked | None:
    """Apply `patches` in order to tree `start_tree` (strictly, as `TempIndex.apply`; `three_way`: a 3-way
    merge between the blobs each patch records first, as `rebase` carries a patch); the tree after each and its
    diff, or None when the layered way cannot vouch for the answer (the caller then goes one by one).
    `skip_applied`: a patch that does not apply but whose reverse does is there already and changes nothing
    (its diff is empty) instead of failing the stack; unless it deletes a file upstream moved (its `deletes`:
    its reverse applies where the file went away, but git's merge would find a rename/delete conflict)."""
    if not patches:
        return Stacked([], [], [])
    layer_of = layers_of([p.paths for p in patches])
    states = _states(repo, start_tree, patches, layer_of, three_way, skip_applied)
    if states is None:
        return None
    commits = _commit_chain(repo, start_tree, states)
    trees = [c[1] for c in commits]
    diffs = _chain_diffs(repo, [c[0] for c in commits])
    if diffs is None:
        return None
    return Stacked(trees, [c[0] for c in commits], diffs)


def _states(
    repo: Repo, start_tree: str, patches: Sequence[LayerPatch], layer_of: list[int], three_way: bool,
    skip_applied: bool,
) -> list[dict[bytes, Entry]] | None:  # fmt: skip
    """What each patch changes: path -> its entry after the patch; None when the layers cannot vouch for it."""
    changed: list[dict[bytes, Entry]] = [{} for _ in patches]
    with TempIndex.scratch(repo, "layers") as index:
        try:
            return _layered_states(repo, index, start_tree, patches, layer_of, three_way, skip_applied, changed)
        finally:
            if os.path.exists(index.path + ".below"):
                os.unlink(index.path + ".below")


def _layered_states(
    repo: Repo, index: TempIndex, start_tree: str, patches: Sequence[LayerPatch], layer_of: list[int],
    three_way: bool, skip_applied: bool, changed: list[dict[bytes, Entry]],
) -> list[dict[bytes, Entry]] | None:  # fmt: skip
    """`_states` in its scratch index (which `.below`, a copy of it before a layer, sits beside)."""
    index.read_tree(start_tree)
    held: dict[bytes, tuple[str, str]] = index.entries()
    for layer in range(1, max(layer_of) + 1):
        members = [n for n, lay in enumerate(layer_of) if lay == layer]
        if skip_applied:
            shutil.copyfile(index.path, index.path + ".below")
        named = _apply_layer(repo, index.path, patches, members, three_way)
        if named is None and skip_applied:
            applying = _not_applied_yet(repo, index.path + ".below", patches, members, three_way)
            if applying is None:
                return None
            shutil.copyfile(index.path + ".below", index.path)
            members = applying
            named = _apply_layer(repo, index.path, patches, members, three_way) if members else []
        if named is None:
            return None
        owner = {p: n for n in members for p in patches[n].paths}
        if len(set(named)) != len(named) or any(name not in owner for name in named):
            return None  # git saw a path twice, or one the reading missed: not layered
        now = index.entries()
        for path in held.keys() | now.keys():
            before, after = held.get(path), now.get(path)
            if before != after:
                if path not in owner:
                    return None
                changed[owner[path]][path] = after
        held = now
    return changed


def _apply_layer(repo: Repo, index: str, patches: Sequence[LayerPatch], members: list[int], three_way: bool
                 ) -> list[bytes] | None:  # fmt: skip
    """Apply a layer's patches (one git call per -p level); git's --numstat names, or None if one fails."""
    named: list[bytes] = []
    for strip in sorted({patches[n].strip for n in members}):
        said = _apply_numstat(repo, index, [patches[n].file for n in members if patches[n].strip == strip], strip,
                              three_way)  # fmt: skip
        if said is None:
            return None
        named.extend(said)
    return named


def _not_applied_yet(repo: Repo, below: str, patches: Sequence[LayerPatch], members: list[int], three_way: bool,
                     ) -> list[int] | None:  # fmt: skip
    """The members of a layer that failed as a whole which apply alone to the index `below` it; the others must
    be there already (their reverse applies: they change nothing, as `git rebase` drops a change already
    applied), else None (a conflict, a patch that fits nowhere, or one deleting a file upstream moved, whose
    reverse applies there as well). Every check only reads `below`: they run
    side by side, a few at a time."""
    checks = []
    for n in members:
        file, strip = patch_file_for_git(patches[n].file), f"-p{patches[n].strip}"
        checks.append(["apply", "--cached", "--check", *(["--3way"] if three_way else []), strip, file])
        checks.append(["apply", "--cached", "--check", "-R", strip, file])
    said: list[tuple[int, bytes]] = []
    for at in range(0, len(checks), _SIDE_BY_SIDE):
        procs = [start(repo.top, args, index=below) for args in checks[at : at + _SIDE_BY_SIDE]]
        for proc in procs:
            out, err = proc.communicate()
            said.append((proc.wait(), out + err))
    keep = []
    for k, n in enumerate(members):
        (forward, message), (reverse, _) = said[2 * k], said[2 * k + 1]
        if forward == 0 and b"with conflicts" not in message:
            keep.append(n)
        elif forward == 0 or reverse != 0 or patches[n].deletes:
            return None  # a conflict, neither way fits, or a file it deletes moved (git's merge decides)
    return keep


def _apply_numstat(repo: Repo, index: str, files: list[str], strip: int, three_way: bool) -> list[bytes] | None:
    """Apply `files` in order to `index` as `TempIndex.apply` does, and the file names git's --numstat gives
    for them (the new name of each file section; the old one for a deletion); None when they do not apply."""
    args = ["apply", "--cached", *(["--3way"] if three_way else []), "--whitespace=nowarn", f"-p{strip}", "--numstat",
            "-z", "--apply"]  # fmt: skip
    rc, out, _ = run_rc(repo.top, [*args, *(patch_file_for_git(f) for f in files)], index=index)
    if rc != 0:
        return None
    return [rec.split(b"\t", 2)[2] for rec in zsplit(out)]


def _commit_chain(repo: Repo, start_tree: str, states: list[dict[bytes, Entry]]) -> list[tuple[str, str]]:
    """(commit, tree) after each patch: one `git fast-import` commits `start_tree` as a root, then each patch's
    changes on the one before, answers each commit's id (`get-mark`) and tree (`ls`), and leaves no ref."""
    ref = f"refs/stackmgr/layers-{os.getpid()}"
    stream = [b"feature done\nfeature get-mark\n"]
    for n, change in enumerate([{}, *states]):
        stream.append(f"commit {ref}\nmark :{n + 1}\ncommitter stackmgr <stackmgr@localhost> 0 +0000\ndata 0\n"
                      .encode())  # fmt: skip
        if n == 0:
            stream.append(f'M 040000 {object_id(start_tree)} ""\n'.encode())  # a line of fast-import's stream
        else:
            stream.append(f"from :{n}\n".encode())
            stream.extend(b"D " + _quoted(p) + b"\n" for p, e in sorted(change.items()) if e is None)
            stream.extend(f"M {e[0]} {e[1]} ".encode() + _quoted(p) + b"\n" for p, e in sorted(change.items()) if e)
        stream.append(b"\n")
        if n:
            stream.append(f'get-mark :{n + 1}\nls :{n + 1} ""\n'.encode())
    stream.append(f"reset {ref}\n\ndone\n".encode())  # the ref is deleted at the end
    out = finish(start(repo.top, ["fast-import", "--quiet", "--date-format=raw"], stdin=True), b"".join(stream))[1]
    lines = out.decode().splitlines()
    return [(lines[2 * n].strip(), lines[2 * n + 1].split()[2]) for n in range(len(states))]


def _quoted(path: bytes) -> bytes:
    """A path as fast-import reads it: C-style quoted, so spaces, quotes, newlines and any byte pass."""
    out = bytearray(b'"')
    for byte in path:
        if byte in b'"\\':
            out += b"\\" + bytes([byte])
        elif byte < 0x20 or byte >= 0x7F:
            out += f"\\{byte:03o}".encode()
        else:
            out.append(byte)
    return bytes(out + b'"')


def _chain_diffs(repo: Repo, commits: list[str]) -> list[bytes] | None:
    """Each commit's diff from its parent (as `Repo.diff_trees_with_stat`), by `diff-tree --stdin`: the chain
    cut in two halves that two git processes diff at once."""
    args = ["diff-tree", "--stdin", "--always", "-r", "-p", "--stat=72", "--summary", *DIFF_FLAGS]
    halves = [commits[: len(commits) // 2], commits[len(commits) // 2 :]] if 8 <= len(commits) <= 600 else [commits]
    procs = [start(repo.top, args, stdin=True) for _ in halves]
    feeds = ["".join(c + "\n" for c in half).encode() for half in halves]
    if len(halves) == 2:
        for proc, feed in zip(procs, feeds, strict=True):
            proc.send(feed)
    diffs: list[bytes] = []
    for proc, half, feed in zip(procs, halves, feeds, strict=True):
        split = _split_by_commit(finish(proc, None if len(halves) == 2 else feed)[1], half)
        if split is None:
            return None
        diffs.extend(split)
    return diffs


def _split_by_commit(out: bytes, commits: list[str]) -> list[bytes] | None:
    """`diff-tree --stdin --always` output cut at the line naming each commit (a diff's own lines all start with
    a space, a sign or a keyword; a base85 line is never as long as an object id)."""
    diffs: list[bytes] = []
    at = 0
    for n, commit in enumerate(commits):
        head = commit.encode() + b"\n"
        if out[at : at + len(head)] != head:
            return None
        at += len(head)
        if n + 1 == len(commits):
            end = len(out)
        else:
            end = out.find(b"\n" + commits[n + 1].encode() + b"\n", at - 1)
            if end < 0:
                return None
            end += 1
        diffs.append(out[at:end])
        at = end
    return diffs
