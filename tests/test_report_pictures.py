"""The report's pictures: a series' waterfall on the index (its ablate walk, else each patch against the
baseline), a patch's headline metric across its runs and versions on its page, both inline SVG that any XML
parser reads, that carry the numbers they draw and escape what a record says; and the patch page leading with
its headline and its verdict, the other metrics folded."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from stackmgr.evidence.report.pictures import Line, RunGroup, Step, nice_ticks, runs_svg, waterfall_svg
from tests.conftest import Lab, link_id
from tests.test_ab import leave_out_bench, three_patches_the_middle_one_fast
from tests.test_baselines import popped  # noqa: F401  (the fixture)
from tests.test_compare_baseline import measured  # noqa: F401  (the fixture)

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert("x")</script>&amp;'


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg" and root.get("role") == "img"
    return root


def titles(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(SVG + "title")]


def svgs(page: str) -> list[ET.Element]:
    return [parse(m) for m in re.findall(r"<svg .*?</svg>", page, re.S)]


def test_a_waterfall_draws_the_base_then_each_step_in_order_with_its_sign_color_and_interval() -> None:
    steps = [Step("bf16", 9560, 12876, "faster", "+34.7% [+33%, +36%] faster", 12700, 13000),
             Step("sdpa", 12876, 918, "slower", "-92.9% [-94%, -91%] slower", 800, 1000),
             Step("instr", 918, 923, "no significant change", "+0.5% no significant change")]  # fmt: skip
    root = parse(waterfall_svg("S", "tok/s", "base (n=5)", 9560, steps))
    said = titles(root)
    assert said[0] == "S"
    assert [t.split(":")[0] for t in said[1:]] == ["base (n=5)", "bf16", "sdpa", "instr"]
    assert said[2] == "bf16: 9560 → 12876 tok/s; +34.7% [+33%, +36%] faster; 95% interval 12700 … 13000"
    bars = [g.find(SVG + "rect") for g in root.iter(SVG + "g")]
    fills = [b.get("fill") for b in bars if b is not None]
    assert fills == ["#57606a", "#1a7f37", "#c0262d", "#8c959f"]  # base, better, worse, no verdict
    xs = [(float(b.get("x") or 0), float(b.get("width") or 0)) for b in bars if b is not None]
    assert xs[1][0] == math.floor(xs[0][0] + xs[0][1]) or abs(xs[1][0] - (xs[0][0] + xs[0][1])) < 0.2  # bf16 starts
    assert xs[2][1] > xs[1][1] > xs[3][1]  # the drop is the longest bar, instr's the shortest
    assert len(list(root.iter(SVG + "path"))) == 2  # the two judged steps' whiskers


def test_a_hostile_name_is_escaped_and_nothing_is_drawn_without_data() -> None:
    svg = waterfall_svg(HOSTILE, "<u>", HOSTILE, 100.0, [Step(HOSTILE, 100, 90, "slower", HOSTILE)])
    root = parse(svg)
    assert "<script>" not in svg and "alert" in svg
    assert HOSTILE in titles(root)[0]
    assert waterfall_svg("S", "", "base", math.nan, []) == ""
    assert runs_svg("m", "", [], []) == ""
    assert runs_svg("m", "", [RunGroup("g", "v1", [math.nan, math.inf])], [Line(1.0, "baseline")]) == ""
    svg = runs_svg(HOSTILE, "tok/s", [RunGroup(HOSTILE, HOSTILE, [5.0, math.nan, -math.inf])], [])
    root = parse(svg)
    assert len(list(root.iter(SVG + "circle"))) == 1 and "<script>" not in svg


def test_runs_are_dots_median_ticks_whiskers_and_the_baseline_and_target_are_lines() -> None:
    groups = [RunGroup("r-1", "aaaa1111", [100.0]),
              RunGroup("r-2", "aaaa1111", [110.0, 111.0, 109.0, 112.0], "faster", "+10% faster", 108.0, 112.0),
              RunGroup("r-3", "bbbb2222", [90.0, 91.0], left_out="invalid: gate quality: fail")]  # fmt: skip
    lines = [Line(100.0, "baseline 100 (n=5)"), Line(150.0, "target >= 150", False, "#a84300")]
    root = parse(runs_svg("tput", "tok/s", groups, lines))
    said = titles(root)
    assert "r-2 (version aaaa1111): 4 runs, median 110.5 tok/s; +10% faster; 95% interval 108 … 112" in said
    assert "r-3 (version bbbb2222): 2 runs, median 90.5 tok/s; left out: invalid: gate quality: fail" in said
    assert "baseline 100 (n=5): 100 tok/s" in said and "target >= 150: 150 tok/s" in said
    assert len(list(root.iter(SVG + "circle"))) == 7
    hollow = [c for c in root.iter(SVG + "circle") if c.get("fill") == "none"]
    assert len(hollow) == 2
    texts = [t.text for t in root.iter(SVG + "text")]
    assert "version aaaa1111" in texts and "version bbbb2222" in texts


def test_a_hundred_runs_stay_readable_and_a_far_line_is_an_edge_mark() -> None:
    values = [900 + (k % 17) for k in range(120)]
    root = parse(runs_svg("tput", "tok/s", [RunGroup("ab-B", "v", values)], [Line(9500.0, "baseline 9500")]))
    radii = {c.get("r") for c in root.iter(SVG + "circle")}
    assert radii == {"1.5"}
    ticks = [float(t.text or "0") for t in root.iter(SVG + "text") if t.get("class") == "tick"]
    assert ticks and max(ticks) < 1000, "the axis is the runs', not stretched to the baseline"
    assert "↑ baseline 9500 (9500)" in [t.text for t in root.iter(SVG + "text")]
    assert not [ln for ln in root.iter(SVG + "line") if ln.get("stroke-dasharray") == "6 4"], "no line across"


def test_nice_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(0, 12876) == [0, 5000, 10000, 15000]
    assert nice_ticks(0.12, 0.17) == [0.12, 0.13, 0.14, 0.15, 0.16, 0.17]
    assert nice_ticks(5, 5)[0] < 5 < nice_ticks(5, 5)[-1]


def _site(lab: Lab, tmp_path: Path) -> dict[str, str]:
    out = tmp_path / "site"
    done = lab.sm("report", "-o", str(out))
    assert done.code == 0, done.err
    return {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*.html")}


def test_the_index_draws_the_series_waterfall_from_its_ablate_walk(lab: Lab, tmp_path: Path) -> None:
    three_patches_the_middle_one_fast(lab)  # p2 is 20% faster
    done = lab.sm("ablate", "S", "-n", "4", "--", *leave_out_bench(tmp_path, lab))
    assert done.code == 0, done.err
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + '\n[targets]\nS = "output_throughput >= 115"\n')
    pages = _site(lab, tmp_path)
    index = pages["index.html"]
    (root,) = svgs(index)
    said = titles(root)
    assert said[0].startswith("Waterfall of S: output_throughput of each prefix (stackmgr ablate, 4 runs a state)")
    assert [t.split(":")[0] for t in said[1:]] == ["base (n=4)", "p1", "p2", "p3", "target >= 115"]
    assert said[-1] == "target >= 115: 115 tok/s"
    p2 = said[3]
    assert re.search(r"p2: 100\.\d+ → 120\.\d+ tok/s; 120\.\d+: \+\d+\.\d% \[\+\d+\.\d%, \+\d+\.\d%\] faster \(n=4\)",
                     p2), p2  # fmt: skip
    assert index.index("<svg") > index.index('<table class="patches"'), "under the series' table"
    # the patch page leads with the headline, its verdict and its picture
    page = pages["patches/p2.html"]
    head = page[page.index('<section class="headline">') :]
    assert head.index("faster") < head.index("<svg") < head.index('class="card')
    # which patch did it: p2's own step in the walk, p3's none
    assert re.search(r'<p class="against">ablate walk ablate-S-\d{8}T\d{6}: output_throughput \+\d+\.\d% '
                     r"\[\+\d+\.\d%, \+\d+\.\d%\] faster than the prefix below \(n=4\+4\)</p>", head), head[:600]
    p3 = pages["patches/p3.html"]
    assert re.search(r"ablate walk ablate-S-\d{8}T\d{6}: output_throughput [+-]\d+\.\d% \[[^]]*\] no significant "
                     r"change against the prefix below \(n=4\+4\)", p3)  # fmt: skip
    lessons = tmp_path / "lessons.md"
    assert lab.sm("report", "--markdown", str(lessons)).code == 0
    lane = lessons.read_text().split("### `p2`")[-1]  # an open lane: its runs are drafts, experimental
    assert "What it did, measured:" in lane and "faster than the prefix below (n=4+4)" in lane, lane
    (picture,) = svgs(page)
    lines = titles(picture)
    assert "target >= 115: 115 tok/s" in lines
    assert any(re.fullmatch(r"baseline 100\.\d+ \(n=4\): 100\.\d+ tok/s", t) for t in lines), lines
    (group,) = [t for t in lines if t.startswith("ablate-S-")]
    assert re.fullmatch(
        r"ablate-S-\d{8}T\d{6}-2 \(version \w{8}\): 4 runs, median 120\.\d+ tok/s; "
        r"\+\d+\.\d% \[\+\d+\.\d%, \+\d+\.\d%\] faster vs the baseline; 95% interval .*",
        group,
    ), group


def test_the_patch_page_leads_with_the_headline_and_folds_the_rest(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("save", "fix", "--series", "s", "-m", "fix").code == 0
    base = link_id(lab, "fix", "--metric", "output_throughput=100tok/s", "--metric", "completed=100",
                   "--metric", "mean_ttft_ms=50ms", "--metric", "accuracy=0.93")  # fmt: skip
    link_id(lab, "fix", "--metric", "completed=100", "--metric", "mean_ttft_ms=45ms", "--metric",
            "output_throughput=120tok/s", "--metric", "accuracy=0.93", "--baseline", base)  # fmt: skip
    page = _site(lab, tmp_path)["patches/fix.html"]
    card = page[page.index('<article class="card') :]
    lead = card[card.index('<table class="metrics lead">') : card.index("</table>")]
    assert lead.count("<tr>") == 1 and "output_throughput" in lead and "+20.0%" in lead
    folded = card[card.index('<details class="more">') : card.index("</details>")]
    assert "<summary>1 more metric, 2 unchanged</summary>" in folded
    assert "mean_ttft_ms" in folded and "unchanged from the baseline: completed, accuracy</p>" in folded
    assert "+0.0%" not in card[: card.index("</article>")]
    (root,) = svgs(page)  # two single runs, no baseline runs: dots and ticks, no verdict
    assert len(list(root.iter(SVG + "circle"))) == 2


def test_without_an_ablate_walk_the_waterfall_is_each_patch_against_the_baseline(
    measured: Lab,  # noqa: F811
    tmp_path: Path,
) -> None:
    index = _site(measured, tmp_path)["index.html"]
    (root,) = svgs(index)
    said = titles(root)
    assert said[0].startswith("S: output_throughput of each patch against the series' baseline runs")
    assert said[1] == "baseline: 100.2 tok/s"
    (probe,) = said[2:]  # fix has no result of its own: the whole series' runs are probe's
    assert probe.startswith("probe: 100.2 → 110.35 tok/s; 110.35: +10.1% [+8.5%, +11.7%] faster (n=4)"), probe
