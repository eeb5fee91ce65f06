"""A do-not-revive lane is guarded the same way by every move that brings its change back into a tree or a series
(`apply`, `push`, `push -a`, `apply --link`, `import --series`, `series add`, `save --series`), and a lane's status
changes only when a verdict is given: an amendment keeps what it does not change."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.conftest import Lab, git, one_line_error
from tests.conftest import link_id as _link
from tests.conftest import show_json as _show

KERNELS = "vllm-xpu-kernels"
LESSON = "tile 128 breaks the color gate"


def _tree_id(tree: Path) -> str:
    """The working tree's id (untracked files included), computed without stackmgr."""
    index = tree / ".git" / "test-revival-index"
    env = dict(os.environ, GIT_INDEX_FILE=str(index))
    subprocess.run(["git", "read-tree", "HEAD"], cwd=tree, env=env, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tree, env=env, check=True)
    out = subprocess.run(["git", "write-tree"], cwd=tree, env=env, check=True, capture_output=True)
    index.unlink()
    return out.stdout.decode().strip()


def _dead_lane_popped(ev: Lab) -> tuple[str, Path]:
    """gemm-tile measured on its tree, rejected, do not revive; then popped off the kernels tree (0 of 1)."""
    lid = _link(ev, "gemm-tile", "results/probe.log", "--verdict", "rejected", "--do-not-revive", "--lesson", LESSON)
    assert ev.sm("pop", "-t", KERNELS).code == 0
    kernels = ev.tree.parent / "kernels"
    assert (kernels / "gemm.cpp").read_text() == "int tile = 64;\n"
    return lid, kernels


def _refusal(name: str, lid: str) -> str:
    return (f"stackmgr: {name} revives a do-not-revive lane ({lid} on gemm-tile: {LESSON}); "
            'pass --override "why it is worth another try" to go ahead\n')  # fmt: skip


def _overrides(ev: Lab) -> list[dict[str, object]]:
    return [tomllib.loads(p.read_text()) for p in sorted((ev.store / "links").glob("*/override-*"))]


@pytest.mark.regression("push and push -a brought a do-not-revive lane back that apply refuses")
@pytest.mark.parametrize("args", [(), ("-a",), ("gemm-tile",)])
def test_push_refuses_a_do_not_revive_lane_as_apply_does(ev: Lab, args: tuple[str, ...]) -> None:
    lid, kernels = _dead_lane_popped(ev)
    before = _tree_id(kernels)
    applied = ev.sm("apply", "kernels", "-t", KERNELS)
    one_line_error(applied, 1)
    refused = ev.sm("push", "-t", KERNELS, *args)
    one_line_error(refused, applied.code)
    assert refused.err == applied.err == _refusal("gemm-tile", lid)
    assert _tree_id(kernels) == before and not _overrides(ev), "nothing changed"
    pushed = ev.sm("push", "-t", KERNELS, *args, "--override", "fp32 epilogue now")
    assert pushed.code == 0, pushed.err
    assert pushed.err == f"stackmgr: WARNING: reviving do-not-revive lane gemm-tile ({lid}): {LESSON}; " \
                         "override: fp32 epilogue now\n"  # fmt: skip
    assert (kernels / "gemm.cpp").read_text() == "int tile = 128;\n"
    (record,) = _overrides(ev)
    assert record["reason"] == "fp32 epilogue now" and record["lanes"] == [lid]
    assert record["command"] == " ".join(("push", *args))
    # Recorded: the next push of the same change goes ahead with a note, as apply's does.
    assert ev.sm("pop", "-t", KERNELS).code == 0
    again = ev.sm("push", "-t", KERNELS)
    assert again.code == 0 and again.err.startswith("stackmgr: note: gemm-tile revives do-not-revive lane")


@pytest.mark.regression("apply --link rebuilt the measured state of a do-not-revive lane silently")
def test_apply_link_of_a_result_of_a_do_not_revive_lane_is_refused_unless_overridden(ev: Lab) -> None:
    lid, kernels = _dead_lane_popped(ev)
    before = _tree_id(kernels)
    refused = ev.sm("apply", "--link", lid, "-t", KERNELS)
    one_line_error(refused, 1)
    assert refused.err == _refusal("gemm-tile", lid)
    assert _tree_id(kernels) == before and not _overrides(ev)
    assert ev.sm("apply", "--link", lid, "-t", "vllm").code == 0, "a tree without the lane is not guarded"
    rebuilt = ev.sm("apply", "--link", lid, "-t", KERNELS, "--override", "measure it once more")
    assert rebuilt.code == 0, rebuilt.err
    assert "WARNING: reviving do-not-revive lane gemm-tile" in rebuilt.err
    assert (kernels / "gemm.cpp").read_text() == "int tile = 128;\n"
    (record,) = _overrides(ev)
    assert record["reason"] == "measure it once more" and record["command"] == f"apply --link {lid} -t {KERNELS}"


