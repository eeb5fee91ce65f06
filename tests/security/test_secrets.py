"""Secrets must not leave with the results: `stackmgr run` records the environment, the command line
and the accelerators into a link record the team pushes. A variable whose name or value looks secret is recorded
as `<set>`, a secret on the command line as `<redacted>`, and a pulled `stackmgr.toml` can name more variables to
record but never publish a value; only this machine's `stackmgr.local.toml` (`[run] env_by_value`) can."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from stackmgr.evidence import redaction
from tests.conftest import stackmgr_process
from tests.security.conftest import Team

VLLM_KEY = "sk-live-4f9c2a7e1b3d5f60a8c9e2b4"
HF_TOKEN = "hf_QmT3xZr8WkLp2VnYs6BcHd9JfGa"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
PASSWORD = "correct-horse-battery-staple"
DB_PASSWORD = "pg-pass-7731"
BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ2aWN0aW0ifQ.c2lnbmF0dXJlLWJ5dGVz"


def victim_runs(team: Team, *argv: str, **env: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """The victim's `stackmgr run -- ARGV` with ENV set, and the run table of the record it wrote."""
    before = set((team.victim.store / "links").rglob("*.toml"))
    done = stackmgr_process(team.victim.store, "run", "--", *argv, **env)
    assert done.returncode == 0, done.stderr
    (record,) = set((team.victim.store / "links").rglob("*.toml")) - before
    return done, tomllib.loads(record.read_text())["run"]


def python(code: str = "print('throughput 107.7 tok/s')") -> list[str]:
    return [sys.executable, "-c", code]


def assert_nowhere(secrets: tuple[str, ...], *roots: Path, outputs: tuple[str, ...] = ()) -> None:
    """No secret's bytes in any file below the roots (the store: links/, artifacts/, .stackmgr/, its .git) nor
    in any output."""
    for root in roots:
        for top, _dirs, names in os.walk(root):
            for name in names:
                path = Path(top) / name
                if path.is_symlink() or not path.is_file():
                    continue
                data = path.read_bytes()
                for secret in secrets:
                    assert secret.encode() not in data, f"{secret[:6]}… is in {path}"
    for out in outputs:
        for secret in secrets:
            assert secret not in out, f"{secret[:6]}… reached the output"


def test_an_api_key_and_a_hub_token_in_the_environment_never_reach_the_store_or_the_remote(team: Team) -> None:
    done, run = victim_runs(team, *python(), VLLM_API_KEY=VLLM_KEY, HF_TOKEN=HF_TOKEN, VLLM_USE_V1="1")
    assert run["env"]["VLLM_API_KEY"] == "<set>" and "HF_TOKEN" not in run["env"]
    assert run["env"]["VLLM_USE_V1"] == "1"  # what shapes a run is still recorded
    shown = [team.sm("links", "--json").out, team.sm("show", "fix").out, team.sm("links").out]
    assert_nowhere((VLLM_KEY, HF_TOKEN), team.victim.store, outputs=(done.stdout, done.stderr, *shown))
    team.victim_commit("results of today's run")  # the results go to the team
    assert_nowhere((VLLM_KEY, HF_TOKEN), team.attacker, team.remote)
    team.canary.assert_untouched(done.stdout, done.stderr)


def test_a_runtime_variable_holding_a_credential_is_recorded_as_set(team: Team) -> None:
    endpoint = f"https://bench:{PASSWORD}@metrics.lab.example/push"
    _done, run = victim_runs(team, *python(), VLLM_METRICS_ENDPOINT=endpoint, VLLM_PLUGIN_TOKEN_SRC=HF_TOKEN,
                             TORCH_CACHE_NOTE=f"owner {BEARER}", VLLM_MAX_TOKENS="4096")  # fmt: skip
    assert run["env"]["VLLM_METRICS_ENDPOINT"] == "<set>" and run["env"]["VLLM_PLUGIN_TOKEN_SRC"] == "<set>"
    assert run["env"]["TORCH_CACHE_NOTE"] == "<set>"
    assert run["env"]["VLLM_MAX_TOKENS"] == "4096"  # a count of tokens is no token
    assert_nowhere((PASSWORD, HF_TOKEN, BEARER), team.victim.store)


