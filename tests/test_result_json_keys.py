"""A result JSON that is not quite `vllm bench serve`'s: a quality eval that names its model `model` (not
`model_id`) and writes numbers of its own (`quality_cosine`, a nested `{"accuracy": {"gsm8k": …}}`). Its model is the
run's model, and its numbers are metrics: recorded, listed, compared, reported and bisected on like the known ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import Lab, link_records, stackmgr_process
from tests.conftest import link_id as _link

EVAL = {"model": "Qwen/Qwen3.6", "num_prompts": 20, "quality_cosine": 0.987, "flagged": True,
        "accuracy": {"gsm8k": 81.5, "note": "text", "deep": {"x": 1}}, "ttfts": [0.1, 0.2],
        "spec_decode_acceptance_rate": 71.3}  # fmt: skip


def test_a_quality_eval_json_gives_its_model_and_every_number_as_a_metric(ev: Lab) -> None:
    (ev.store / "results" / "eval.json").write_text(json.dumps(EVAL))
    link = _link(ev, "replay-fix", "--from-json", "results/eval.json")
    (record,) = link_records(ev, "replay-fix")
    by_name = {m["name"]: m for m in record["metric"]}
    assert set(by_name) == {"spec_decode_acceptance_rate", "quality_cosine", "accuracy.gsm8k"}  # no bool, no config
    assert by_name["quality_cosine"]["value"] == 0.987
    assert by_name["quality_cosine"]["source"]["pointer"] == "/quality_cosine"
    assert by_name["accuracy.gsm8k"]["source"]["pointer"] == "/accuracy/gsm8k"
    assert ev.sm("verify").code == 0  # each re-derived from its pointer
    listed = json.loads(ev.sm("links", "--json").out)["links"]
    (mine,) = [k for k in listed if k["id"] == link]
    assert mine["config"]["model_id"] == "Qwen/Qwen3.6"  # `model`, read as the model
    assert {m["name"] for m in mine["metrics"]} >= {"quality_cosine", "accuracy.gsm8k"}
    shown = ev.sm("show", "replay-fix")
    assert "quality_cosine" in shown.out and "accuracy.gsm8k" in shown.out


def test_model_id_wins_over_model_when_both_are_there(ev: Lab) -> None:
    (ev.store / "results" / "both.json").write_text(json.dumps({"model_id": "a/one", "model": "b/two",
                                                                "output_throughput": 10.0}))  # fmt: skip
    link = _link(ev, "replay-fix", "--from-json", "results/both.json")
    (mine,) = [k for k in json.loads(ev.sm("links", "--json").out)["links"] if k["id"] == link]
    assert mine["config"]["model_id"] == "a/one"


def test_a_run_records_the_extra_numbers_and_the_model_of_its_result(lab: Lab, tmp_path: Path) -> None:
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    out = tmp_path / "r"
    write = (f"import json, os; os.makedirs({str(out)!r}); "
             f"json.dump({EVAL!r}, open(os.path.join({str(out)!r}, 'eval.json'), 'w'))")
    done = stackmgr_process(lab.store, "run", "--name", "q1", "--result-dir", str(out), "--", sys.executable, "-c",
                            write)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (record,) = link_records(lab, "fix")
    assert record["run"]["config"]["model_id"] == "Qwen/Qwen3.6"
    assert {m["name"] for m in record["metric"]} == {"spec_decode_acceptance_rate", "quality_cosine",
                                                      "accuracy.gsm8k"}  # fmt: skip
    (listed,) = json.loads(lab.sm("links", "--json").out)["links"]  # one setting, one type: the run's
    assert listed["config"]["num_prompts"] == record["run"]["config"]["num_prompts"] == 20


def test_a_config_json_beside_the_result_gives_no_metrics(lab: Lab, tmp_path: Path) -> None:
    """Only a result (a known vllm bench key, or a `model`) is read for numbers: a config file is not."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    out = tmp_path / "r"
    write = (f"import json, os; os.makedirs({str(out)!r}); "
             f"json.dump({{'batch': 8, 'seed': 1}}, open(os.path.join({str(out)!r}, 'cfg.json'), 'w'))")
    done = stackmgr_process(lab.store, "run", "--name", "c1", "--result-dir", str(out), "--", sys.executable, "-c",
                            write)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (record,) = link_records(lab, "fix")
    assert "metric" not in record


def test_bisect_finds_an_extra_metric(lab: Lab) -> None:
    for n in range(1, 4):
        (lab.tree / f"f{n}.txt").write_text(f"{n}\n")
        if n == 2:
            (lab.tree / "src" / "model.py").write_text("def f():\n    return 'broken'\n")
        assert lab.sm("save", f"p{n}", "--series", "S", "-m", f"p{n}").code == 0
    assert lab.sm("reset").code == 0
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["out"]\n'  # under [trees.vllm]
                      '\n[metrics.quality_cosine]\ndirection = "higher"\n')  # "worse than 0.9" needs a direction
    bench = ("import json, os, sys; os.chdir(sys.argv[1]); os.makedirs('out', exist_ok=True); "
             "bad = 'broken' in open('src/model.py').read(); "
             "json.dump({'model': 'm', 'quality_cosine': 0.5 if bad else 0.99}, open('out/q.json', 'w'))")
    done = stackmgr_process(lab.store, "--json", "bisect", "S", "--metric", "quality_cosine", "--threshold", "0.9",
                            "--", sys.executable, "-c", bench, str(lab.tree))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["first_bad"] == "p2"
