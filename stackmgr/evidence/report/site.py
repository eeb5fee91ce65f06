"""`stackmgr report -o DIR`, written here: a static HTML site to browse patch ↔ result
(docs/COMMANDS.md#recording-results).

Pages, all linked relatively so the directory works from file:// and can be copied anywhere:

- `index.html`: every series with its patches in order (tree, status, best fresh metric with that run's gates,
  link states), then the patches in no series (`index_page`);
- `patches/<name>.html`: header, description, diffstat, the diff, and beside it the evidence timeline (`patch_page`,
  `diff`);
- `artifacts/<slug>.html`: which links cite a result file, whether it still verifies, a preview of its text: the
  first 100 and the last 200 lines of a long log, error lines (Traceback, `…Error`, FAILED, Killed) and a Python
  traceback's frames marked, the error lines listed at the top with links to them (`artifact_page`);
- `results.html`: every link and every artifact in one table each (`results_page`);
- `graveyard.html`: rejected and do-not-revive lanes with their lessons, filtered client-side by a search box
  (`graveyard_page`); the navigation's count is of lanes, as the page's.

Every page names a result by one rule (evidence/link_state.py): a failed or tainted run is badged so, never shown
as a clean result, never the index's best metric; every page lists a result's metrics headline first
(`Markup.lead_metrics`).

`report --markdown FILE` writes the lessons page (`lessons_page`) from the same gathered data, alone or beside the
site; FILE is replaced atomically.

Stdlib only: everything is escaped with `html.escape`, no external assets. Each page carries a
Content-Security-Policy that runs no script at all, except the graveyard's own (allowed by its hash), so even a
missed escape could not execute (`assets`). The site is built in memory first (`model` gathers, the page modules
render); only then is DIR touched. DIR must be empty, new, or a previous report (marked by `.stackmgr-report`, which
also lists the files to remove on regeneration) (`site`).
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

from stackmgr.errors import StackmgrError
from stackmgr.evidence.report.artifact_page import ArtifactPage
from stackmgr.evidence.report.graveyard_page import GraveyardPage
from stackmgr.evidence.report.index_page import IndexPage
from stackmgr.evidence.report.lab_page import LiveTree
from stackmgr.evidence.report.lessons_page import LessonCounts, LessonsPage
from stackmgr.evidence.report.model import Site
from stackmgr.evidence.report.patch_page import PatchPage
from stackmgr.evidence.report.results_page import ResultsPage
from stackmgr.store.config import Store
from stackmgr.store.fs import atomic_write

MARKER = ".stackmgr-report"
MARKER_HEAD = "stackmgr report v1"


class Report(IndexPage, PatchPage, ArtifactPage, ResultsPage, GraveyardPage, LessonsPage):
    """The whole site and the lessons page: the store's data gathered once, and a builder for each kind of page."""

    def build(self) -> Site:
        from stackmgr import output

        output.progress_total(len(self.patches) + len(self.artifacts))
        pages: dict[str, bytes] = {}
        pages["index.html"] = self.index_page().encode("utf-8")
        pages["results.html"] = self.results_page().encode("utf-8")
        pages["graveyard.html"] = self.graveyard_page().encode("utf-8")
        for info in self.patches.values():
            output.tick()
            pages[info.page] = self.patch_page(info).encode("utf-8")
            if info.raw and info.data is not None:
                pages[info.raw] = info.data
        for art in self.artifacts.values():
            output.tick()
            pages[art.page] = self.artifact_page(art).encode("utf-8")
        return Site(pages, len(self.patches), len(self.links))


def _outside_store_data(store: Store, given: str, real: str) -> None:
    for sub in ("patches", "series", "links", ".stackmgr"):
        guarded = os.path.realpath(os.path.join(store.root, sub))
        if os.path.commonpath([guarded, real]) == guarded:
            raise StackmgrError(f"{given} is inside the store's {sub}/", "write the report somewhere else")


def _no_link_in_store(store: Store, directory: str) -> None:
    """A report written into the store (`report -o site` in it) never goes through a symlink a pull put there
    (`site -> ~/empty`, `docs -> ~`): one among the directories from the store's root to `directory` is refused."""
    rel = os.path.relpath(os.path.abspath(directory), os.path.abspath(store.root))
    if rel != os.curdir and rel != os.pardir and not rel.startswith(os.pardir + os.sep):
        from stackmgr.store.fs import refuse_links_below

        refuse_links_below(store.root, os.path.abspath(directory))


def check_target(store: Store, out_dir: str) -> str:
    """The absolute output directory, refusing one that is not ours to fill."""
    target = os.path.abspath(out_dir)
    _no_link_in_store(store, target)
    _outside_store_data(store, out_dir, os.path.realpath(target))
    if os.path.lexists(target) and not os.path.isdir(target):
        raise StackmgrError(f"{out_dir} exists and is not a directory", "pick a new directory for the report")
    if os.path.isdir(target):
        try:
            entries = os.listdir(target)
        except OSError as exc:
            raise StackmgrError(f"cannot read {out_dir}: {exc.strerror}", "check its permissions") from None
        if entries and MARKER not in entries:
            raise StackmgrError(f"{out_dir} is not empty and holds no earlier report",
                                "pick a new or empty directory (stackmgr report only overwrites its own)")  # fmt: skip
    return target