def test_a_pushed_run_env_line_cannot_publish_a_teammates_secrets(team: Team) -> None:
    config = team.attacker / "stackmgr.toml"
    named = ("AWS_SECRET_ACCESS_KEY", "MY_PASSWORD", "DATABASE_URL", "vllm_api_key", "GITHUB_PAT")
    pushed = f"\n[run]\nenv = {list((*named, 'MODEL_NOTE'))}\nenv_by_value = {list(named)}\n".replace("'", '"')
    team.attack({"stackmgr.toml": config.read_text() + pushed})
    secrets = (AWS_SECRET, PASSWORD, DB_PASSWORD, VLLM_KEY, "github_pat_11AAAAAA0abcdefghijklmnop")
    done, run = victim_runs(team, *python(), AWS_SECRET_ACCESS_KEY=AWS_SECRET, MY_PASSWORD=PASSWORD,
                            DATABASE_URL=f"postgres://app:{DB_PASSWORD}@db.lab:5432/results", vllm_api_key=VLLM_KEY,
                            GITHUB_PAT=secrets[4], MODEL_NOTE="qwen3 fp8 sweep")  # fmt: skip
    assert {name: run["env"][name] for name in named} == dict.fromkeys(named, "<set>")
    assert run["env"]["MODEL_NOTE"] == "<set>"  # only the shared config names it: whether it is set, never its value
    assert_nowhere(secrets, team.victim.store, outputs=(done.stdout, done.stderr))
    team.victim_commit()
    assert_nowhere(secrets, team.attacker)


def test_a_pushed_run_env_line_naming_secrets_under_innocent_names_records_only_that_they_are_set(
        team: Team) -> None:  # fmt: skip
    """Found by review: `DB_CREDS`, `SLACK_HOOK`, `SMTPPASS` dodge any rule of names; the values too any rule of
    shapes. A name only the pulled config gives is recorded as `<set>`; this machine's own `[run] env` names it
    to record its value."""
    config = team.attacker / "stackmgr.toml"
    pushed = '\n[run]\nenv = ["DB_CREDS", "SLACK_HOOK", "OMP_NUM_THREADS"]\n'
    team.attack({"stackmgr.toml": config.read_text() + pushed})
    local = team.victim.store / "stackmgr.local.toml"
    local.write_text(local.read_text() + '\n[run]\nenv = ["OMP_NUM_THREADS"]\n')
    done, run = victim_runs(team, *python(), DB_CREDS="admin:Hunter2-CANARY", SLACK_HOOK="hooks-T000-B000-XXXX",
                            OMP_NUM_THREADS="8")  # fmt: skip
    assert run["env"]["DB_CREDS"] == run["env"]["SLACK_HOOK"] == "<set>"
    assert run["env"]["OMP_NUM_THREADS"] == "8"
    assert_nowhere(("Hunter2-CANARY", "hooks-T000-B000-XXXX"), team.victim.store, outputs=(done.stdout, done.stderr))


def test_a_pushed_local_config_cannot_opt_a_secret_in(team: Team) -> None:
    """The attacker force-adds stackmgr.local.toml (git-ignored, so a pull replaces the victim's own) asking for
    the key by value: what a pull brings is not this machine's config."""
    local = team.victim.store / "stackmgr.local.toml"
    planted = local.read_text() + '\n[run]\nenv_by_value = ["VLLM_API_KEY", "HF_TOKEN"]\nenv = ["HF_TOKEN"]\n'
    team.attack({"stackmgr.local.toml": planted})
    done = stackmgr_process(team.victim.store, "run", "--", *python(), VLLM_API_KEY=VLLM_KEY, HF_TOKEN=HF_TOKEN)
    records = [tomllib.loads(p.read_text()) for p in (team.victim.store / "links").rglob("*.toml")]
    if done.returncode == 0:  # run, yet not by the planted table's word
        assert [r["run"]["env"].get("VLLM_API_KEY") for r in records] == ["<set>"]
    else:  # refused before anything ran: a tracked local config is no longer this machine's
        assert "tracked" in done.stderr and not records and "Traceback" not in done.stderr
    assert_nowhere((VLLM_KEY, HF_TOKEN), team.victim.store, outputs=(done.stdout, done.stderr))


def test_this_machines_own_config_can_record_a_value_that_only_looks_secret(team: Team) -> None:
    local = team.victim.store / "stackmgr.local.toml"
    local.write_text(local.read_text() + '\n[run]\nenv_by_value = ["VLLM_TOKEN_BUDGET", "SESSION_LEN"]\n')
    _done, run = victim_runs(team, *python(), VLLM_TOKEN_BUDGET="8192", SESSION_LEN="32", VLLM_API_KEY=VLLM_KEY)
    assert run["env"]["VLLM_TOKEN_BUDGET"] == "8192" and run["env"]["SESSION_LEN"] == "32"
    assert run["env"]["VLLM_API_KEY"] == "<set>"  # not named there: still kept back
    assert_nowhere((VLLM_KEY,), team.victim.store)


