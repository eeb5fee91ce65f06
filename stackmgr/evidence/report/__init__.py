"""`stackmgr report -o DIR`: a static HTML site to browse patch ↔ result (README.md, "Recording results").

Pages, all linked relatively so the directory works from file:// and can be copied anywhere:

- `index.html`: every series with its patches in order (tree, status, best fresh metric, gates, link states), then
  the patches in no series (`index_page`);
- `patches/<name>.html`: header, description, diffstat, the diff, and beside it the evidence timeline (`patch_page`,
  `diff`);
- `artifacts/<slug>.html`: which links cite a result file, whether it still verifies, a preview of its text
  (`artifact_page`);
- `results.html`: every link and every artifact in one table each (`results_page`);
- `graveyard.html`: rejected and do-not-revive lanes with their lessons, filtered client-side by a search box
  (`graveyard_page`).

Stdlib only: everything is escaped with `html.escape`, no external assets. Each page carries a
Content-Security-Policy that runs no script at all, except the graveyard's own (allowed by its hash), so even a
missed escape could not execute (`assets`). The site is built in memory first (`model` gathers, the page modules
render); only then is DIR touched. DIR must be empty, new, or a previous report (marked by `.stackmgr-report`, which
also lists the files to remove on regeneration) (`site`).
"""

from __future__ import annotations

from stackmgr.evidence.report.model import Site
from stackmgr.evidence.report.site import Report, check_target, write_report, write_site

__all__ = ["Report", "Site", "check_target", "write_report", "write_site"]
