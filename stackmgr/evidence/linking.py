"""Creating a link record (`stackmgr link`, and the drafts `stackmgr run` writes): the patch, the measured state
of the trees (evidence/measured.py), the artifacts (those from outside the store copied in by content), the
metrics and gates; a record amended (`--amends`: a draft completed, a result corrected) keeps what it measured,
and what is given is added to it."""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence import artifacts as kept_artifacts
from stackmgr.evidence import metrics
from stackmgr.evidence.freshness import linked_version
from stackmgr.evidence.gates import failed_gate, refusal
from stackmgr.evidence.reading import find_ref
from stackmgr.evidence.records import Artifact, Link, StackEntry, measured_patch, utc_now, write_link
from stackmgr.evidence.states import Evidence, amended_verdict, resolve_artifact
from stackmgr.git.repo import author_ident, start_author_ident
from stackmgr.safety.preserved import PatchIndex
from stackmgr.store import lfs
from stackmgr.store.applied import load_applied
from stackmgr.store.config import Store
from stackmgr.store.fs import sha256_hex
from stackmgr.store.inside import OutsideStore


def stack_now(store: Store, tree: str, index: PatchIndex) -> list[StackEntry]:
    """What a result is measured on (evidence/measured.py): `tree`, and every other tree of this machine with a
    series applied."""
    from stackmgr.evidence.measured import measure

    applied = load_applied(store)
    trees = [n for n, c in sorted(store.trees.items()) if (n == tree or n in applied) and os.path.isdir(c.path)]
    return measure(store, trees, index)


def create_link(
    store: Store, patch: str, artifacts: list[str], *, metric_specs: list[str], gate_specs: list[str],
    from_json: list[str], verdict: str | None, lesson: str, do_not_revive: bool, amends: str, baseline: str,
    label: str = "",
) -> Link:  # fmt: skip
    """`verdict` None: none given (an amendment keeps the amended record's: states.amended_verdict)."""
    from stackmgr.journal.operation import operation
    from stackmgr.store.names import patch_file

    patch = patch_file(store, patch)
    with operation(store, f"link {patch}"):
        return _create_link(store, patch, artifacts, metric_specs=metric_specs, gate_specs=gate_specs,
                            from_json=from_json, verdict=verdict, lesson=lesson, do_not_revive=do_not_revive,
                            amends=amends, baseline=baseline, label=label)  # fmt: skip


