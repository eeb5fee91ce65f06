"""Rendering: data to stdout, diagnostics to stderr, colour only on a TTY and never with NO_COLOR.

Terminal safety (docs/SECURITY.md): text meant for a terminal goes through `for_terminal`, so a string from the store (a
Subject, a gate name, a series comment, a journal command) can never move the cursor, set the window title, clear
the screen or reorder a line: C0 and C1 controls, DEL, bidi embeddings/overrides/isolates/marks, line separators and
lone surrogates are shown as `\\x1b`, `\\u202e`, `\\xNN`. `out` and `err` apply it; while a command runs
(cli/entry.py) sys.stdout and sys.stderr are `TerminalStream`s that apply it to every other write too, so no command
can forget. The colours stackmgr asks for survive: `paint` marks them with a token no store file can hold (it holds
a random number drawn by this process), and only that token becomes a colour code, after the escaping. JSON and a
patch's bytes piped elsewhere go out exact (`emit_json`, `out_bytes`).
"""

from __future__ import annotations

import os
import sys

from stackmgr.types import show_path

TYPE_CHECKING = False  # mypy treats this as true; `typing` stays out of `check`'s start-up
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, TextIO

    from stackmgr.commands.status import TreeReport

_CODES = {"red": "31", "green": "32", "yellow": "33", "bold": "1", "dim": "2"}
_SGR = frozenset([*_CODES.values(), "0"])
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))  # marks, embeddings, isolates
_tables: list[dict[int, str]] = []  # [one line, layout kept]: built on first use (check's quiet path needs none)
_mark: list[str] = []  # paint's token, drawn on first use


