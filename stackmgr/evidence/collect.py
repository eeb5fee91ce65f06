"""What `stackmgr run` keeps of what its command wrote (docs/FORMATS.md#link-record): the files new or changed
under the result directories and the `--from-json` files, kept by content in `artifacts/` a block at a time;
only the JSON among them is read whole, for the vllm bench metrics and configuration, and the log is scanned
line by line for the `[run.metrics]` regexes.

Below a result directory, regular files are opened without following a symbolic link (a file swapped for one is
not read). A symbolic link is a name, not content: one to a file of the same result directory that the command
wrote is recorded with that file's artifact (kept once), its own path as origin; one to a directory there is
left to the files below it; one to a file the command did not write (an earlier run's), or that leads outside
the directory, or to nothing, is not kept (a warning)."""

from __future__ import annotations

import errno
import os
import stat
from typing import Any

from stackmgr.errors import StackmgrError
from stackmgr.evidence import artifacts, capture, metrics
from stackmgr.evidence.compare import result_config
from stackmgr.evidence.metrics import Metric
from stackmgr.evidence.patterns import BadPattern, Hit, LinePattern
from stackmgr.evidence.records import Artifact
from stackmgr.store.config import Store
from stackmgr.store.fs import sha256_hex

MAX_COLLECTED = 1000  # files kept from the result directories of one run
MAX_PARSED = metrics.MAX_PARSED  # a JSON file bigger than this is kept but not read for metrics

Entry = tuple[str, int, int]  # "file" or "link", size, mtime
Listing = dict[str, dict[str, Entry]]  # result directory -> path -> entry


def listing(directory: str) -> dict[str, Entry]:
    """path -> (kind, size, mtime) of every regular file and symbolic link below `directory` (never through a
    link, never into `.git`)."""
    found: dict[str, Entry] = {}
    folders = [directory]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                here = list(entries)
        except OSError:
            continue
        for entry in here:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                found[entry.path] = ("link", st.st_size, st.st_mtime_ns)
            elif stat.S_ISREG(st.st_mode):
                found[entry.path] = ("file", st.st_size, st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode) and entry.name != ".git":
                folders.append(entry.path)
    return found


def written(store: Store, listed: Listing, asked: list[str],
            warnings: list[str]) -> tuple[list[Artifact], dict[str, bytes]]:  # fmt: skip
    """The artifacts of what the command wrote under the result directories (new or changed since `listed`), in
    path order, then of the `--from-json` files `asked`; and the bytes of the JSON among them, by path."""
    changed = _changed(listed)
    if len(changed) > MAX_COLLECTED:
        warnings.append(f"{len(changed)} files were written under the result directories; the first "
                        f"{MAX_COLLECTED} are kept")  # fmt: skip
    chosen = sorted(changed)[:MAX_COLLECTED]
    files = [p for p in chosen if changed[p][0] == "file"]
    data: dict[str, bytes] = {}
    kept: dict[str, Artifact] = {}  # path -> its artifact
    for path in dict.fromkeys(files + asked):
        listed_file = changed.get(path, ("", ""))[0] == "file"
        opened = path if listed_file else os.path.realpath(path)  # --from-json names the file it means
        artifact = _keep(store, path, opened, path in asked or path.endswith(".json"), data, warnings)
        if artifact is not None:
            kept[path] = artifact
    by_file = {os.path.realpath(p): kept[p] for p in files if p in kept}
    for path in [p for p in chosen if changed[p][0] == "link" and p not in kept]:
        artifact = _link(path, changed[path][1], by_file, warnings)
        if artifact is not None:
            kept[path] = artifact
    return [kept[p] for p in dict.fromkeys(chosen + asked) if p in kept], data


def _changed(listed: Listing) -> dict[str, tuple[str, str]]:
    """path -> (kind, its result directory) of what is new or changed under the directories since `listed`."""
    changed: dict[str, tuple[str, str]] = {}
    for directory, old in listed.items():
        for path, entry in listing(directory).items():
            if old.get(path) != entry:
                changed.setdefault(path, (entry[0], directory))
    return changed


def read_written(listed: Listing, warnings: list[str]) -> tuple[list[Artifact], dict[str, bytes]]:
    """The JSON files written under the result directories since `listed`, read but not kept (no record is
    written of this run): an artifact of each naming the file itself, and its bytes, by path."""
    found, data = [], {}
    changed = _changed(listed)
    for path in sorted(p for p, (kind, _) in changed.items() if kind == "file" and p.endswith(".json")):
        try:
            raw = _read(path, shown(path), warnings)
        except OSError:
            continue
        if raw is not None:
            data[path] = raw
            found.append(Artifact(capture.text(path), sha256_hex(raw), len(raw), origin=capture.text(path)))
    return found, data


def _keep(store: Store, path: str, opened: str, parse: bool, data: dict[str, bytes],
          warnings: list[str]) -> Artifact | None:  # fmt: skip
    """The artifact of the file at `path` (read at `opened`); its bytes into `data` when it is to be parsed."""
    try:
        raw = _read(opened, shown(path), warnings) if parse else None
        if raw is None:
            rel, digest, size = artifacts.keep_file(store, opened)
            return Artifact(rel, digest, size, origin=capture.text(path))
    except OSError as exc:
        warnings.append(f"{shown(path)}: not kept ({_why(exc)})")
        return None
    data[path] = raw
    digest = sha256_hex(raw)
    return Artifact(artifacts.keep(store, raw, digest), digest, len(raw), origin=capture.text(path))


