"""A link's state, one answer in every view: a failed or tainted run is never shown as a clean result (`show`,
`links`, `compare`, the HTML report, the lessons page, a promotion), and `compare` averages only repeats of one
measured state."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Lab, link_id, show_json, stackmgr_process
from tests.test_report import _parse


def _bench(lab: Lab, name: str, tput: float, rate: float = 1.0, first: str = "") -> str:
    """A `vllm bench serve --save-result` file under results/; `first`: a metric vllm writes before the rest."""
    doc: dict[str, Any] = {"model_id": "Qwen/Qwen3.6", "num_prompts": 50, "request_rate": rate, "max_concurrency": 8}
    if first:
        doc[first] = 0.5
    doc |= {"output_throughput": tput, "mean_ttft_ms": 40.0}
    (lab.store / "results" / name).write_text(json.dumps(doc))
    return f"results/{name}"


def _run(lab: Lab, patch: str, bench: str, code: str, *more: str) -> str:
    """`stackmgr run --link PATCH --from-json BENCH [MORE…] -- python -c CODE` (the command touches BENCH, as a
    bench writes it): the draft's id."""
    touch = f"import os; os.utime({str(lab.store / bench)!r}); "
    done = stackmgr_process(lab.store, "run", "--link", patch, "--from-json", bench, *more, "--",
                            sys.executable, "-c", touch + code)  # fmt: skip
    (draft,) = [line for line in done.stderr.splitlines() if line.startswith("stackmgr: recorded ")]
    return draft.split()[2]


def _tainted(lab: Lab, patch: str, bench: str) -> str:
    return _run(lab, patch, bench, f"open({str(lab.tree / 'README')!r}, 'a').write('edited while it ran')")


def _compare(lab: Lab, *args: str) -> dict[str, Any]:
    result = lab.sm("--json", "compare", *args)
    assert result.code == 0, result.err
    return dict(json.loads(result.out))


def _site(lab: Lab, out: Path) -> dict[str, str]:
    result = lab.sm("report", "-o", str(out))
    assert result.code == 0, result.err
    return {p.relative_to(out).as_posix(): _parse(p.read_text()).all_text for p in out.rglob("*.html")}


# --- the rule ----------------------------------------------------------------------------------------------------


def test_link_state_says_failed_for_an_exit_gate_or_exit_code_and_tainted_apart(ev: Lab) -> None:
    from stackmgr.evidence.link_state import link_state
    from stackmgr.evidence.reading import load_links
    from stackmgr.evidence.states import Evidence
    from stackmgr.store.config import load_store

    clean = link_id(ev, "replay-fix", "results/probe.log", "--metric", "output_throughput=100tok/s")
    gated = link_id(ev, "replay-fix", "results/probe.log", "--gate", "exit=fail:exit 3")
    crashed = _run(ev, "replay-fix", _bench(ev, "crash.json", 5.0), "import sys; sys.exit(2)")
    noisy = _tainted(ev, "replay-fix", _bench(ev, "noisy.json", 500.0))
    store = load_store(str(ev.store))
    evidence = Evidence.gather(store)
    states = {k.id: link_state(evidence, k) for k in load_links(store, "replay-fix")}
    assert [(states[i].failed, states[i].tainted, states[i].freshness, states[i].usable) for i in
            (clean, gated, crashed, noisy)] == [("", False, "fresh", True), ("exit 3", False, "fresh", False),
                                                ("exit 2", False, "fresh", False), ("", True, "fresh", False)]
    assert [states[i].word for i in (clean, gated, crashed, noisy)] == ["fresh", "failed", "failed", "tainted"]


def test_a_run_failed_by_its_exit_gate_cannot_be_promoted(ev: Lab) -> None:
    gated = link_id(ev, "replay-fix", "results/probe.log", "--metric", "output_throughput=100tok/s",
                    "--gate", "exit=fail:exit 3")  # fmt: skip
    before = sorted((ev.store / "links" / "replay-fix").iterdir())
    done = ev.sm("link", "replay-fix", "--amends", gated, "--verdict", "promoted")
    assert done.code == 2 and done.err.startswith(f"stackmgr: cannot promote {gated}: it failed (exit 3)"), done.err
    done = ev.sm("link", "replay-fix", "results/probe.log", "--gate", "exit=error", "--verdict", "promoted")
    assert done.code == 2 and "cannot promote" in done.err, done.err
    assert sorted((ev.store / "links" / "replay-fix").iterdir()) == before, "nothing written"
    assert show_json(ev, "replay-fix")["patch"]["status"] == "experimental"  # type: ignore[index]


