"""Link records that name files outside the store (docs/SECURITY.md): an artifact path or metric source that is
absolute, or reaches out through a symbolic link in the store, is never hashed, re-read, parsed or shown. Its
link is `broken` with a one-line reason; `verify`, `links`, `show`, `compare`, the report and `apply` go on; no
hash prefix, number or run configuration from the private file reaches any output, and `/dev/zero` is refused
at once instead of read until memory runs out."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import git
from tests.security.conftest import Symlink, Team, edited_record

SECONDS = 30  # a command on a hostile record ends within this (it reads nothing big, and nothing without end)


def toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def artifact(path: str, sha256: str = "0" * 64, size: int = 1) -> str:
    return f"\n[[artifact]]\npath = {toml_string(path)}\nsha256 = {toml_string(sha256)}\nsize = {size}\n"


def metric(name: str, value: float, source: str, regex: str = "", pointer: str = "") -> str:
    how = f"regex = {toml_string(regex)}" if regex else f"pointer = {toml_string(pointer)}"
    return (f'\n[[metric]]\nname = "{name}"\nvalue = {float(value)!r}\ndirection = "higher"\n'
            f"source = {{ artifact = {toml_string(source)}, {how} }}\n")  # fmt: skip


def record(team: Team, *tables: str, created: str = "2026-01-02T03:04:05.000000Z") -> dict[str, str]:
    """A link record of patch `fix`, byte for byte as `stackmgr link` writes one (tests/test_links.py), with the
    tables the attacker chose; its id is the sha256 of its content without the id line, as `stackmgr` makes
    it, so the victim's stackmgr takes it for an unedited record. {path in the store: content}."""
    sha = hashlib.sha256((team.victim.store / "patches" / "fix.patch").read_bytes()).hexdigest()
    head = 'schema = "stackmgr.link/v1"\n'
    rest = (f'created = "{created}"\nauthor = "Mallory <mallory@example.com>"\n'
            f'\n[patch]\nname = "fix"\ntree = "vllm"\nsha256 = "{sha}"\n' + "".join(tables)
            + '\n[verdict]\nstatus = "experimental"\ndo_not_revive = false\n')  # fmt: skip
    ident = "lnk-" + hashlib.sha256((head + rest).encode()).hexdigest()[:12]
    stamp = created.replace("-", "").replace(":", "")
    return {f"links/fix/{stamp}-{ident}.toml": head + f'id = "{ident}"\n' + rest}


def record_id(files: dict[str, str]) -> str:
    (name,) = [n for n in files if n.startswith("links/")]
    return "lnk-" + name.rsplit("-lnk-", 1)[1].removesuffix(".toml")


@dataclass
class Ran:
    args: tuple[str, ...]
    code: int
    out: str
    err: str


