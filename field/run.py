#!/usr/bin/env python3
"""The field suite: stackmgr against git and quilt on real data nobody here wrote.

    debian   Debian source packages (3.0 quilt): the pristine upstream tarball as a git repository, its
             debian/patches series brought in by `stackmgr import` + `stackmgr apply` vs `quilt push -a`
    export   `stackmgr export debian --quilt DIR`, then `quilt push -a` of DIR vs the Debian series by quilt
    am       the same series as `git format-patch` mails (quilt push + commit per patch): `stackmgr import`
             + `stackmgr apply` vs `git am`
    rebase   consecutive PyPI releases of small projects as commits, a release's real changes carried as a
             stack of per-file patches: `stackmgr rebase S --onto REV` vs `git rebase` of the same commits
    submodule  one project's releases carrying another's as a submodule; a branch that bumps it and changes a
             file: import + apply vs `git am`, rebase + apply vs `git rebase` (upstream bumped it too, or not)

A case agrees when both sides build the same working-tree id (or both refuse). A disagreement listed in
field/known.toml (with its reason) is reported but excused; any other makes the run exit 1 (2: a case could not
be built, e.g. no network and nothing cached). Downloads are cached in $STACKMGR_FIELD_CACHE or
~/.cache/stackmgr-field (or --cache DIR); a warm run downloads nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import debian, history, submodules
from harness.cases import Result, exit_code, known_reason, load_known, render, summary
from harness.fetch import Cache, default_cache
from harness.sh import Env, FieldError

SUITES = ("debian", "export", "am", "rebase", "submodule")
KNOWN = Path(__file__).resolve().parent / "known.toml"
RAM_TEMP = "/dev/shm"


def ram_temp() -> str | None:
    """/dev/shm when nobody chose a TMPDIR and it has 4 GiB free (as the tests do): stackmgr syncs what it writes,
    so on a busy disk the run would wait on I/O more than it works."""
    if os.environ.get("TMPDIR"):
        return None
    try:
        ram = os.statvfs(RAM_TEMP)
    except OSError:
        return None
    return RAM_TEMP if ram.f_bavail * ram.f_frsize >= 4 << 30 and os.access(RAM_TEMP, os.W_OK | os.X_OK) else None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, help="download cache (default $STACKMGR_FIELD_CACHE or "
                        "~/.cache/stackmgr-field)")  # fmt: skip
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a new temporary one, removed)")
    parser.add_argument("--known", type=Path, default=KNOWN, help="known differences (default field/known.toml)")
    parser.add_argument("--only", action="append", default=[],
                        help="run only cases whose package or project has this name (repeatable)")  # fmt: skip
    parser.add_argument("--skip-debian", action="store_true", help="no Debian cases (debian, export, am)")
    parser.add_argument("--skip-rebase", action="store_true", help="no PyPI release-history cases")
    parser.add_argument("-v", "--verbose", action="store_true", help="per-patch detail of agreeing cases too")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    known = load_known(args.known)
    cache = Cache((args.cache or default_cache()).expanduser().resolve())
    scratch = args.workdir.resolve() if args.workdir else Path(tempfile.mkdtemp(prefix="stackmgr-field-",
                                                                               dir=ram_temp()))  # fmt: skip
    results: list[Result] = []
    broken: list[str] = []
    try:
        env = Env.hermetic(scratch)
        jobs: list[tuple[str, Callable[[Env, Cache, str, Path], list[Result]]]] = []
        if not args.skip_debian:
            jobs += [(p, debian.run_package) for p in debian.PACKAGES]
        if not args.skip_rebase:
            jobs += [(p.label, history.run_project) for p in history.PROJECTS]
            jobs += [(pair[0] + "+" + pair[1], submodules.run_pair) for pair in submodules.PAIRS]
        for name, job in jobs:
            if args.only and name not in args.only:
                continue
            t0 = time.monotonic()
            try:
                got = job(env, cache, name, scratch / name)
            except FieldError as exc:
                broken.append(f"{name}: {exc}")
                print(f"field: {name}: could not build: {exc}", file=sys.stderr, flush=True)
                continue
            if not args.workdir:
                shutil.rmtree(scratch / name, ignore_errors=True)
            for r in got:
                r.known = known_reason(known, r)
            results += got
            agreed = sum(r.agree for r in got)
            print(f"field: {name}: {agreed}/{len(got)} agree ({time.monotonic() - t0:.1f} s)", file=sys.stderr,
                  flush=True)  # fmt: skip
    except FieldError as exc:
        print(f"field: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if not args.workdir:
            shutil.rmtree(scratch, ignore_errors=True)
    print(render(results, args.verbose))
    print(f"\n({time.monotonic() - started:.0f} s; {cache.downloads} downloads into {cache.root})")
    for line in broken:
        print(f"could not build: {line}")
    print(summary(results, SUITES))
    if broken:
        return 2
    return exit_code(results)


if __name__ == "__main__":
    sys.exit(main())