def test_secrets_on_the_command_line_are_redacted_and_the_rest_kept(team: Team, tmp_path: Path) -> None:
    script = tmp_path / "serve_and_bench.py"
    script.write_text("print('throughput 107.7 tok/s')\n")
    argv = [sys.executable, str(script), "--model", "Qwen/Qwen3-8B", "--api-key", VLLM_KEY,
            f"--hf-token={HF_TOKEN}", "--max-num-batched-tokens", "8192", "--tokenizer", "Qwen/Qwen3-8B",
            "-H", f"Authorization: Bearer {BEARER}", f"--base-url=https://bench:{PASSWORD}@gpu7.lab:8000/v1",
            "sh -c 'MY_PASSWORD=" + DB_PASSWORD + " x'"]  # fmt: skip
    done, run = victim_runs(team, *argv)
    assert run["command"] == [sys.executable, str(script), "--model", "Qwen/Qwen3-8B", "--api-key", "<redacted>",
                              "--hf-token=<redacted>", "--max-num-batched-tokens", "8192", "--tokenizer",
                              "Qwen/Qwen3-8B", "-H", "Authorization: <redacted>",
                              "--base-url=https://bench:<redacted>@gpu7.lab:8000/v1",
                              "sh -c 'MY_PASSWORD=<redacted> x'"]  # fmt: skip
    assert_nowhere((VLLM_KEY, HF_TOKEN, BEARER, PASSWORD, DB_PASSWORD), team.victim.store,
                   outputs=(done.stdout, done.stderr))  # fmt: skip


def test_a_command_that_prints_its_key_is_named_in_a_warning_that_holds_no_secret(team: Team) -> None:
    """The log is the command's own output, kept as it is: when it holds a secret the record leaves out, the
    user is told which one, before anything is pushed."""
    code = "import os; print('server args: api_key=' + os.environ['VLLM_API_KEY'])"
    done, run = victim_runs(team, *python(code), VLLM_API_KEY=VLLM_KEY)
    assert run["env"]["VLLM_API_KEY"] == "<set>"
    assert "holds the value of VLLM_API_KEY" in done.stderr and "artifacts/" in done.stderr
    assert VLLM_KEY not in done.stderr and VLLM_KEY in done.stdout  # its output shown as it came
    quiet, _run = victim_runs(team, *python(), VLLM_API_KEY=VLLM_KEY)
    assert "holds the value" not in quiet.stderr


def test_a_bisect_records_its_runs_without_secrets(team: Team) -> None:
    done = stackmgr_process(team.victim.store, "bisect", "replay", "--", *python(), "--api-key", VLLM_KEY,
                            VLLM_API_KEY=VLLM_KEY, HF_TOKEN=HF_TOKEN)  # fmt: skip
    assert done.returncode == 1 and "every patch passes" in done.stdout, done.stderr
    records = [tomllib.loads(p.read_text()) for p in (team.victim.store / "links").rglob("*.toml")]
    assert records and all(r["run"]["env"]["VLLM_API_KEY"] == "<set>" for r in records)
    assert_nowhere((VLLM_KEY, HF_TOKEN), team.victim.store, outputs=(done.stdout, done.stderr))


def test_an_accelerator_tool_that_prints_a_credential_has_it_redacted(team: Team, tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    smi = tools / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-8b1b1e4a-0c2d)'\n"
                   f"echo 'license server https://lab:{PASSWORD}@lic.lab token {HF_TOKEN}'\n")  # fmt: skip
    smi.chmod(0o755)
    _done, run = victim_runs(team, *python(), PATH=f"{tools}{os.pathsep}{os.environ['PATH']}")
    assert run["accelerators"][0] == "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-8b1b1e4a-0c2d)"
    assert run["accelerators"][1] == "license server https://lab:<redacted>@lic.lab token <redacted>"
    assert_nowhere((PASSWORD, HF_TOKEN), team.victim.store)


@pytest.mark.parametrize(("name", "secret"), [
    ("VLLM_API_KEY", True), ("HF_TOKEN", True), ("HUGGING_FACE_HUB_TOKEN", True), ("OPENAI_API_KEY", True),
    ("WANDB_API_KEY", True), ("AWS_SECRET_ACCESS_KEY", True), ("AWS_REGION", True), ("GITHUB_PAT", True),
    ("DB_PASS", True), ("MYSQL_PWD", True), ("PGPASSWORD", True), ("SENTRY_DSN", True), ("hf_token", True),
    ("api-key", True), ("X-Auth-Token", True), ("Cookie", True), ("NCCL_IB_PKEY", True),
    ("VLLM_USE_V1", False), ("VLLM_ATTENTION_BACKEND", False), ("CUDA_VISIBLE_DEVICES", False),
    ("PYTORCH_CUDA_ALLOC_CONF", False), ("TOKENIZERS_PARALLELISM", False), ("max-num-batched-tokens", False),
    ("tokenizer-mode", False), ("GIT_AUTHOR_NAME", False), ("VLLM_KEEP_ALIVE_ON_ENGINE_DEATH", False),
    ("PWD", False), ("BYPASS_CACHE", False),
])  # fmt: skip
def test_which_names_look_secret(name: str, secret: bool) -> None:
    assert redaction.secret_name(name) is secret