def victim(team: Team, *args: str, seconds: float = SECONDS) -> Ran:
    """A command as the victim runs it, in a process of its own that must end within `seconds` (killed, with
    everything it started, and failed otherwise)."""
    proc = subprocess.Popen([sys.executable, "-m", "stackmgr", "--store", str(team.victim.store), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=team.victim.store,
                            start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"`stackmgr {' '.join(args)}` ran over {seconds} s") from None
    return Ran(args, proc.returncode, out, err)


def calm(*results: Ran) -> None:
    """No traceback, no internal error: each command ended as stackmgr means commands to end."""
    for r in results:
        assert "Traceback" not in r.err and "internal error" not in r.err, (r.args, r.err)


def everyday(team: Team, tmp_path: Path) -> tuple[list[Ran], Path]:
    """What the victim runs after the pull: every reader of link records, and `apply` of the series. The report
    directory comes back for the canary's check."""
    site, page = tmp_path / "site", tmp_path / "lessons.md"
    runs = [victim(team, *args) for args in (
        ("verify",), ("links",), ("links", "--json"), ("show", "fix"), ("show", "--json", "fix"),
        ("compare", "fix"), ("report", "-o", str(site)), ("report", "--markdown", str(page)),
        ("apply", "replay"), ("status",),
    )]  # fmt: skip
    calm(*runs)
    return runs, site


def outputs(runs: Iterable[Ran], site: Path) -> list[str]:
    texts = [r.out + r.err for r in runs]
    page = site.parent / "lessons.md"
    return texts + ([page.read_text()] if page.exists() else [])


def link_json(team: Team, ident: str) -> dict[str, object]:
    shown = victim(team, "show", "--json", "fix")
    assert shown.code == 0, shown.err
    (link,) = [k for k in json.loads(shown.out)["links"] if k["id"] == ident]
    return dict(link)


# --- an artifact or metric source outside the store -----------------------------------------------------------


def test_an_artifact_named_by_absolute_path_is_broken_and_its_hash_never_shown(team: Team, tmp_path: Path) -> None:
    """Even a record that states the private file's true sha256 (a public key's is no secret) gets no answer:
    were the file hashed, the link would be `fresh`, an oracle for what the victim's file holds."""
    secret = tmp_path / "outside" / "secret.txt"
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    rsa = team.home / ".ssh" / "id_rsa"
    files = record(team, artifact(str(secret), digest, secret.stat().st_size), artifact(str(rsa)))
    team.attack(files)
    runs, site = everyday(team, tmp_path)
    link = link_json(team, record_id(files))
    assert link["state"] == "broken" and not any(a["ok"] for a in link["artifacts"])  # type: ignore[attr-defined]
    verify = runs[0]
    assert verify.code == 1
    assert f"artifact {secret} is outside the store: never read" in verify.out
    assert f"artifact {rsa} is outside the store: never read" in verify.out
    rsa_digest = hashlib.sha256(rsa.read_bytes()).hexdigest()  # the record says zeros: the file's own is news
    assert all(rsa_digest[:12] not in text for text in outputs(runs, site))
    assert runs[-2].code == 0, runs[-2].err  # apply replay
    team.canary.assert_untouched(*outputs(runs, site), sites=(site,))


def test_a_metric_regex_on_a_private_file_gives_no_number(team: Team, tmp_path: Path) -> None:
    """The record's metric reads the canary through its regex: were it re-derived, `verify` would print the
    digits of the secret ("metric leak is 1234 in …, recorded 1")."""
    secret = tmp_path / "outside" / "secret.txt"
    bashrc = team.home / ".bashrc"
    files = record(team, metric("leak", 1, str(secret), regex=r"CANARY-\D*(\d+)"),
                   metric("rc", 1, str(bashrc), regex=r"CANARY-\D*(\d+)"))  # fmt: skip
    team.attack(files)
    runs, site = everyday(team, tmp_path)
    verify = runs[0]
    assert verify.code == 1 and "metric leak is" not in verify.out and "metric rc is" not in verify.out
    assert f"metric leak: its source {secret} is outside the store: never read" in verify.out
    assert f"metric rc: its source {bashrc} is outside the store: never read" in verify.out
    team.canary.assert_untouched(*outputs(runs, site), sites=(site,))


@pytest.fixture
def private_result(tmp_path: Path, team: Team) -> Path:
    """A vllm bench result of the victim's, outside the store, whose model name is the canary's secret."""
    path = tmp_path / "private" / "bench.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"model_id": team.canary.secret, "request_rate": 7, "num_prompts": 9,
                                "output_throughput": 4242.5}))  # fmt: skip
    return path


@pytest.mark.parametrize("reach", ["absolute path", "symlinked file", "symlinked folder", "pointer source"])
def test_a_result_json_outside_the_store_never_gives_a_run_configuration(
    team: Team, tmp_path: Path, private_result: Path, reach: str
) -> None:
    """`compare`, `links --json`, `show --json`, the report and the lessons page read a result's JSON for its
    model, rate and prompts: never from a file outside the store, however the record reaches it."""
    digest = hashlib.sha256(private_result.read_bytes()).hexdigest()
    size = private_result.stat().st_size
    if reach == "absolute path":
        files: dict[str, str | Symlink] = {**record(team, artifact(str(private_result), digest, size))}
    elif reach == "symlinked file":
        files = {"results/bench.json": Symlink(str(private_result)),
                 **record(team, artifact("results/bench.json", digest, size),
                          metric("output_throughput", 1, "results/bench.json", pointer="/output_throughput"))}
    elif reach == "symlinked folder":
        files = {"results": Symlink("../private"),
                 **record(team, artifact("results/bench.json", digest, size),
                          metric("output_throughput", 1, "results/bench.json", pointer="/output_throughput"))}
    else:
        files = {**record(team, metric("output_throughput", 1, str(private_result), pointer="/output_throughput"))}
    team.attack(files)  # type: ignore[arg-type]
    runs, site = everyday(team, tmp_path)
    shown = json.loads(runs[4].out)["links"][0]
    assert shown["config"] == {"model_id": None, "request_rate": None, "max_concurrency": None, "num_prompts": None}
    assert runs[0].code == 1, runs[0].out  # verify: broken, or the metric's source not read
    for text in outputs(runs, site):
        assert "4242.5" not in text and "rate 7" not in text, text
    team.canary.assert_untouched(*outputs(runs, site), sites=(site,))


