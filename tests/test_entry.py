"""The start-up fast path parses the same options as the click CLI and gives the same results."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stackmgr.cli.argspec import parse_fast
from tests.conftest import Lab


@pytest.mark.parametrize(
    ("argv", "parsed"),
    [
        (["check"], ("check", {}, [])),
        (["--store", "/s", "--json", "check", "-v", "vllm"], ("check", {"store": "/s", "as_json": True,
                                                                       "verbose": True}, ["vllm"])),
        (["--store=/s", "check", "--quiet"], ("check", {"store": "/s", "quiet": True}, [])),
        (["save", "p", "-t", "vllm", "-m", "-starts with a dash", "src/"],
         ("save", {"tree": "vllm", "message": "-starts with a dash"}, ["p", "src/"])),
        (["save", "p", "--message=x", "--series", "s", "--update", "--json"],
         ("save", {"message": "x", "series": "s", "update": True, "as_json": True}, ["p"])),
        (["apply", "s", "--guard", "xpu", "--guard=cuda", "--3way", "-t", "vllm", "--dry-run"],
         ("apply", {"guards": ("xpu", "cuda"), "three_way": True, "only_tree": "vllm", "dry_run": True}, ["s"])),
        (["run", "-t", "vllm", "--name", "qps1", "--result-dir=r", "--", "vllm", "bench", "-x", "--", "y"],
         ("run", {"trees": ("vllm",), "name": "qps1", "result_dirs": ("r",)}, ["--", "vllm", "bench", "-x", "--", "y"])),  # noqa: E501
        (["run", "--json", "./bench.sh", "--help"], ("run", {"as_json": True}, ["./bench.sh", "--help"])),
        (["status", "vllm", "--json"], ("status", {"as_json": True}, ["vllm"])),
    ],
)  # fmt: skip
def test_plain_forms_are_parsed(argv: list[str], parsed: tuple[str, dict[str, object], list[str]]) -> None:
    assert parse_fast(argv) == parsed


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["check", "--help"], ["save", "-mx", "p"], ["check", "-vq"], ["save", "p", "--", "-x"],
     ["save", "p", "-m"], ["links"], ["status", "-v"], ["--store"], ["--bogus", "check"], ["check", "--update"],
     ["save", "p", "--update=yes"], ["run", "--help"], ["run", "--bogus", "--", "x"], ["run", "--name"]],
)  # fmt: skip
def test_anything_unusual_goes_to_click(argv: list[str]) -> None:
    assert parse_fast(argv) is None


def test_both_paths_save_identical_bytes(lab: Lab, tmp_path: object) -> None:
    (lab.tree / "README").write_text("edited\n")
    fast = lab.sm("save", "fast", "--message=same words", "-t", "vllm")
    assert fast.code == 0, fast.err
    slow = lab.sm("save", "slow", "-msame words", "-tvllm")  # bundled values: parsed by click
    assert slow.code == 0, slow.err
    patches = lab.store / "patches"
    assert (patches / "fast.patch").read_bytes() == (patches / "slow.patch").read_bytes()
    assert fast.out.replace("fast", "X") == slow.out.replace("slow", "X")


def test_check_save_and_apply_start_without_click(lab: Lab) -> None:
    (lab.tree / "README").write_text("edited\n")
    probe = (
        "import sys; from stackmgr.cli.entry import main; "
        "codes = [main(['--store', sys.argv[1], *a]) for a in (['check'], ['save', 'p', '-m', 'm', '--series', 's'],"
        " ['check'], ['apply', 's'])]; "
        "heavy = [m for m in ('click', 'rich', 'unidiff', 'git') if m in sys.modules]; print(codes, heavy)"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(lab.store)], capture_output=True, check=True)
    assert out.stdout.decode().splitlines()[-1] == "[1, 0, 0, 0] []"
