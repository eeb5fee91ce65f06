"""One answer everywhere: each rule a user meets in several commands is one public function in its core package,
and every command asks it instead of working the answer out again (docs/ARCHITECTURE.md, "One rule, one
function"). Like tests/test_layout.py keeps git command lines in `git/`, these tests read the source and fail when
a command grows its own copy of a rule."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "stackmgr"

# rule, as the user meets it -> (module, public function)
RULES = {
    "a patch of this store by name": ("stackmgr.store.names", "patch_file"),
    "which series list a patch": ("stackmgr.store.series", "series_listing"),
    "the tree's applied position in its series": ("stackmgr.store.position", "applied_position"),
    "the tree a command acts on when none is named": ("stackmgr.store.tree_paths", "tree_to_act_on"),
    "may this move bring back a do-not-revive lane": ("stackmgr.evidence.revival", "guard_revival"),
    "a lane's status, as show and the report badge it": ("stackmgr.evidence.revival", "lane_of"),
    "a link's state (failed, tainted, usable, fresh)": ("stackmgr.evidence.link_state", "link_state"),
    "the results whose numbers a view may quote as a patch's": ("stackmgr.evidence.link_state", "quoted_results"),
    "a result by link id or run name (an ambiguous name refused)": ("stackmgr.evidence.reading", "find_ref"),
    "did a result measure the patch": ("stackmgr.evidence.records", "measured_patch"),
    "is a result fresh for its measured stack": ("stackmgr.evidence.freshness", "measured_stack_freshness"),
    "where run and bisect run the user's command": ("stackmgr.evidence.capture", "where_command_runs"),
}

# Every move that brings a patch's change back into a tree or a series.
MOVES = ["commands/apply.py", "commands/navigate.py", "commands/apply_link.py", "commands/import_.py",
         "commands/series.py", "commands/save.py"]  # fmt: skip

# Names of the per-command copies these rules replaced: none may come back.
RETIRED = {"pick_tree", "_default_trees", "left_out_why", "_failed", "refuse_revival", "_patch_tree",
           "_series_order_skipping"}  # fmt: skip


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield str(path.relative_to(PACKAGE)), ast.parse(path.read_text(encoding="utf-8"))


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    yield from (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _names_used(node: ast.AST) -> set[str]:
    return {
        n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))
    }


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_is_one_public_function_defined_once(rule: str) -> None:
    module, name = RULES[rule]
    assert callable(getattr(importlib.import_module(module), name)), f"{rule}: {module}.{name}"
    defined = [path for path, tree in _modules() for f in _functions(tree) if f.name == name]
    assert len(defined) == 1, f"{rule}: {name} is defined in {defined}"


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_is_asked_outside_its_own_module(rule: str) -> None:
    module, name = RULES[rule]
    own = module.removeprefix("stackmgr.").replace(".", "/") + ".py"
    callers = [path for path, tree in _modules() if path != own and name in _names_used(tree)]
    assert callers, f"{rule}: nobody calls {name}"


@pytest.mark.parametrize("move", MOVES)
def test_every_move_that_brings_a_change_back_asks_the_revival_guard(move: str) -> None:
    tree = ast.parse((PACKAGE / move).read_text(encoding="utf-8"))
    assert "guard_revival" in _names_used(tree), f"{move} brings patches back without evidence/revival.guard_revival"


def test_no_retired_copy_of_a_rule_comes_back() -> None:
    found = [
        f"{path}:{f.lineno} {f.name}"
        for path, tree in _modules()
        for f in tree.body
        if isinstance(f, ast.FunctionDef) and f.name in RETIRED
    ]  # a method of the rule's own class may keep one
    assert not found, found


def test_a_trees_path_is_asked_of_the_store_which_knows_it_may_have_none_here() -> None:
    """`store.trees[NAME]` skips what `Store.tree(NAME)` says of a tree with no path on this machine."""
    found = []
    for path, tree in _modules():
        if path.startswith("store/") or path == "journal/rollback.py":  # rollback goes on for a tree gone here
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
                    node.value.attr == "trees" and "store" in _names_used(node.value.value):  # fmt: skip
                found.append(f"{path}:{node.lineno}")
    assert not found, found


def test_the_position_line_is_built_in_one_place() -> None:
    """ "S: k of n applied, top P" comes from store/position.py only."""
    found = []
    for path, tree in _modules():
        if path == "store/position.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
                if "} of {" in text and "applied" in text:
                    found.append(f"{path}:{node.lineno}")
    assert not found, found


def test_series_membership_is_read_by_the_series_module_only() -> None:
    """A function that reads every series and asks which patches they list is the series-listing rule again."""
    found = [f"{path}:{f.lineno} {f.name}" for path, tree in _modules() if path != "store/series.py"
             for f in _functions(tree) if {"list_series", "patch_names"} <= _names_used(f)]  # fmt: skip
    assert not found, found


def test_a_runs_taint_is_judged_by_the_link_state_rule() -> None:
    """Reading `tainted` to decide whether a result counts happens in evidence/link_state.py (through the
    record's `tainted`); the record's own modules define the field, `run` writes it."""
    allowed = {"evidence/link_state.py", "evidence/records.py", "evidence/rows.py", "commands/run.py",
               "cli/run.py", "commands/bisect.py", "commands/bisect_state.py", "evidence/capture.py"}  # fmt: skip
    found = []
    for path, tree in _modules():
        if path in allowed:
            continue
        for node in ast.walk(tree):
            key = node.slice if isinstance(node, ast.Subscript) else \
                node.args[0] if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "get" and node.args else None  # fmt: skip
            if isinstance(key, ast.Constant) and key.value == "tainted":
                found.append(f"{path}:{node.lineno} [{key.value!r}]")
    assert not found, found
