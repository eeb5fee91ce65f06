"""`check`'s fast path (stackmgr/safety/shards.py): answers from path-sharded post-images, and never a wrong "preserved"
or a stale "unpreserved" when patches come, go or change."""

from __future__ import annotations

import os

from tests.conftest import Lab


def _cache(lab: Lab) -> list[str]:
    return sorted(p.name for p in (lab.store / ".stackmgr" / "cache").glob("lookup-*.marshal"))


def test_shards_answer_and_follow_the_store(lab: Lab) -> None:
    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("check").code == 1
    assert len(_cache(lab)) == 65  # 64 shards and their meta file
    assert lab.sm("save", "p", "-m", "p").code == 0
    assert lab.sm("check").code == 0  # a new patch: patches/ changed, so "unpreserved" was not trusted
    assert lab.sm("check").code == 0  # and now from the shards
    patch = lab.store / "patches" / "p.patch"
    data = patch.read_bytes()
    patch.write_bytes(data.replace(b"+edited", b"+EDITED"))  # edited in place: the owner no longer matches
    assert lab.sm("check").code == 1
    patch.write_bytes(data)  # put back in place: `check` errs on the safe side until a full assessment
    assert lab.sm("status").code == 0
    assert lab.sm("check").code == 0
    os.rename(patch, lab.store / "p.patch.away")
    assert lab.sm("check").code == 1  # the owner is gone
    os.rename(lab.store / "p.patch.away", patch)
    assert lab.sm("check").code == 0


def test_damaged_or_missing_shards_fall_back(lab: Lab) -> None:
    (lab.tree / "README").write_text("edited\n")
    assert lab.sm("save", "p", "-m", "p").code == 0
    assert lab.sm("check").code == 0
    for name in _cache(lab):
        path = lab.store / ".stackmgr" / "cache" / name
        path.write_bytes(b"\x00junk" if name.endswith("00.marshal") else path.read_bytes())
    assert lab.sm("check").code == 0
    for path in (lab.store / ".stackmgr" / "cache").glob("lookup-*"):
        path.unlink()
    assert lab.sm("check").code == 0
    (lab.tree / "README").write_text("edited again\n")
    assert lab.sm("check").code == 1