def _escapes() -> list[dict[int, str]]:
    if not _tables:
        one = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}
        one.update({0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"})
        one.update({c: f"\\u{c:04x}" for c in (*range(0x80, 0xA0), 0x2028, 0x2029, *_BIDI, *range(0xD800, 0xE000))})
        one.update({c: f"\\x{c - 0xDC00:02x}" for c in range(0xDC80, 0xDD00)})  # an undecodable byte, as show_path
        layout = {c: shown for c, shown in one.items() if c not in (0x09, 0x0A)}  # the lines and columns we print
        _tables.extend((one, layout))
    return _tables


def show_text(text: str) -> str:
    """A string from the store as the user reads it, always on one line (as `show_path` shows a file name):
    control characters, bidi controls and undecodable bytes appear as \\n, \\t, \\r, \\xNN or \\uNNNN."""
    return text if text.isprintable() else text.translate(_escapes()[0])


def for_terminal(text: str) -> str:
    """`text` as it may reach a terminal: newlines and tabs kept, everything else a terminal acts on escaped, and
    paint's tokens (only those) turned into the colour codes they stand for."""
    if not _mark or _mark[0] not in text:
        return _screen(text)
    first, *painted = text.split(_mark[0])
    shown = [_screen(first)]
    for piece in painted:
        code, m, rest = piece.partition("m")
        if m and code in _SGR:
            shown.append(f"\x1b[{code}m")
            piece = rest
        shown.append(_screen(piece))
    return "".join(shown)


def _screen(text: str) -> str:
    return text if text.isprintable() else text.translate(_escapes()[1])


class TerminalStream:
    """sys.stdout or sys.stderr while a command runs (cli/entry.py): every text written goes through
    `for_terminal`, whoever writes it (a module printing a warning, click, a traceback with --debug). The stream
    underneath is `raw`: JSON, a patch's bytes and rich's live display write there."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # let the stream underneath refuse it as it would
            return self.raw.write(text)
        self.raw.write(for_terminal(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, buffer…: the stream's own
        return getattr(self.raw, name)


def raw_stream(stream: TextIO) -> TextIO:
    """The stream under a TerminalStream (else the stream itself): for what must go out exact."""
    return stream.raw if isinstance(stream, TerminalStream) else stream


def _write(stream: TextIO, text: str) -> None:
    if isinstance(stream, TerminalStream):
        stream.write(text)
    else:  # not inside a command (a library call, a captured report): escaped all the same
        stream.write(for_terminal(text))


def color_on(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def paint(text: str, style: str, stream: TextIO | None = None) -> str:
    """`text` in a colour, on a terminal that shows colour. The colour is a token that `for_terminal` turns into
    its code when the line is written: a code inside `text` (from the store) is escaped like any other."""
    if not color_on(stream or sys.stdout):
        return text
    if not _mark:
        _mark.append("\x1b" + os.urandom(8).hex() + "[")  # unguessable: store files were written before it was drawn
    return f"{_mark[0]}{_CODES[style]}m{text}{_mark[0]}0m"


def out_bytes(data: bytes) -> None:
    """Bytes to stdout as they are (a patch is bytes end to end) for a file or a pipe, decoded only where stdout has
    no buffer; on a terminal, escaped as text is (a diff can carry any byte)."""
    stream = raw_stream(sys.stdout)
    buffer = getattr(stream, "buffer", None)
    if stream.isatty() or buffer is None:
        text = data.decode("utf-8", "surrogateescape")
        stream.write(for_terminal(text) if stream.isatty() else text)
        return
    stream.flush()
    buffer.write(data)
    buffer.flush()


def out(line: str = "") -> None:
    _write(sys.stdout, line + "\n")


def err(line: str) -> None:
    _write(sys.stderr, line + "\n")


def emit_json(data: dict[str, Any]) -> None:
    """Exact: json.dumps escapes every control character and, with ensure_ascii, every non-ASCII one (a lone
    surrogate from an undecodable byte too), so the line needs no terminal escaping and reads back as it was."""
    import json

    try:
        text = json.dumps(data, indent=2, sort_keys=False, allow_nan=False, ensure_ascii=True)
    except ValueError:  # a record's `nan` or `inf` (TOML has them, JSON does not): said as TOML spells it
        text = json.dumps(_finite(data), indent=2, sort_keys=False, allow_nan=False, ensure_ascii=True)
    raw_stream(sys.stdout).write(text + "\n")


def _finite(value: Any) -> Any:
    """`value` with every float that JSON cannot carry as a string: "nan", "inf", "-inf"."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 path`, `2 paths`: a count and its noun, in the singular for one (`many` when the plural is not WORDs)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def effect_bar(effect: float | None, verdict: str, largest: float, width: int = 24) -> str:
    """A judged effect as a compact bar, its length `width` for the `largest` effect shown beside it: `+` for a
    change for the better (`faster`, `better`), `-` for the worse, `~` direction unknown, `·` no verdict."""
    if effect is None or not largest:
        return ""
    size = max(1, round(abs(effect) / largest * width))
    if verdict in ("no significant change", "too few runs"):
        return "·" * size
    return ("+" if verdict in ("faster", "better") else "-" if verdict in ("slower", "worse") else "~") * size


def quantity(value: float, unit: str = "") -> str:
    """A metric's value as every view writes it: six significant digits, the unit after a space (`1874.2 tok/s`)."""
    return f"{value:.6g} {show_text(unit)}" if unit else f"{value:.6g}"


_KIND_LETTER = {"added": "A", "deleted": "D", "modified": "M", "mode": "m", "typechange": "T",
                "modified+mode": "M", "submodule": "S"}  # fmt: skip
_LETTERS = {"A": "added", "M": "modified", "D": "deleted", "m": "mode changed", "T": "type changed",
            "S": "submodule", "?": "other", "!": "not preserved"}  # fmt: skip


def legend(letters: set[str]) -> str | None:
    """The one line that explains the status letters shown (`letters: A added, m mode changed`), None for none."""
    if not letters:
        return None
    return "  letters: " + ", ".join(f"{k} {said}" for k, said in _LETTERS.items() if k in letters)


def _measured_head(a: dict[str, Any], head: str) -> str:
    """The applied state `apply --link` recorded: the link, the patches (of the series it names, and others), and
    the residue on top, which is in no patch."""
    m = a["measured"]
    if not a["series"]:
        head = f"  {show_text(a['position'])} (on {a['base'][:12]}, no series)"
    if m.get("residue"):
        kept = "kept in " + m["residue"] if m.get("residue_kept") else paint("its file is missing or damaged", "red")
        return head + f" + the residue of {m['link']} (in no patch; {kept})"
    return head + f" (the measured state of {m['link']})"


def render_status(report: TreeReport) -> set[str]:
    """A tree's report, for people; the status letters it showed (for `legend`)."""
    letters: set[str] = set()
    out(paint(show_text(report.name), "bold") + f"  {show_text(report.path)}")
    if report.state != "ok" or report.snapshot is None or report.assessment is None:
        out(f"  {paint(report.state, 'yellow')}: {show_text(report.error or '')}")
        return letters
    snap, found = report.snapshot, report.assessment
    out(f"  HEAD {snap.head[:12]}" + (f"  ({snap.operation} in progress)" if snap.operation else ""))
    for warning in report.warnings:
        out("  " + paint(f"note: {show_text(warning)}", "yellow"))
    if report.applied:
        a = report.applied
        head = f"  {show_text(a['position'])} (on {a['base'][:12]})"  # the applied position (store/position.py)
        if a.get("measured"):
            head = _measured_head(a, head)
        edited = [show_text(e) for e in a.get("series_edited") or []]
        if a.get("head_moved") and a["series"]:
            out("  " + paint(f"note: HEAD moved off the series' base {a['base'][:12]} since it was applied (a `git "
                             "switch` or a commit?): save refuses until HEAD is back (`git switch --detach "
                             f"{a['base'][:12]}`)", "yellow"))  # fmt: skip
        if a["drift"]:
            shown = ", ".join(a["drift"][:5]) + (" …" if len(a["drift"]) > 5 else "")
            verb = "differs" if len(a["drift"]) == 1 else "differ"
            out(head + " — " + paint(f"{plural(len(a['drift']), 'path')} {verb} since: {shown}", "yellow"))
        if edited:
            shown = "; ".join(edited[:4]) + (" …" if len(edited) > 4 else "")
            lead = "  " if a["drift"] else head + " — "
            out(lead + paint(f"the series was edited since: {shown}", "yellow")
                + f" (`stackmgr apply {a['series']}` applies it as it is now)")  # fmt: skip
        if a.get("to_do") and a.get("interrupted"):
            out(f"  {a['to_do']}")
        elif a.get("to_do"):
            out(f"  the applied patches are not the series' first {len(a['patches'])}: {a['to_do']}")
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
            if c.old_mode != c.new_mode and c.kind in ("mode", "modified+mode"):  # a mode's change is no line
                modes = f"mode {c.old_mode} -> {c.new_mode}"
                counts = modes if c.kind == "mode" else f"{counts}, {modes}"
            owners = found.preserved.get(c.path)
            where = ("saved in " + ", ".join(owners)) if owners else paint("NOT PRESERVED", "red")
            if owners and owners[0].startswith("residue of "):  # kept by content under artifacts/, no patch
                where = f"kept as the {owners[0]} (no patch)"
            letter = _KIND_LETTER.get(c.kind, "?")
            letters.add(letter)
            out(f"    {letter} {show_path(c.path):<{width}}  {counts:>12}  {where}")
    other = [(p, why) for p, why in blockers if why not in _KIND_LETTER]
    for path, why in other:
        letters.add("!")
        out(f"    ! {show_path(path)}  {paint(why, 'red')}")
    for u in snap.unprotected:
        size = f", {human_size(u.size)}" if u.size else ""
        out(f"  unprotected: {show_path(u.path)} ({u.reason}{size}; never saved, never deleted)")
    present = [(n, hit, total) for n, (hit, total) in sorted(found.presence.items()) if hit]
    applied = report.applied or {"patches": [], "series": ""}
    for name, hit, total in present:
        if name in applied["patches"]:  # the applied position holds it: a patch above may change its files again
            patches = applied["patches"]
            by = "by a patch above it or by hand since" if patches.index(name) < len(patches) - 1 else "by hand since"
            again = f", {total - hit} of its {total} files changed again {by} (`stackmgr diff -z`)"
            above = again if hit < total else ""
            series = show_text(applied["series"] or "no series")  # as the position line says it
            where = f"not in {series}" if name in applied.get("not_in_series", ()) else series
            where = f"upstream now, was in {series}" if name in applied.get("upstream", ()) else where
            out(f"  patch {name}: applied ({where}){above}")
            continue
        out(f"  patch {name}: " + ("fully present" if hit == total else f"partly present ({hit}/{total} files)"))
    return letters


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
            from rich.text import Text

            # rich's own cursor codes go to the stream underneath; the message is plain text, never rich markup
            console = Console(file=raw_stream(sys.stderr), highlight=False)
            if self._total is None:
                self._live = console.status(Text(show_text(self.message)))
                self._live.__enter__()
            else:
                self._start_bar(console)

    def _start_bar(self, console: Any) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

        self._live = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(),
                              MofNCompleteColumn(), transient=True, console=console)  # fmt: skip
        self._live.__enter__()
        self._task = self._live.add_task(show_text(self.message), total=self._total, completed=self._done)

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