@pytest.mark.regression("import --series of the same change as a do-not-revive lane, under another name, exited 0")
def test_import_into_a_series_of_a_patch_id_twin_is_refused_unless_overridden(ev: Lab, tmp_path: Path) -> None:
    lid, kernels = _dead_lane_popped(ev)
    mail = tmp_path / "tile-again.patch"
    (kernels / "gemm.cpp").write_text("int tile = 128;\n")
    mail.write_bytes(git(kernels, "diff"))
    (kernels / "gemm.cpp").write_text("int tile = 64;\n")
    refused = ev.sm("import", str(mail), "-t", KERNELS, "--series", "tiles")
    one_line_error(refused, 1)
    assert refused.err == _refusal("tile-again", lid)
    assert not (ev.store / "series" / "tiles").exists() and not (ev.store / "patches" / "tile-again.patch").exists()
    assert ev.sm("import", str(mail), "-t", KERNELS).code == 0, "a loose import brings nothing back"
    assert ev.sm("drop", "tile-again").code == 0
    ok = ev.sm("import", str(mail), "-t", KERNELS, "--series", "tiles", "--override", "new epilogue")
    assert ok.code == 0, ok.err
    assert (ev.store / "series" / "tiles").read_text() == "tile-again.patch\n"
    (record,) = _overrides(ev)
    assert record["patch"] == "tile-again" and record["lanes"] == [lid] and record["reason"] == "new epilogue"


@pytest.mark.regression("show and the report missed a patch-id twin of a do-not-revive lane that the guard catches")
def test_show_and_the_report_mark_a_patch_id_twin_as_the_guard_sees_it(ev: Lab) -> None:
    _dead_lane_popped(ev)
    patch = (ev.store / "patches" / "gemm-tile.patch").read_bytes()
    (ev.store / "patches" / "tile-copy.patch").write_bytes(patch.replace(b"[PATCH] tile", b"[PATCH] t2"))
    assert ev.sm("series", "add", "tiles", "tile-copy").code == 1, "the guard: the same lane"
    shown = _show(ev, "tile-copy")["patch"]
    assert shown["do_not_revive"] is True and shown["status"] == "unlinked"  # type: ignore[index]
    assert "status UNLINKED (do not revive)" in ev.sm("show", "tile-copy").out
    assert ev.sm("report", "-o", str(ev.store / "site")).code == 0
    page = (ev.store / "site" / "patches" / "tile-copy.html").read_text()
    own = (ev.store / "site" / "patches" / "gemm-tile.html").read_text()
    marker = "do not revive"
    assert marker in own.lower() and marker in page.lower()


def _lessons(ev: Lab) -> str:
    out = ev.store / "lessons.md"
    assert ev.sm("report", "--markdown", str(out)).code == 0
    return out.read_text()


@pytest.mark.regression("an amendment without --verdict flipped a rejected do-not-revive lane to experimental")
@pytest.mark.parametrize("amendment", [("--gate", "color=fail:banding"), ("results/bench.json",)])
def test_an_amendment_without_a_verdict_keeps_the_lane_and_its_lesson(ev: Lab, amendment: tuple[str, ...]) -> None:
    lid, kernels = _dead_lane_popped(ev)
    new = _link(ev, "gemm-tile", *amendment, "--amends", lid)
    shown = _show(ev, "gemm-tile")
    assert shown["patch"]["status"] == "rejected" and shown["patch"]["do_not_revive"] is True  # type: ignore[index]
    (current,) = [k for k in shown["links"] if k["id"] == new]  # type: ignore[attr-defined]
    assert current["verdict"] == {"status": "rejected", "lesson": LESSON, "do_not_revive": True}
    assert "status REJECTED (do not revive)" in ev.sm("show", "gemm-tile").out
    page = _lessons(ev)
    failed = page.split("## Failed paths")[1].split("## Patches worth remembering")[0]
    assert "`gemm-tile`" in failed and f"> {LESSON}" in failed and "**rejected, do not revive**" in failed
    assert "gemm-tile" not in page.split("## Open experiments")[1]
    before = _tree_id(kernels)
    one_line_error(ev.sm("push", "-t", KERNELS), 1)
    assert _tree_id(kernels) == before, "the lane is still guarded"


