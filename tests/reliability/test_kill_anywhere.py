"""Row 59, at random: seeded SIGKILLs of the whole process group anywhere in save, `save --update`, reset,
`reset --force`, apply, `apply --link`, undo, link, run, rebase, push, pop and refresh (docs/RELIABILITY.md,
promise 3; the method and the invariant are in tests/reliability/kill_anywhere.py).

Each trial is one test case, `COMMAND-SEED-N`: `pytest 'tests/reliability/test_kill_anywhere.py::test_kill_anywhere[
reset-force-1-16]'` replays it alone (the kill's moment comes from the seed; where it lands still depends on the
machine's timing, so the failure message says where it landed). Trial N kills command N mod 13, by mode
(N div 13) mod 3: uniform, journal window, git child.

`STACKMGR_KILL_TRIALS` (default 52: four per command) and `STACKMGR_KILL_SEED` (default 1) size a longer run:
`STACKMGR_KILL_TRIALS=300 STACKMGR_KILL_SEED=7 python -m pytest tests/reliability/test_kill_anywhere.py`.
The line before pytest's summary counts the trials and their failures (tests/reliability/kill_summary.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.reliability.kill_anywhere import COMMANDS, Kit, known_reason, make_kit, run_trial
from tests.reliability.kill_summary import TRIAL

TRIALS = int(os.environ.get("STACKMGR_KILL_TRIALS", "52"))
SEED = int(os.environ.get("STACKMGR_KILL_SEED", "1"))
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
    if known:
        pytest.xfail("; ".join(str(known_reason(command, kind)) for kind in kinds) + "\n" + trial.report())
    assert not trial.failures, trial.report()