def _create_link(
    store: Store, patch: str, artifacts: list[str], *, metric_specs: list[str], gate_specs: list[str],
    from_json: list[str], verdict: str | None, lesson: str, do_not_revive: bool, amends: str, baseline: str,
    label: str = "",
) -> Link:  # fmt: skip
    evidence = Evidence.gather(store)
    rec = evidence.index.record(patch + ".patch")
    if rec is None:
        raise UsageProblem(f"no patch named {patch}", "see `stackmgr series` or `ls patches/`")
    if rec["tree"] is None:
        if str(rec["error"]).startswith("unresolved merge conflict"):
            from stackmgr.store.conflicts import refuse_conflicted

            with open(os.path.join(store.patches_dir, patch + ".patch"), "rb") as f:
                refuse_conflicted(f.read(), f"patches/{patch}.patch")
        raise StackmgrError(f"patches/{patch}.patch has no stackmgr header ({rec['error']})", "save it again")
    if verdict is not None and verdict not in metrics.VERDICTS:
        raise UsageProblem(f"verdict '{verdict}' is not one of {', '.join(metrics.VERDICTS)}", "pick one of them")
    amended, based = _named(store, amends, "--amends", patch), _named(store, baseline, "--baseline", patch)
    amends, baseline = amended.id if amended else "", based.id if based else ""
    if amended is not None:
        _refuse_amending(store, amended, patch)
    verdict, lesson, do_not_revive, baseline = amended_verdict(amended, verdict, lesson, do_not_revive, baseline)
    # Completing a draft or correcting a result: the same measurement (its measured state, run, artifacts), what
    # is given now added to it or replacing its own (a metric, a gate); a new measurement is a new link.
    completed = amended
    run = amended.run if amended is not None else {}
    if verdict == "promoted":  # a failed or tainted run is no result to promote (evidence/link_state.py)
        from stackmgr.evidence.link_state import failure_of

        failed = failure_of(run.get("exit_code"), _gates(completed, [metrics.parse_gate(g) for g in gate_specs]))
        tainted = amended is not None and amended.tainted
        why, hint = ("a tree changed while it ran (tainted)", "run it again with the tree left alone") \
            if tainted else (f"its command exited {run['exit_code']}" if "exit_code" in run
                             else f"it failed ({failed})", "run it again")  # fmt: skip
        if tainted or failed:
            raise UsageProblem(f"cannot promote {amends or 'this result'}: {why}", f"{hint}, or record another verdict")
        gate = failed_gate(_gates(completed, [metrics.parse_gate(g) for g in gate_specs]))
        if gate is not None:  # a result is valid only when every gate passes (evidence/gates.py)
            raise UsageProblem(*refusal(amends or "this result", gate))
    resolved = [resolve_artifact(store, raw) for raw in dict.fromkeys(artifacts + from_json)]
    found: list[Artifact] = list(completed.artifacts) if completed else []
    data_by_path: dict[str, bytes | None] = dict.fromkeys(a.path for a in found)  # a draft's: read when asked
    by_raw: dict[str, str] = {}
    new: list[Artifact] = []
    for raw, (recorded, full) in zip(dict.fromkeys(artifacts + from_json), resolved, strict=True):
        with open(full, "rb") as f:
            data = f.read()
        digest = sha256_hex(data)
        # Outside the store: recorded as the copy that travels with the store (kept once the link is sure), the
        # path it had kept as information.
        artifact = Artifact(kept_artifacts.path_of(digest), digest, len(data), origin=recorded, label=label) \
            if os.path.isabs(recorded) else Artifact(recorded, digest, len(data), label=label)  # fmt: skip
        if all((a.path, a.sha256) != (artifact.path, artifact.sha256) for a in found):
            found.append(artifact)
            new.append(artifact)
        data_by_path[artifact.path] = data
        by_raw[raw] = artifact.path
    measured = _metrics(store, metric_specs, from_json, by_raw, data_by_path)
    if completed is not None:  # its metrics stay, a metric given again replaces its own
        measured = [m for m in completed.metrics if m.name not in {n.name for n in measured}] + measured
    names = [m.name for m in measured]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise UsageProblem(f"metric {', '.join(twice)} is given twice", "name each metric once (rename one)")
    stack = completed.stack if completed else stack_now(store, rec["tree"], evidence.index)
    if verdict == "promoted":
        _refuse_promotion_off_tree(store, patch, rec["tree"], stack, str(rec["sha256"]))
    version = linked_version(evidence, stack, rec["tree"], patch)  # the version measured
    link = Link(
        id="", created=utc_now(), author=author_of(store, rec["tree"]), patch=patch, tree=rec["tree"],
        sha256=version[0], patch_id=version[1], stack=stack, artifacts=found,
        metrics=measured, gates=_gates(completed, [metrics.parse_gate(g) for g in gate_specs]),
        verdict=verdict, lesson=lesson, do_not_revive=do_not_revive, amends=amends, baseline=baseline,
        run=completed.run if completed else {},
    )  # fmt: skip
    for artifact in new:
        kept = data_by_path[artifact.path]
        if artifact.origin and kept is not None:
            kept_artifacts.keep(store, kept, artifact.sha256)
    write_link(store, link)
    lfs.track(store, [a.path for a in found if not os.path.isabs(a.path)])  # a big result stays out of git's objects
    evidence.save()
    if based is not None:
        _warn_unlike_baseline(store, link, based)
    return link


def _warn_unlike_baseline(store: Store, link: Link, based: Link) -> None:
    """A baseline measured with another run configuration: its deltas compare unlike runs (`compare` never
    ranks them together); said, not refused (a model change may be the point)."""
    import sys

    from stackmgr.evidence.compare import run_config

    ours, theirs = run_config(store, link), run_config(store, based)
    differ = [k for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)]
    if ours and theirs and differ:
        said = ", ".join(f"{k} {theirs.get(k, '—')} vs {ours.get(k, '—')}" for k in differ)
        sys.stderr.write(f"stackmgr: warning: --baseline {based.id} was measured with another run configuration "
                         f"({said}): its deltas compare unlike runs\n")  # fmt: skip


