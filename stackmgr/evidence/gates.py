"""Gates: what a run must pass for its result to be valid. `stackmgr run` computes every gate the config declares
(`[gates.NAME]`, store/lab_config.py) for every run and records each beside its `exit` gate: a metric bound, a
regex on the log (RE2, in bounded time: evidence/patterns.py), or a command run on the result (this machine's
config only: docs/SECURITY.md). `gate_failure` is the one rule of validity: a result is valid only when every gate
it records passes (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from stackmgr.evidence import metrics
from stackmgr.evidence.metrics import Gate, Metric
from stackmgr.evidence.patterns import BadPattern
from stackmgr.store.config import Store
from stackmgr.store.lab_config import GateDecl, declared_gates

SAID = 160  # characters of a gate command's last output line kept in its detail


def check_declared(store: Store) -> None:
    """Refuse, in one line naming the file, a config whose `[gates]` or `[metrics]` is not what they say; `run`
    calls it before the command runs."""
    from stackmgr.store.lab_config import directions

    declared_gates(store)
    directions(store)


def gate_failure(gates: Sequence[Gate]) -> str:
    """Why a result is not valid by its gates, in a few words (`gate quality: fail`), or "": the first gate it
    records, but `exit` (a failed run: evidence/link_state.py `run_failure`), whose status is not `pass`."""
    from stackmgr.output import show_text  # a pulled record's gate name and status: never a second line

    gate = failed_gate(gates)
    return f"gate {show_text(gate.name)}: {show_text(gate.status)}" if gate else ""


def failed_gate(gates: Sequence[Gate]) -> Gate | None:
    """The first gate but `exit` that did not pass (`gate_failure`), or None."""
    return next((g for g in gates if g.name != "exit" and g.status != "pass"), None)


def refusal(link_id: str, gate: Gate) -> tuple[str, str]:
    """What `link --verdict promoted` says of a result whose gate did not pass: the line and how to go on."""
    said = f" ({gate.detail})" if gate.detail else ""
    return (f"cannot promote {link_id}: gate {gate.name} {'failed' if gate.status == 'fail' else gate.status}{said}",
            f"run it again, or, having checked it by hand, record it: --gate {gate.name}=pass:WHY")  # fmt: skip


def with_directions(store: Store, measured: list[Metric]) -> list[Metric]:
    """The run's metrics, each with the direction the config gives it (`[metrics.NAME] direction`)."""
    for m in measured:
        m.direction = metrics.direction_of(store, m)
    return measured


def run_commands(store: Store, log: str, where: str, result_dirs: Sequence[str], exit_code: int) -> dict[str, Gate]:
    """The declared command gates of one run, by name: run before the run is recorded, outside the store's lock
    and with signals free (a Ctrl-C stops a gate as it stops the benchmark). `log` is the run's log, `where` the
    directory the command ran in (a gate command runs there), `result_dirs` where it wrote its results."""
    return {d.name: _command_gate(d, log, where, result_dirs, exit_code)
            for d in declared_gates(store) if d.kind == "command"}  # fmt: skip


def evaluate(store: Store, measured: list[Metric], log: str, commands: dict[str, Gate]) -> list[Gate]:
    """Every declared gate of one run, in name order: metric bounds on `measured`, regexes on the log file `log`,
    and the command gates `run_commands` ran."""
    out = []
    for decl in declared_gates(store):
        if decl.kind == "metric":
            out.append(_metric_gate(decl, measured))
        elif decl.kind == "log_regex":
            out.append(_log_gate(decl, log))
        elif decl.name in commands:
            out.append(commands[decl.name])
    return out


def _metric_gate(decl: GateDecl, measured: list[Metric]) -> Gate:
    found = next((m for m in measured if m.name == decl.metric), None)
    if found is None:
        return Gate(decl.name, "error", f"the run wrote no metric {decl.metric}")
    v = found.value
    ok = (decl.low is None or v >= decl.low) and (decl.high is None or v <= decl.high)
    if decl.low is not None and decl.high is not None:
        return Gate(decl.name, "pass" if ok else "fail",
                    f"{decl.metric} {v:g} {'within' if ok else 'outside'} [{decl.low:g}, {decl.high:g}]")  # fmt: skip
    if decl.low is not None:
        return Gate(decl.name, "pass" if ok else "fail", f"{decl.metric} {v:g} {'>=' if ok else '<'} min {decl.low:g}")
    assert decl.high is not None
    return Gate(decl.name, "pass" if ok else "fail", f"{decl.metric} {v:g} {'<=' if ok else '>'} max {decl.high:g}")


def _log_gate(decl: GateDecl, log: str) -> Gate:
    try:
        compiled = metrics.compile_regex(decl.pattern)
    except BadPattern as exc:
        return Gate(decl.name, "error", f"/{decl.pattern[:60]}/: {exc.message}")
    gave_up: dict[str, str] = {}
    with open(log, "rb") as f:
        hit = metrics.first_matches({decl.name: compiled}, f, gave_up).get(decl.name)
    if decl.name in gave_up:
        return Gate(decl.name, "error", gave_up[decl.name])
    matched = hit is not None
    said = f"the log {'matches' if matched else 'does not match'} /{decl.pattern[:80]}/"
    return Gate(decl.name, "pass" if matched == (decl.must == "match") else "fail", said)


def _command_gate(decl: GateDecl, log: str, where: str, result_dirs: Sequence[str], exit_code: int) -> Gate:
    """The gate's command, run in `where` with the run's paths in its environment (STACKMGR_LOG,
    STACKMGR_RESULT_DIRS joined by os.pathsep, STACKMGR_EXIT_CODE), its output kept aside (the last line in the
    detail), stopped with its process group after `timeout_s` (or when stackmgr is interrupted); exit 0 passes.
    Declared by the shared config alone, it does not run: `not-run`."""
    if not decl.local:
        return Gate(decl.name, "not-run", "a command from the shared config: declare [gates."
                    f"{decl.name}] in stackmgr.local.toml to run it on this machine")  # fmt: skip
    import signal
    import subprocess
    import tempfile

    env = dict(os.environ, STACKMGR_LOG=log, STACKMGR_RESULT_DIRS=os.pathsep.join(result_dirs),
               STACKMGR_EXIT_CODE=str(exit_code))  # fmt: skip
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(list(decl.command), cwd=where, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        except OSError as exc:
            return Gate(decl.name, "error", f"cannot start {decl.command[0][:60]}: {exc.strerror}")
        try:
            code = proc.wait(timeout=decl.timeout_s)
        except subprocess.TimeoutExpired:
            return Gate(decl.name, "error", f"stopped after {decl.timeout_s:g} s")
        finally:
            if proc.poll() is None:  # past its time, or stackmgr interrupted: it goes, with what it started
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                proc.wait()
        code = 128 - code if code < 0 else code  # died of signal N: 128+N, as a shell says it
        out.seek(max(0, out.seek(0, os.SEEK_END) - 4096))
        tail = out.read().decode("utf-8", "replace").strip().splitlines()
    last = tail[-1].strip()[:SAID] if tail else ""
    return Gate(decl.name, "pass" if code == 0 else "fail", f"exit {code}" + (f": {last}" if last else ""))
