"""Creating a link record (`stackmgr link`, and the drafts `stackmgr run` writes): the patch, the measured state
of the trees (evidence/measured.py), the artifacts (those from outside the store copied in by content), the
metrics and gates; a draft completed with `--amends` keeps what it recorded."""

from __future__ import annotations

import os

from stackmgr.errors import StackmgrError, UsageProblem
from stackmgr.evidence import artifacts as kept_artifacts
from stackmgr.evidence import metrics
from stackmgr.evidence.reading import find_ref
from stackmgr.evidence.records import Artifact, Link, StackEntry, utc_now, write_link
from stackmgr.evidence.states import Evidence, resolve_artifact
from stackmgr.git.repo import author_ident, start_author_ident
from stackmgr.safety.preserved import PatchIndex
from stackmgr.store import lfs
from stackmgr.store.applied import load_applied
from stackmgr.store.config import Store
from stackmgr.store.fs import sha256_hex


def stack_now(store: Store, tree: str, index: PatchIndex) -> list[StackEntry]:
    """What a result is measured on (evidence/measured.py): `tree`, and every other tree of this machine with a
    series applied."""
    from stackmgr.evidence.measured import measure

    applied = load_applied(store)
    trees = [n for n, c in sorted(store.trees.items()) if (n == tree or n in applied) and os.path.isdir(c.path)]
    return measure(store, trees, index)


def create_link(
    store: Store, patch: str, artifacts: list[str], *, metric_specs: list[str], gate_specs: list[str],
    from_json: list[str], verdict: str, lesson: str, do_not_revive: bool, amends: str, baseline: str,
) -> Link:  # fmt: skip
    from stackmgr.journal.operation import operation

    with operation(store, f"link {patch}"):
        return _create_link(store, patch, artifacts, metric_specs=metric_specs, gate_specs=gate_specs,
                            from_json=from_json, verdict=verdict, lesson=lesson, do_not_revive=do_not_revive,
                            amends=amends, baseline=baseline)  # fmt: skip