def test_a_symlinked_artifact_is_broken_with_its_reason(team: Team, tmp_path: Path) -> None:
    secret = tmp_path / "outside" / "secret.txt"
    files = record(team, artifact("results/key.txt", hashlib.sha256(secret.read_bytes()).hexdigest()))
    team.attack({"results/key.txt": Symlink("../../outside/secret.txt"), **files})
    runs, site = everyday(team, tmp_path)
    assert link_json(team, record_id(files))["state"] == "broken", "the true sha256 recorded: no oracle"
    assert "artifact results/key.txt is a symbolic link" in runs[0].out, runs[0].out
    team.canary.assert_untouched(*outputs(runs, site), sites=(site,))


# --- /dev/zero and other files without end ---------------------------------------------------------------------


def test_dev_zero_as_an_artifact_or_source_is_refused_at_once(team: Team, tmp_path: Path) -> None:
    """`links` (which reads a result's JSON for its run configuration) and even `apply` of every series (which
    reads the records for do-not-revive lanes) read /dev/zero until memory ran out."""
    files = record(team, artifact("/dev/zero"), artifact("results/zero.json"), artifact("patches"),
                   metric("z", 1, "/dev/zero", pointer="/z"), metric("r", 1, "results/zero.json", regex="(1)"),
                   metric("w", 1, "/dev/urandom", regex="(1)"))  # fmt: skip
    team.attack({"results/zero.json": Symlink("/dev/zero"), **files})
    runs, site = everyday(team, tmp_path)
    verify = runs[0]
    assert verify.code == 1
    assert "artifact /dev/zero is outside the store: never read" in verify.out
    assert "artifact results/zero.json is a symbolic link" in verify.out
    assert "metric w: its source /dev/urandom is outside the store: never read" in verify.out
    assert "artifact patches is not a regular file" in verify.out
    assert all(r.code == 0 for r in runs[1:] if r.args[0] != "verify"), [(r.args, r.err) for r in runs]
    team.canary.assert_untouched(*outputs(runs, site), sites=(site,))


# --- what a record names to rebuild a measured state ---------------------------------------------------------


