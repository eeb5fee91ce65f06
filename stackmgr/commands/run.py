"""`stackmgr run [-t TREE…] [--link PATCH|--series S] [--name N] [--result-dir DIR…] [--from-json GLOB] -- CMD…`:
run a benchmark and record it as a draft (`experimental`) link.

1. Before anything runs, what is asked is checked (trees, the patch or series to link to) and each tree's
   measured state is taken (evidence/measured.py) and the result directories listed; the store is not locked
   while the command runs, however long.
2. The command runs with its output shown and written to a log as it comes (evidence/capture.py).
3. Each tree is measured again: one that changed meanwhile taints the result. The files the command wrote under
   the result directories (new or changed) are kept by content with the log; metrics come from the vllm bench
   JSON among them (and `--from-json`), and from `[run.metrics]` regexes on the log; the run's configuration
   (model, request rate, concurrency, prompts) from the JSON.
4. One record per patch, written together; `run` exits with the command's own code. What goes wrong after the
   command ran (a JSON that is no vllm result) is a warning: the run is recorded anyway.
"""

from __future__ import annotations

import glob
import os
import sys
from typing import Any

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence import artifacts as kept
from stackmgr.evidence import capture, metrics
from stackmgr.evidence.compare import CONFIG_KEYS
from stackmgr.evidence.linking import author_of
from stackmgr.evidence.measured import measure, snapshot_ids
from stackmgr.evidence.metrics import Gate, Metric
from stackmgr.evidence.records import Artifact, Link, StackEntry, utc_now, write_link
from stackmgr.evidence.states import Evidence
from stackmgr.journal.operation import operation
from stackmgr.store.applied import load_applied
from stackmgr.store.config import Store
from stackmgr.store.fs import sha256_hex
from stackmgr.store.series import SeriesFile

MAX_COLLECTED = 1000  # files kept from the result directories of one run


class RunRequest:
    def __init__(self, argv: list[str], *, trees: tuple[str, ...] = (), link: str | None = None,
                 series: str | None = None, name: str | None = None, result_dirs: tuple[str, ...] = (),
                 from_json: tuple[str, ...] = (), unique: bool = True) -> None:  # fmt: skip
        self.argv = argv
        self.unique = unique  # a --name given twice is refused (bisect's own names repeat per bisect)
        self.trees = trees
        self.link = link
        self.series = series
        self.name = name
        self.result_dirs = result_dirs
        self.from_json = from_json


class RunOutcome:
    def __init__(self, links: list[Link], exit_code: int, tainted: list[str], warnings: list[str]) -> None:
        self.links = links
        self.exit_code = exit_code
        self.tainted = tainted  # the trees that changed while the command ran
        self.warnings = warnings


def run(store: Store, req: RunRequest) -> RunOutcome:
    if not req.argv:
        raise UsageProblem("no command to run", "`stackmgr run -- CMD ARGS…`")
    if req.link and req.series:
        raise UsageProblem("--link and --series say the same thing twice", "give one of them")
    why = capture.startable(req.argv)
    if why is not None:
        raise UsageProblem(f"cannot run the command: {why}", "check the command after `--`; nothing was recorded")
    if req.name and req.unique:
        from stackmgr.evidence.reading import load_briefs

        taken = [k.id for k in load_briefs(store) if k.run_name == req.name]
        if taken:
            raise UsageProblem(f"a run named {req.name} is recorded already ({taken[-1]})",
                               "pick another --name: a run's name stands for one result")  # fmt: skip
    trees = list(dict.fromkeys(req.trees)) or _default_trees(store)
    for name in trees:
        store.tree(name)  # a usage error for an unknown or unplaced tree, before anything runs
    evidence = Evidence.gather(store)
    targets = _targets(store, req, trees, evidence)
    dirs = [os.path.abspath(d) for d in req.result_dirs] or _declared_dirs(store, trees)
    outputs = _outputs_inside(store, trees, dirs)
    with operation(store, f"run {req.name or req.argv[0]} (measure)"):
        before = measure(store, trees, evidence.index, outputs)
    listed = {d: _files(d) for d in dirs}
    log = os.path.join(store.state_dir, f"run-{os.getpid()}.log")
    ran = capture.tee(req.argv, log)
    if ran.log_error is not None:  # nothing recorded: the partial log goes, the one line says what filled up
        from stackmgr.errors import disk_error

        os.unlink(log)
        full = disk_error(ran.log_error, log)
        raise StackmgrError(f"the command ran (exit {ran.exit_code}) but was not recorded: "
                            f"{full.message if full else ran.log_error.strerror}",
                            "free some space there and run it again" if full else None)  # fmt: skip
    try:
        return _record(store, req, evidence, targets, trees, outputs, before, listed, log, ran)
    except (StackmgrError, OSError) as exc:  # the command ran: say where its output is, whatever went wrong
        if isinstance(exc, OSError):
            from stackmgr.errors import disk_error

            exc = disk_error(exc) or exc
        message = exc.message if isinstance(exc, StackmgrError) else str(exc)
        raise StackmgrError(f"the command ran (exit {ran.exit_code}) but was not recorded: {message}",
                            f"its output is kept in {os.path.relpath(log, store.root)} (in the store)") from None


