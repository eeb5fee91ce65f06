"""`stackmgr run -- CMD`: one command captures a run: its output teed to a log, the measured state before and
after (a tree that changed meanwhile taints the result), the command, exit code, times, environment and host,
the files written under the result directories and their metrics, as a draft link completed by one short
`link --amends`; `run` exits with the command's own code."""

from __future__ import annotations

import json
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Lab, stackmgr_process

BENCH = """\
import json, os, sys
rate, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
json.dump({"model_id": "Qwen/Qwen3.6", "request_rate": rate, "max_concurrency": 8, "num_prompts": 50,
           "output_throughput": 100.0 if rate == "1" else 290.0, "mean_ttft_ms": 45.0 if rate == "1" else 80.0},
          open(os.path.join(out, f"bench-{rate}.json"), "w"))
print("Output token throughput (tok/s): 107.7", flush=True)  # a bench that flushes: the log keeps its order
print("warming up", file=sys.stderr)
if os.environ.get("TOUCH"):
    open(os.environ["TOUCH"], "a").write("changed while running\\n")
sys.exit(int(os.environ.get("EXIT", "0")))
"""


@pytest.fixture
def bench(lab: Lab, tmp_path: Path) -> Path:
    """A fix applied as series S, the tree otherwise clean, and a vllm-bench-like script outside the tree."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    script = tmp_path / "bench.py"
    script.write_text(BENCH)
    return script


def run(lab: Lab, *args: str, **env: str) -> tuple[int, str, str, list[dict[str, Any]]]:
    done = stackmgr_process(lab.store, "run", *args, **env)
    records = sorted((lab.store / "links").glob("*/*.toml"))
    return done.returncode, done.stdout, done.stderr, [tomllib.loads(r.read_text()) for r in records]


def test_a_run_is_captured_end_to_end_as_a_draft_link(lab: Lab, bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    code, stdout, stderr, (record,) = run(lab, "--name", "qps1", "--result-dir", str(out), "--",
                                          sys.executable, str(bench), "1", str(out), VLLM_USE_V1="1")  # fmt: skip
    assert code == 0
    assert "Output token throughput (tok/s): 107.7" in stdout and "warming up" in stdout  # teed as it came
    assert record["patch"]["name"] == "fix" and record["verdict"]["status"] == "experimental"
    r = record["run"]
    assert r["name"] == "qps1" and r["command"] == [sys.executable, str(bench), "1", str(out)]
    assert r["exit_code"] == 0 and r["tainted"] is False and r["duration_s"] >= 0 and r["host"]
    assert r["env"]["VLLM_USE_V1"] == "1" and "HOME" not in r["env"]
    assert r["config"] == {"model_id": "Qwen/Qwen3.6", "request_rate": "1", "max_concurrency": 8, "num_prompts": 50}
    log, result = record["artifact"]
    assert (lab.store / log["path"]).read_text() == "Output token throughput (tok/s): 107.7\nwarming up\n"
    assert result["origin"] == str(out / "bench-1.json") and (lab.store / result["path"]).is_file()
    assert {m["name"]: m["value"] for m in record["metric"]} == {"output_throughput": 100.0, "mean_ttft_ms": 45.0}
    assert record["gate"] == [{"name": "exit", "status": "pass", "detail": "exit 0"}]
    assert record["stack"][0]["snapshot"] == lab.worktree_id()
    assert f"recorded {record['id']} for fix" in stderr
    done = lab.sm("link", "fix", "--amends", "qps1", "--verdict", "promoted", "--lesson", "keep it")  # by run name
    assert done.code == 0, done.err
    listed = json.loads(lab.sm("links", "--json").out)["links"]
    (final,) = [k for k in listed if k["amends"] == record["id"]]  # the draft completed: its artifacts, its run
    assert final["verdict"]["status"] == "promoted" and final["verdict"]["lesson"] == "keep it"
    assert [(m["name"], m["value"]) for m in final["metrics"]] == [("output_throughput", 100.0), ("mean_ttft_ms", 45.0)]
    assert lab.sm("show", "fix").out.count("PROMOTED") == 1
    assert [a["path"] for a in final["artifacts"]] == [log["path"], result["path"]]
    assert final["run"]["name"] == "qps1" and final["stack"][0]["snapshot"] == record["stack"][0]["snapshot"]


def test_a_failing_command_is_recorded_and_its_exit_code_passed_through(lab: Lab, bench: Path, tmp_path: Path) -> None:
    code, _out, _err, (record,) = run(lab, "--", sys.executable, str(bench), "1", str(tmp_path / "r"), EXIT="3")
    assert code == 3 and record["run"]["exit_code"] == 3
    assert record["gate"] == [{"name": "exit", "status": "fail", "detail": "exit 3"}]


def test_a_tree_that_changed_while_the_command_ran_taints_the_result(lab: Lab, bench: Path, tmp_path: Path) -> None:
    code, _out, stderr, (record,) = run(lab, "--", sys.executable, str(bench), "1", str(tmp_path / "r"),
                                        TOUCH=str(lab.tree / "README"))  # fmt: skip
    assert code == 0 and record["run"]["tainted"] is True and record["run"]["changed_trees"] == ["vllm"]
    assert "tainted: vllm changed while the command ran" in stderr
    shown = lab.sm("show", "fix")
    assert "TAINTED: vllm changed while it ran" in shown.out


def test_results_written_inside_a_declared_directory_neither_taint_nor_block(lab: Lab, bench: Path) -> None:
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["results"]\n')  # under [trees.vllm]
    code, _out, stderr, (record,) = run(lab, "--", sys.executable, str(bench), "4", str(lab.tree / "results"))
    assert code == 0 and record["run"]["tainted"] is False
    assert [a["origin"] for a in record["artifact"]][1:] == [str(lab.tree / "results" / "bench-4.json")]
    assert lab.sm("check").code == 0 and "not declared" not in stderr


def test_compare_of_two_request_rates_never_ranks_them_together(lab: Lab, bench: Path, tmp_path: Path) -> None:
    for rate in ("1", "4"):
        out = tmp_path / f"r{rate}"
        assert run(lab, "--name", f"qps{rate}", "--result-dir", str(out), "--",
                   sys.executable, str(bench), rate, str(out))[0] == 0  # fmt: skip
    groups = json.loads(lab.sm("compare", "fix", "--json").out)["groups"]
    assert [g["config"]["request_rate"] for g in groups] == ["1", "4"]
    baseline = lab.sm("link", "fix", "--amends", "qps4", "--baseline", "qps1", "--verdict", "inconclusive")
    assert baseline.code == 0, baseline.err


def test_run_says_what_is_wrong_before_running_anything(lab: Lab, bench: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for args, words in ((("--link", "nope"), "no patch named nope"), (("-t", "kernels"), "unknown tree"),
                        (("--link", "fix", "--series", "S"), "give one of them")):  # fmt: skip
        done = stackmgr_process(lab.store, "run", *args, "--", "touch", str(marker))
        assert done.returncode == 2 and words in done.stderr, (args, done.stderr)
    assert not marker.exists()
    assert stackmgr_process(lab.store, "run").returncode == 2


INTERRUPTED = """\
import signal, sys, time
def partial(signum, frame):
    print("caught SIGINT, writing partial results", flush=True)
    sys.exit(130)
