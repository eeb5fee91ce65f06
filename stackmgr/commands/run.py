"""`stackmgr run [-t TREE…] [--link PATCH|--series S] [--name N] [--result-dir DIR…] [--from-json GLOB] -- CMD…`:
run a benchmark and record it as a draft (`experimental`) link.

1. Before anything runs, what is asked is checked (trees, the patch or series to link to) and each tree's
   measured state is taken (evidence/measured.py) and the result directories listed; the store is not locked
   while the command runs, however long.
2. The command runs with its output shown and written to a log as it comes (evidence/capture.py).
3. Each tree is measured again: one that changed meanwhile taints the result, and the warning names the paths
   that changed. The files the command wrote under the result directories (new or changed) are kept by content
   with the log, a block at a time (evidence/collect.py); metrics come from the vllm bench JSON among them (and
   `--from-json`), and from `[run.metrics]` regexes on the log, line by line; the run's configuration (model,
   request rate, concurrency, prompts) from the JSON; every `[gates.NAME]` of the config is computed on the
   result and recorded beside the `exit` gate (evidence/gates.py).
4. One record per patch, written together; `run` exits with the command's own code. What goes wrong after the
   command ran (a JSON that is no vllm result) is a warning: the run is recorded anyway.
"""

from __future__ import annotations

import glob
import os
import sys
from typing import Any

from stackmgr.commands.run_targets import link_targets, trees_measured
from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence import artifacts as kept
from stackmgr.evidence import capture, collect, environment, gates, redaction
from stackmgr.evidence.freshness import linked_version
from stackmgr.evidence.linking import author_of
from stackmgr.evidence.measured import changed_paths, measure, snapshot_ids
from stackmgr.evidence.metrics import Gate
from stackmgr.evidence.records import Artifact, Link, StackEntry, utc_now, write_link
from stackmgr.evidence.states import Evidence
from stackmgr.journal.operation import operation
from stackmgr.output import plural, show_text
from stackmgr.store.config import Store
from stackmgr.store.fs import process_alive
from stackmgr.store.tree_paths import tree_key

SHOWN_CHANGES = 5  # paths a taint warning names, per tree