@pytest.mark.parametrize("residue", ["/dev/zero", "../outside/secret.txt", "artifacts/sha256/../../x"])
def test_a_residue_outside_artifacts_is_refused_naming_the_record(team: Team, tmp_path: Path, residue: str) -> None:
    """A measured state's residue is applied by `apply --link` and, once applied, read by every `check`: only a
    file stackmgr keeps by content (`artifacts/sha256/…`) can be one."""
    head = team.victim.tree
    base = subprocess.run(["git", "-C", str(head), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    stack = (f'\n[[stack]]\ntree = "vllm"\nbase = "{base.strip()}"\nsnapshot = "{"1" * 40}"\nresidue = true\n'
             f"residue_patch = {toml_string(residue)}\n")  # fmt: skip
    files = record(team, stack)
    team.attack(files)
    (name,) = files
    shown = victim(team, "show", "fix")
    assert shown.code == 3 and f"{name}: not a readable link record" in shown.err.replace(
        str(team.victim.store) + "/", "")  # fmt: skip
    assert "is not a file under artifacts/sha256/" in shown.err and len(shown.err.strip().splitlines()) <= 2
    rebuilt = victim(team, "apply", "--link", record_id(files))
    assert rebuilt.code != 0
    assert victim(team, "reset").code == 0  # so that `apply` brings `fix` back and asks the do-not-revive lanes
    applied = victim(team, "apply", "replay")  # one damaged record does not stop every apply: said, and left out
    assert applied.code == 0 and name.split("/")[-1] in applied.err, applied.err
    calm(shown, rebuilt, applied)
    team.canary.assert_untouched(shown.err, rebuilt.err, applied.err)


# --- records reached through a symbolic link ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["record file", "record folder", "to /dev/zero"])
def test_a_record_reached_through_a_symlink_is_not_read(team: Team, tmp_path: Path, how: str) -> None:
    """A record outside the store, its lesson the canary's secret, linked in as a record file or as a patch's
    records folder: never parsed, so its lesson is shown nowhere; a record linked to /dev/zero is not read
    without end."""
    (tmp_path / "private").mkdir()
    outside = tmp_path / "private" / "20260101T000000.000000Z-lnk-000000000000.toml"
    outside.write_text('schema = "stackmgr.link/v1"\nid = "lnk-000000000000"\ncreated = "2026-01-01T00:00:00Z"\n'
                       '[patch]\nname = "fix"\ntree = "vllm"\nsha256 = "00"\n'
                       f'[verdict]\nstatus = "rejected"\nlesson = "{team.canary.secret}"\n')  # fmt: skip
    if how == "record file":
        files: dict[str, str | Symlink] = {"links/fix/" + outside.name: Symlink(str(outside))}
    elif how == "record folder":
        files = {"links/fix": Symlink(str(outside.parent))}
    else:
        files = {"links/fix/20260101T000000.000000Z-lnk-111111111111.toml": Symlink("/dev/zero")}
    team.attack(files)  # type: ignore[arg-type]
    runs, site = everyday(team, tmp_path)
    links = runs[1]
    assert links.code == 3 and "symbolic link" in links.err and len(links.err.strip().splitlines()) <= 2, links.err
    assert runs[-2].code == 0, runs[-2].err  # apply replay: the record is said, not obeyed
    team.canary.assert_untouched(*outputs(runs, site), sites=(site,))


@pytest.mark.parametrize("source", ["{ artifact = 'results/run.log', regex = 5 }",
                                    "{ artifact = 'results/run.log', pointer = [1] }",
                                    "{ artifact = ['/etc/passwd'], regex = '(1)' }"])  # fmt: skip
def test_a_metric_source_that_is_not_text_is_refused_naming_the_record(team: Team, source: str) -> None:
    files = record(team, f'\n[[metric]]\nname = "m"\nvalue = 1.0\ndirection = "higher"\nsource = {source}\n')
    team.attack({"results/run.log": "1\n", **files})
    (name,) = files
    for args in (("verify",), ("links",), ("show", "fix"), ("reset",), ("apply", "replay")):
        ran = victim(team, *args)
        if args == ("reset",):  # so that `apply` brings `fix` back and asks the do-not-revive lanes
            assert ran.code == 0, ran.err
            continue
        calm(ran)
        assert name.split("/")[-1] in ran.out + ran.err, (args, ran.out, ran.err)


def test_the_report_never_copies_a_patch_file_linked_out_of_the_store(team: Team, tmp_path: Path) -> None:
    """The report keeps a raw copy of every patch for reviewers: a patch file that is a link to the private key
    must not put the key in the site."""
    files = record(team)  # a result of the patch: the report gives it a page, with the patch's raw copy
    git(team.attacker, "rm", "-q", "--", "patches/fix.patch")
    team.attack({"patches/fix.patch": Symlink("../../home/.ssh/id_rsa"), **files})
    site = tmp_path / "site"
    made = victim(team, "report", "-o", str(site))
    calm(made)
    assert made.code == 0, made.err
    team.canary.assert_untouched(made.out, made.err, sites=(site,))


@pytest.mark.regression("`apply --link` wrote a record's `[[stack]] series = \"../../home/.bashrc\"` into the state")
def test_a_record_whose_stack_names_no_series_is_refused_naming_it(team: Team, tmp_path: Path) -> None:
    record = edited_record(team, tmp_path, 'series = "replay"', 'series = "../../home/.bashrc"')
    result = team.sm("apply", "--link", record.stem.rsplit("-", 2)[-2] + "-" + record.stem.rsplit("-", 1)[-1])
    assert result.code != 0 and "not a series name" in result.err, result.err
    state = (team.victim.store / ".git" / "stackmgr-store" / "applied.json").read_text()
    assert ".bashrc" not in state
    team.canary.assert_untouched(result.out, result.err)