Listing = dict[str, dict[str, tuple[int, int]]]  # result directory -> path -> (size, mtime)


def _record(store: Store, req: RunRequest, evidence: Evidence, targets: list[tuple[str, str]], trees: list[str],
            outputs: dict[str, tuple[bytes, ...]], before: list[StackEntry], listed: Listing, log: str,
            ran: capture.Ran) -> RunOutcome:  # fmt: skip
    warnings = [f"{os.fsdecode(d)}/ is in tree {t} but not declared a results directory: what the command left "
                f"there counts as work for `check`; declare it (results = [\"{os.fsdecode(d)}\"] under [trees.{t}])"
                for t, dirs in outputs.items() for d in dirs if d not in store.trees[t].results]  # fmt: skip
    with operation(store, f"run {req.name or req.argv[0]}"):
        after = snapshot_ids(store, trees, outputs)
        tainted = [b.tree for b, a in zip(before, after, strict=True) if b.snapshot != a]
        with open(log, "rb") as f:
            log_data = f.read()
        output = "the command's output"
        found = [Artifact(kept.keep(store, log_data), sha256_hex(log_data), len(log_data), origin=output)]
        written = [p for d, old in listed.items() for p, sig in _files(d).items() if old.get(p) != sig]
        if len(written) > MAX_COLLECTED:
            warnings.append(f"{len(written)} files were written under the result directories; the first "
                            f"{MAX_COLLECTED} are kept")  # fmt: skip
        matched = sorted({p for pattern in req.from_json for p in glob.glob(pattern, recursive=True)})
        asked = [p for p in matched if _written_since(p, ran.began)]  # an earlier run's file is not this run's
        if len(asked) < len(matched):
            warnings.append(f"--from-json: {len(matched) - len(asked)} matching file(s) older than the run left out")
        data: dict[str, bytes] = {}
        for path in dict.fromkeys(sorted(written)[:MAX_COLLECTED] + asked):
            try:
                with open(path, "rb") as f:
                    data[path] = f.read()
            except OSError as exc:
                warnings.append(f"{path}: not kept ({exc.strerror})")
                continue
            digest = sha256_hex(data[path])
            found.append(Artifact(kept.keep(store, data[path], digest), digest, len(data[path]),
                                  origin=capture.text(path)))  # fmt: skip
        measured, config = _metrics(store, found, data, set(asked), log_data, warnings)
        run_table = _run_table(store, req, ran, tainted, before, after, config)
        links = []
        for patch, tree in targets:
            rec = evidence.index.record(patch + ".patch") or {}
            link = Link(id="", created=utc_now(), author=author_of(store, tree), patch=patch, tree=tree,
                        sha256=str(rec.get("sha256", "")), patch_id=evidence.patch_id(patch + ".patch") or "",
                        stack=before, artifacts=found, metrics=measured, verdict="experimental",
                        gates=[Gate("exit", "pass" if ran.exit_code == 0 else "fail", f"exit {ran.exit_code}")],
                        run=run_table)  # fmt: skip
            write_link(store, link)
            links.append(link)
        evidence.save()
    os.unlink(log)
    return RunOutcome(links, ran.exit_code, tainted, warnings)


def _default_trees(store: Store) -> list[str]:
    """The trees of this machine with a series applied; else the tree the current directory is in."""
    applied = load_applied(store)
    trees = [n for n in sorted(store.trees) if n in applied and os.path.isdir(store.trees[n].path)]
    if trees:
        return trees
    here = os.path.realpath(os.getcwd())
    inside = [n for n, c in sorted(store.trees.items())
              if here == (top := os.path.realpath(c.path)) or here.startswith(top + os.sep)]  # fmt: skip
    if inside:
        return inside[:1]
    raise UsageProblem("no tree to measure: none has a series applied, and this directory is in none",
                       "name it: `stackmgr run -t TREE -- CMD…`")  # fmt: skip


def _targets(store: Store, req: RunRequest, trees: list[str], evidence: Evidence) -> list[tuple[str, str]]:
    """(patch, tree) the result is linked to: --link PATCH; the last patch of --series S of each measured tree;
    else the top of each measured tree's applied series."""
    evidence_index = evidence.index
    if req.link:
        rec = evidence_index.record(req.link + ".patch")
        if rec is None or rec["tree"] is None:
            raise UsageProblem(f"no patch named {req.link}", "see `stackmgr series` or `ls patches/`")
        return [(req.link, str(rec["tree"]))]
    if req.series:
        last: dict[str, str] = {}
        for name in SeriesFile.load(store, req.series).patch_names():
            rec = evidence_index.record(name + ".patch")
            if rec is not None and rec["tree"] in trees:
                last[str(rec["tree"])] = name
        if not last:
            raise UsageProblem(f"series {req.series} has no patch of the measured trees ({', '.join(trees)})",
                               "name the trees with -t, or the patch with --link")  # fmt: skip
        return [(p, t) for t, p in sorted(last.items())]
    applied = load_applied(store)
    tops = [(a.link_patch or a.names[-1], t) for t in trees  # a measured state rebuilt: the patch its link names
            if (a := applied.get(t)) is not None and (a.names or a.link_patch)]  # fmt: skip
    if not tops:
        raise UsageProblem("nothing to link the result to: no measured tree has a patch applied",
                           "name it: `--link PATCH` or `--series S`")  # fmt: skip
    return tops


