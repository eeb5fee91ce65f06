"""The report's pictures: pure functions from numbers to an inline SVG string (no script, no external file or font).

- `waterfall_svg`: a series' base, then each patch's step (+/-) with its 95% interval as a whisker, colored by its
  verdict (evidence/stats.judge), labelled by the patch's name;
- `runs_svg`: one metric of a patch across its results, grouped by patch version: a run group's repeats as dots,
  its median as a tick, its interval against the series' baseline as a whisker, the baseline's median as a dashed
  line and the series' target as a labelled line.

Every text a record gave is escaped (markup.e); values that are not finite are left out; no data draws nothing
(an empty string, never an empty box). Each picture carries `role="img"`, a `<title>` and, per mark, a `<title>`
with the numbers it draws, so a reader (or a test) can read them without the drawing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from stackmgr.evidence.report.markup import e, num

TONES = {"good": "#1a7f37", "bad": "#c0262d", "flat": "#8c959f", "base": "#57606a"}
TONE_OF = {"faster": "good", "better": "good", "slower": "bad", "worse": "bad"}  # verdicts of evidence/stats.judge
FONT = 'font-family="system-ui,-apple-system,Segoe UI,Roboto,Arial,sans-serif"'
MAX_GROUPS = 60  # a patch's picture shows its latest groups; the caption says how many are left out


@dataclass
class Step:
    """A bar of the waterfall: from `start` to `end` (the medians below and with the patch); `low`/`high` the
    interval of `end` (absolute), None when not judged; `said` the judged words (`+20.0% [+19.5%, +20.5%] faster`)."""

    label: str
    start: float
    end: float
    verdict: str = ""
    said: str = ""
    low: float | None = None
    high: float | None = None


@dataclass
class RunGroup:
    """One measurement of a patch: the values of its runs (a run group, or a single run), its patch version."""

    label: str
    version: str
    values: list[float]
    verdict: str = ""
    said: str = ""  # its judgement against the baseline, in words
    low: float | None = None  # the interval of its level against the baseline (absolute), None when not judged
    high: float | None = None
    left_out: str = ""  # why its runs are no valid measurement (`invalid: gate quality: fail`): drawn hollow


@dataclass
class Line:
    """A horizontal line across the picture: the baseline's median, a target."""

    value: float
    label: str
    dashed: bool = True
    color: str = TONES["base"]


@dataclass
class Frame:
    """A value axis from `lo` to `hi` drawn over pixels `p0`..`p1` (p1 < p0 for a vertical axis)."""

    lo: float
    hi: float
    p0: float
    p1: float
    ticks: list[float] = field(default_factory=list)

    def at(self, v: float) -> float:
        return self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)


def finite(values: list[float]) -> list[float]:
    return [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5 or 5 × 10^k apart) covering lo..hi, about `count` of them."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        lo, hi = lo - (abs(lo) or 1) * 0.1, hi + (abs(hi) or 1) * 0.1
    raw = (hi - lo) / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    first = math.floor(lo / step) * step
    ticks, k = [], 0
    while first + k * step <= hi + step * 1e-9 and k < 50:
        ticks.append(round(first + k * step, 12))
        k += 1
    if ticks[-1] < hi:
        ticks.append(round(first + k * step, 12))
    return ticks


def short_num(v: float) -> str:
    """A tick label: 12.5k, 918, 0.25, 3M."""
    a = abs(v)
    for at, div, suffix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if a >= at:
            return f"{v / div:.4g}{suffix}"
    return f"{v:.4g}"


def axis(values: list[float], p0: float, p1: float, zero: bool) -> Frame:
    """A frame over `values` (and 0 where `zero`), widened to its nice ticks."""
    lo, hi = min(values), max(values)
    if zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi == lo:
        pad = abs(hi) * 0.05 or 1.0
        lo, hi = lo - pad, hi + pad
    elif not zero:
        pad = (hi - lo) * 0.08
        lo, hi = (lo - pad if lo - pad >= 0 or lo < 0 else 0.0), hi + pad  # never below 0 for positive values
    ticks = nice_ticks(lo, hi)
    return Frame(min(ticks[0], lo), max(ticks[-1], hi), p0, p1, ticks)


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="picture" role="img" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" {FONT} font-size="12">'
            f"<title>{e(title)}</title>{''.join(body)}</svg>")  # fmt: skip