signal.signal(signal.SIGINT, partial)
print("started", flush=True)
time.sleep(30)
"""


@pytest.mark.regression("Ctrl-C lost what the command printed after it (its partial results) from the log and screen")
def test_ctrl_c_keeps_every_byte_the_command_writes_after_it(lab: Lab, bench: Path, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess

    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    argv = [sys.executable, "-m", "stackmgr", "--store", str(lab.store), "run", "--", sys.executable, str(script)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"started\n"
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C reaches the whole foreground group
    out, _err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and b"caught SIGINT, writing partial results" in out
    (record,) = [tomllib.loads(r.read_text()) for r in (lab.store / "links").glob("*/*.toml")]
    assert record["run"]["interrupted"] is True and record["run"]["exit_code"] == 130
    log = (lab.store / record["artifact"][0]["path"]).read_text()
    assert log == "started\ncaught SIGINT, writing partial results\n"


@pytest.mark.regression("a result file whose name is not UTF-8 lost the whole run (internal error)")
def test_a_result_file_with_a_name_that_is_not_utf8_is_kept(lab: Lab, bench: Path, tmp_path: Path) -> None:
    import os

    out = tmp_path / "r"
    write = (f"import os; os.makedirs({str(out)!r}, exist_ok=True); "
             f"open(os.path.join({str(out)!r}.encode(), b'bad\\xff.txt'), 'w').write('x')")
    code, _o, err, (record,) = run(lab, "--result-dir", str(out), "--", sys.executable, "-c", write)
    assert code == 0, err
    assert record["artifact"][1]["origin"] == os.fsdecode(os.fsencode(str(out))) + "/bad\\xff.txt"


@pytest.mark.regression("a run took its metrics and configuration from an earlier run's JSON")
def test_a_run_takes_its_numbers_only_from_what_it_wrote(lab: Lab, bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    assert run(lab, "--name", "a", "--result-dir", str(out), "--", sys.executable, str(bench), "4", str(out))[0] == 0
    time.sleep(0.2)
    code, _o, err, records = run(lab, "--name", "b", "--from-json", str(out / "*.json"), "--", sys.executable,
                                 str(bench), "1", str(tmp_path / "elsewhere"))  # fmt: skip
    b = next(r for r in records if r["run"]["name"] == "b")
    assert code == 0 and "metric" not in b and b["run"].get("config") is None  # bench-4.json is a's, not b's
    assert "older than the run left out" in err
    again = stackmgr_process(lab.store, "run", "--name", "a", "--", sys.executable, "-c", "pass")
    assert again.returncode == 2 and "a run named a is recorded already" in again.stderr


@pytest.mark.regression("a tainted or failed draft could be promoted; a missing program still recorded drafts")
def test_a_failed_or_tainted_run_is_not_promoted_and_a_missing_program_records_nothing(
    lab: Lab, bench: Path, tmp_path: Path
) -> None:
    assert run(lab, "--name", "bad", "--", sys.executable, str(bench), "1", str(tmp_path / "r"), EXIT="3")[0] == 3
    refused = lab.sm("link", "fix", "--amends", "bad", "--verdict", "promoted")
    assert refused.code == 2 and "cannot promote" in refused.err and "exited 3" in refused.err
    assert lab.sm("link", "fix", "--amends", "bad", "--verdict", "rejected", "--lesson", "crashes").code == 0
    missing = stackmgr_process(lab.store, "run", "--", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "cannot run the command" in missing.stderr
    assert len(list((lab.store / "links").glob("*/*.toml"))) == 2


@pytest.mark.regression("compare refused run names; links never said TAINTED; show never said what a record amends")
def test_run_names_and_taints_are_said_where_results_are_listed(lab: Lab, bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    assert run(lab, "--name", "calm", "--result-dir", str(out), "--", sys.executable, str(bench), "1", str(out))[0] == 0
    assert run(lab, "--name", "noisy", "--", sys.executable, str(bench), "1", str(tmp_path / "x"),
               TOUCH=str(lab.tree / "README"))[0] == 0  # fmt: skip
    compared = lab.sm("compare", "calm", "noisy", "--json")
    assert compared.code == 0, compared.err
    listed = lab.sm("links").out.splitlines()[1:]  # under the header
    assert [line.endswith("TAINTED") for line in listed] == [False, True]
    assert lab.sm("link", "fix", "--amends", "calm", "--verdict", "inconclusive").code == 0
    calm = json.loads(lab.sm("links", "--json").out)["links"][0]["id"]
    assert f"amends {calm}" in lab.sm("show", "fix").out


@pytest.mark.regression("completing a draft with --gate dropped the draft's exit gate")
def test_completing_a_draft_with_a_gate_keeps_the_exit_gate_of_the_run(lab: Lab, bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    code, _, _, _ = run(lab, "--name", "qps1", "--result-dir", str(out), "--", sys.executable, str(bench), "1",
                        str(out))  # fmt: skip
    assert code == 0
    done = lab.sm("link", "fix", "--amends", "qps1", "--gate", "color=fail:3/8", "--verdict", "rejected",
                  "--lesson", "the color gate breaks")  # fmt: skip
    assert done.code == 0, done.err
    (final,) = [k for k in json.loads(lab.sm("links", "--json").out)["links"] if k["amends"]]
    assert final["gates"] == [{"name": "exit", "status": "pass", "detail": "exit 0"},
                              {"name": "color", "status": "fail", "detail": "3/8"}]  # fmt: skip


@pytest.mark.regression("run read its whole log into memory (a 200 MB log, ~400 MiB); its regexes could span lines")
def test_a_big_log_is_kept_byte_for_byte_and_scanned_line_by_line(lab: Lab, bench: Path, tmp_path: Path) -> None:
    import hashlib
    import subprocess

    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + "\n[run.metrics]\nedge = 'edge: ([0-9.]+)'\n"
                      "late = 'late: ([0-9.]+) (\\S+)$'\nspanned = 'spanned:\\s+([0-9.]+)'\n")  # fmt: skip
    block = 1 << 20  # how much of the log is read at a time
    payload = (b"y" * (block - 6) + b"\n"  # the next line straddles the end of the first block
               + b"edge: 42.5\nspanned:\n77\n" + b"\xff\xfe not UTF-8 \r\n" * 500_000  # 8 MB on
               + b"late: 7.25 ms\n")  # fmt: skip
    source = tmp_path / "output.bin"
    source.write_bytes(payload)
    done = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), "run", "--", "cat",
                           str(source)], capture_output=True)  # fmt: skip
    assert done.returncode == 0 and done.stdout == payload, done.stderr
    (record,) = [tomllib.loads(r.read_text()) for r in (lab.store / "links").glob("*/*.toml")]
    log = record["artifact"][0]
    assert log["sha256"] == hashlib.sha256(payload).hexdigest() and log["size"] == len(payload)
    assert (lab.store / log["path"]).read_bytes() == payload
    found = {m["name"]: (m["value"], m.get("unit", "")) for m in record["metric"]}
    assert found == {"edge": (42.5, ""), "late": (7.25, "ms")}  # a regex matches within one line, as verify reads it
    assert lab.sm("verify").code == 0


@pytest.mark.regression("run held its whole log in memory, twice: a 200 MB log made a 400 MiB process")
def test_the_memory_a_run_takes_does_not_grow_with_its_log(lab: Lab, bench: Path, tmp_path: Path) -> None:
    import subprocess

    source = tmp_path / "output.txt"
    peak = """import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"""  # KiB, of the biggest process it waited for
    peaks = []
    for megabytes in (0, 32):
        source.write_bytes(b"%d\n" % megabytes + (b"z" * 99 + b"\n") * (megabytes * 10_000))
        argv = [sys.executable, "-m", "stackmgr", "--store", str(lab.store), "run", "--", "cat", str(source)]
        measured = subprocess.run([sys.executable, "-c", peak, *argv], capture_output=True, text=True, check=True)
        peaks.append(int(measured.stdout))
    assert peaks[1] - peaks[0] < 16 * 1024, peaks  # the log's size does not show in stackmgr's memory


LINKS = """\
import json, os, sys
out, secret = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(out, "sub"), exist_ok=True)
json.dump({"output_throughput": 100.0, "request_rate": "1"}, open(os.path.join(out, "bench-1.json"), "w"))
open(os.path.join(out, "sub", "notes.txt"), "w").write("notes\\n")
os.symlink("bench-1.json", os.path.join(out, "latest.json"))  # the usual `latest` link, to a result written here
os.symlink(secret, os.path.join(out, "outside.json"))
os.symlink("sub", os.path.join(out, "notes"))
os.symlink("nothing.json", os.path.join(out, "gone.json"))
"""


@pytest.mark.regression("symbolic links in a result directory were ignored; one to outside must never be followed")
def test_symlinks_in_a_result_directory_are_kept_only_inside_it(lab: Lab, bench: Path, tmp_path: Path) -> None:
    import errno
    import os

    out, secret = tmp_path / "r", tmp_path / "secret.json"
    secret.write_text(json.dumps({"output_throughput": 999.0, "request_rate": "9"}))
    links = tmp_path / "links.py"
    links.write_text(LINKS)
    code, _o, err, (record,) = run(lab, "--result-dir", str(out), "--", sys.executable, str(links), str(out),
                                   str(secret))  # fmt: skip
    assert code == 0, err
    by_origin = {a["origin"]: a for a in record["artifact"][1:]}
    assert list(by_origin) == [str(out / "bench-1.json"), str(out / "latest.json"), str(out / "sub" / "notes.txt")]
    result, latest = by_origin[str(out / "bench-1.json")], by_origin[str(out / "latest.json")]
    assert (latest["path"], latest["sha256"], latest["size"]) == (result["path"], result["sha256"], result["size"])
    assert f"{out / 'outside.json'}: a symbolic link to outside the results directory, not kept" in err
    assert f"{out / 'gone.json'}: a symbolic link to nothing, not kept" in err
    assert {m["name"]: m["value"] for m in record["metric"]}["output_throughput"] == 100.0
    assert record["run"]["config"]["request_rate"] == "1" and "vllm bench results were written" not in err
    assert not any(b"999" in p.read_bytes() for p in (lab.store / "artifacts").rglob("*") if p.is_file())
    assert lab.sm("verify").code == 0
    from stackmgr.evidence.artifacts import keep_file
    from stackmgr.store.config import load_store

    with pytest.raises(OSError) as refused:  # a file swapped for a link meanwhile is not followed either
        keep_file(load_store(str(lab.store)), str(out / "outside.json"))
    assert refused.value.errno == errno.ELOOP and os.path.islink(out / "outside.json")


@pytest.mark.regression("a taint by files the command wrote in the tree never said which, nor how to keep them")
def test_a_taint_names_what_changed_and_how_to_keep_it_as_results(lab: Lab, bench: Path) -> None:
    out = lab.tree / "out"
    write = f"import os; os.makedirs({str(out)!r}); [open(f'{out}/{{i}}.txt', 'w') for i in range(7)]"
    code, _o, err, (record,) = run(lab, "--name", "a", "--", sys.executable, "-c", write)
    assert code == 0 and record["run"]["tainted"] is True
    assert ("tainted: vllm changed while the command ran (out/0.txt, out/1.txt, out/2.txt, out/3.txt, out/4.txt and "
            "2 more); the result is recorded with the state before it; to keep what the command writes in the tree "
            'as results, declare its directory (results = ["out"] under [trees.vllm] in stackmgr.toml) or pass '
            "--result-dir") in err  # fmt: skip
    code, _o, err, records = run(lab, "--name", "b", "--result-dir", str(out), "--", sys.executable, "-c",
                                 f"open({str(out / 'new.txt')!r}, 'w')")  # fmt: skip
    b = next(r for r in records if r["run"]["name"] == "b")
    assert code == 0 and b["run"]["tainted"] is False and "tainted" not in err
    assert [a["origin"] for a in b["artifact"][1:]] == [str(out / "new.txt")]  # kept as a result instead


def run_in(lab: Lab, cwd: Path, *args: str) -> tuple[int, str, list[dict[str, Any]]]:
    """`stackmgr run` from the directory `cwd`, as a user types it there."""
    import os
    import subprocess

    done = subprocess.run([sys.executable, "-m", "stackmgr", "--store", str(lab.store), "run", *args], cwd=cwd,
                          capture_output=True, text=True, env=os.environ)  # fmt: skip
    records = sorted((lab.store / "links").glob("*/*.toml"))
    return done.returncode, done.stderr, [tomllib.loads(r.read_text()) for r in records]


@pytest.mark.regression("README's example run from the store lost its benchmark JSON to store/results/, silently")
def test_a_run_that_wrote_nothing_where_results_are_looked_for_says_so(lab: Lab, bench: Path) -> None:
    config = lab.store / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["results"]\n')  # under [trees.vllm]
    code, err, (record,) = run_in(lab, lab.store, "--name", "a", "--cwd", str(lab.store), "--", sys.executable,
                                  str(bench), "4", "results")  # fmt: skip
    assert code == 0 and (lab.store / "results" / "bench-4.json").is_file() and record["run"].get("config") is None
    assert (f"stackmgr: warning: nothing was written under the result directories (vllm/results/); the command ran "
            f"in {lab.store}, outside the measured trees: leave out --cwd, or pass --result-dir DIR / "
            "--from-json GLOB for where it writes\n") in err  # fmt: skip
    assert err.count("nothing was written") == 1
    code, err, records = run_in(lab, lab.tree, "--name", "b", "--", sys.executable, str(bench), "4", "results")
    b = next(r for r in records if r["run"]["name"] == "b")
    assert code == 0 and b["run"]["config"]["request_rate"] == "4" and "nothing was written" not in err, err
    code, err, _ = run_in(lab, lab.tree / "src", "--name", "c", "--", sys.executable, "-c", "pass")
    assert code == 0 and "warning: nothing was written under the result directories (vllm/results/)\n" in err


TERMINATED = """\
import os, signal, sys, time
def partial(signum, frame):
    print(f"caught {signal.Signals(signum).name}, writing partial results", flush=True)
    sys.exit(5)