def _refuse_promotion_off_tree(store: Store, patch: str, tree: str, stack: list[StackEntry], sha256: str) -> None:
    """A promotion says the result measured the patch (records.measured_patch)."""
    if measured_patch(stack, tree, patch, sha256):
        return
    applied = load_applied(store).get(tree)
    if applied is not None and applied.series and patch in _listed(store, applied.series):
        how = f"push it (`stackmgr push -t {tree} {patch}`: series {applied.series} is applied)"
    else:
        from stackmgr.store.series import series_listing

        series = next(iter(series_listing(store, patch)), None)
        how = f"apply its series (`stackmgr apply {series}`)" if series else "apply its series"
    raise UsageProblem(f"cannot promote {patch}: its changes are not in tree {tree}'s measured state",
                       f"{how} and measure again, or record the result with --verdict experimental")  # fmt: skip


def _listed(store: Store, series: str) -> list[str]:
    from stackmgr.store.series import SeriesFile

    try:
        return SeriesFile.load(store, series).patch_names()
    except StackmgrError:
        return []


def _gates(completed: Link | None, given: list[metrics.Gate]) -> list[metrics.Gate]:
    """The gates given; completing a draft, also the draft's that none given replaces (its `exit` gate stays)."""
    named = {g.name for g in given}
    return [g for g in (completed.gates if completed else []) if g.name not in named] + given


def _named(store: Store, ref: str, what: str, patch: str) -> Link | None:
    """The link `ref` names (evidence.reading.find_ref: an ambiguous run name is refused there); None for ""."""
    if not ref:
        return None
    found = find_ref(store, ref, patch)
    if found is None:
        from stackmgr.evidence.ref_names import unknown_ref

        raise unknown_ref(store, ref, f"{what} {ref}: no such link or run",
                          "see `stackmgr links --json` for ids (`id`) and run names (`run.name`)")  # fmt: skip
    return found


def _refuse_amending(store: Store, amended: Link, patch: str) -> None:
    """An amendment replaces one current record: of this patch, not already replaced by another."""
    from stackmgr.evidence.reading import load_links

    if amended.patch != patch:
        raise UsageProblem(f"--amends {amended.id}: that link is about {amended.patch}, not {patch}",
                           f"amend it with `stackmgr link {amended.patch} … --amends {amended.id}`")  # fmt: skip
    later = [k.id for k in load_links(store, patch) if k.amends == amended.id]
    if later:
        raise UsageProblem(f"--amends {amended.id}: it is amended already, by {later[-1]}",
                           f"amend the current record: `--amends {later[-1]}`")  # fmt: skip


def _metrics(store: Store, specs: list[str], from_json: list[str], by_raw: dict[str, str],
             data: dict[str, bytes | None]) -> list[metrics.Metric]:  # fmt: skip
    """The metrics given: from the `--from-json` files, then each `--metric` (a value, or a regex matched on the
    artifacts: those read now by their bytes, a completed draft's from the store, a block at a time)."""
    out: list[metrics.Metric] = []
    for raw in from_json:
        given = data[by_raw[raw]]
        assert given is not None  # read above
        out += metrics.from_vllm_json(given, by_raw[raw])
    for spec in specs:
        metric, regex = metrics.parse_metric(spec)
        if metric is not None:
            out.append(metric)
            continue
        assert regex is not None
        name, pattern = regex
        hit = next((m for path, blob in data.items() if (m := _from_regex(store, name, pattern, path, blob))), None)
        if hit is None:
            raise StackmgrError(f"--metric {name}: /{pattern}/ matches no artifact", "check the regex and the files")
        out.append(hit)
    return out


def _from_regex(store: Store, name: str, pattern: str, path: str, blob: bytes | None) -> metrics.Metric | None:
    """Metric `name` from `pattern` in the artifact `path`: its bytes, or the store file (never one outside it)."""
    if blob is not None:
        return metrics.from_regex(name, pattern, blob, path)
    try:
        with kept_artifacts.open_kept(store.root, path) as f:
            return metrics.from_regex(name, pattern, f, path)
    except (OSError, OutsideStore):
        return None


def author_of(store: Store, tree: str) -> str:
    """`Name <email>` of the tree's git identity, else $USER, else `unknown`."""
    config = store.trees.get(tree)
    top = config.path if config and os.path.isdir(config.path) else store.root
    try:
        name, email, _stamp, _tz = author_ident(start_author_ident(top))
        return f"{name} <{email}>"
    except StackmgrError:
        return os.environ.get("USER", "unknown")