class RunRequest:
    def __init__(self, argv: list[str], *, trees: tuple[str, ...] = (), link: str | None = None,
                 series: str | None = None, name: str | None = None, result_dirs: tuple[str, ...] = (),
                 from_json: tuple[str, ...] = (), unique: bool = True, cwd: str | None = None,
                 say_where: bool = True, grouped: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.argv = argv
        self.grouped = grouped or {}  # [run] group and repeat: one of several runs of one state (commands/repeat.py)
        self.cwd = cwd  # --cwd: where CMD runs (capture.where_command_runs)
        self.say_where = say_where  # say on stderr where CMD runs when that is not where the user stands
        self.unique = unique  # a --name given twice is refused
        self.trees = trees
        self.link = link
        self.series = series
        self.name = name
        self.result_dirs = result_dirs
        self.from_json = from_json


class RunOutcome:
    def __init__(self, links: list[Link], exit_code: int, tainted: list[str], warnings: list[str],
                 taints: list[str] | None = None) -> None:  # fmt: skip
        self.links = links
        self.exit_code = exit_code
        self.tainted = tainted  # the trees that changed while the command ran
        self.warnings = warnings
        self.taints = taints or []  # per tainted tree, what changed and how to keep such files as results
        self.received = ""  # the signal that reached stackmgr itself while the command ran ("SIGTERM"), or ""


def run(store: Store, req: RunRequest) -> RunOutcome:
    if not req.argv:
        raise UsageProblem("no command to run", "`stackmgr run -- CMD ARGS…`")
    if req.link and req.series:
        raise UsageProblem("--link and --series say the same thing twice", "give one of them")
    if req.name is not None:
        _check_name(req.name)
    if req.name and req.unique:
        from stackmgr.evidence.reading import load_briefs

        taken = [k.id for k in load_briefs(store) if k.run_name == req.name]
        if taken:
            raise UsageProblem(f"a run named {req.name} is recorded already ({taken[-1]})",
                               "pick another --name: a run's name stands for one result")  # fmt: skip
    trees = list(dict.fromkeys(req.trees)) or trees_measured(store)
    for name in trees:
        store.tree(name)  # a usage error for an unknown or unplaced tree, before anything runs
    where, moved = capture.where_command_runs(store, trees, req.cwd)
    why = capture.startable(req.argv, where)
    if why is not None:
        raise UsageProblem(f"cannot run the command: {why}", "check the command after `--`; nothing was recorded")
    _check_result_dirs(store, trees, req.result_dirs, where)
    gates.check_declared(store)  # a config's [gates] and [metrics] said wrong: refused before anything runs
    evidence = Evidence.gather(store)
    targets = link_targets(store, req, trees, evidence)
    dirs = [os.path.abspath(os.path.join(where, d)) for d in req.result_dirs] or _declared_dirs(store, trees)
    outputs = _outputs_inside(store, trees, dirs)
    with operation(store, f"run {req.name or req.argv[0]} (measure)"):
        before = measure(store, trees, evidence.index, outputs)
    listed = {d: collect.listing(d) for d in dirs}
    earlier = settle_killed_logs(store)
    log = os.path.join(store.state_dir, f"run-{os.getpid()}.log")
    watch = environment.Watch(req.argv, where)  # the GPUs' state, sampled while it runs (evidence/environment.py)
    try:
        ran = capture.tee(req.argv, log, cwd=where)
    except capture.NotStarted as exc:
        watch.stop()
        _unlink(log)
        raise UsageProblem(f"{exc}{f' (in {capture.text(where)})' if moved else ''}",
                           "check the command after `--`; nothing ran and nothing was recorded") from None  # fmt: skip
    ran.environment = watch.stop()  # the GPUs' state after it ran
    if ran.log_error is not None:  # nothing recorded: the partial log goes, the one line says what filled up
        from stackmgr.errors import disk_error

        _unlink(log)
        full = disk_error(ran.log_error, log)
        raise StackmgrError(f"the command ran (exit {ran.exit_code}) but was not recorded: "
                            f"{full.message if full else ran.log_error.strerror}",
                            "free some space there and run it again" if full else None)  # fmt: skip
    try:
        outcome = _record(store, req, evidence, targets, trees, outputs, before, listed, log, ran, where)
        outcome.warnings[:0] = [*earlier, *watch.warnings, *([moved] if moved and req.say_where else [])]
        outcome.received = ran.received
        return outcome
    except (StackmgrError, OSError) as exc:  # the command ran: say where its output is, whatever went wrong
        if isinstance(exc, OSError):
            from stackmgr.errors import disk_error

            exc = disk_error(exc) or exc
        message = exc.message if isinstance(exc, StackmgrError) else str(exc)
        raise StackmgrError(f"the command ran (exit {ran.exit_code}) but was not recorded: {message}",
                            f"its output is kept in {os.path.relpath(log, store.root)} (in the store)") from None


def _record(store: Store, req: RunRequest, evidence: Evidence, targets: list[tuple[str, str, str]], trees: list[str],
            outputs: dict[str, tuple[bytes, ...]], before: list[StackEntry], listed: collect.Listing, log: str,
            ran: capture.Ran, where: str) -> RunOutcome:  # fmt: skip
    warnings = [f"{os.fsdecode(d)}/ is in tree {t} but not declared a results directory: what the command left "
                f"there counts as work for `check`; declare it (results = [\"{os.fsdecode(d)}\"] under "
                f"[{tree_key(store, t)}])"
                for t, dirs in outputs.items() for d in _undeclared(store, t, dirs)]  # fmt: skip
    commands = gates.run_commands(store, log, where, list(listed), ran.exit_code)  # outside the lock (gates.py)
    with operation(store, f"run {req.name or req.argv[0]}"):
        after = snapshot_ids(store, trees, outputs)
        tainted = [b.tree for b, a in zip(before, after, strict=True) if b.snapshot != a]
        rel, digest, size = kept.keep_file(store, log)  # read a block at a time: a log of any size
        found = [Artifact(rel, digest, size, origin="the command's output")]
        warnings += _secrets_in_log(store, req.argv, log, rel)
        globbed = {pattern: glob.glob(os.path.join(where, pattern), recursive=True) for pattern in req.from_json}
        warnings += [f"--from-json {capture.text(p)}: no file matches" for p, hits in globbed.items() if not hits]
        matched = sorted({p for hits in globbed.values() for p in hits})
        asked = [p for p in matched if _written_since(p, ran.began)]  # an earlier run's file is not this run's
        if len(asked) < len(matched):
            warnings.append(f"--from-json: {len(matched) - len(asked)} matching file(s) older than the run left out")
        files, data = collect.written(store, listed, asked, warnings)
        found += files
        if len(found) == 1 and listed:  # nothing kept but the log: the command wrote somewhere else
            warnings.append(_nothing_written(store, trees, list(listed), where))
        measured, config = collect.run_metrics(store, found, data, set(asked), log, warnings)
        measured = gates.with_directions(store, measured)  # [metrics.NAME] direction (evidence/gates.py)
        declared = gates.evaluate(store, measured, log, commands)
        taints = [_taint(store, b.tree, changed_paths(store, b.tree, b.snapshot, a))
                  for b, a in zip(before, after, strict=True) if b.snapshot != a]  # fmt: skip
        run_table = _run_table(store, req, ran, tainted, before, after, config, where, data)
        links = []
        for patch, tree, base_of in targets:
            sha, pid = linked_version(evidence, before, tree, patch)  # the version measured
            link = Link(id="", created=utc_now(), author=author_of(store, tree), patch=patch, tree=tree,
                        sha256=sha, patch_id=pid,
                        stack=before, artifacts=found, metrics=measured, verdict="experimental",
                        gates=[Gate("exit", "pass" if ran.exit_code == 0 else "fail", f"exit {ran.exit_code}"),
                               *declared],
                        run={**run_table, **({"baseline_of": base_of} if base_of else {})})  # fmt: skip
            write_link(store, link)
            links.append(link)
        evidence.save()
    os.unlink(log)
    return RunOutcome(links, ran.exit_code, tainted, warnings, taints)


def _secrets_in_log(store: Store, argv: list[str], log: str, rel: str) -> list[str]:
    """The warning for a log that holds a secret the record leaves out: the log is pushed with the results."""
    leaked = capture.secrets_in_log(log, argv, capture.env_settings(store.run, store.local_run)[1])
    return [f"the command's output holds the value of {', '.join(leaked)}, which the record leaves out; its log "
            f"{rel} leaves with the store when pushed: delete that file before pushing (the result then reads "
            "broken), or change the secret"] if leaked else []  # fmt: skip


def _check_name(name: str) -> None:
    """A run's name stands for its record where a link id does (`--amends`, `--baseline`): it may not look like
    one, nor hold whitespace or `/`."""
    if name.startswith("lnk-") and all(c in "0123456789abcdef" for c in name[4:]):
        raise UsageProblem(f"--name {name} looks like a link id", "pick a name that does not start with lnk-")
    if not name or any(c.isspace() or c == "/" for c in name):
        raise UsageProblem(f"--name {name!r} holds whitespace or a /" if name else "--name is empty",
                           "name a run with letters, digits and . _ + -, e.g. qps4")  # fmt: skip


def settle_killed_logs(store: Store) -> list[str]:
    """The logs earlier `run`s left when they were killed (their pid is gone): one the store keeps already (the
    run was recorded, then killed before removing it) or an empty one is deleted; one with output that was not
    recorded is named once, then kept as `run-PID.killed.log` (not named again). The next `run` and `recover` call
    this; returns what to tell the user."""
    warnings = []
    try:
        names = sorted(os.listdir(store.state_dir))
    except OSError:
        return []
    for name in names:
        pid = name[len("run-"):-len(".log")] if name.startswith("run-") and name.endswith(".log") else ""
        if not pid.isdigit() or process_alive(int(pid)):
            continue
        path = os.path.join(store.state_dir, name)
        try:
            if os.path.getsize(path) == 0 or kept.kept_already(store, path):
                os.unlink(path)
                continue
            kept_as = os.path.join(store.state_dir, f"run-{pid}.killed.log")
            os.replace(path, kept_as)
        except OSError:
            continue
        warnings.append(f"the log of an earlier run that was killed is kept in "
                        f"{os.path.relpath(kept_as, store.root)} (it was not recorded)")  # fmt: skip
    return warnings


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _declared_dirs(store: Store, trees: list[str]) -> list[str]:
    """The result directories the config declares, but none reached through a symbolic link in the tree: a patch
    of a pulled series can make `out -> ~`, and the files written there would be copied into the store."""
    from stackmgr.store.inside import is_link_inside

    return [os.path.join(store.tree(t).path, os.fsdecode(d)) for t in trees for d in store.tree(t).results
            if is_link_inside(store.tree(t).path, os.fsdecode(d)) is None]  # fmt: skip


def _outputs_inside(store: Store, trees: list[str], dirs: list[str]) -> dict[str, tuple[bytes, ...]]:
    """Per tree, the result directories inside it (relative): outputs, left out of its measured state."""
    out: dict[str, tuple[bytes, ...]] = {}
    for tree in trees:
        top = os.path.realpath(store.tree(tree).path)
        inside = [os.fsencode(os.path.relpath(os.path.realpath(d), top)) for d in dirs
                  if os.path.realpath(d).startswith(top + os.sep)]  # fmt: skip
        out[tree] = tuple(inside)
    return out


def _undeclared(store: Store, tree: str, dirs: tuple[bytes, ...]) -> list[bytes]:
    """The result directories inside `tree` its config does not declare and its .gitignore does not cover: what
    the command leaves there would count as work for `check` (an ignored directory never does)."""
    from stackmgr.git.ignore import ignored_paths
    from stackmgr.git.repo import open_repo

    asked = [d for d in dirs if d not in store.tree(tree).results]
    ignored = set(ignored_paths(open_repo(store.tree(tree).path), [d.rstrip(b"/") + b"/" for d in asked]))
    return [d for d in asked if d.rstrip(b"/") + b"/" not in ignored]


def _within(path: str, top: str) -> bool:
    path, top = os.path.realpath(path), os.path.realpath(top)
    return path == top or path.startswith(top + os.sep)


def _nothing_written(store: Store, trees: list[str], dirs: list[str], here: str) -> str:
    """The warning for a run that kept nothing but its log: where it looked, and, when the command ran outside
    every measured tree (a relative `--result-dir results/` then lands where it ran), what to do."""
    named = []
    for d in dirs:
        tree = next((t for t in trees if _within(d, store.tree(t).path)), None)
        rel = os.path.relpath(os.path.realpath(d), os.path.realpath(store.tree(tree).path)) if tree else ""
        named.append(capture.text(f"{tree}/{rel}/" if tree else d.rstrip(os.sep) + "/"))
    note = f"nothing was written under the result directories ({', '.join(named)})"
    if any(_within(here, store.tree(t).path) for t in trees):
        return note
    return (f"{note}; the command ran in {capture.text(here)}, outside the measured trees: leave out --cwd, "
            "or pass --result-dir DIR / --from-json GLOB for where it writes")


def _written_since(path: str, began: float) -> bool:
    return collect.mtime(path) >= began - 0.05  # the kernel stamps files with a coarse clock: a little grace


def _run_table(store: Store, req: RunRequest, ran: capture.Ran, tainted: list[str], before: list[StackEntry],
               after: list[str], config: dict[str, Any], where: str,
               data: dict[str, bytes]) -> dict[str, Any]:  # fmt: skip
    extra, by_value, masked = capture.env_settings(store.run, store.local_run)
    return {
        "name": req.name or "", **req.grouped, "command": [capture.text(a) for a in redaction.command_line(req.argv)],
        "cwd": capture.text(where), "exit_code": ran.exit_code,
        "start": ran.start, "duration_s": round(ran.duration, 3), "host": capture.host(),
        "accelerators": capture.accelerators(), "env": capture.environment(extra, by_value, masked),
        "environment": environment.table(ran.environment, data),  # evidence/environment.py
        "tainted": bool(tainted), "changed_trees": tainted, "interrupted": ran.interrupted,
        **({"signal": ran.signal} if ran.signal else {}),
        "after": [{"tree": b.tree, "snapshot": a} for b, a in zip(before, after, strict=True)], "config": config,
    }  # fmt: skip


def say(outcome: RunOutcome) -> None:
    """What `run` says on stderr after the command's own output."""
    for warning in outcome.warnings:
        sys.stderr.write(f"stackmgr: warning: {warning}\n")
    for link in outcome.links:
        base = link.run.get("baseline_of")
        what = f"as the baseline of series {base} at its base" if base else f"for {link.patch}"
        then = (f"compare and the report judge {base}'s results against it" if base else
                f"complete it: `stackmgr link {link.patch} --amends {link.id} --verdict … --lesson …`")  # fmt: skip
        sys.stderr.write(f"stackmgr: recorded {link.id} {what} (exit {outcome.exit_code}, "
                         f"{link.run['duration_s']} s, {plural(len(link.artifacts), 'artifact')}, "
                         f"{plural(len(link.metrics), 'metric')}); {then}\n")  # fmt: skip
    for taint in outcome.taints:
        sys.stderr.write(f"stackmgr: warning: {taint}\n")
    from stackmgr.evidence.gates import failed_gate

    for link in outcome.links:
        if (gate := failed_gate(link.gates)) is not None:  # the number may look good: say it does not count
            detail = f" ({show_text(gate.detail)})" if gate.detail else ""
            sys.stderr.write(f"stackmgr: warning: {link.id} is not valid: gate {show_text(gate.name)} "
                             f"{show_text(gate.status)}{detail}; compare, targets and a promotion leave it out\n")


def _taint(store: Store, tree: str, changes: list[tuple[str, str]]) -> str:
    """The warning for a tree that changed while the command ran: which paths (the first few), and, for files it
    wrote there, how to keep them as results instead."""
    paths = [p for _, p in changes]
    named = ", ".join(paths[:SHOWN_CHANGES]) + (f" and {len(paths) - SHOWN_CHANGES} more"
                                                 if len(paths) > SHOWN_CHANGES else "")  # fmt: skip
    note = f"tainted: {tree} changed while the command ran{f' ({named})' if named else ''}; the result is " \
           "recorded with the state before it"  # fmt: skip
    new = [p for status, p in changes if status == "A"]
    if not new:
        return note
    directory = os.path.commonpath([os.path.dirname(p) for p in new])  # the deepest holding all of them
    if not directory or _tracks(store, tree, directory):  # the tree's top, or its own files there: never hide
        return f"{note}; to keep what the command writes in the tree as results, pass --result-dir DIR"
    return (f"{note}; to keep what the command writes in the tree as results, declare its directory "
            f"(results = [\"{directory}\"] under [{tree_key(store, tree)}] in {os.path.basename(store.config_path)}) "
            "or pass --result-dir")  # fmt: skip


def _tracks(store: Store, tree: str, directory: str) -> bool:
    from stackmgr.git.repo import open_repo

    return open_repo(store.tree(tree).path).tracks_below(os.fsencode(directory))


def _check_result_dirs(store: Store, trees: list[str], given: tuple[str, ...], where: str) -> None:
    """A `--result-dir` that is a file, holds a measured tree's top, or holds files the tree tracks is refused
    before anything runs: what is under it is left out of the measured state."""
    for d in given:
        found = os.path.realpath(os.path.join(where, d))  # relative: to where the command runs
        if os.path.exists(found) and not os.path.isdir(found):
            raise UsageProblem(f"--result-dir {d} is not a directory", "name the directory the command writes to")
        for tree in trees:
            top = os.path.realpath(store.tree(tree).path)
            if _within(top, found) or (_within(found, top) and _tracks(store, tree, os.path.relpath(found, top))):
                raise UsageProblem(f"--result-dir {d} would hide the tree's own files from check",
                                   "name the directory the command writes to")  # fmt: skip
