"""`stackmgr report -o DIR`: the static HTML site, its links between pages, escaping, and a real browser on it."""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

from tests.conftest import Lab, make_repo

HOSTILE_LESSON = '<script>document.title="pwned"</script> tile 128 & B-layout break the "color" gate; keep fp32'
HOSTILE_SUBJECT = "kernel <b>B-layout</b> fix & friends"
HOSTILE_CODE = "// </td></table><script>alert(1)</script>\nint layout = 2;\n"
ODD_ARTIFACT = 'odd <img src=x onerror=alert(2)> & "quotes".log'
BENCH = {"backend": "vllm", "output_throughput": 107.77, "mean_ttft_ms": 41.2, "p99_tpot_ms": 12.5}
CHROMIUM = "/usr/bin/chromium"


def _link(lab: Lab, *args: str) -> str:
    result = lab.sm("--json", "link", *args)
    assert result.code == 0, result.err
    return str(json.loads(result.out)["id"])


def _ok(lab: Lab, *args: str) -> None:
    result = lab.sm(*args)
    assert result.code == 0, result.err


@pytest.fixture
def store(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Two trees, two series, a patch in no series; links in every state; a do-not-revive lane with a hostile
    lesson. Returns the link ids by role."""
    monkeypatch.chdir(lab.store)  # artifacts are named as a user in the store would
    kernels = make_repo(tmp_path / "kernels", {"gemm.cpp": "int tile = 64;\nint layout = 1;\n", "README": "k\n"})
    _ok(lab, "tree", "add", "vllm-xpu-kernels", str(kernels))
    results = lab.store / "results"
    results.mkdir()
    (results / "baseline.log").write_text("Output token throughput (tok/s): 98.40\nJSON gate: 12/12\n")
    (results / "bench.json").write_text(json.dumps(BENCH))
    (results / "probe.log").write_text("touches src/model.py\nOutput token throughput (tok/s): 101.5\n")
    (results / ODD_ARTIFACT).write_text("<b>not bold</b> & friends\n")
    (results / "blayout.log").write_text("Output token throughput (tok/s): 107.77\ncolor gate: 3/8\n")

    # vllm: series `replay` with three patches, one of which is edited (stale) and one removed (orphaned) later.
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n\n\ndef g(x):\n    return x * 2\n")
    _ok(lab, "save", "replay-fix", "-t", "vllm", "--series", "replay", "-m", "replay fix\n\nKeeps the boundary.")
    (lab.tree / "README").write_text("probe\n")
    _ok(lab, "save", "replay-probe", "-t", "vllm", "--series", "replay", "-m", "probe instrumentation")
    ids = {"broken": _link(lab, "replay-fix", "results/probe.log", "--metric", "output_throughput=101.5tok/s",
                           "--gate", "json=pass", "--verdict", "experimental")}  # fmt: skip
    ids["stale"] = _link(lab, "replay-probe", f"results/{ODD_ARTIFACT}", "--verdict", "inconclusive")
    (lab.tree / "README").write_text("probe, changed\n")
    _ok(lab, "save", "replay-probe", "-t", "vllm", "--series", "replay", "--update", "-m", "probe instrumentation")
    (lab.tree / "src" / "boundary.py").write_text("BOUNDARY = 7\n")
    _ok(lab, "save", "decode-boundary", "-t", "vllm", "--series", "replay", "-m", "decode boundary")
    ids["orphaned"] = _link(lab, "decode-boundary", "results/baseline.log", "--verdict", "experimental")
    _ok(lab, "series", "remove", "replay", "decode-boundary")
    # An artifact edited after linking: the replay-fix link is broken.
    (results / "probe.log").write_text("touches src/model.py\nOutput token throughput (tok/s): 111.1\n")

    # vllm-xpu-kernels: series `kernels`, a promoted patch with a baseline, a rejected do-not-revive lane.
    (kernels / "gemm.cpp").write_text("int tile = 128;\nint layout = 1;\n")
    _ok(lab, "save", "gemm-tile", "-t", "vllm-xpu-kernels", "--series", "kernels", "-m", "gemm tile 128")
    (kernels / "gemm.cpp").write_text("int tile = 128;\n" + HOSTILE_CODE)
    _ok(lab, "save", "blayout-fix", "-t", "vllm-xpu-kernels", "--series", "kernels", "-m", HOSTILE_SUBJECT)
    ids["baseline"] = _link(lab, "gemm-tile", "results/baseline.log", "--metric", "output_throughput=98.4tok/s",
                            "--gate", "json=pass", "--gate", "color=pass")  # fmt: skip
    ids["promoted"] = _link(lab, "gemm-tile", "--from-json", "results/bench.json", "--gate", "json=pass",
                            "--gate", "color=pass", "--verdict", "promoted", "--baseline", ids["baseline"])  # fmt: skip
    ids["rejected"] = _link(lab, "blayout-fix", "results/blayout.log", "--metric", "output_throughput=107.77tok/s",
                            "--gate", "json=pass", "--gate", "color=fail:3/8", "--verdict", "rejected",
                            "--do-not-revive", "--lesson", HOSTILE_LESSON, "--baseline", ids["baseline"])  # fmt: skip

    # A patch in no series, never linked (saved with no series applied: on top of one, a save appends to it).
    _ok(lab, "pop", "-a", "-t", "vllm-xpu-kernels")
    (kernels / "README").write_text("kernels, documented\n")
    _ok(lab, "save", "loose-doc", "-t", "vllm-xpu-kernels", "README", "-m", "document the kernels")
    assert "loose-doc" not in (lab.store / "series" / "kernels").read_text()
    return ids


def _report(lab: Lab, out: Path) -> dict[str, object]:
    result = lab.sm("--json", "report", "-o", str(out))
    assert result.code == 0, result.err
    return dict(json.loads(result.out))


class _Page(HTMLParser):
    """hrefs, ids, classes and text of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[tuple[str, str]] = []  # (href, text of the <a>)
        self.ids: set[str] = set()
        self.scripts = 0
        self.text: list[str] = []
        self._a: list[str] | None = None
        self._href = ""
        self._skip = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "script":
            self.scripts += 1
        if tag in ("script", "style"):
            self._skip = tag
        if tag == "a" and a.get("href") is not None:
            self._a, self._href = [], str(a["href"])

    def handle_endtag(self, tag: str) -> None:
        if tag == self._skip:
            self._skip = ""
        if tag == "a" and self._a is not None:
            self.hrefs.append((self._href, "".join(self._a).strip()))
            self._a = None

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self.text.append(data)
        if self._a is not None:
            self._a.append(data)

    @property
    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())