if sys.argv[1] == "handle":
    signal.signal(signal.SIGTERM, partial)
    signal.signal(signal.SIGINT, partial)
print("started", os.getpid(), flush=True)
time.sleep(30)
"""


def start_run(lab: Lab, tmp_path: Path, how: str) -> tuple[Any, int]:
    """`stackmgr run` of a command that prints its pid and sleeps (handling SIGTERM and SIGINT if `how` says)."""
    import subprocess

    script = tmp_path / "terminated.py"
    script.write_text(TERMINATED)
    argv = [sys.executable, "-m", "stackmgr", "--store", str(lab.store), "run", "--", sys.executable, str(script), how]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line[0] == b"started", line
    return proc, int(line[1])


@pytest.mark.regression("SIGTERM to run (timeout, Slurm, systemd) left the benchmark orphaned and recorded nothing")
def test_a_signal_to_run_reaches_the_command_and_the_run_is_recorded(lab: Lab, bench: Path, tmp_path: Path) -> None:
    import os
    import signal

    for how, sig, code in (("handle", signal.SIGTERM, 5), ("die", signal.SIGTERM, 143), ("handle", signal.SIGINT, 5),
                           ("die", signal.SIGHUP, 129)):  # fmt: skip
        proc, child = start_run(lab, tmp_path, how)
        time.sleep(0.2)
        os.kill(proc.pid, sig)  # to stackmgr alone, as `timeout` and `kill PID` send it
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == code, (how, sig, err)
        with pytest.raises(ProcessLookupError):
            os.kill(child, 0)  # the command is not left running
        if how == "handle":
            assert f"caught {sig.name}, writing partial results".encode() in out
        records = [tomllib.loads(r.read_text()) for r in (lab.store / "links").glob("*/*.toml")]
        (record,) = [r for r in records if r["created"] == max(x["created"] for x in records)]
        assert record["run"]["interrupted"] is True and record["run"]["signal"] == sig.name
        assert record["run"]["exit_code"] == code
    assert not list((lab.store / ".stackmgr").glob("run-*.log"))


@pytest.mark.regression("run's log was written buffered: a run killed -9 left it empty, and it stayed forever")
def test_the_log_of_a_killed_run_is_written_as_it_comes_and_named_by_the_next_run(lab: Lab, bench: Path,
                                                                                   tmp_path: Path) -> None:  # fmt: skip
    import os
    import signal
    import subprocess

    proc, child = start_run(lab, tmp_path, "die")
    log = lab.store / ".stackmgr" / f"run-{proc.pid}.log"
    try:
        time.sleep(0.2)
        assert log.read_bytes() == f"started {child}\n".encode()  # on disk already, while the command runs
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        os.kill(child, signal.SIGKILL)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    empty = lab.store / ".stackmgr" / f"run-{int(gone.stdout)}.log"  # of a run killed before its command printed
    empty.write_bytes(b"")
    code, _o, err, _ = run(lab, "--name", "next", "--", sys.executable, "-c", "pass")
    assert code == 0, err
    assert (f"stackmgr: warning: the log of an earlier run that was killed is kept in .stackmgr/run-{proc.pid}"
            ".killed.log (it was not recorded)") in err  # fmt: skip
    assert not log.exists() and not empty.exists() and err.count("earlier run") == 1
    assert (lab.store / ".stackmgr" / f"run-{proc.pid}.killed.log").read_bytes() == f"started {child}\n".encode()
    code, _o, err, _ = run(lab, "--name", "after", "--", sys.executable, "-c", "pass")
    assert code == 0 and "earlier run" not in err


@pytest.mark.regression("the taint hint suggested a top-level source directory (tests/) as results, hiding it")
def test_the_taint_hint_names_only_a_directory_of_new_files_and_bad_result_dirs_are_refused(
    lab: Lab, bench: Path, tmp_path: Path
) -> None:
    def taint(name: str, *files: str) -> str:
        write = f"import os\nfor f in {[str(lab.tree / f) for f in files]!r}:\n" \
                "    os.makedirs(os.path.dirname(f), exist_ok=True); open(f, 'w').write('x')"  # fmt: skip
        code, _o, err, _ = run(lab, "--name", name, "--", sys.executable, "-c", write)
        assert code == 0 and "tainted: vllm changed" in err, err
        return err

    err = taint("deep", "src/client/bench_out/r.json", "src/client/bench_out/s/t.json")
    assert 'declare its directory (results = ["src/client/bench_out"] under [trees.vllm]' in err
    for name, files in (("tracked", ("src/a.txt", "src/new/b.txt")), ("top", ("top.txt",))):
        err = taint(name, *files)
        assert "to keep what the command writes in the tree as results, pass --result-dir DIR\n" in err, err
        assert "results = [" not in err
    marker = tmp_path / "ran"
    for given, words in (("README", "--result-dir README is not a directory; "),
                         (".", "--result-dir . would hide the tree's own files from check; name the directory the "
                               "command writes to"), ("src", "--result-dir src would hide")):  # fmt: skip
        code, err, _ = run_in(lab, lab.tree, "--result-dir", given, "--", "touch", str(marker))
        assert code == 2 and words in err and not marker.exists(), (given, err)


@pytest.mark.regression("run --name took a link id's shape, spaces and / (names --amends and --baseline take)")
def test_a_run_name_that_could_be_mistaken_is_refused_before_running(lab: Lab, bench: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for name in ("lnk-0123abcd4567", "lnk-ab", "two words", "a/b", "tab\there"):
        done = stackmgr_process(lab.store, "run", "--name", name, "--", "touch", str(marker))
        assert done.returncode == 2 and "--name" in done.stderr and done.stderr.count("\n") == 1, (name, done.stderr)
    assert not marker.exists()
    assert run(lab, "--name", "lnk-bench", "--", sys.executable, "-c", "pass")[0] == 0  # not hex after lnk-


@pytest.mark.regression("a --from-json that matched nothing, or a broken JSON result, gave 0 metrics and no word")
def test_metrics_files_that_give_nothing_are_named(lab: Lab, bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    write = (f"import os; os.makedirs({str(out)!r}); d = {str(out)!r}; "
             "open(d + '/cut.json', 'w').write('{\"output_throughput\": 1'); "
             "open(d + '/nan.json', 'w').write('{\"output_throughput\": NaN}'); "
             "open(d + '/latin.json', 'wb').write(b'{\"model_id\": \"caf\\xe9\"}'); "
             "open(d + '/config.json', 'w').write('[1, 2]')")  # fmt: skip
    code, _o, err, (record,) = run(lab, "--result-dir", str(out), "--from-json", str(tmp_path / "none" / "*.json"),
                                   "--", sys.executable, "-c", write)  # fmt: skip
    assert code == 0, err
    assert f"stackmgr: warning: --from-json {tmp_path / 'none' / '*.json'}: no file matches\n" in err
    for name in ("cut", "latin"):
        assert f"stackmgr: warning: {out / name}.json: not JSON (" in err, err
    nan = f"{out / 'nan.json'}: left out of its metrics: output_throughput: nan (not a finite number)"
    assert nan in err and f"{out / 'nan.json'}: no `vllm bench serve` metrics in it, kept as an artifact" in err
    assert err.count("kept as an artifact, no metrics from it") == 3 and "config.json" not in err
    assert len(record["artifact"]) == 5 and "metric" not in record


def test_a_nan_in_one_field_of_a_result_leaves_out_that_field_only(lab: Lab, bench: Path, tmp_path: Path) -> None:
    """Python's json writes NaN for a mean of nothing (`std_ttft_ms`): that field is left out and said, as is a
    key no metric may be named (a terminal escape in it); the throughput and every other number are kept (before,
    the NaN cost the whole result its metrics, and the odd key went without a word)."""
    out = tmp_path / "results"
    script = tmp_path / "write.py"
    script.write_text("import json, os, sys\nos.makedirs(sys.argv[1])\n"
                      "doc = {'model_id': 'm', 'output_throughput': 120.5, 'std_ttft_ms': float('nan'), "
                      "'quality_cosine': 0.99, 'odd\\x1b[31m': 3}\n"
                      "json.dump(doc, open(os.path.join(sys.argv[1], 'r.json'), 'w'))\n")  # fmt: skip
    code, _o, err, (record,) = run(lab, "--result-dir", str(out), "--", sys.executable, str(script), str(out))
    assert code == 0, err
    assert (f"{out / 'r.json'}: left out of its metrics: std_ttft_ms: nan (not a finite number), "
            "'odd\\x1b[31m' (not a metric name)") in err, err
    assert {m["name"]: m["value"] for m in record["metric"]} == {"output_throughput": 120.5, "quality_cosine": 0.99}


@pytest.mark.regression("a command that could not be started by permission or a bad #! was recorded as a run")
def test_a_command_that_cannot_start_is_a_usage_error_and_nothing_is_recorded(lab: Lab, bench: Path,
                                                                               tmp_path: Path) -> None:  # fmt: skip
    import os

    bad = tmp_path / "bin"
    bad.mkdir()
    (bad / "plain").write_text("echo hi\n")  # on PATH, not executable
    shebang = bad / "shebang"
    shebang.write_text("#!/nonexistent/interpreter\n")
    shebang.chmod(0o755)
    path = f"{bad}{os.pathsep}{os.environ['PATH']}"
    for argv, words in ((["plain"], f"{bad / 'plain'} is not executable (permission denied)"),
                        ([str(bad)], f"{bad} is a directory"), ([str(shebang)], "cannot start")):  # fmt: skip
        done = stackmgr_process(lab.store, "run", "--", *argv, PATH=path)
        assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1, (argv, done.stderr)
    assert not list((lab.store / "links").glob("*/*.toml"))
    assert not list((lab.store / ".stackmgr").glob("run-*.log"))


@pytest.mark.regression("a run killed after its record was written, before removing its log, had that log kept as "
                        "'not recorded' by the next run")  # fmt: skip
@pytest.mark.parametrize("next_command", ["run", "recover"])
def test_the_log_of_a_run_killed_after_it_was_recorded_goes_without_a_false_warning(
    lab: Lab, bench: Path, next_command: str
) -> None:
    import subprocess

    code, _o, err, records = run(lab, "--name", "first", "--", sys.executable, "-c", "print('tok/s 99.5')")
    assert code == 0, err
    (log,) = [a for a in records[0]["artifact"] if a.get("origin") == "the command's output"]
    kept = (lab.store / log["path"]).read_bytes()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    recorded = lab.store / ".stackmgr" / f"run-{int(gone.stdout)}.log"  # the killed run's, recorded already
    recorded.write_bytes(kept)
    if next_command == "run":
        code, _o, err, _ = run(lab, "--name", "next", "--", sys.executable, "-c", "pass")
    else:
        result = lab.sm("recover")
        code, err = result.code, result.err
    assert code == 0 and "earlier run" not in err, err
    assert not recorded.exists() and not list((lab.store / ".stackmgr").glob("run-*.killed.log"))
