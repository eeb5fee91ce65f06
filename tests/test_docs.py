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
