"""`stackmgr diff [PATCH] [-z] [--stat]`: a patch's diff as saved, or the changes not saved yet. The rules are in
commands/diff.py."""

from __future__ import annotations

import sys

import click

from stackmgr import output
from stackmgr.cli.context import Context, json_option, pass_context, patch_names, tree_names
from stackmgr.store.config import open_store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from stackmgr.commands.diff import Shown


@click.command("diff")
@click.argument("patch", required=False, shell_complete=patch_names)
@click.option("-t", "--tree", metavar="TREE", shell_complete=tree_names,
              help="The tree (default: the only tree with a current series).")  # fmt: skip
@click.option("-z", "--unsaved", is_flag=True,
              help="The tree's changes on top of its applied patches (on top of HEAD when none is applied: a "
                   "patch saved with no series is not applied), untracked files included: what the next `save` "
                   "takes.")  # fmt: skip
@click.option("--stat", is_flag=True, help="A diffstat instead of the diff.")
@json_option()
@pass_context
def diff_cmd(ctx: Context, patch: str | None, tree: str | None, unsaved: bool, stat: bool) -> None:
    """Print a patch's diff as saved: the top applied patch of the tree's current series, or PATCH (applied or
    not). With -z, what the tree holds on top of its applied patches (on top of HEAD when none is applied).
    The bytes are the patch's own, so `stackmgr diff PATCH > p.diff; git apply p.diff` works; nothing is
    changed, the tree's index included."""
    from stackmgr.commands.diff import shown as shown_diff

    store = open_store(ctx.store)
    shown = shown_diff(store, patch, tree, unsaved)
    if ctx.json:
        output.emit_json(_as_json(shown, shown.stat(store.root)))
        return
    if not shown.data:
        output.err(f"stackmgr: tree {shown.tree}: nothing unsaved on top of {shown.on}")
        return
    if stat:
        output.out_bytes(shown.stat(store.root))
    elif output.color_on(sys.stdout):
        _painted(shown.data)
    else:
        output.out_bytes(shown.data)


def _as_json(shown: Shown, stat: bytes) -> dict[str, object]:
    """`diff --json` (docs/FORMATS.md#json-output): the diff as text, or as base64 when it is not UTF-8."""
    import base64

    files, insertions, deletions = shown.totals(stat)
    try:
        text: str | None = shown.data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {
        "schema": 1,
        "tree": shown.tree,
        "patch": shown.patch,
        "unsaved": shown.unsaved,
        "on": shown.on or None,
        "stat": {
            "files": files,
            "insertions": insertions,
            "deletions": deletions,
            "text": stat.decode("utf-8", "replace"),
        },
        "diff": text,
        "diff_base64": None if text is not None else base64.b64encode(shown.data).decode(),
    }


def _painted(data: bytes) -> None:
    """The diff on a terminal, coloured as git colours one: headers bold, hunk lines yellow, + green, - red."""
    header = False
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    for line in lines[:-1] if lines[-1] == "" else lines:
        if line.startswith("diff --git "):
            header = True
        elif line.startswith(("@@", "GIT binary patch")):
            header = False
        style = "bold" if header else {"+": "green", "-": "red", "@": "yellow"}.get(line[:1])
        output.out(output.paint(line, style) if style else line)