def _old_files(target: str) -> set[str]:
    from stackmgr.store.fs import read_or_none

    try:  # never through a link (`.stackmgr-report -> /dev/zero` in a report a pull brought): a regular file only
        lines = (read_or_none(os.path.join(target, MARKER)) or b"").decode("utf-8", "replace").split("\n")
    except (OSError, StackmgrError):
        return set()
    out = set()
    for line in lines[1:]:
        parts = line.split("/")
        if line and not line.startswith("/") and ".." not in parts and "" not in parts and line != MARKER:
            out.add(line)
    return out


def _write(path: str, data: bytes) -> None:
    """`path` replaced by a new file: the temp file is created exclusively, never through a symlink (a report kept
    in a pulled store may hold `index.html.<pid>.tmp -> ~/.bashrc` for every pid), and the rename replaces a link
    at `path` itself rather than writing where it points."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, flags, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_site(target: str, site: Site) -> None:
    """Put the pages in place; files an earlier report wrote and this one does not are removed."""
    try:
        os.makedirs(target, exist_ok=True)
        real = os.path.realpath(target)
        old = _old_files(target)
        new = set(site.pages)
        marker = MARKER_HEAD + "\n"
        _write(os.path.join(target, MARKER), (marker + "\n".join(sorted(old | new)) + "\n").encode("utf-8"))
        made: set[str] = set()
        for rel, data in sorted(site.pages.items()):
            directory = posixpath.dirname(rel)
            if directory and directory not in made:
                path = os.path.join(target, directory)
                os.makedirs(path, exist_ok=True)
                if os.path.realpath(path) != os.path.join(real, directory):
                    raise StackmgrError(f"{path} leads outside the report directory",
                                        "remove that symlink, or write the report to a new directory")  # fmt: skip
                made.add(directory)
            _write(os.path.join(target, rel), data)
        for rel in sorted(old - new):
            path = os.path.join(target, rel)
            if os.path.commonpath([real, os.path.realpath(path)]) == real and os.path.isfile(path):
                os.unlink(path)
        _write(os.path.join(target, MARKER), (marker + "\n".join(sorted(new)) + "\n").encode("utf-8"))
    except OSError as exc:
        raise StackmgrError(f"cannot write the report in {target}: {exc.strerror}",
                            "check the directory's permissions and free space") from None  # fmt: skip


def check_markdown_target(store: Store, file: str) -> tuple[str, str | None]:
    """The absolute path of the lessons page, and the real directory its artifact links are relative to (None when
    it is outside the store: links climbing out of it would hold on this machine only)."""
    target = os.path.abspath(file)
    _no_link_in_store(store, os.path.dirname(target))
    directory = os.path.realpath(os.path.dirname(target))
    _outside_store_data(store, file, os.path.join(directory, os.path.basename(target)))
    if os.path.isdir(target):
        raise StackmgrError(f"{file} is a directory", "give the Markdown file's path, e.g. DIR/lessons.md")
    if os.path.lexists(target) and not os.path.isfile(target):
        raise StackmgrError(f"{file} exists and is not a regular file", "pick another path for the lessons page")
    if not os.path.lexists(directory):  # as -o makes its directory: a docs folder a new store does not have yet
        try:
            os.makedirs(directory)
        except OSError as exc:
            raise StackmgrError(f"cannot create {os.path.dirname(file)}: {exc.strerror}",
                                "create it first, or pick another path") from None  # fmt: skip
        directory = os.path.realpath(directory)
    if not os.path.isdir(directory):
        raise StackmgrError(f"{os.path.dirname(file) or '.'} is not a directory", "create it first")
    root = os.path.realpath(store.root)
    return target, directory if os.path.commonpath([root, directory]) == root else None


@dataclass
class Written:
    dir: str | None  # the site's directory
    site: Site | None
    markdown: str | None  # the lessons page
    lessons: LessonCounts | None
    patches: int
    links: int


def write_report(store: Store, out_dir: str | None, markdown: str | None = None, title: str = "Lessons",
                 trees: list[LiveTree] | None = None) -> Written:  # fmt: skip
    """Check both targets, gather the store once and build in memory, then write the site and the lessons page."""
    target = check_target(store, out_dir) if out_dir is not None else None
    page = check_markdown_target(store, markdown) if markdown is not None else None
    report = Report(store)
    site = report.build() if target is not None else None
    lessons = report.lessons_markdown(page[1], title, trees) if page is not None else None
    if target is not None and site is not None:
        write_site(target, site)
    if page is not None and lessons is not None:
        atomic_write(page[0], lessons[0].encode("utf-8"))
    return Written(target, site, page[0] if page else None, lessons[1] if lessons else None, len(report.patches),
                   len(report.links))  # fmt: skip
