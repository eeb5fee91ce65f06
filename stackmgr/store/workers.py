"""Work spread over forked processes, for a first reading of thousands of files (evidence/reading.py): each
worker is a copy of the command (what it has read and opened it has too), takes job numbers and sends back what
each gave, in any order. Where fork is not the way to start a process (not Linux), or one CPU is all there is,
the jobs run here, one after another."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

MAX_WORKERS = 8

_job: Callable[[int], Any] | None = None  # what a forked worker runs: set before the fork, inherited


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def fork_map(job: Callable[[int], Any], count: int) -> Iterator[Any]:
    """job(0) … job(count - 1), in worker processes when there are several CPUs; results as they come."""
    workers = min(cpus(), MAX_WORKERS, count)
    if workers < 2 or not sys.platform.startswith("linux"):
        yield from map(job, range(count))
        return
    import multiprocessing

    global _job
    _job = job
    try:
        with multiprocessing.get_context("fork").Pool(workers, initializer=_quiet) as pool:
            yield from pool.imap_unordered(_run, range(count))
    finally:
        _job = None


def _quiet() -> None:
    """A worker leaves Ctrl-C to the command, which stops the pool (no traceback from each worker)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run(i: int) -> Any:
    assert _job is not None
    return _job(i)
