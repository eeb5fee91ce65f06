"""Bounded time and memory on hostile input (docs/SECURITY.md, docs/FORMATS.md#limits): a regex from a pulled
record or config cannot backtrack without end (RE2, searched a piece at a time), TOML and JSON nesting is bounded
with an error naming the file, and a huge artifact is hashed and scanned a block at a time. Every command here
runs in a process of its own that must end within a time limit."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git
from tests.security.conftest import Team, edited_record
from tests.security.test_outside_records import (
    SECONDS,
    Ran,
    artifact,
    calm,
    everyday,
    metric,
    outputs,
    record,
    record_id,
    victim,
)

CATASTROPHIC = "^(a+)+$"  # Python's re takes 2^n steps on n `a`s and a `!`: hours at n = 40


def one_line(result: Ran, code: int, *said: str) -> None:
    """Refused with `code` in one line (a hint line may follow) saying each of `said`; no traceback."""
    assert result.code == code, (result.args, result.code, result.err)
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2, result.err
    for words in said:
        assert words in lines[0], (words, result.err)
    calm(result)


# --- regexes ----------------------------------------------------------------------------------------------------


def test_a_backtracking_record_regex_does_not_hang_verify(team: Team, tmp_path: Path) -> None:
    log = b"a" * 40 + b"!\n" + b"a" * 5000 + b"!\n"
    files = record(team, artifact("results/run.log", hashlib.sha256(log).hexdigest(), len(log)),
                   metric("tput", 1, "results/run.log", regex=CATASTROPHIC),
                   metric("lookaround", 1, "results/run.log", regex=r"(?<=a)(\d)"))  # fmt: skip
    team.attack({"results/run.log": log, **files})
    runs, site = everyday(team, tmp_path)  # each within SECONDS
    verify = runs[0]
    assert verify.code == 1
    assert f"{record_id(files)} (fix): metric tput no longer found in results/run.log" in verify.out, verify.out
    assert "metric lookaround: bad regex (invalid perl operator: (?<=)" in verify.out, verify.out
    team.canary.assert_untouched(*outputs(runs, site), sites=(site,))


def test_a_backtracking_run_metrics_regex_from_the_shared_config_does_not_hang_run(team: Team) -> None:
    """`[run.metrics]` comes with the shared `stackmgr.toml`: every teammate's next `run` matches it against
    its log. The run ends, its result recorded; the metric is simply not found."""
    config = (team.attacker / "stackmgr.toml").read_text()
    team.attack({"stackmgr.toml": config + f"\n[run.metrics]\nevil = '{CATASTROPHIC}'\ngood = 'tput: ([0-9.]+)'\n"})
    command = "import sys; print('a' * 40 + '!'); print('a' * 5000 + '!'); print('tput: 12.5')"
    ran = victim(team, "run", "--", sys.executable, "-c", command)
    assert ran.code == 0, ran.err
    calm(ran)
    (latest,) = json.loads(victim(team, "links", "--json").out)["links"]
    assert {m["name"]: m["value"] for m in latest["metrics"]} == {"good": 12.5}


def test_a_huge_counted_repetition_is_refused_not_compiled(team: Team, tmp_path: Path) -> None:
    """RE2 is linear in the text, but its program grows with counted repetitions: a pattern too big to search
    quickly is refused by name."""
    log = b"x" * 100 + b"\n"
    files = record(team, artifact("results/run.log", hashlib.sha256(log).hexdigest(), len(log)),
                   metric("big", 1, "results/run.log", regex=r"(?:(.)*a(.){200}){4}(1)"))  # fmt: skip
    team.attack({"results/run.log": log, **files})
    verify = victim(team, "verify")
    assert verify.code == 1 and "metric big: the regex is too complex" in verify.out, verify.out
    calm(verify)


# --- nesting -------------------------------------------------------------------------------------------------------


NESTINGS = {
    "arrays": "\n[run]\nx = " + "[" * 20_000 + "]" * 20_000 + "\n",  # 40 KB
    "inline tables": "\n[run]\nx = " + "{a = " * 5_000 + "1" + " }" * 5_000 + "\n",
    "dotted keys": "\n[run]\n" + ".".join(["a"] * 5_000) + " = 1\n",
    "a key of a million parts": "\n[run]\n" + " . ".join(["a"] * 1_000_000) + " = 1\n",  # tomllib: quadratic
}


@pytest.mark.parametrize("nesting", NESTINGS)
def test_a_deeply_nested_record_is_one_line_naming_it_and_apply_goes_on(
    team: Team, tmp_path: Path, nesting: str
) -> None:
    files = record(team, NESTINGS[nesting])
    team.attack(files)
    (name,) = files
    for args in (("links",), ("show", "fix"), ("report", "-o", str(tmp_path / "site"))):
        one_line(victim(team, *args), 3, name, "nested more than 64 levels deep")
    verify = victim(team, "verify")
    assert verify.code == 1 and f"{name}: not a readable link record (nested more than 64 levels" in verify.out
    assert victim(team, "reset").code == 0  # so that `apply` brings `fix` back and asks the do-not-revive lanes
    applied = victim(team, "apply", "replay")  # one such record used to stop `apply` of every series
    assert applied.code == 0 and name in applied.err and "do-not-revive" in applied.err, applied.err
    calm(verify, applied)


def test_a_nested_override_record_is_left_out(team: Team) -> None:
    team.attack({"links/fix/override-20260101T000000Z-000000000000": "lanes = " + "[" * 20_000 + "]" * 20_000})
    for args in (("show", "fix"), ("apply", "replay"), ("links",)):
        shown = victim(team, *args)
        assert shown.code == 0, (args, shown.err)
        calm(shown)


def nested_json(depth: int) -> bytes:
    return b'{"output_throughput": 1.5, "model_id": "m", "deep": ' + b"[" * depth + b"]" * depth + b"}"


def test_a_nested_json_result_is_said_naming_it(team: Team, tmp_path: Path) -> None:
    """A result file nested 100,000 deep: `verify` re-derives a JSON pointer metric from it, `compare`, `links`
    and the report read its run configuration, the report pretty-prints it: each says what is wrong with it,
    or leaves it out, instead of `internal error: RecursionError`."""
    data = nested_json(100_000)
    files = record(team, artifact("results/bench.json", hashlib.sha256(data).hexdigest(), len(data)),
                   metric("output_throughput", 1.5, "results/bench.json", pointer="/output_throughput"))  # fmt: skip
    team.attack({"results/bench.json": data, **files})
    runs, site = everyday(team, tmp_path)
    verify = runs[0]
    assert verify.code == 1
    assert "metric output_throughput: results/bench.json: nested more than 64 levels deep" in verify.out
    assert all(r.code == 0 for r in runs[1:]), [(r.args, r.err) for r in runs if r.code]
    linked = victim(team, "link", "fix", "--from-json", str(team.victim.store / "results" / "bench.json"))
    one_line(linked, 3, "results/bench.json: nested more than 64 levels deep")
    team.canary.assert_untouched(*outputs(runs, site), sites=(site,))
    (tmp_path / "mine.json").write_bytes(nested_json(60))  # within the limit: read as ever
    assert victim(team, "link", "fix", "--from-json", str(tmp_path / "mine.json")).code == 0


# --- size --------------------------------------------------------------------------------------------------------


PEAK = """import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=%d)
sys.stderr.write(done.stderr.decode("utf-8", "replace"))
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"""  # KiB, of its biggest child


def peak_kib(team: Team, *args: str) -> int:
    """The most memory `stackmgr ARGS` took (KiB), run as the victim; it must succeed or find problems (exit 1)."""
    argv = [sys.executable, "-m", "stackmgr", "--store", str(team.victim.store), *args]
    done = subprocess.run([sys.executable, "-c", PEAK % SECONDS, *argv], capture_output=True, text=True,
                          timeout=SECONDS + 10)  # fmt: skip
    assert done.returncode == 0, done.stderr
    code, kib = map(int, done.stdout.split())
    assert code in (0, 1) and "Traceback" not in done.stderr, (args, done.stderr)
    return kib


def zeros(path: Path, size: int) -> str:
    """Write `size` zero bytes at `path`, a MiB at a time; their sha256."""
    digest, block = hashlib.sha256(), bytes(1 << 20)
    with path.open("wb") as f:
        for _ in range(size >> 20):
            f.write(block)
            digest.update(block)
    return digest.hexdigest()


@pytest.mark.slow
def test_an_80_mib_artifact_of_zeros_is_read_a_block_at_a_time(team: Team, tmp_path: Path) -> None:
    """80 MiB of zeros (over the 64 MiB a result JSON may be, more than the 48 MiB a command may grow by) packs to
    80 KiB: cheap to push, and `verify` and the report read it whole (as did a metric's JSON pointer on it).
    Hashing, the regex scan, the preview and the JSON's size check take what a small file takes."""
    (team.attacker / "results").mkdir()
    small = zeros(team.attacker / "results" / "small.bin", 1 << 20)
    small_record = record(team, artifact("results/small.bin", small, 1 << 20),
                          metric("s", 1, "results/small.bin", regex="([0-9]+)"),
                          metric("p", 1, "results/small.bin", pointer="/p"), created="2026-01-01T00:00:00.000000Z")
    git(team.attacker, "add", "results/small.bin")
    team.attack(small_record)
    before = {cmd: peak_kib(team, cmd, *more) for cmd, *more in (("verify",), ("report", "-o", str(tmp_path / "s1")))}

    big = zeros(team.attacker / "results" / "zeros.bin", 80 << 20)
    big_record = record(team, artifact("results/zeros.bin", big, 80 << 20),
                        metric("z", 1, "results/zeros.bin", regex="([0-9]+)"),
                        metric("p", 1, "results/zeros.bin", pointer="/p"))  # fmt: skip
    git(team.attacker, "add", "results/zeros.bin")
    team.attack(big_record)
    after = {cmd: peak_kib(team, cmd, *more) for cmd, *more in (("verify",), ("report", "-o", str(tmp_path / "s2")))}
    for cmd, kib in after.items():
        assert kib - before[cmd] < 48 * 1024, (cmd, before[cmd], kib)  # not 80 MiB more
    verify = victim(team, "verify")
    assert "metric p: results/zeros.bin is over 64 MiB: not parsed" in verify.out, verify.out
    assert "metric z no longer found in results/zeros.bin" in verify.out
    assert f"{record_id(big_record)} (fix): artifact" not in verify.out, "it verifies: its hash is right"


@pytest.mark.regression("a 5,000-digit integer in a pulled stackmgr.toml: every command an internal error")
def test_a_giant_integer_in_the_shared_config_is_one_line_naming_it(team: Team) -> None:
    config = (team.attacker / "stackmgr.toml").read_text()
    team.attack({"stackmgr.toml": config + "\nunused = " + "9" * 5000 + "\n"})
    for args in (("check",), ("status",), ("lint",)):
        result = team.sm(*args)
        assert result.code == 3 and "stackmgr.toml: not valid TOML" in result.err, (args, result.err)
        assert "internal error" not in result.err and len(result.err.splitlines()) == 1


@pytest.mark.regression("a record's `value = nan` made `links --json` an internal error")
def test_a_nan_metric_is_said_in_json_not_a_crash(team: Team, tmp_path: Path) -> None:
    edited_record(team, tmp_path, "value = 1.0", "value = nan")
    listed = team.sm("links", "--json")
    assert listed.code == 0 and "internal error" not in listed.err, listed.err
    assert '"nan"' in listed.out and "NaN" not in listed.out
