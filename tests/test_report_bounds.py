"""A patch with hundreds of runs and a store of thousands of records give pages of bounded size: the newest links
whole, older ones one line each (their anchors kept), and the results page the newest links and artifacts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stackmgr.evidence.report import patch_page, results_page
from tests.conftest import Lab, link_id


@pytest.fixture
def many_links(evidence_lab: Lab, monkeypatch: pytest.MonkeyPatch) -> tuple[Lab, list[str]]:
    """Seven results of replay-fix, linked one after another; pages bounded at 3 cards and 2 older rows."""
    monkeypatch.setattr(patch_page, "CARDS", 3)
    monkeypatch.setattr(patch_page, "OLDER_ROWS", 2)
    monkeypatch.setattr(results_page, "RESULTS_ROWS", 4)
    results = evidence_lab.store / "results"
    ids = []
    for n in range(7):
        (results / f"run{n}.json").write_text(json.dumps({"output_throughput": 100.0 + n}))
        ids.append(link_id(evidence_lab, "replay-fix", f"results/run{n}.json"))
    return evidence_lab, ids


def test_a_patch_page_shows_its_newest_links_whole_and_the_older_ones_a_line_each(
    many_links: tuple[Lab, list[str]], tmp_path: Path
) -> None:
    lab, ids = many_links
    assert lab.sm("report", "-o", str(tmp_path / "site")).code == 0
    page = (tmp_path / "site" / "patches" / "replay-fix.html").read_text()
    cards = re.findall(r'<article class="card[^"]*" id="(lnk-[0-9a-f]+)"', page)
    rows = re.findall(r'<tr id="(lnk-[0-9a-f]+)"', page)
    assert cards == ids[::-1][:3]  # newest first, whole
    assert rows == ids[::-1][3:5]  # the next two a line each, still anchored for links from other pages
    assert "4 older links, one line each" in page
    assert "2 older links not shown: <code>stackmgr show replay-fix</code> lists every one" in page
    assert ids[0] not in page  # the oldest: only `show` lists it


def test_the_results_page_lists_the_newest_links_and_says_where_the_rest_are(
    many_links: tuple[Lab, list[str]], tmp_path: Path
) -> None:
    lab, ids = many_links
    assert lab.sm("report", "-o", str(tmp_path / "site")).code == 0
    page = (tmp_path / "site" / "results.html").read_text()
    listed = [i for i in ids if i in page]
    assert listed == ids[3:]  # the newest four
    assert "The newest 4 links; the 3 older ones are on their patches' pages" in page
    assert re.search(r"The 4 artifacts of the newest links; the \d+ others are on their links' cards", page)