def _declared_dirs(store: Store, trees: list[str]) -> list[str]:
    return [os.path.join(store.trees[t].path, os.fsdecode(d)) for t in trees for d in store.trees[t].results]


def _outputs_inside(store: Store, trees: list[str], dirs: list[str]) -> dict[str, tuple[bytes, ...]]:
    """Per tree, the result directories inside it (relative): outputs, left out of its measured state."""
    out: dict[str, tuple[bytes, ...]] = {}
    for tree in trees:
        top = os.path.realpath(store.trees[tree].path)
        inside = [os.fsencode(os.path.relpath(os.path.realpath(d), top)) for d in dirs
                  if os.path.realpath(d).startswith(top + os.sep)]  # fmt: skip
        out[tree] = tuple(inside)
    return out


def _files(directory: str) -> dict[str, tuple[int, int]]:
    """path -> (size, mtime) of every regular file below `directory`."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for f in filenames:
            path = os.path.join(dirpath, f)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if st.st_mode & 0o170000 == 0o100000:
                found[path] = (st.st_size, st.st_mtime_ns)
    return found


def _metrics(store: Store, found: list[Artifact], data: dict[str, bytes], asked: set[str], log: bytes,
             warnings: list[str]) -> tuple[list[Metric], dict[str, Any]]:  # fmt: skip
    """The metrics of the run, and its configuration (the vllm bench JSON's model, rate, concurrency, prompts)."""
    import json

    out: list[Metric] = []
    config: dict[str, Any] = {}
    by_origin = {a.origin: a.path for a in found}
    results = []
    for path, raw in sorted(data.items(), key=lambda item: -_mtime(item[0])):  # the newest result first
        if not path.endswith(".json") and path not in asked:
            continue
        try:
            got = metrics.from_vllm_json(raw, by_origin[capture.text(path)])
            doc = json.loads(raw)
        except StackmgrError as exc:
            if path in asked:
                warnings.append(f"--from-json {exc.message}")
            continue
        results.append(path)
        if len(results) == 1:  # one result's metrics and configuration, never a mix of two runs'
            config = {k: doc[k] for k in CONFIG_KEYS if isinstance(doc.get(k), (str, int, float))}
            out += got
    if len(results) > 1:
        warnings.append(f"{len(results)} vllm bench results were written; metrics and configuration are from the "
                        f"newest, {capture.text(results[0])} (all are kept as artifacts)")  # fmt: skip
    table = store.run.get("metrics", {}) if isinstance(store.run, dict) else {}
    for name, pattern in (table.items() if isinstance(table, dict) else []):
        try:
            metric = metrics.from_regex(str(name), str(pattern), log.decode("utf-8", "replace"), found[0].path)
        except (StackmgrError, ValueError) as exc:
            warnings.append(f"[run.metrics] {name}: {getattr(exc, 'message', exc)}")
            continue
        if metric is not None and metric.name not in {m.name for m in out}:
            out.append(metric)
    return out, config


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _written_since(path: str, began: float) -> bool:
    return _mtime(path) >= began - 0.05  # the kernel stamps files with a coarse clock: a little grace


def _run_table(store: Store, req: RunRequest, ran: capture.Ran, tainted: list[str], before: list[StackEntry],
               after: list[str], config: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    extra = store.run.get("env", []) if isinstance(store.run, dict) else []
    return {
        "name": req.name or "", "command": [capture.text(a) for a in req.argv], "cwd": capture.text(os.getcwd()),
        "exit_code": ran.exit_code,
        "start": ran.start, "duration_s": round(ran.duration, 3), "host": capture.host(),
        "accelerators": capture.accelerators(), "env": capture.environment(e for e in extra if isinstance(e, str)),
        "tainted": bool(tainted), "changed_trees": tainted, "interrupted": ran.interrupted,
        "after": [{"tree": b.tree, "snapshot": a} for b, a in zip(before, after, strict=True)], "config": config,
    }  # fmt: skip


def say(outcome: RunOutcome) -> None:
    """What `run` says on stderr after the command's own output."""
    for warning in outcome.warnings:
        sys.stderr.write(f"stackmgr: warning: {warning}\n")
    for link in outcome.links:
        sys.stderr.write(f"stackmgr: recorded {link.id} for {link.patch} (exit {outcome.exit_code}, "
                         f"{link.run['duration_s']} s, {len(link.artifacts)} artifact(s), {len(link.metrics)} "
                         f"metric(s)); complete it: `stackmgr link {link.patch} --amends {link.id} --verdict … "
                         "--lesson …`\n")  # fmt: skip
    if outcome.tainted:
        sys.stderr.write(f"stackmgr: warning: tainted: {', '.join(outcome.tainted)} changed while the command "
                         "ran; the result is recorded with the state before it\n")  # fmt: skip