def _create_link(
    store: Store, patch: str, artifacts: list[str], *, metric_specs: list[str], gate_specs: list[str],
    from_json: list[str], verdict: str, lesson: str, do_not_revive: bool, amends: str, baseline: str,
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
    if verdict not in metrics.VERDICTS:
        raise UsageProblem(f"verdict '{verdict}' is not one of {', '.join(metrics.VERDICTS)}", "pick one of them")
    amended, based = _named(store, amends, "--amends"), _named(store, baseline, "--baseline")
    amends, baseline = amended.id if amended else "", based.id if based else ""
    if amended is not None and amended.patch != patch:
        raise UsageProblem(f"--amends {amends}: that link is about {amended.patch}, not {patch}",
                           f"amend it with `stackmgr link {amended.patch} … --amends {amends}`")  # fmt: skip
    completed = amended if amended is not None and not artifacts and not from_json else None  # a draft completed
    run = amended.run if amended is not None else {}
    if verdict == "promoted" and (run.get("tainted") or run.get("exit_code", 0) != 0):
        why = "a tree changed while it ran (tainted)" if run.get("tainted") else \
            f"its command exited {run['exit_code']}"  # fmt: skip
        raise UsageProblem(f"cannot promote {amends}: {why}", "run it again on a quiet tree, or record another verdict")
    resolved = [resolve_artifact(store, raw) for raw in dict.fromkeys(artifacts + from_json)]
    found: list[Artifact] = list(completed.artifacts) if completed else []
    data_by_path: dict[str, bytes] = _kept_bytes(store, found)
    by_raw: dict[str, str] = {}
    for raw, (recorded, full) in zip(dict.fromkeys(artifacts + from_json), resolved, strict=True):
        with open(full, "rb") as f:
            data = f.read()
        digest = sha256_hex(data)
        # Outside the store: recorded as the copy that travels with the store (kept once the link is sure), the
        # path it had kept as information.
        artifact = Artifact(kept_artifacts.path_of(digest), digest, len(data), origin=recorded) \
            if os.path.isabs(recorded) else Artifact(recorded, digest, len(data))  # fmt: skip
        found.append(artifact)
        data_by_path[artifact.path] = data
        by_raw[raw] = artifact.path
    measured = _metrics(metric_specs, from_json, by_raw, data_by_path)
    if completed is not None:  # its metrics stay, a metric given again replaces its own
        measured = [m for m in completed.metrics if m.name not in {n.name for n in measured}] + measured
    names = [m.name for m in measured]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise UsageProblem(f"metric {', '.join(twice)} is given twice", "name each metric once (rename one)")
    stack = completed.stack if completed else stack_now(store, rec["tree"], evidence.index)
    if verdict == "promoted":
        _refuse_promotion_off_tree(store, patch, rec["tree"], stack)
    link = Link(
        id="", created=utc_now(), author=author_of(store, rec["tree"]), patch=patch, tree=rec["tree"],
        sha256=rec["sha256"], patch_id=evidence.patch_id(patch + ".patch") or "", stack=stack, artifacts=found,
        metrics=measured, gates=_gates(completed, [metrics.parse_gate(g) for g in gate_specs]),
        verdict=verdict, lesson=lesson, do_not_revive=do_not_revive, amends=amends, baseline=baseline,
        run=completed.run if completed else {},
    )  # fmt: skip
    for artifact in found if completed is None else []:
        if artifact.origin:
            kept_artifacts.keep(store, data_by_path[artifact.path], artifact.sha256)
    write_link(store, link)
    lfs.track(store, [a.path for a in found if not os.path.isabs(a.path)])  # a big result stays out of git's objects
    evidence.save()
    return link


def _refuse_promotion_off_tree(store: Store, patch: str, tree: str, stack: list[StackEntry]) -> None:
    """A promotion says the result measured the patch: its changes must be in its own tree's measured state (in
    the chain that rebuilds it, or present whatever the series)."""
    entry = next((s for s in stack if s.tree == tree), None)
    if entry is not None and patch in {n for n, _ in entry.patches + entry.present}:
        return
    series = _series_listing(store, patch)
    how = f"`stackmgr apply {series}`" if series else "`stackmgr apply SERIES`"
    raise UsageProblem(f"cannot promote {patch}: its changes are not in tree {tree}'s measured state",
                       f"apply its series ({how}) and measure again, or record the result with "
                       "--verdict experimental")  # fmt: skip


def _series_listing(store: Store, patch: str) -> str | None:
    from stackmgr.store.series import SeriesFile, list_series

    for name in list_series(store):
        try:
            if patch in SeriesFile.load(store, name).patch_names():
                return name
        except StackmgrError:
            continue
    return None


def _gates(completed: Link | None, given: list[metrics.Gate]) -> list[metrics.Gate]:
    """The gates given; completing a draft, also the draft's that none given replaces (its `exit` gate stays)."""
    named = {g.name for g in given}
    return [g for g in (completed.gates if completed else []) if g.name not in named] + given


def _named(store: Store, ref: str, what: str) -> Link | None:
    """The link `ref` names: its id (`lnk-` optional), or the name `stackmgr run --name` gave it (the latest run
    of that name); None for ""."""
    if not ref:
        return None
    found = find_ref(store, ref)
    if found is None:
        raise UsageProblem(f"{what} {ref}: no such link or run", "see `stackmgr links` for ids and run names")
    return found


def _kept_bytes(store: Store, found: list[Artifact]) -> dict[str, bytes]:
    """The bytes of a completed draft's artifacts, for a `--metric NAME=/REGEX/` given while completing it."""
    out = {}
    for a in found:
        try:
            with open(a.path if os.path.isabs(a.path) else os.path.join(store.root, a.path), "rb") as f:
                out[a.path] = f.read()
        except OSError:
            continue
    return out


def _metrics(
    specs: list[str], from_json: list[str], by_raw: dict[str, str], data: dict[str, bytes]
) -> list[metrics.Metric]:
    out: list[metrics.Metric] = []
    for raw in from_json:
        out += metrics.from_vllm_json(data[by_raw[raw]], by_raw[raw])
    for spec in specs:
        metric, regex = metrics.parse_metric(spec)
        if metric is not None:
            out.append(metric)
            continue
        assert regex is not None
        name, pattern = regex
        hit = next((m for path, blob in data.items() if (m := metrics.from_regex(name, pattern, blob, path))), None)
        if hit is None:
            raise StackmgrError(f"--metric {name}: /{pattern}/ matches no artifact", "check the regex and the files")
        out.append(hit)
    return out


def author_of(store: Store, tree: str) -> str:
    """`Name <email>` of the tree's git identity, else $USER, else `unknown`."""
    config = store.trees.get(tree)
    top = config.path if config and os.path.isdir(config.path) else store.root
    try:
        name, email, _stamp, _tz = author_ident(start_author_ident(top))
        return f"{name} <{email}>"
    except StackmgrError:
        return os.environ.get("USER", "unknown")


