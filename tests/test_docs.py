"""The repository explains itself: code and docs cite only documents that are in it.

The product specification, research notes and issue threads the project grew from are not shipped with the
repository, so a comment saying "see SPEC §3.1" sends the reader nowhere. Code cites docs/FORMATS.md,
docs/ARCHITECTURE.md and docs/RELIABILITY.md sections instead (or states the fact), and every `docs/X.md#section`
it cites must be a heading of that file, so a renamed heading or a moved module shows up here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve()

# Citations of text outside the repository: the specification, research notes, issue threads.
EXTERNAL = re.compile(r"\bSPEC\b|research/|anchors-[a-z-]+\.md|\b[Ii]ssues? #?\d+")
# A document of the repository, optionally with a section: docs/FORMATS.md#patch-file. Under stackmgr/ and bench/
# any docs/X.md counts; in tests only upper-case names do (tests build trees holding docs/a.md and the like).
CODE_DOC = re.compile(r"(?<![\w/.-])(docs/[\w.-]+\.md)(?:#([\w-]+))?")
TEST_DOC = re.compile(r"(?<![\w/.-])(docs/[A-Z][A-Z_]*\.md)(?:#([\w-]+))?")
# In the Markdown docs: FORMATS.md#exit-codes (beside it in docs/), docs/FORMATS.md#…, README.md#…
MD_DOC = re.compile(r"(?<![\w/.-])((?:docs/)?[A-Z][A-Z_]*\.md)(?:#([\w-]+))?")
# Source files the docs name by path (stackmgr/safety/shards.py, tests/test_roundtrip_property.py, …).
MD_SOURCE = re.compile(r"(?<![\w/.-])((?:stackmgr|tests|bench)/[\w/.-]*\.py)\b")


def _code_files() -> list[Path]:
    files = [*sorted((ROOT / "stackmgr").rglob("*.py")), *sorted((ROOT / "bench").glob("*.py")),
             *sorted((ROOT / "tests").rglob("*.py"))]  # fmt: skip
    return [f for f in files if f.resolve() != HERE]


def _markdown_files() -> list[Path]:
    # bench/RESULTS.md is left out: a log of measurements whose headings name the milestone each was taken at.
    return [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def slug(heading: str) -> str:
    """The anchor GitHub (and most Markdown renderers) give a heading: lower case, punctuation dropped, spaces to
    hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    """The anchors of every heading of a Markdown file (lines in ``` fences are not headings)."""
    found: set[str] = set()
    fenced = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} +(.+?) *#* *$", line)):
            found.add(slug(m.group(1)))
    return found


def _citations(path: Path, pattern: re.Pattern[str]) -> list[tuple[int, str, str | None]]:
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        for m in pattern.finditer(line):
            out.append((lineno, m.group(1), m.group(2) if pattern.groups > 1 else None))
    return out


def _check_target(where: str, doc: Path, shown: str, anchor: str | None, problems: list[str]) -> None:
    if not doc.is_file():
        problems.append(f"{where}: {shown} is not a file of the repository")
    elif anchor is not None and anchor not in anchors(doc):
        problems.append(f"{where}: {shown}#{anchor}: {_rel(doc)} has no such heading")


def test_code_cites_no_document_outside_the_repository() -> None:
    problems = []
    for path in _code_files():
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for m in EXTERNAL.finditer(line):
                problems.append(f"{_rel(path)}:{lineno}: '{m.group(0)}' cites text that is not in the repository")
    for path in _markdown_files():
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for m in EXTERNAL.finditer(line):
                problems.append(f"{_rel(path)}:{lineno}: '{m.group(0)}' cites text that is not in the repository")
    assert not problems, (
        "cite docs/FORMATS.md, docs/ARCHITECTURE.md or docs/RELIABILITY.md (a section: docs/FORMATS.md#patch-file),"
        " or state the fact in a few words:\n" + "\n".join(problems)
    )


