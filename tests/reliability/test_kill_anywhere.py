"""Row 59, at random: seeded SIGKILLs of the whole process group anywhere in save, `save --update`, reset,
`reset --force`, apply, `apply --link`, undo, link, run, rebase, push, pop and refresh (docs/RELIABILITY.md,
promise 3; the method and the invariant are in tests/reliability/kill_anywhere.py).

Each trial is one test case, `COMMAND-SEED-N`: `pytest 'tests/reliability/test_kill_anywhere.py::test_kill_anywhere[
reset-force-1-16]'` replays it alone (the kill's moment comes from the seed; where it lands still depends on the
machine's timing, so the failure message says where it landed). Trial N kills command N mod 13, by mode
N mod 3: uniform, journal window, git child (so 39 trials meet every command in every mode once).

`STACKMGR_KILL_TRIALS` (default 39: each command once in each mode) and `STACKMGR_KILL_SEED` (default 1) size a
longer run: `STACKMGR_KILL_TRIALS=300 STACKMGR_KILL_SEED=7 python -m pytest tests/reliability/test_kill_anywhere.py`;
`STACKMGR_KILL_LOG=FILE` appends one JSON line per trial (its failures and where the kill landed) to FILE.
The line before pytest's summary counts the trials and their failures (tests/reliability/kill_summary.py).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import Lab
from tests.reliability.kill_anywhere import COMMANDS, Kit, known_reason, make_kit, run_trial
from tests.reliability.kill_summary import TRIAL

TRIALS = int(os.environ.get("STACKMGR_KILL_TRIALS", "39"))
SEED = int(os.environ.get("STACKMGR_KILL_SEED", "1"))
LOG = os.environ.get("STACKMGR_KILL_LOG")  # read here: the hermetic environment drops STACKMGR_* before each test
CASES = [(COMMANDS[n % len(COMMANDS)], n) for n in range(TRIALS)]


@pytest.fixture(scope="session")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Kit:
    """Templates and calibrations, built lazily from inside the first test that needs each (so under its
    hermetic git environment), once per session or xdist worker."""
    return make_kit(tmp_path_factory.mktemp("kill-anywhere"))


@pytest.mark.slow
@pytest.mark.catalogue(59)
@pytest.mark.parametrize(("command", "n"), CASES, ids=[f"{c}-{SEED}-{n}" for c, n in CASES])
def test_kill_anywhere(command: str, n: int, kit: Kit, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Row 59: a SIGKILL of the process group at a random moment of the command; after `recover` (or the command
    run again) the tree and store are the state before or after it, every byte before is still recoverable, the
    store parses, nothing crashed, the command runs again, no lock is left."""
    try:
        trial = run_trial(kit, command, SEED, n, tmp_path)
    except BaseException:  # the harness itself failed (a fixture, a calibration): counted, then reported
        request.node.user_properties.append((TRIAL, {"command": command, "seed": SEED, "n": n,
                                                     "classes": ["harness"], "known": []}))  # fmt: skip
        raise
    kinds = sorted({f.kind for f in trial.failures})
    known = trial.known()
    request.node.user_properties.append((TRIAL, {
        "command": command, "seed": SEED, "n": n, "classes": sorted({f.cls for f in trial.failures}),
        "known": [f"{command}/{'+'.join(kinds)}"] if known else [],
    }))  # fmt: skip
    if trial.failures and kit.live.exists():  # keep what the user would have found, for a look
        shutil.copytree(kit.live, tmp_path / "found", symlinks=True)
    if LOG:  # a long run's record: one JSON line per trial
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps({"id": f"{command}-{SEED}-{n}", "mode": trial.mode, "next": trial.next_step,
                                "how": trial.how, "known": known, "report": trial.report() if trial.failures else "",
                                "failures": [[x.kind, x.cls, x.detail] for x in trial.failures]}) + "\n")  # fmt: skip
    if known:
        pytest.xfail("; ".join(str(known_reason(command, kind)) for kind in kinds) + "\n" + trial.report())
    assert not trial.failures, trial.report()


@pytest.mark.regression("a git killed while refreshing the snapshot index leaves its lock; every move then refuses")
def test_a_killed_gits_lock_on_the_snapshot_index_does_not_block_every_move(lab: Lab) -> None:
    """A `git status` or `update-index` on stackmgr's private index (`.git/stackmgr/index`) killed with stackmgr
    leaves `.git/stackmgr/index.lock`. A file that was only touched since (same bytes, new stat data) then makes
    every move refuse: "refused, nothing changed: changed after the check: README; check again and retry", and
    retrying, `recover` or `check` never clears it. The lock is a dead git's (the tree lock is held): the move
    must go through."""
    (lab.tree / "src" / "model.py").write_text("def f():\n    return 2\n")
    assert lab.sm("save", "fix", "--series", "S", "-m", "fix").code == 0
    (lab.tree / "README").write_text("hello, probe\n")
    assert lab.sm("save", "probe", "--series", "S", "-m", "probe").code == 0
    readme = lab.tree / "README"
    readme.write_bytes(readme.read_bytes())  # the same bytes: a new ctime
    st = readme.stat()
    os.utime(readme, ns=(st.st_atime_ns, st.st_mtime_ns - 10**10))  # and another mtime, as an editor's save gives
    (lab.tree / ".git" / "stackmgr" / "index.lock").touch()  # what the killed git left
    assert lab.sm("check").code == 0
    assert lab.sm("recover").code == 0
    popped = lab.sm("pop")
    assert popped.code == 0, popped.err
    assert readme.read_text() == "hello\n"