@pytest.mark.regression("a verdict given in an amendment is the lane's new status (experimental lifts it)")
def test_an_amendment_with_a_verdict_changes_the_status(ev: Lab) -> None:
    lid, _kernels = _dead_lane_popped(ev)
    _link(ev, "gemm-tile", "--amends", lid, "--verdict", "experimental")
    shown = _show(ev, "gemm-tile")["patch"]
    assert shown["status"] == "experimental" and shown["do_not_revive"] is False  # type: ignore[index]
    assert ev.sm("push", "-t", KERNELS).code == 0


@pytest.mark.regression("an amendment adding --do-not-revive --verdict rejected dropped the lesson and baseline")
def test_an_amendment_adding_do_not_revive_keeps_lesson_and_baseline(ev: Lab) -> None:
    base = _link(ev, "replay-fix", "results/probe.log", "--metric", "tput=100tok/s")
    done = _link(ev, "gemm-tile", "results/probe.log", "--metric", "tput=90tok/s", "--baseline", base,
                 "--lesson", LESSON)  # fmt: skip
    new = _link(ev, "gemm-tile", "--amends", done, "--do-not-revive", "--verdict", "rejected")
    shown = _show(ev, "gemm-tile")
    (current,) = [k for k in shown["links"] if k["id"] == new]  # type: ignore[attr-defined]
    assert current["verdict"] == {"status": "rejected", "lesson": LESSON, "do_not_revive": True}
    assert current["baseline"] == base and current["metrics"][0]["delta"] == pytest.approx(-10.0)
    assert shown["patch"]["status"] == "rejected" and shown["patch"]["do_not_revive"] is True  # type: ignore[index]
    failed = _lessons(ev).split("## Failed paths")[1].split("## Patches worth remembering")[0]
    assert f"> {LESSON}" in failed and "*No lesson recorded.*" not in failed


def test_the_dead_lanes_kept_between_commands_follow_a_record_edited_in_place(ev: Lab) -> None:
    """The do-not-revive lanes are kept by every record file's stat data: a record edited in place (a teammate's
    hand, its size and mtime put back) is read again, never answered from what was kept."""
    lid = _link(ev, "gemm-tile", "results/probe.log", "--verdict", "rejected", "--lesson", LESSON)
    assert ev.sm("pop", "-t", KERNELS).code == 0
    assert ev.sm("push", "-t", KERNELS).code == 0 and ev.sm("pop", "-t", KERNELS).code == 0  # the lanes kept
    (record,) = (ev.store / "links" / "gemm-tile").glob("*.toml")
    data, st = record.read_bytes(), record.stat()
    edited = data.replace(b"do_not_revive = false", b"do_not_revive = true ")
    assert edited != data and len(edited) == len(data)
    record.write_bytes(edited)
    os.utime(record, ns=(st.st_atime_ns, st.st_mtime_ns))
    refused = ev.sm("push", "-t", KERNELS)
    one_line_error(refused, 1)
    assert lid in refused.err and "do-not-revive" in refused.err


def test_apply_again_of_the_series_a_tree_holds_brings_no_lane_back(ev: Lab) -> None:
    """`apply S` of the series the tree already holds, a do-not-revive lane among its patches applied before the
    verdict, brings nothing back: it succeeds and changes nothing; popped, the lane is refused again."""
    lid = _link(ev, "gemm-tile", "results/probe.log", "--verdict", "rejected", "--do-not-revive", "--lesson", LESSON)
    kernels = ev.tree.parent / "kernels"
    before = _tree_id(kernels)
    again = ev.sm("apply", "kernels", "-t", KERNELS)
    assert again.code == 0, again.err
    assert _tree_id(kernels) == before and _overrides(ev) == []
    assert ev.sm("pop", "-t", KERNELS).code == 0
    refused = ev.sm("apply", "kernels", "-t", KERNELS)
    one_line_error(refused, 1)
    assert lid in refused.err
