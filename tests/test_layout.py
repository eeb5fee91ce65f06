"""The shape of the code (docs/ARCHITECTURE.md): packages by concern, git command lines only in `stackmgr.git`,
no import cycles, small modules. Each rule is read from the source, so breaking it fails here, naming where."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "stackmgr"
PACKAGES = {"cli", "commands", "evidence", "git", "incoming", "journal", "safety", "store"}
# The process runner: whoever imports it can build a git command line. Only stackmgr.git may.
RUNNER = {"stackmgr.git.runner", "stackmgr.git.process"}
# A program other than git: demo runs `python -m stackmgr` as a user would. (rebase --exec runs the user's own
# command through git/worktree.py, beside the scratch worktree's git operations.)
SUBPROCESS_ALLOWED = {"stackmgr.commands.demo", "stackmgr.evidence.capture",
                      "stackmgr.evidence.gates"}  # `run`: the user's benchmark, a gate's command on its result


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import that runs: module level and inside functions, not `if TYPE_CHECKING:`."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base))
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        graph[name] = {m for _, m in imports(path) if m in known and m != name and m != "stackmgr"}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_package_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_top_level_holds_packages_and_at_most_eight_modules() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 8, f"modules directly under stackmgr/: {top}"
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages == PACKAGES


def test_every_package_init_is_empty_so_imports_stay_lazy() -> None:
    full = [str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("__init__.py")
            if p.parent != PACKAGE and p.read_text().strip()]  # fmt: skip
    assert full == [], "\n".join(full)


def test_no_module_is_over_400_lines() -> None:
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > 400}
    assert long == {}


def test_git_command_lines_are_built_only_in_the_git_package() -> None:
    offenders = []
    for name, path in modules().items():
        if name.startswith("stackmgr.git"):
            continue
        for line, module in imports(path):
            if module in RUNNER or (module == "subprocess" and name not in SUBPROCESS_ALLOWED):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.List | ast.Tuple) and node.elts:
                first = node.elts[0]
                if isinstance(first, ast.Constant) and first.value == "git":
                    offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} builds a git command line")
    assert offenders == [], "\n".join(offenders)


def test_the_command_line_layer_reaches_git_and_the_journal_only_through_commands() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}"
        for name, path in modules().items()
        if name.startswith("stackmgr.cli.")
        for line, module in imports(path)
        if module.startswith(("stackmgr.git", "stackmgr.journal"))
    ]
    assert offenders == [], "\n".join(offenders)


# Each package may import only from its own rank or below (docs/ARCHITECTURE.md#packages). The base below git:
# domain errors, id types, stdout/stderr, and store/fs.py (atomic files, locks, marshal caches: a leaf).
BASE = {"stackmgr", "stackmgr.errors", "stackmgr.types", "stackmgr.output", "stackmgr.store.fs"}
RANK = {"git": 1, "store": 2, "safety": 3, "incoming": 3, "journal": 4, "evidence": 5, "commands": 6, "cli": 7}


def rank(module: str) -> int:
    if module in BASE or (module.count(".") == 1 and module.split(".")[1] not in RANK):
        return 0
    return RANK[module.split(".")[1]]


def test_packages_import_only_downwards() -> None:
    every = modules()  # once: a walk of the package per import made this test the slowest of the quick suite
    upward = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}"
        for name, path in every.items()
        if name not in BASE and rank(name) > 0
        for line, module in imports(path)
        if module in every and rank(module) > rank(name)
    ]
    assert upward == [], "\n".join(upward)