def _text(x: float, y: float, text: str, anchor: str = "start", cls: str = "", extra: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{c}{extra}>{e(text)}</text>'


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def waterfall_svg(title: str, unit: str, base_label: str, base: float, steps: list[Step],
                  lines: list[Line] | None = None) -> str:  # fmt: skip
    """The base bar, then each patch's step from the level below to its own, its interval a whisker; `lines`
    (a target) across, labelled above; "" when the base is not a finite number."""
    if not math.isfinite(base):
        return ""
    steps = [s for s in steps if math.isfinite(s.start) and math.isfinite(s.end)]
    lines = [ln for ln in lines or [] if math.isfinite(ln.value)]
    row, left, width, right = 28, 170, 1060, 420
    top = 24 + 13 * (len(lines) - 1) if lines else 8  # a row for each line's label: close lines stack them
    height = top + row * (len(steps) + 1) + 40
    values = [base] + [v for s in steps for v in (s.start, s.end, s.low, s.high) if v is not None and math.isfinite(v)]
    f = axis(values + [ln.value for ln in lines], left, width - right, zero=True)
    out = [f'<line x1="{f.at(t):.1f}" x2="{f.at(t):.1f}" y1="{top}" y2="{height - 32}" class="grid" '
           f'stroke="#d8dee4" stroke-width="1"/>' for t in f.ticks]  # fmt: skip
    out += [_text(f.at(t), height - 18, short_num(t), "middle", "tick") for t in f.ticks]
    out.append(_text(width - right, height - 4, unit, "end", "unit"))
    zero = f.at(0.0)

    def bar(y: float, a: float, b: float, color: str, tip: str, label: str, said: str) -> str:
        x0, x1 = sorted((f.at(a), f.at(b)))
        return (f"<g><title>{e(tip)}</title>"
                + _text(left - 8, y + row / 2 + 4, _clip(label, 28), "end", "label")
                + f'<rect x="{x0:.1f}" y="{y + 5:.1f}" width="{max(x1 - x0, 1.5):.1f}" height="{row - 10}" '
                  f'fill="{color}" fill-opacity="0.8" stroke="{color}"/>'
                + _text(width - right + 8, y + row / 2 + 4, said, "start", "said", f' fill="{color}"')
                + "</g>")  # fmt: skip

    out.append(bar(top, 0.0, base, TONES["base"], f"{base_label}: {num(base)} {unit}".rstrip(), base_label,
                   f"{num(base)} {unit}".rstrip()))  # fmt: skip
    level_y = top + row - 5
    for k, s in enumerate(steps, 1):
        y = top + row * k
        color = TONES[TONE_OF.get(s.verdict, "flat")]
        out.append(f'<line x1="{f.at(s.start):.1f}" x2="{f.at(s.start):.1f}" y1="{level_y:.1f}" y2="{y + 5:.1f}" '
                   'stroke="#656d76" stroke-dasharray="2 2"/>')  # fmt: skip
        tip = f"{s.label}: {num(s.start)} → {num(s.end)} {unit}".rstrip() + (f"; {s.said}" if s.said else "")
        if s.low is not None and s.high is not None:
            tip += f"; 95% interval {num(s.low)} … {num(s.high)}"
        out.append(bar(y, s.start, s.end, color, tip, s.label, s.said or f"{num(s.end)} {unit}".rstrip()))
        if s.low is not None and s.high is not None and math.isfinite(s.low) and math.isfinite(s.high):
            a, b, c = f.at(s.low), f.at(s.high), y + row / 2
            out.append(f'<path d="M{a:.1f} {c - 5:.1f}V{c + 5:.1f}M{a:.1f} {c:.1f}H{b:.1f}M{b:.1f} {c - 5:.1f}'
                       f'V{c + 5:.1f}" stroke="#1f2328" stroke-width="1.5" fill="none" class="whisker"/>')  # fmt: skip
        level_y = y + row - 5
    out.append(f'<line x1="{zero:.1f}" x2="{zero:.1f}" y1="{top}" y2="{height - 32}" stroke="#656d76"/>')
    placed: list[float] = []
    for ln in lines:
        x = f.at(ln.value)
        row = sum(1 for p in placed if abs(p - x) < 150)  # labels of lines close together one above the other
        placed.append(x)
        dash = ' stroke-dasharray="6 4"' if ln.dashed else ""
        out.append(f"<g><title>{e(ln.label)}: {e(num(ln.value))} {e(unit)}</title>"
                   f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 4}" y2="{height - 32}" stroke="{ln.color}" '
                   f'stroke-width="1.5"{dash}/>' + _text(x, top - 8 - 13 * row, _clip(ln.label, 30), "middle", "line",
                                                          f' fill="{ln.color}"') + "</g>")  # fmt: skip
    return _svg(width, height, title, out)