def test_every_cited_document_and_section_exists() -> None:
    problems: list[str] = []
    for path in _code_files():
        pattern = TEST_DOC if path.is_relative_to(ROOT / "tests") else CODE_DOC
        for lineno, doc, anchor in _citations(path, pattern):
            _check_target(f"{_rel(path)}:{lineno}", ROOT / doc, doc, anchor, problems)
    for path in _markdown_files():
        for lineno, doc, anchor in _citations(path, MD_DOC):
            beside = path.parent / doc  # in docs/, FORMATS.md is the one beside; else relative to the root
            target = beside if path.parent != ROOT and not doc.startswith("docs/") and beside.is_file() else ROOT / doc
            _check_target(f"{_rel(path)}:{lineno}", target, doc, anchor, problems)
        for lineno, source, _none in _citations(path, MD_SOURCE):
            if not (ROOT / source).is_file():
                problems.append(f"{_rel(path)}:{lineno}: {source} is not a file of the repository")
    assert not problems, "fix the citation or the heading it names:\n" + "\n".join(problems)


def test_formats_sections_cited_by_code_are_headings() -> None:
    """Every `docs/FORMATS.md#anchor` in the code names a heading of docs/FORMATS.md (the sections code cites
    are the ones that must keep their names), and the code cites some."""
    headings = anchors(ROOT / "docs" / "FORMATS.md")
    cited = {
        (f"{_rel(path)}:{lineno}", anchor)
        for path in _code_files()
        for lineno, doc, anchor in _citations(path, CODE_DOC)
        if doc == "docs/FORMATS.md" and anchor is not None
    }
    assert cited, "no code cites docs/FORMATS.md sections: is the pattern still right?"
    missing = sorted(f"{where}: docs/FORMATS.md#{anchor}" for where, anchor in cited if anchor not in headings)
    assert not missing, "no such heading in docs/FORMATS.md:\n" + "\n".join(missing)


def test_slug_matches_the_headings_in_use() -> None:
    assert slug("Patch file") == "patch-file"
    assert slug("State in each tree") == "state-in-each-tree"
    assert slug("Kept versions (patches/.versions)") == "kept-versions-patchesversions"
    assert "patch-file" in anchors(ROOT / "docs" / "FORMATS.md")
    assert "comment-lines-start-in-column-0" not in anchors(ROOT / "docs" / "FORMATS.md")  # inside a ``` fence


# A module named by its file name alone, in a comment, docstring or doc (`claims.py`, `fsutil.py`): it must still
# exist somewhere in the repository, so a renamed module does not leave readers looking for the old one.
BARE_MODULE = re.compile(r"(?<![\w/.-])([a-z_][a-z0-9_]*\.py)\b")
ANY_NAME_OK = {"setup.py", "conftest.py", "__init__.py", "__main__.py"}


def _prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of what a reader reads as prose: all of a Markdown file or of stackmgr's code and bin/stackmgr
    (its own strings name no made-up files); in tests only docstrings and comments (tests make files like x.py)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py" or not _rel(path).startswith("tests/"):
        return list(enumerate(text.splitlines(), 1))
    import ast
    import io
    import tokenize

    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(text).readline)
             if tok.type == tokenize.COMMENT]  # fmt: skip
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.extend((first.lineno + i, line) for i, line in enumerate(str(first.value.value).splitlines()))
    return found


def test_modules_named_by_file_name_exist() -> None:
    names = {p.name for d in ("stackmgr", "tests", "bench") for p in (ROOT / d).rglob("*.py")} | ANY_NAME_OK
    stale = [
        f"{_rel(path)}:{n}: {match.group(1)}"
        for path in [*_code_files(), *_markdown_files(), ROOT / "bin" / "stackmgr"]
        for n, line in _prose(path)
        for match in BARE_MODULE.finditer(line)
        if match.group(1) not in names
    ]
    assert not stale, "no such module any more:\n" + "\n".join(stale)