# --- show and links ----------------------------------------------------------------------------------------------


def test_show_says_which_signal_stopped_a_run(ev: Lab) -> None:
    stopped = _run(ev, "replay-fix", _bench(ev, "term.json", 5.0),
                   "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")  # fmt: skip
    (record,) = [k for k in show_json(ev, "replay-fix")["links"] if k["id"] == stopped]  # type: ignore[attr-defined]
    assert (record["run"]["signal"], record["run"]["exit_code"]) == ("SIGTERM", 143)
    shown = ev.sm("show", "replay-fix").out
    assert "interrupted (SIGTERM)" in shown and "Ctrl-C" not in shown
    assert ev.sm("links").out.splitlines()[-1].endswith("FAILED (exit 143)"), "links says the run failed"


# --- compare -----------------------------------------------------------------------------------------------------


def test_compare_never_averages_results_of_two_measured_states(ev: Lab) -> None:
    both = link_id(ev, "replay-fix", "--from-json", _bench(ev, "both.json", 117.43))
    assert ev.sm("pop", "-t", "vllm").code == 0  # replay-fix alone in the tree now
    alone = link_id(ev, "replay-fix", "--from-json", _bench(ev, "alone.json", 107.77))
    again = link_id(ev, "replay-fix", "--from-json", _bench(ev, "alone-2.json", 107.77))
    (group,) = _compare(ev, "replay-fix")["groups"]
    assert [r["links"] for r in group["results"]] == [[both], [alone, again]], "one column per measured state"
    tput = next(m for m in group["metrics"] if m["name"] == "output_throughput")
    assert [v["mean"] for v in tput["values"]] == [117.43, 107.77]
    assert [r["label"] for r in group["results"]] == ["replay-fix on replay-fix+replay-probe",
                                                     "replay-fix on replay-fix"]
    shown = ev.sm("compare", "replay-fix").out.splitlines()
    assert shown[1:3] == [f"  replay-fix on replay-fix+replay-probe (reference): {both}",
                          f"  replay-fix on replay-fix: {alone}, {again}"]


def test_compare_shows_float_rounding_as_no_change(ev: Lab) -> None:
    a = link_id(ev, "replay-fix", "--from-json", _bench(ev, "a.json", 1.1))
    b = link_id(ev, "replay-fix", "--from-json", _bench(ev, "b.json", 2.2))
    c = link_id(ev, "replay-probe", "--from-json", _bench(ev, "c.json", 1.65))
    assert (1.1 + 2.2) / 2 - 1.65 != 0, "the mean of the two is 1.65 give or take float rounding"
    (group,) = _compare(ev, "replay-fix", c)["groups"]
    assert [r["links"] for r in group["results"]] == [[a, b], [c]]
    tput = next(m for m in group["metrics"] if m["name"] == "output_throughput")
    assert (tput["values"][1]["change"], tput["values"][1]["delta"]) == ("same", 0.0)
    shown = ev.sm("compare", "replay-fix", c).out
    assert "e-1" not in shown and "worse" not in shown and "better" not in shown.split("output_throughput")[1].split(
        "\n")[0], shown  # fmt: skip


def test_compare_shows_a_failed_run_the_user_named_marked_and_titles_columns_by_run_name(ev: Lab) -> None:
    good = _run(ev, "replay-fix", _bench(ev, "good.json", 100.0), "pass", "--name", "good-run")
    bad = _run(ev, "replay-fix", _bench(ev, "bad.json", 5.0), "import sys; sys.exit(1)", "--name", "bad-run")
    (group,) = _compare(ev, "good-run", "bad-run")["groups"]
    assert [(r["links"], r["label"], r["reference"]) for r in group["results"]] == [
        ([good], "good-run", True), ([bad], "bad-run", False)]
    assert [r["marked"] for r in group["results"]] == [None, "exit 1"] and group["left_out"] == []
    shown = ev.sm("compare", "good-run", "bad-run").out
    assert "good-run" in shown and "bad-run" in shown and "FAILED (exit 1)" in shown, shown
    (patch_group,) = _compare(ev, "replay-fix")["groups"]  # through its patch: a failed run is still left out
    assert [k["link"] for k in patch_group["left_out"]] == [bad]
    (both,) = _compare(ev, "replay-fix", "bad-run")["groups"]  # named too: shown, marked
    assert [(r["links"], r["marked"]) for r in both["results"]] == [([good], None), ([bad], "exit 1")]
    assert both["left_out"] == []