def runs_svg(title: str, unit: str, groups: list[RunGroup], lines: list[Line]) -> str:
    """Each group's runs as dots over its slot, its median a tick, its interval a whisker; groups of one patch
    version side by side under the version's name; `lines` across; "" when no group has a finite value."""
    groups = [RunGroup(g.label, g.version, finite(g.values), g.verdict, g.said, g.low, g.high, g.left_out)
              for g in groups]  # fmt: skip
    groups = [g for g in groups if g.values][-MAX_GROUPS:]
    if not groups:
        return ""
    lines = [ln for ln in lines if math.isfinite(ln.value)]
    width, left, right, top, bottom = 880, 64, 190, 30, 46
    height = 300
    slot = (width - left - right) / len(groups)
    values = [v for g in groups for v in g.values]
    values += [v for g in groups for v in (g.low, g.high) if v is not None and math.isfinite(v)]
    span = max(max(values) - min(values), abs(max(values, key=abs)) * 0.05)
    near = [ln for ln in lines if min(values) - 3 * span <= ln.value <= max(values) + 3 * span]
    f = axis(values + [ln.value for ln in near], height - bottom, top, zero=False)  # a far line: an edge mark
    out = [f'<line x1="{left}" x2="{width - right}" y1="{f.at(t):.1f}" y2="{f.at(t):.1f}" stroke="#d8dee4"/>'
           + _text(left - 6, f.at(t) + 4, short_num(t), "end", "tick") for t in f.ticks]  # fmt: skip
    out.append(_text(left - 6, top - 14, unit, "end", "unit"))
    start = 0
    for k in range(1, len(groups) + 1):  # versions: a band each, its name above it
        if k < len(groups) and groups[k].version == groups[start].version:
            continue
        x0, x1 = left + start * slot, left + k * slot
        if start:
            out.append(f'<line x1="{x0:.1f}" x2="{x0:.1f}" y1="{top - 18}" y2="{height - bottom}" stroke="#8c959f" '
                       'stroke-dasharray="4 3"/>')  # fmt: skip
        out.append(_text((x0 + x1) / 2, top - 8, _clip("version " + groups[start].version, int((x1 - x0) / 6.5)),
                         "middle", "version"))  # fmt: skip
        start = k
    most = max(len(g.values) for g in groups)
    r = 3.2 if most <= 12 else 2.2 if most <= 40 else 1.5
    for k, g in enumerate(groups):
        cx = left + (k + 0.5) * slot
        spread = min(slot * 0.6, 60.0)
        n = len(g.values)
        mid = sorted(g.values)[n // 2] if n % 2 else sum(sorted(g.values)[n // 2 - 1 : n // 2 + 1]) / 2
        color = TONES[TONE_OF.get(g.verdict, "flat")] if g.verdict else TONES["base"]
        tip = f"{g.label} (version {g.version}): {n} run{'s' if n != 1 else ''}, median {num(mid)} {unit}".rstrip()
        if g.said:
            tip += f"; {g.said}"
        if g.left_out:
            tip += f"; left out: {g.left_out}"
            color = TONES["flat"]
        if g.low is not None and g.high is not None:
            tip += f"; 95% interval {num(g.low)} … {num(g.high)}"
        dots = "".join(f'<circle cx="{cx - spread / 2 + spread * ((i * 0.618034) % 1):.1f}" cy="{f.at(v):.1f}" '
                       + (f'r="{r}" fill="none" stroke="{color}"/>' if g.left_out else
                          f'r="{r}" fill="{color}" fill-opacity="{0.75 if n <= 12 else 0.45}"/>')
                       for i, v in enumerate(g.values))  # fmt: skip
        style = 'stroke="#8c959f" stroke-dasharray="3 2"' if g.left_out else 'stroke="#1f2328"'
        tick = (
            f'<line x1="{cx - min(slot * 0.42, 30):.1f}" x2="{cx + min(slot * 0.42, 30):.1f}" '
            f'y1="{f.at(mid):.1f}" y2="{f.at(mid):.1f}" {style} stroke-width="2.5" class="median"/>'
        )
        whisker = ""
        if g.low is not None and g.high is not None and math.isfinite(g.low) and math.isfinite(g.high):
            wx = cx + min(slot * 0.42, 30) + 3
            a, b = f.at(g.low), f.at(g.high)
            whisker = (f'<path d="M{wx - 3:.1f} {a:.1f}H{wx + 3:.1f}M{wx:.1f} {a:.1f}V{b:.1f}M{wx - 3:.1f} {b:.1f}'
                       f'H{wx + 3:.1f}" stroke="{color}" stroke-width="1.5" fill="none" class="whisker"/>')  # fmt: skip
        label = _text(cx, height - bottom + 14, _clip(g.label, int(slot / 6.5)), "middle", "label") if slot >= 40 \
            else ""  # fmt: skip
        out.append(f"<g><title>{e(tip)}</title>{tick}{dots}{whisker}{label}</g>")
    placed: list[float] = []  # label heights taken: two lines close together keep their labels apart
    for ln in sorted(lines, key=lambda ln: -ln.value):
        y = min(max(f.at(ln.value), top), height - bottom)
        ty = max([y + 4, *(p + 13 for p in placed if p + 13 > y + 4)])
        placed.append(ty)
        label = ln.label if ln in near else f"{'↑' if ln.value > f.hi else '↓'} {ln.label} ({short_num(ln.value)})"
        dash = ' stroke-dasharray="6 4"' if ln.dashed else ""
        across = (f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="{ln.color}" '
                  f'stroke-width="1.5"{dash}/>' if ln in near else "")  # a far line: its label at the edge only
        out.append(f"<g><title>{e(ln.label)}: {e(num(ln.value))} {e(unit)}</title>{across}"
                   + _text(width - right + 6, ty, _clip(label, 34), "start", "line", f' fill="{ln.color}"')
                   + "</g>")  # fmt: skip
    out.append(_text(left, height - 8, "runs in time order, grouped by patch version", "start", "axis"))
    return _svg(width, height, title, out)
