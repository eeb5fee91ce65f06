#!/usr/bin/env python3
"""Every stackmgr benchmark in one command: `python bench/run.py` (add `--smoke` for the small CI version).

Runs, one after the other (each builds its own workloads from the seed, warms up, repeats, and prints a table of
medians, ratios against git or quilt measured in the same run, targets and PASS/FAIL):

    bench_check_save.py   check vs `git status`; save vs the raw git pipeline (typical and release-size, with
                          the release-size save's peak RSS); start-up context
    bench_apply.py        apply of 40 patches vs `quilt push -a` and a `git apply` loop
    bench_scale.py        apply of 40/400/2,000 patches; check, links, show, status --json and report on a
                          5,000-patch / 20,000-link store; start-up and heavy imports
    bench_import.py       on the field suite's real data (Debian quilt series, PyPI release histories):
                          import vs `git am`, import + apply vs `quilt push -a`, rebase vs `git rebase`
    bench_evidence.py     `run --link` overhead; show, links and compare on 20,000 link records
    bench_real.py         on a real tree (vLLM 0.33.0 with 0.34.0's changes, sdists cached from PyPI): check vs
                          `git status`, release-size save vs the raw git pipeline (and its peak RSS), status vs
                          `git status` + `git diff --numstat`, apply of a real 40-patch series vs a `git apply` loop
    bench_scaling.py      past one machine, by simulation: check, status, save vs git on Chromium-shaped trees of
                          10,000-100,000 files, with git's big-tree settings and 10-10,000 changes; check, links,
                          show, status and report on stores of 5,000-50,000 patches; each command's growth

Then a summary of every target. Exit 1 when a target fails (never with --smoke), 2 when a benchmark could not
measure. Needs the `stackmgr` command on PATH (a non-editable install measures what users run) and quilt.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_apply
import bench_check_save
import bench_evidence
import bench_import
import bench_real
import bench_scale
import bench_scaling

BENCHES = (("check and save", bench_check_save.main), ("apply", bench_apply.main), ("scale", bench_scale.main),
           ("import and rebase", bench_import.main), ("evidence", bench_evidence.main),
           ("real trees", bench_real.main), ("scaling", bench_scaling.main))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    codes, verdicts = [], []
    for label, bench in BENCHES:
        print(f"\n## {label}\n", flush=True)
        started = time.monotonic()
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            code = bench(args)
        text = captured.getvalue()
        sys.stdout.write(text)
        print(f"\n({label}: {time.monotonic() - started:.0f} s, exit {code})", flush=True)
        codes.append(code)
        verdicts += [(label, m.group(1).strip(), m.group(2)) for m in
                     re.finditer(r"^\| (.+?) \|[^|\n]*\|[^|\n]*\|[^|\n]*\| (PASS|FAIL) \|$", text, re.M)]  # fmt: skip
    print("\n## targets\n")
    for label, name, verdict in verdicts:
        print(f"{verdict}  {label}: {name}")
    passed = sum(v == "PASS" for _, _, v in verdicts)
    print(f"\n{passed} of {len(verdicts)} targets PASS" if verdicts else "\nno targets judged (smoke run)")
    if 2 in codes:
        return 2
    return 1 if 1 in codes else 0


if __name__ == "__main__":
    sys.exit(main())
