"""Rendering: data to stdout, diagnostics to stderr, colour only on a TTY and never with NO_COLOR."""

from __future__ import annotations

import os
import sys

from stackmgr.types import show_path

TYPE_CHECKING = False  # mypy treats this as true; `typing` stays out of `check`'s start-up
if TYPE_CHECKING:
    from typing import Any, TextIO

    from stackmgr.commands.status import TreeReport

_CODES = {"red": "31", "green": "32", "yellow": "33", "bold": "1", "dim": "2"}


def color_on(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def paint(text: str, style: str, stream: TextIO | None = None) -> str:
    return f"\x1b[{_CODES[style]}m{text}\x1b[0m" if color_on(stream or sys.stdout) else text


def out_bytes(data: bytes) -> None:
    """Bytes to stdout as they are (a patch is bytes end to end); decoded only where stdout has no buffer."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(data.decode("utf-8", "surrogateescape"))
        return
    sys.stdout.flush()
    buffer.write(data)
    buffer.flush()


def out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def err(line: str) -> None:
    sys.stderr.write(line + "\n")


def emit_json(data: dict[str, Any]) -> None:
    import json

    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n")


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


_KIND_LETTER = {"added": "A", "deleted": "D", "modified": "M", "mode": "m", "typechange": "T",
                "modified+mode": "M", "submodule": "S"}  # fmt: skip


def _measured_head(a: dict[str, Any], head: str) -> str:
    """The applied state `apply --link` recorded: the link, the patches (of the series it names, and others), and
    the residue on top, which is in no patch."""
    m, n = a["measured"], len(a["patches"])
    if not a["series"]:
        top = f", top {a['top']}" if a.get("top") else ""
        head = f"  {n} patch{'es' if n != 1 else ''} applied{top} (on {a['base'][:12]}, no series)"
    others = m.get("not_in_series") or []
    head += f" + {', '.join(others)} (not in {a['series']})" if others else ""
    if m.get("residue"):
        kept = "kept in " + m["residue"] if m.get("residue_kept") else paint("its file is missing or damaged", "red")
        return head + f" + the residue of {m['link']} (in no patch; {kept})"
    return head + f" (the measured state of {m['link']})"


def render_status(report: TreeReport) -> None:
    out(paint(report.name, "bold") + f"  {report.path}")
    if report.state != "ok" or report.snapshot is None or report.assessment is None:
        out(f"  {paint(report.state, 'yellow')}: {report.error}")
        return
    snap, found = report.snapshot, report.assessment
    out(f"  HEAD {snap.head[:12]}" + (f"  ({snap.operation} in progress)" if snap.operation else ""))
    for warning in report.warnings:
        out("  " + paint(f"note: {warning}", "yellow"))
    if report.applied:
        a = report.applied
        top = f", top {a['top']}" if a.get("top") else ""
        count = a.get("in_series", len(a["patches"]))  # an applied patch the series lost since is said below
        head = f"  {a['series']}: {count} of {a.get('total', len(a['patches']))} applied{top} (on {a['base'][:12]})"
        if a.get("measured"):
            head = _measured_head(a, head)
        edited = a.get("series_edited") or []
        if a["drift"]:
            shown = ", ".join(a["drift"][:5]) + (" …" if len(a["drift"]) > 5 else "")
            out(head + " — " + paint(f"{len(a['drift'])} path(s) differ since: {shown}", "yellow"))
        if edited:
            shown = "; ".join(edited[:4]) + (" …" if len(edited) > 4 else "")
            lead = "  " if a["drift"] else head + " — "
            out(lead + paint(f"the series was edited since: {shown}", "yellow")
                + f" (`stackmgr apply {a['series']}` applies it as it is now)")  # fmt: skip
        if a["matches"]:
            out(head + " — tree matches")
    blockers = report.blockers
    if not snap.changes:
        out("  no changes against HEAD")
    else:
        unpreserved = len({path for path, _why in blockers})  # a path with two findings is one path
        verdict = paint(f"{unpreserved} not preserved", "red") if blockers else paint("all preserved", "green")
        out(f"  {len(snap.changes)} changed, {verdict}")
        width = min(60, max(len(show_path(c.path)) for c in snap.changes))
        for c in snap.changes:
            stat = report.numstat.get(c.path)
            counts = f"+{stat[0]} -{stat[1]}" if stat else ("binary" if c.path in report.numstat else "")
            owners = found.preserved.get(c.path)
            where = ("saved in " + ", ".join(owners)) if owners else paint("NOT PRESERVED", "red")
            if owners and owners[0].startswith("residue of "):  # kept by content under artifacts/, no patch
                where = f"kept as the {owners[0]} (no patch)"
            out(f"    {_KIND_LETTER.get(c.kind, '?')} {show_path(c.path):<{width}}  {counts:>12}  {where}")
    other = [(p, why) for p, why in blockers if why not in _KIND_LETTER]
    for path, why in other:
        out(f"    ! {show_path(path)}  {paint(why, 'red')}")
    for u in snap.unprotected:
        size = f", {human_size(u.size)}" if u.size else ""
        out(f"  unprotected: {show_path(u.path)} ({u.reason}{size}; never saved, never deleted)")
    present = [(n, hit, total) for n, (hit, total) in sorted(found.presence.items()) if hit]
    for name, hit, total in present:
        out(f"  patch {name}: " + ("fully present" if hit == total else f"partly present ({hit}/{total} files)"))


def render_blockers(name: str, blockers: list[tuple[bytes, str]]) -> None:
    for path, why in blockers:
        out(f"{name}: {show_path(path)} ({why})")


class activity:  # lower-case: used like a function, `with activity("saving"):`
    """Shown on stderr once the work has run for a second: a rich spinner, or a progress bar once the work says
    how much there is (`progress_total(n)`, then `tick()` per item, from wherever the work is done). Nothing at
    all when stderr is not a terminal, or when the work is done within the second. One at a time (rich allows
    one live display)."""

    current: activity | None = None
    DELAY = 1.0

    def __init__(self, message: str) -> None:
        self.message = message
        self._live: Any = None  # the rich Status or Progress on screen
        self._task: Any = None
        self._total: int | None = None
        self._done = 0
        self._closed = False
        self._lock: Any = None
        self._timer: Any = None

    def __enter__(self) -> activity:
        if sys.stderr.isatty() and os.environ.get("TERM") != "dumb" and activity.current is None:
            import threading

            activity.current = self
            self._lock = threading.Lock()
            self._timer = threading.Timer(self.DELAY, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self

    def _show(self) -> None:
        with self._lock:
            if self._closed or self._live is not None:
                return
            from rich.console import Console

            console = Console(stderr=True, highlight=False)
            if self._total is None:
                self._live = console.status(self.message)
                self._live.__enter__()
            else:
                self._start_bar(console)

    def _start_bar(self, console: Any) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

        self._live = Progress(SpinnerColumn(), TextColumn(self.message), BarColumn(), MofNCompleteColumn(),
                              transient=True, console=console)  # fmt: skip
        self._live.__enter__()
        self._task = self._live.add_task(self.message, total=self._total, completed=self._done)

    def total(self, n: int) -> None:
        if self._lock is None:
            return
        with self._lock:
            if self._total is not None:
                return
            self._total = n
            if self._live is not None and self._task is None:  # the spinner is up: it becomes a bar
                console = self._live.console
                self._live.__exit__(None, None, None)
                self._start_bar(console)

    def tick(self, n: int = 1) -> None:
        if self._lock is None:
            return
        with self._lock:
            self._done += n
            if self._task is not None:
                self._live.update(self._task, completed=self._done)

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            self._timer.cancel()
            with self._lock:
                self._closed = True
                if self._live is not None:
                    self._live.__exit__(None, None, None)
        if activity.current is self:
            activity.current = None


def progress_total(n: int) -> None:
    """The running activity (if any, on a terminal) becomes a bar of `n` steps."""
    if activity.current is not None:
        activity.current.total(n)


def tick(n: int = 1) -> None:
    if activity.current is not None:
        activity.current.tick(n)