def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def _pages(out: Path) -> dict[str, str]:
    return {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*.html")}


def test_report_site_pages_states_links_and_escaping(lab: Lab, store: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "site"
    result = lab.sm("report", "-o", str(out))
    assert result.code == 0, result.err
    assert result.out == f"wrote report: {out}/index.html (6 patches, 6 links)\n"
    pages = _pages(out)
    names = ("replay-fix", "replay-probe", "decode-boundary", "gemm-tile", "blayout-fix", "loose-doc")
    patch_pages = {f"patches/{n}.html" for n in names}
    assert {"index.html", "results.html", "graveyard.html"} | patch_pages <= set(pages)
    assert len([p for p in pages if p.startswith("artifacts/")]) == 5
    assert (out / ".stackmgr-report").is_file() and (out / "raw" / "blayout-fix.patch.txt").is_file()

    # Index: series in order, then the patch in no series; statuses, best metric with its delta, gates, states.
    index = _parse(pages["index.html"]).all_text
    expected = ("kernels 2 patches", "gemm-tile", "blayout-fix", "replay 2 patches", "replay-fix", "replay-probe")
    order = [index.index(name) for name in expected]
    assert order == sorted(order), "series by name, each in its own order"
    no_series = index[index.index("Patches in no series") :]
    assert "loose-doc" in no_series and "decode-boundary" in no_series and "unlinked" in no_series
    gemm = index[index.index("gemm-tile") : index.index("blayout-fix")]
    assert "promoted" in gemm and "output_throughput 107.77 tok/s +9.5%" in gemm and "color ✓" in gemm
    blayout = index[index.index("blayout-fix") : index.index("replay-fix")]
    assert "rejected" in blayout and "do not revive" in blayout and "color ✗" in blayout
    replay = index[index.index("replay-fix") : index.index("Patches in no series")]
    assert "1 broken" in replay and "1 stale" in replay
    assert "1 orphaned" in no_series

    # Patch page: header, description, coloured diff, evidence cards with states, deltas, gates, lessons.
    fix = pages["patches/replay-fix.html"]
    assert "Keeps the boundary." in fix and 'class="add"' in fix and 'class="hunk"' in fix and 'class="fh"' in fix
    assert f'id="{store["broken"]}"' in fix and "✗ broken" in fix and ">changed</span>" in fix
    assert f'named in <a class="mono" href="#{store["broken"]}">' in fix, "probe.log names src/model.py of the diff"
    assert "named in" not in pages["patches/gemm-tile.html"]
    tile = _parse(pages["patches/gemm-tile.html"]).all_text
    assert "● fresh" in tile and "+9.5%" in tile and f"Δ vs {store['baseline']}" in tile and "sha ok" in tile
    probe = _parse(pages["patches/replay-probe.html"]).all_text
    assert "○ stale" in probe and "inconclusive" in probe
    assert "⌫ orphaned" in _parse(pages["patches/decode-boundary.html"]).all_text
    blayout_page = pages["patches/blayout-fix.html"]
    blayout_text = _parse(blayout_page).all_text
    assert HOSTILE_LESSON in blayout_text and HOSTILE_SUBJECT in blayout_text and "alert(1)" in blayout_text
    assert "do not revive" in blayout_text and "3/8" in blayout_text

    # Graveyard: the rejected lane and its lesson, and the search script (the only script in the whole site).
    grave = _parse(pages["graveyard.html"])
    assert "blayout-fix" in grave.all_text and HOSTILE_LESSON in grave.all_text and "gemm-tile" not in grave.all_text
    assert grave.scripts == 1 and 'id="q"' in pages["graveyard.html"]
    assert all(_parse(text).scripts == 0 for name, text in pages.items() if name != "graveyard.html")

    # Artifact pages: who cites them, whether they verify, an escaped preview.
    arts = {name: _parse(text).all_text for name, text in pages.items() if name.startswith("artifacts/")}
    (probe_art,) = [t for t in arts.values() if "results/probe.log" in t.split(" Cited by")[0]]
    assert "changed since linked" in probe_art and store["broken"] in probe_art
    assert "not what was measured" in probe_art and "111.1" in probe_art
    (odd,) = [(n, t) for n, t in arts.items() if ODD_ARTIFACT in t]
    assert re.fullmatch(r"artifacts/[A-Za-z0-9._-]+\.html", odd[0]) and "<b>not bold</b> & friends" in odd[1]
    (bench,) = [t for t in arts.values() if "results/bench.json" in t]
    assert "verifies" in bench and '"output_throughput": 107.77' in bench, "JSON is shown pretty-printed"

    # Escaping: nothing hostile reaches the markup as markup.
    for name, text in pages.items():
        assert "<script>document" not in text and "<script>alert" not in text and "<b>B-layout" not in text, name
        assert "<img src=x" not in text and "<b>not bold" not in text, name
    assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in blayout_page

    # Every relative href of every page leads to a file of the site, and every #fragment to an element there.
    parsed = {name: _parse(text) for name, text in pages.items()}
    checked = 0
    for name, page in parsed.items():
        for href, _text in page.hrefs:
            parts = urlsplit(href)
            assert not parts.scheme and not parts.netloc, f"{name}: absolute link {href}"
            target = posixpath.normpath(posixpath.join(posixpath.dirname(name), unquote(parts.path))) \
                if parts.path else name  # fmt: skip
            assert not target.startswith("../"), f"{name}: {href} leaves the site"
            assert (out / target).is_file(), f"{name}: {href} -> {target} does not exist"
            if parts.fragment and target.endswith(".html"):
                assert unquote(parts.fragment) in parsed[target].ids, f"{name}: {href} names no element"
            checked += 1
    assert checked > 100


def test_report_json_regeneration_and_refusals(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "README").write_text("changed\n")
    _ok(lab, "save", "only", "-t", "vllm", "--series", "s", "-m", "only patch")
    out = tmp_path / "site"
    data = _report(lab, out)
    assert data["schema"] == 1 and data["dir"] == str(out)
    assert data["pages"] == ["graveyard.html", "index.html", "patches/only.html", "results.html"]

    # Regenerating replaces the pages it wrote before and removes the ones no longer made; other files stay.
    marker = out / ".stackmgr-report"
    marker.write_text(marker.read_text() + "patches/gone.html\n")
    (out / "patches" / "gone.html").write_text("old")
    (out / "mine.txt").write_text("notes kept by the user")
    assert _report(lab, out)["pages"] == data["pages"]
    assert not (out / "patches" / "gone.html").exists() and (out / "mine.txt").exists()

    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    for target, says in (
        (other, "is not empty and holds no earlier report"),
        (lab.store / "links" / "r", "inside the store's links/"),
        (lab.store / "patches", "inside the store's patches/"),
        (other / "keep.txt", "exists and is not a directory"),
    ):
        result = lab.sm("report", "-o", str(target))
        assert result.code == 3, (target, result.err)
        assert says in result.err and len(result.err.strip().splitlines()) == 1
    assert os.listdir(other) == ["keep.txt"] and not (lab.store / "links" / "r").exists()

    empty = tmp_path / "empty"
    empty.mkdir()
    assert lab.sm("report", "-o", str(empty)).code == 0 and (empty / "index.html").is_file()


def test_the_index_headline_is_the_metric_the_config_names(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "README").write_text("edited\n")
    _ok(lab, "save", "fix", "--series", "s", "-m", "fix")
    _link(lab, "fix", "--metric", "request_throughput=0.41req/s", "--metric", "mean_ttft_ms=41.2ms")
    _link(lab, "fix", "--metric", "request_throughput=0.45req/s", "--metric", "mean_ttft_ms=39.5ms")

    def headline_cell() -> str:
        _ok(lab, "report", "-o", str(tmp_path / "site"))
        index = _parse((tmp_path / "site" / "index.html").read_text()).all_text
        return index[index.index("fix") :]

    assert "request_throughput 0.45 req/s" in headline_cell(), "no output_throughput: the first metric, best"
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + '\n[evidence]\nheadline = "mean_ttft_ms"\n')
    cell = headline_cell()
    assert "mean_ttft_ms 39.5 ms" in cell and "request_throughput" not in cell, "lower is better: the best is 39.5"


@pytest.mark.regression("the index's best result ranked a run at 4 req/s against the newest, at 1 req/s")
def test_the_index_best_result_is_the_best_of_the_newest_results_configuration(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "README").write_text("edited\n")
    _ok(lab, "save", "fix", "--series", "s", "-m", "fix")
    results = lab.store / "results"
    results.mkdir(exist_ok=True)
    for name, rate, tput in (("a", 4.0, 300.0), ("b", 1.0, 100.0), ("c", 1.0, 104.0), ("d", 1.0, 101.0)):
        (results / f"{name}.json").write_text(json.dumps({"model_id": "org/Model-7B", "request_rate": rate,
                                                          "max_concurrency": 8, "output_throughput": tput}))
        _link(lab, "fix", "--from-json", str(results / f"{name}.json"))
    _ok(lab, "report", "-o", str(tmp_path / "site"))
    index = _parse((tmp_path / "site" / "index.html").read_text()).all_text
    cell = index[index.index("fix") :]
    assert "output_throughput 104 tok/s" in cell and "Model-7B · rate 1 · conc 8" in cell and "300" not in cell


# --- a real browser ----------------------------------------------------------------------------------------------


def _chromium(profile: Path, *args: str) -> str:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
           f"--user-data-dir={profile}", *args]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    return proc.stdout.decode("utf-8", "replace")


