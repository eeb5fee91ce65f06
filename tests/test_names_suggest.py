"""Did you mean: a mistyped patch, series, tree or run name is answered with the store's closest names, in the one
line of the refusal, its exit code unchanged (docs/FORMATS.md#names)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import Lab, Result


def _refused(result: Result, code: int, *says: str) -> None:
    """One line on stderr, the exit code, nothing on stdout."""
    assert result.code == code, result
    assert result.err.startswith("stackmgr: ") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err and result.out == "", result
    for words in says:
        assert words in result.err, result.err


def _store_files(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
            if p.is_file() and ".stackmgr" not in p.parts and ".git" not in p.parts}  # fmt: skip


@pytest.fixture
def day(lab: Lab) -> Lab:
    """A morning's work: `fp8-scale` saved into series `fp8-sweep`, then the tree reset to its base."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fp8-scale", "--series", "fp8-sweep", "-m", "scale").code == 0
    assert lab.sm("reset").code == 0
    return lab


PATCH_TYPOS = [
    ("show", "fp8-scal"),
    ("diff", "fp8-scal"),
    ("drop", "fp8-scal"),
    ("rename", "fp8-scal", "fp8-new"),
    ("link", "fp8-scal", "results.log"),
    ("interdiff", "fp8-scal", "fp8-scale"),
    ("series", "add", "fp8-sweep", "fp8-scal"),
    ("series", "remove", "fp8-sweep", "fp8-scal"),
    ("series", "move", "fp8-sweep", "fp8-scal", "1"),
    ("push", "fp8-scal"),
    ("pop", "fp8-scal"),
]


@pytest.mark.parametrize("args", PATCH_TYPOS, ids=lambda a: " ".join(a[:2]))
def test_a_mistyped_patch_name_is_answered_with_the_closest_patch(day: Lab, args: tuple[str, ...]) -> None:
    (day.store / "results.log").write_text("tput 1\n")
    before = _store_files(day.store)
    if args[0] in ("push", "pop"):
        assert day.sm("apply", "fp8-sweep").code == 0
        if args[0] == "push":
            assert day.sm("pop", "-a").code == 0
        before = _store_files(day.store)
    _refused(day.sm(*args), 2, 'did you mean "fp8-scale"?', "fp8-scal")
    assert _store_files(day.store) == before


def test_a_patch_name_nothing_is_close_to_keeps_the_old_hint(day: Lab) -> None:
    _refused(day.sm("show", "zzzz"), 2, "no patch named zzzz", "see `stackmgr series`")


def test_up_to_three_suggestions_closest_first(day: Lab) -> None:
    for name in ("fp8-scala", "fp8-scald", "fp8-scalp", "fp8-scalx"):
        (day.store / "patches" / f"{name}.patch").write_bytes(b"placeholder\n")
    refused = day.sm("show", "fp8-scal")
    _refused(refused, 2, "did you mean ")
    hint = refused.err.split("did you mean ")[1]
    assert hint.count('"') == 6, refused.err  # three names, each quoted


def test_a_suggestion_is_never_a_patch_the_lookup_would_refuse(day: Lab, tmp_path: Path) -> None:
    outside = tmp_path / "evil.patch"
    outside.write_bytes(b"not the store's\n")
    (day.store / "patches" / "fp8-scalx.patch").symlink_to(outside)  # a pulled link out of patches/
    (day.store / "patches" / "fp8-scaly.patch").mkdir()  # not a file
    refused = day.sm("show", "fp8-scal")
    _refused(refused, 2, 'did you mean "fp8-scale"?')
    assert "fp8-scalx" not in refused.err and "fp8-scaly" not in refused.err


def test_a_store_file_name_with_control_characters_never_reaches_the_terminal(day: Lab) -> None:
    (day.store / "patches" / "fp8-scal\x1b[31m.patch").write_bytes(b"placeholder\n")
    (day.store / "series" / "fp8-swee\x07p").write_bytes(b"fp8-scale.patch\n")
    for args in (("show", "fp8-scal"), ("series", "show", "fp8-swep")):
        refused = day.sm(*args)
        assert refused.code == 2 and "\x1b" not in refused.err and "\x07" not in refused.err, refused.err


SERIES_TYPOS = [
    ("series", "fp8-swep"),
    ("series", "show", "fp8-swep"),
    ("series", "rm", "fp8-swep"),
    ("apply", "fp8-swep"),
    ("rebase", "fp8-swep", "--onto", "HEAD"),
    ("export", "fp8-swep", "--mbox", "out.mbox"),
    ("links", "--series", "fp8-swep"),
]


@pytest.mark.parametrize("args", SERIES_TYPOS, ids=lambda a: " ".join(a[:2]))
def test_a_mistyped_series_name_is_answered_with_the_closest_series(day: Lab, args: tuple[str, ...]) -> None:
    before = _store_files(day.store)
    refused = day.sm(*args)
    assert refused.code in (2, 3), refused
    _refused(refused, refused.code, 'did you mean "fp8-sweep"?')
    assert _store_files(day.store) == before


def test_a_series_name_in_the_wrong_case_is_suggested(day: Lab) -> None:
    _refused(day.sm("series", "show", "FP8-SWEEP"), 2, 'did you mean "fp8-sweep"?')


def test_save_series_typo_keeps_its_advice_with_the_quoted_suggestion(day: Lab) -> None:
    assert day.sm("apply", "fp8-sweep").code == 0
    (day.tree / "README").write_text("hello\nmore\n")
    refused = day.sm("save", "more", "--series", "fp8-swep", "-m", "more")
    _refused(refused, 2, 'did you mean "fp8-sweep"?', "`--series fp8-sweep` adds to it")
    assert not (day.store / "patches" / "more.patch").exists()


@pytest.mark.parametrize("args", [("status", "vlm"), ("push", "-t", "vlm"), ("links", "--tree", "vlm")],
                         ids=lambda a: " ".join(a[:2]))  # fmt: skip
def test_a_mistyped_tree_name_is_answered_with_the_closest_tree(day: Lab, args: tuple[str, ...]) -> None:
    _refused(day.sm(*args), 2, "vlm", 'did you mean "vllm"?')


def test_a_mistyped_run_name_or_link_id_is_answered_with_the_closest(day: Lab) -> None:
    assert day.sm("apply", "fp8-sweep").code == 0
    ran = day.sm("--json", "run", "--name", "baseline-a100", "--", sys.executable, "-c", "print('tput 1')")
    assert ran.code == 0, ran
    (record,) = [p for p in (day.store / "links").rglob("*.toml")]
    link = str(tomllib.loads(record.read_text())["id"])
    _refused(day.sm("apply", "--link", "baseline-a10"), 2, 'did you mean "baseline-a100"?')
    _refused(day.sm("apply", "--link", link[:-1] + ("z" if link[-1] != "z" else "y")), 2, f'did you mean "{link}"?')
    _refused(day.sm("link", "fp8-scale", "--amends", "baseline-a10"), 2, 'did you mean "baseline-a100"?')


def test_compare_of_a_mistyped_patch_or_run_suggests_either(day: Lab) -> None:
    _refused(day.sm("compare", "fp8-scal"), 2, "no link or patch named 'fp8-scal'", 'did you mean "fp8-scale"?')