def _read(path: str, name: str, warnings: list[str]) -> bytes | None:
    """The bytes of a file to parse, or None (with a warning) when it is too big to read whole."""
    with artifacts.open_regular(path) as f:
        if os.fstat(f.fileno()).st_size <= MAX_PARSED:
            raw = f.read(MAX_PARSED + 1)
            if len(raw) <= MAX_PARSED:
                return raw
    warnings.append(f"{name}: over {MAX_PARSED >> 20} MiB, kept but not read for metrics")
    return None


def _link(path: str, directory: str, by_file: dict[str, Artifact], warnings: list[str]) -> Artifact | None:
    """A symbolic link the command wrote: the artifact of the file it names, if that is one the command wrote in
    the same result directory; else None, and a warning when it leads outside or to nothing."""
    target = os.path.realpath(path)
    if not target.startswith(os.path.join(os.path.realpath(directory), "")):
        warnings.append(f"{shown(path)}: a symbolic link to outside the results directory, not kept")
        return None
    if os.path.isdir(target):
        return None  # the files below it are collected where they are
    if target in by_file:
        a = by_file[target]
        return Artifact(a.path, a.sha256, a.size, origin=capture.text(path))
    if not os.path.lexists(target):
        warnings.append(f"{shown(path)}: a symbolic link to nothing, not kept")
    else:
        warnings.append(f"{shown(path)}: a symbolic link to {shown(target)}, which the command did not write: "
                        "not kept")  # fmt: skip
    return None


def _why(exc: OSError) -> str:
    return "it is a symbolic link now, not followed" if exc.errno == errno.ELOOP else str(exc.strerror)


def shown(path: str) -> str:
    """A path as a warning names it: relative to the current directory when below it."""
    relative = os.path.relpath(path)
    return capture.text(path if relative.startswith("..") else relative)


def run_metrics(store: Store, found: list[Artifact], data: dict[str, bytes], asked: set[str], log: str,
                warnings: list[str]) -> tuple[list[Metric], dict[str, Any]]:  # fmt: skip
    """The metrics of a run and its configuration (the vllm bench JSON's model, rate, concurrency, prompts): from
    the newest vllm bench result among `data`, then the `[run.metrics]` regexes on the log (`found[0]`)."""
    out: list[Metric] = []
    config: dict[str, Any] = {}
    by_origin = {a.origin: a.path for a in found}
    results = []
    for path, raw in sorted(data.items(), key=lambda item: -mtime(item[0])):  # the newest result first
        if not path.endswith(".json") and path not in asked:
            continue
        origin, name = by_origin[capture.text(path)], shown(path)
        lead, tail = ("--from-json ", "") if path in asked else ("", ", kept as an artifact, no metrics from it")
        try:
            doc = metrics.parse_json(raw, name)  # truncated, NaN-free but broken, not UTF-8: said, never silent
        except StackmgrError as exc:
            warnings.append(f"{lead}{exc.message}{tail}")
            continue
        skipped: list[str] = []
        try:
            got = metrics.vllm_metrics(doc, origin, asked=path in asked, skipped=skipped)
        except StackmgrError as exc:  # another JSON (a config) says nothing
            if path in asked or skipped:
                warnings.append(f"{lead}{name}{exc.message.removeprefix(origin)}{tail}")
            continue
        finally:
            if skipped:  # one field's NaN (or odd name) never costs the others
                warnings.append(f"{lead}{name}: left out of its metrics: {', '.join(skipped)}")
        results.append(path)
        if len(results) == 1:  # one result's metrics and configuration, never a mix of two runs'
            config = {k: v for k, v in result_config(doc).items() if isinstance(v, (str, int, float))}
            out += got
    if len(results) > 1:
        warnings.append(f"{len(results)} vllm bench results were written; metrics and configuration are from the "
                        f"newest, {capture.text(results[0])} (all are kept as artifacts)")  # fmt: skip
    table = store.run.get("metrics", {}) if isinstance(store.run, dict) else {}
    patterns: dict[str, LinePattern] = {}
    for name, pattern in (table.items() if isinstance(table, dict) else []):
        try:  # the shared config's: matched by RE2, in bounded time (evidence/patterns.py)
            patterns[str(name)] = metrics.compile_regex(str(pattern))
        except BadPattern as exc:
            warnings.append(f"[run.metrics] {name}: {exc.message}")
    hits: dict[str, Hit] = {}
    gave_up: dict[str, str] = {}
    if patterns:
        with open(log, "rb") as f:
            hits = metrics.first_matches(patterns, f, gave_up)  # one pass over the log, a block at a time
    warnings += [f"[run.metrics] {name}: {why}" for name, why in gave_up.items()]
    for name in [n for n in patterns if n in hits]:
        try:
            metric = metrics.regex_metric(name, hits[name], found[0].path)
        except StackmgrError as exc:
            warnings.append(f"[run.metrics] {name}: {exc.message}")
            continue
        if metric.name not in {m.name for m in out}:
            out.append(metric)
    return out, config


def mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