# --- the HTML report and the lessons page ------------------------------------------------------------------------


def test_the_report_never_shows_a_tainted_or_failed_run_as_a_clean_result(ev: Lab, tmp_path: Path) -> None:
    good = link_id(ev, "replay-probe", "results/probe.log", "--metric", "output_throughput=100tok/s",
                   "--gate", "json=pass")  # fmt: skip
    noisy = _tainted(ev, "replay-fix", _bench(ev, "noisy.json", 500.0))
    failed = link_id(ev, "replay-probe", "results/probe.log", "--metric", "output_throughput=900tok/s",
                     "--gate", "exit=fail:exit 3")  # fmt: skip
    pages = _site(ev, tmp_path / "site")
    fix_page = next(text for page, text in pages.items() if page.startswith("patches/replay-fix"))
    card = fix_page[fix_page.index(noisy):]
    assert "tainted" in card, "the card says the run was tainted"
    index = pages["index.html"]
    fix_row = index[index.index("replay-fix"): index.index("replay-probe")]
    assert "500" not in fix_row and "tainted" in fix_row, fix_row
    probe_row = index[index.index("replay-probe"):]
    probe_row = probe_row[: probe_row.index("gemm-tile")] if "gemm-tile" in probe_row else probe_row
    assert "output_throughput 100 tok/s" in probe_row and "json ✓" in probe_row, probe_row
    assert "exit ✗" not in probe_row, "the best number's gates are its own run's"
    results = pages["results.html"]
    assert "failed" in results[results.index(failed):] and good in results


def test_the_lessons_page_never_quotes_a_tainted_run_as_a_patch_latest(ev: Lab) -> None:
    link_id(ev, "replay-fix", "results/probe.log", "--metric", "output_throughput=100tok/s", "--verdict",
            "inconclusive")  # fmt: skip
    _tainted(ev, "replay-fix", _bench(ev, "noisy.json", 500.0))
    assert ev.sm("report", "--markdown", "lessons.md").code == 0
    page = (ev.store / "lessons.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `replay-fix`"))
    assert "100 tok/s" in row and "500" not in row, row


def test_the_graveyard_badge_counts_lanes_as_the_page_does(ev: Lab, tmp_path: Path) -> None:
    for value in ("90", "91"):
        link_id(ev, "replay-probe", "results/probe.log", "--metric", f"output_throughput={value}tok/s",
                "--verdict", "rejected", "--lesson", "no")  # fmt: skip
    pages = _site(ev, tmp_path / "site")
    assert "Graveyard 1" in pages["index.html"] and "1 of 1" in pages["graveyard.html"]


def test_report_pages_lead_with_the_headline_metric(ev: Lab, tmp_path: Path) -> None:
    lid = link_id(ev, "replay-fix", "--from-json", _bench(ev, "vllm.json", 107.77, first="request_throughput"),
                  "--verdict", "rejected", "--lesson", "slow")  # fmt: skip
    pages = _site(ev, tmp_path / "site")
    for page in ("results.html", "graveyard.html"):
        after = pages[page][pages[page].index(lid):]
        assert after.index("output_throughput") < after.index("request_throughput"), page


def test_the_lessons_page_says_a_baseline_of_another_run_configuration(ev: Lab) -> None:
    base = link_id(ev, "gemm-tile", "--from-json", _bench(ev, "base-4.json", 290.0, rate=4.0))
    link_id(ev, "replay-probe", "--from-json", _bench(ev, "probe-1.json", 110.0), "--verdict", "rejected",
            "--lesson", "slow", "--baseline", base)  # fmt: skip
    assert ev.sm("report", "--markdown", "lessons.md").code == 0
    page = (ev.store / "lessons.md").read_text()
    lane = page[page.index("### `replay-probe`"):]
    assert "another run configuration" in lane, lane


@pytest.mark.parametrize("named", [True, False])
def test_links_lists_a_failed_run_as_failed(ev: Lab, named: bool) -> None:
    gated = link_id(ev, "replay-fix", "results/probe.log", "--gate", "exit=fail:exit 3")
    args = ["links", "--json"] if named else ["links"]
    out = ev.sm(*args).out
    if named:
        (row,) = [k for k in json.loads(out)["links"] if k["id"] == gated]
        assert row["failed"] == "exit 3" and row["usable"] is False
    else:
        assert next(line for line in out.splitlines() if gated in line).rstrip().endswith("FAILED (exit 3)")