def _follow(url: str, page: _Page, text: str) -> str:
    """The absolute URL of the first link on `page` whose text is `text`."""
    for href, label in page.hrefs:
        if label == text:
            return urljoin(url, href)
    raise AssertionError(f"no link {text!r} on {url}: {[label for _h, label in page.hrefs][:40]}")


@pytest.mark.slow
def test_report_in_a_real_browser(lab: Lab, store: dict[str, str], tmp_path: Path) -> None:
    if not os.path.exists(CHROMIUM):
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)")
    out = tmp_path / "site"
    _report(lab, out)
    profile = tmp_path / "chromium-profile"

    index_url = (out / "index.html").as_uri()
    index_dom = _chromium(profile, "--dump-dom", index_url)
    index = _parse(index_dom)
    assert "stackmgr report" in index_dom and "pwned" not in index_dom.split("</title>")[0]
    assert "replay" in index.all_text and "kernels" in index.all_text and "do not revive" in index.all_text

    patch_url = _follow(index_url, index, "blayout-fix")
    assert patch_url.endswith("/patches/blayout-fix.html")
    patch_dom = _chromium(profile, "--dump-dom", patch_url)
    patch = _parse(patch_dom)
    assert HOSTILE_LESSON in patch.all_text, "the lesson is shown as text, not run"
    assert "<title>blayout-fix · stackmgr report</title>" in patch_dom
    assert "color ✗" in patch.all_text and "● fresh" in patch.all_text and "+9.5%" in patch.all_text
    assert 'class="add"' in patch_dom and "alert(1)" in patch.all_text

    art_url = _follow(patch_url, patch, "results/blayout.log")
    art_dom = _chromium(profile, "--dump-dom", art_url)
    art = _parse(art_dom)
    assert "verifies" in art.all_text and "color gate: 3/8" in art.all_text and store["rejected"] in art.all_text

    grave_url = _follow(art_url, art, "Graveyard 1")
    assert grave_url.endswith("/graveyard.html")
    grave = _parse(_chromium(profile, "--dump-dom", grave_url))
    assert "blayout-fix" in grave.all_text and HOSTILE_LESSON in grave.all_text and "1 of 1" in grave.all_text
    # The search script runs (its hash is in the page's CSP) and filters the lanes.
    assert "0 of 1" in _parse(_chromium(profile, "--dump-dom", grave_url + "?q=nothing-like-this")).all_text
    assert "1 of 1" in _parse(_chromium(profile, "--dump-dom", grave_url + "?q=FP32+color")).all_text

    shots = tmp_path / "shots"
    shots.mkdir()
    for name, url in (("patch.png", (out / "patches" / "gemm-tile.html").as_uri()), ("index.png", index_url)):
        _chromium(profile, f"--screenshot={shots / name}", "--window-size=1400,1000", url)
        data = (shots / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_hostile_link_records_are_escaped_and_outside_files_not_shown(lab: Lab, tmp_path: Path) -> None:
    """A record pulled from someone else's store can carry any id, lesson or artifact path: the report must neither
    break out of its markup nor publish a private file the record merely points at."""
    (lab.tree / "README").write_text("changed\n")
    _ok(lab, "save", "only", "-t", "vllm", "--series", "s", "-m", "only patch")
    secret = tmp_path / "secret.txt"
    secret.write_text("PRIVATE KEY MATERIAL\n")
    (lab.store / "links" / "evil").mkdir(parents=True)
    (lab.store / "links" / "evil" / "20260101T000000Z-lnk-x.toml").write_text(
        'schema = "stackmgr.link/v1"\nid = "lnk-\\"><script>alert(3)</script>"\ncreated = "2026-01-01T00:00:00Z"\n'
        '[patch]\nname = "evil"\ntree = "vllm"\nsha256 = "00"\npatch_id = "00"\n'
        f'[[artifact]]\npath = "{secret}"\nsha256 = "{"0" * 64}"\nsize = 21\n'
        '[[artifact]]\npath = "outside <img src=x>.log"\nsha256 = "00"\nsize = 1\n'
        '[verdict]\nstatus = "rejected"\nlesson = "</div><script>alert(4)</script> <b>evil</b>"\n'
        "do_not_revive = true\n"
    )
    out = tmp_path / "site"
    _report(lab, out)
    pages = _pages(out)
    evil_page = "patches/evil.html"
    assert evil_page in pages
    for name, text in pages.items():
        assert "PRIVATE KEY" not in text, name
        assert "<script>alert" not in text and "<b>evil" not in text and "<img src=x" not in text, name
    assert "&lt;/div&gt;&lt;script&gt;alert(4)&lt;/script&gt;" in pages[evil_page]
    assert "&lt;b&gt;evil&lt;/b&gt;" in pages["graveyard.html"]
    (secret_page,) = [t for n, t in pages.items() if n.startswith("artifacts/") and "secret.txt" in t]
    assert "outside the store: never read" in secret_page
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    assert all(digest[:12] not in text for text in pages.values()), "not even its hash is published"


def test_a_record_that_names_another_patch_or_climbs_out_stops_the_report(lab: Lab, tmp_path: Path) -> None:
    (lab.store / "links" / "evil").mkdir(parents=True)
    record = lab.store / "links" / "evil" / "20260101T000000Z-lnk-x.toml"
    header = 'schema = "stackmgr.link/v1"\nid = "lnk-x"\ncreated = "2026-01-01T00:00:00Z"\n'
    record.write_text(header + '[patch]\nname = "../../<b>evil</b>"\ntree = "vllm"\nsha256 = "00"\n')
    result = lab.sm("report", "-o", str(tmp_path / "site"))
    assert result.code == 3 and "invalid patch name" in result.err and result.err.count("\n") == 1
    record.write_text(header + '[patch]\nname = "evil"\ntree = "vllm"\nsha256 = "00"\n'
                      '[[artifact]]\npath = "../../etc/passwd"\nsha256 = "00"\nsize = 1\n')  # fmt: skip
    result = lab.sm("report", "-o", str(tmp_path / "site"))
    assert result.code == 3 and "climbs with '..'" in result.err
    assert not (tmp_path / "site").exists(), "nothing is written when the records cannot be read"


@pytest.mark.regression("the index ranked a newer log-only run's decode_tput 500 as the best result over the "
                        "promoting run's output_throughput")  # fmt: skip
def test_the_best_result_is_of_the_headline_metric_when_any_link_has_it(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "README").write_text("edited\n")
    _ok(lab, "save", "fix", "--series", "s", "-m", "fix")
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"model_id": "m", "request_rate": 1.0, "num_prompts": 50,
                                 "output_throughput": 100.5, "mean_ttft_ms": 40.0}))  # fmt: skip
    _link(lab, "fix", "--from-json", str(bench), "--verdict", "promoted")
    _link(lab, "fix", "--metric", "decode_tput=500")  # newer, another metric, no run configuration
    _ok(lab, "report", "-o", str(tmp_path / "site"))
    index = _parse((tmp_path / "site" / "index.html").read_text()).all_text
    cell = index[index.index("fix") :]
    assert "output_throughput 100.5 tok/s" in cell and "decode_tput" not in cell


def test_terminal_escapes_from_a_pulled_record_reach_no_page_raw() -> None:
    """A unit `tok/s\\x1b[31m` in a teammate's record: the page shows `\\x1b`, as the terminal views do, so `cat`
    of a page never colours a terminal; tabs and newlines stay text."""
    from stackmgr.evidence.report.markup import e

    assert e("tok/s\x1b[31m<b>\x85\x07\tend\n") == "tok/s\\x1b[31m&lt;b&gt;\\x85\\x07\tend\n"
