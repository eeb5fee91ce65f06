#!/usr/bin/env python3
"""Benchmark the evidence commands: `stackmgr run`'s own overhead, and `show`, `links`, `compare` on a
store of 20,000 link records.

On the vLLM-size tree of bench_check_save.py (6,401 files, ~1.29 M lines), deterministically from a seed:

- `stackmgr run --link P -- true` against `true` run directly, alternating, in a store with a series of 5
  stacked patches applied and 4 untracked files in the tree: overhead = median(run) - median(bare)
  (target <= 150 ms). Every `run` writes its draft link record: they accumulate in links/P/ (one per round);
- a lab store generated without running stackmgr (patch files as `save` writes them, link records rendered by
  stackmgr's own `records.render` with ids from `records.new_id`, so they are what `run` and `link` write):
  300 patches in 30 series of 10 (some with kept older versions), 20,000 records over them (skewed: a few
  patches have hundreds): ~1/2 drafts from `run` (log + vllm bench JSON kept under artifacts/sha256/, a run
  table with the run's configuration, an exit gate), half of those completed by a `link --amends` record
  (verdict, lesson, some a baseline in another patch), ~1/5 `link` records of JSON results under results/;
  every record with its measured stack (snapshot, patches, present; some a residue, some a second tree), some
  measured on an older version of the patch (stale). Timed: `links`, `show` of the busiest patch, `compare`
  of the two busiest patches of one series, each cold (`.stackmgr/cache/` emptied first: the first run after
  the store was made or pulled; Python's byte code is warm, and so is the OS page cache: every store file is
  read just before) and warm (median of 5 runs after the cold one); target <= 1 s for each, cold and warm,
  except the cold `links`: on a fresh clone it parses every record once (reported, per record; not a target),
  so its target is `links` after a pull of 100 records (held aside from the cold run, then brought back). The
  cold `links` always runs to the end (it fills every cache, kept aside); a cold `show` or `compare` is
  stopped at `--cold-limit` seconds (default 10; the caches are put back then) and is a FAIL.

Needs the `stackmgr` console script of a non-editable install first on PATH, and this script run by that
install's Python (it imports stackmgr.evidence to write the records). Full mode exits 1 when a target fails;
`--smoke` (small tree, 200 records, for CI) never fails on a target; a run that cannot measure exits 2.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import shutil
import statistics
import sys
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_check_save import (
    FULL,
    MARKER,
    SMOKE,
    WORDS,
    BenchError,
    Row,
    build_tree,
    commit_tree,
    finish,
    hermetic_env,
    log,
    median_ms,
    paired_medians,
    prepare_workdir,
    render_source,
    run,
    timed,
    tracked_sources,
    write_gitconfig,
)
from bench_scale import FROM_LINE, one_hunk_patch, write_series

TREE = "vllm"
RUN_TARGET_MS = 150.0
COMMAND_TARGET_MS = 1000.0
UNTRACKED = ("vllm/probe/bench_probe.py", "vllm/probe/sweep_config.py", "notes/todo.md", "scratch.log")
MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V2-Lite",
          "mistralai/Mixtral-8x7B-Instruct-v0.1")  # fmt: skip
VERDICTS = ("promoted", "rejected", "inconclusive", "promoted", "rejected", "superseded")
RATES = ((1.0, 8, 200), (4.0, 32, 500), (16.0, 64, 1000), (float("inf"), 128, 1000))  # rate, concurrency, prompts
HOSTS = ("xpu-node-03", "xpu-node-07", "xpu-node-11", "a100-lab-2")


@dataclass(frozen=True)
class Sizes:
    run_patches: int  # the series applied for `run`
    patches: int  # in the evidence store
    series_len: int
    records: int
    run_repeats: int
    repeats: int  # warm rounds of show, links, compare


FULL_SIZES = Sizes(run_patches=5, patches=300, series_len=10, records=20000, run_repeats=11, repeats=5)
SMOKE_SIZES = Sizes(run_patches=3, patches=12, series_len=4, records=200, run_repeats=2, repeats=2)


_UNSAFE = re.compile(r'[\x00-\x1f"\\\x7f]')


def evidence_api():
    """stackmgr's own record writer, from the installed package."""
    try:
        from stackmgr.evidence import metrics, records, toml_out
        from stackmgr.git.repo import patch_ids
    except ImportError as exc:
        raise BenchError(f"run this script with the Python of the venv stackmgr is installed in ({exc})") from None
    if not hasattr(toml_out, "slow_string"):  # the same strings, without escaping char by char what needs none
        slow = toml_out._string
        toml_out.slow_string = slow
        toml_out._string = lambda v: slow(v) if _UNSAFE.search(v) else f'"{v}"'
    return records, metrics, patch_ids


# --- part 1: `stackmgr run` on the vLLM-size tree --------------------------------------------------------------


def setup_run(workdir: Path, exe: str, env: dict[str, str], tree: Path, base: str, sizes: Sizes, pool: list[str],
              rng: random.Random) -> tuple[Path, str]:  # fmt: skip
    """A store with a series of stacked one-hunk patches applied to the tree, and untracked files in the tree."""
    store = workdir / "store-run"
    run([exe, "init", str(store)], workdir, env)
    run([exe, "--store", str(store), "tree", "add", TREE, str(tree)], workdir, env)
    write_series(store, tree, base, "work", sizes.run_patches, pool, rng)
    run([exe, "--store", str(store), "apply", "work"], workdir, env)
    for i, rel in enumerate(UNTRACKED):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(render_source(rng, rel if rel.endswith(".py") else "module" + ".py", 30 + 20 * i))
    return store, f"work-{sizes.run_patches - 1:04d}"


def check_run_record(store: Path, patch: str, sizes: Sizes) -> int:
    """The newest record of `patch` is a draft of `true` on the applied series plus a residue; the count."""
    found = sorted((store / "links" / patch).glob("*.toml"))
    if not found:
        raise BenchError(f"`stackmgr run --link {patch}` wrote no link record")
    doc = tomllib.loads(found[-1].read_text())
    stack = doc["stack"][0]
    if (doc["run"]["command"] != ["true"] or doc["gate"][0]["status"] != "pass" or not stack.get("residue")
            or len(stack["patches"]) != sizes.run_patches):  # fmt: skip
        raise BenchError(f"unexpected record from `stackmgr run`: {found[-1]}")
    return len(found)


def measure_run(exe: str, env: dict[str, str], tree: Path, store: Path, patch: str, sizes: Sizes) -> list[Row]:
    def bare() -> None:
        run(["true"], tree, env)

    def sm_run() -> None:
        run([exe, "--store", str(store), "run", "--link", patch, "--", "true"], tree, env)

    def git_status() -> None:
        run(["git", "status", "--porcelain"], tree, env)

    sm_run()
    check_run_record(store, patch, sizes)
    bare_ms, run_ms = paired_medians(bare, sm_run, sizes.run_repeats)
    records = check_run_record(store, patch, sizes)
    overhead = run_ms - bare_ms
    git_ms = median_ms(git_status, max(3, sizes.run_repeats // 2))
    return [
        Row("true, run directly", bare_ms),
        Row(f"stackmgr run --link {patch} -- true ({records} records in links/{patch}/ at the end)", run_ms),
        Row("git status --porcelain of the tree (for context)", git_ms),
        Row(f"stackmgr run overhead (run - bare), as a fraction of {RUN_TARGET_MS:.0f} ms", overhead,
            overhead / RUN_TARGET_MS, 1.0),
    ]  # fmt: skip


# --- part 2: a store of 20,000 link records --------------------------------------------------------------------


def hexid(rng: random.Random, n: int = 40) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def patch_bytes(base: str, subject: str, body: str, diffs: list[tuple[str, bytes]], date: str) -> bytes:
    """A patch file as `save` writes it: mail header, trailers, diffstat, full-index diffs."""
    stat = "".join(f" {path} | 2 +-\n" for path, _ in diffs)
    n = len(diffs)
    head = (f"From: Bench Runner <bench@example.com>\nDate: {date}\nSubject: [PATCH] {subject}\n\n{body}\n\n"
            f"Stackmgr-Tree: {TREE}\nStackmgr-Base: {base}\n---\n{stat} {n} file{'s' if n > 1 else ''} changed, "
            f"{n} insertion{'s' if n > 1 else ''}(+), {n} deletion{'s' if n > 1 else ''}(-)\n\n")  # fmt: skip
    return FROM_LINE + head.encode() + b"".join(d for _, d in diffs)


@dataclass
class Lane:
    name: str
    patches: list[str]
    configs: list[dict[str, object]]


@dataclass
class PatchInfo:
    name: str
    lane: int
    position: int
    versions: list[tuple[str, str]]  # (sha256, patch-id): current first, then kept older versions


def write_patches(store: Path, tree: Path, base: str, sizes: Sizes, pool: list[str], rng: random.Random,
                  patch_ids) -> tuple[list[Lane], list[PatchInfo]]:  # fmt: skip
    """`sizes.patches` patches on the base, each touching 1-3 files no other patch touches (they stack in any
    order), in series of `series_len`; a third with 1-2 older versions kept as `save --update` keeps them."""
    files = iter(pool)
    lanes: list[Lane] = []
    infos: list[PatchInfo] = []
    blobs: list[bytes] = []
    for k in range(sizes.patches):
        lane, pos = divmod(k, sizes.series_len)
        if pos == 0:
            word = WORDS[lane % len(WORDS)].replace("_", "-")
            configs: list[dict[str, object]] = [
                {"model_id": MODELS[(lane + c) % len(MODELS)], "request_rate": rate, "max_concurrency": conc,
                 "num_prompts": prompts} for c, (rate, conc, prompts) in enumerate(rng.sample(RATES, 3))]  # fmt: skip
            lanes.append(Lane(f"{word}-{lane:02d}", [], configs))
        name = f"{lanes[-1].name}-{pos:02d}"
        lanes[-1].patches.append(name)
        paths = [next(files) for _ in range(rng.choice((1, 1, 2, 3)))]
        versions = []
        for v in range(1 + (rng.randrange(1, 3) if rng.random() < 0.33 else 0)):
            diffs = []
            for path in paths:
                old = (tree / path).read_bytes()
                line = 3 + rng.randrange(max(1, old.count(b"\n") - 8))
                text = b"    %s_tile_%d = %d  # v%d\n" % (name.replace("-", "_").encode(), k, rng.randrange(512), v)
                diffs.append((path, one_hunk_patch(path, old, line, text)[0]))
            subject = f"{lanes[-1].name}: step {pos} of the {WORDS[k % len(WORDS)]} change"
            body = f"Measured with vllm bench serve at three rates.\nRevision {v} (bench seed)."
            data = patch_bytes(base, subject, body, diffs, f"Sat, 13 Jun 2026 10:{pos:02d}:{v:02d} +0000")
            versions.append(data)
        current, older = versions[-1], versions[:-1]
        (store / "patches" / f"{name}.patch").write_bytes(current)
        for data in older:
            kept = store / "patches" / ".versions" / name
            kept.mkdir(parents=True, exist_ok=True)
            (kept / f"{hashlib.sha256(data).hexdigest()[:12]}.patch").write_bytes(data)
        infos.append(PatchInfo(name, lane, pos, []))
        blobs += [current, *older]
        infos[-1].versions = [(hashlib.sha256(d).hexdigest(), "") for d in (current, *older)]
    ids = iter(patch_ids(str(store), [b[b.index(b"\ndiff --git ") + 1 :] for b in blobs]))
    for info in infos:
        info.versions = [(sha, next(ids)) for sha, _ in info.versions]
    for series in lanes:
        (store / "series" / series.name).write_text("".join(p + ".patch\n" for p in series.patches))
    return lanes, infos


def vllm_result(rng: random.Random, config: dict[str, object], quality: float, when: float) -> dict[str, object]:
    """A `vllm bench serve --save-result` file (its summary keys, no per-request lists)."""
    prompts = int(config["num_prompts"])  # type: ignore[call-overload]
    tput = 900 * quality * rng.uniform(0.97, 1.03) * (1 + min(float(config["request_rate"]), 32) / 8)  # type: ignore[arg-type]
    ttft = 40 / quality * rng.uniform(0.9, 1.1)
    tpot = 9 / quality * rng.uniform(0.95, 1.05)
    duration = prompts * 256 / tput
    return {
        "date": time.strftime("%Y%m%d-%H%M%S", time.gmtime(when)), "backend": "vllm", "label": None,
        "model_id": config["model_id"], "tokenizer_id": config["model_id"], "num_prompts": prompts,
        "request_rate": config["request_rate"] if config["request_rate"] != float("inf") else "inf",
        "burstiness": 1.0, "max_concurrency": config["max_concurrency"], "duration": round(duration, 3),
        "completed": prompts, "total_input_tokens": prompts * 1024, "total_output_tokens": prompts * 256,
        "request_throughput": round(prompts / duration, 4), "request_goodput": None,
        "output_throughput": round(tput, 3), "total_token_throughput": round(tput * 5, 3),
        "mean_ttft_ms": round(ttft, 3), "median_ttft_ms": round(ttft * 0.96, 3), "std_ttft_ms": round(ttft / 7, 3),
        "p99_ttft_ms": round(ttft * 2.1, 3), "mean_tpot_ms": round(tpot, 3), "median_tpot_ms": round(tpot * 0.98, 3),
        "std_tpot_ms": round(tpot / 9, 3), "p99_tpot_ms": round(tpot * 1.4, 3), "mean_itl_ms": round(tpot * 1.01, 3),
        "median_itl_ms": round(tpot * 0.9, 3), "std_itl_ms": round(tpot / 4, 3), "p99_itl_ms": round(tpot * 3.2, 3),
    }  # fmt: skip


def vllm_log(result: dict[str, object], rng: random.Random) -> bytes:
    """What `vllm bench serve` prints: progress, then its result block."""
    lines = [f"INFO {result['date']} [api_server:512] Namespace(backend='vllm', model='{result['model_id']}', "
             f"request_rate={result['request_rate']}, max_concurrency={result['max_concurrency']}, "
             f"num_prompts={result['num_prompts']}, seed={rng.randrange(1 << 16)})",
             "Starting initial single prompt test run...", "Initial test run completed. Starting main benchmark run..."]
    lines += [f"{p:3d}%|{'#' * (p // 10):<10}| {p * int(result['num_prompts']) // 100}/{result['num_prompts']} "  # type: ignore[call-overload]
              f"[{p * 0.37:.0f}s]" for p in range(0, 101, 5)]  # fmt: skip
    lines += ["============ Serving Benchmark Result ============",
              f"Successful requests:                     {result['completed']}",
              f"Benchmark duration (s):                  {result['duration']}",
              f"Total input tokens:                      {result['total_input_tokens']}",
              f"Total generated tokens:                  {result['total_output_tokens']}",
              f"Request throughput (req/s):              {result['request_throughput']}",
              f"Output token throughput (tok/s):         {result['output_throughput']}",
              f"Total Token throughput (tok/s):          {result['total_token_throughput']}"]  # fmt: skip
    for kind, label in (("ttft", "Time to First Token"), ("tpot", "Time per Output Token (excl. 1st token)"),
                        ("itl", "Inter-token Latency")):  # fmt: skip
        lines.append(f"{'-' * 15}{label}{'-' * 15}")
        lines += [f"{stat.title()} {kind.upper()} (ms):{' ' * 24}{result[f'{stat}_{kind}_ms']}"
                  for stat in ("mean", "median", "p99")]  # fmt: skip
    lines.append("=" * 50)
    return ("\n".join(lines) + "\n").encode()


class StoreWriter:
    """Writes artifacts (kept by content, or under results/) and link records into the store."""

    def __init__(self, store: Path, records) -> None:
        self.store, self.records, self.count, self.bytes = store, records, 0, 0
        self.kinds = {"draft": 0, "amends": 0, "link": 0}
        self.dirs: set[Path] = set()

    def _write(self, path: Path, data: bytes) -> None:
        if path.parent not in self.dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.dirs.add(path.parent)
        path.write_bytes(data)
        self.bytes += len(data)

    def keep(self, data: bytes, origin: str):
        """An Artifact kept by content, as artifacts/sha256/XX/REST."""
        digest = hashlib.sha256(data).hexdigest()
        rel = f"artifacts/sha256/{digest[:2]}/{digest[2:]}"
        self._write(self.store / rel, data)
        return self.records.Artifact(rel, digest, len(data), origin=origin)

    def result(self, rel: str, data: bytes):
        """An Artifact in the store at `rel` (a result put there by hand)."""
        self._write(self.store / rel, data)
        return self.records.Artifact(rel, hashlib.sha256(data).hexdigest(), len(data))

    def link(self, link) -> str:
        self.kinds["amends" if link.amends else "draft" if link.run else "link"] += 1
        link.id = self.records.new_id(link)
        data = self.records.render(link)
        if self.count < 50:  # the faster string writer changes no byte: checked on the first records
            from stackmgr.evidence import toml_out

            fast, toml_out._string = toml_out._string, toml_out.slow_string
            try:
                fast_id = link.id
                link.id = self.records.new_id(link)
                if link.id != fast_id or self.records.render(link) != data:
                    raise BenchError("the bench's TOML string writer differs from stackmgr's")
            finally:
                toml_out._string = fast
        stamp = link.created.replace("-", "").replace(":", "")
        self._write(self.store / "links" / link.patch / f"{stamp}-{link.id}.toml", data)
        self.count += 1
        return link.id


def stamp(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when)) + f".{int(when % 1 * 1e6):06d}Z"


def write_records(store: Path, tree: Path, base: str, sizes: Sizes, lanes: list[Lane], infos: list[PatchInfo],
                  rng: random.Random) -> dict[str, int]:  # fmt: skip
    """`sizes.records` link records over the patches, skewed (lognormal weights); per lane the first patch (the
    lane's baseline) is measured first, and later completions name one of its links as their baseline."""
    records, metrics, _ = evidence_api()
    writer = StoreWriter(store, records)
    weights = [rng.lognormvariate(0, 0.8) for _ in infos]
    total = sum(weights)
    counts = [max(1, int(w / total * sizes.records)) for w in weights]
    while sum(counts) < sizes.records:
        counts[rng.randrange(len(counts))] += 1
    while sum(counts) > sizes.records:
        i = rng.randrange(len(counts))
        counts[i] -= counts[i] > 1
    by_name = {info.name: info for info in infos}
    residues = [writer.keep(b"diff --git a/notes/todo.md b/notes/todo.md\nnew file mode 100644\n--- /dev/null\n"
                            b"+++ b/notes/todo.md\n@@ -0,0 +1 @@\n+try tile %d\n" % i, "").path
                for i in range(20)]  # fmt: skip
    kernel_base, kernel_snaps = hexid(rng), [hexid(rng) for _ in range(8)]
    start = 1_780_000_000.0  # 2026-05-28
    baselines: dict[tuple[int, int], list[str]] = {}
    written: dict[str, int] = {}
    for info in infos:
        lane = lanes[info.lane]
        chain_names = lane.patches[: info.position + 1]
        todo = counts[infos.index(info)]
        n = 0
        while n < todo:
            version = 0 if len(info.versions) == 1 or rng.random() < 0.8 else rng.randrange(1, len(info.versions))
            sha, pid = info.versions[version]
            chain = [(p, by_name[p].versions[0][0]) for p in chain_names[:-1]] + [(info.name, sha)]
            residue = rng.random() < 0.1
            stack = [records.StackEntry(TREE, base, chain, lane.name, residue, hexid(rng), list(chain),
                                        rng.choice(residues) if residue else "")]  # fmt: skip
            if rng.random() < 0.2:
                stack.append(records.StackEntry("vllm-xpu-kernels", kernel_base, [("gemm-tile", hexid(rng, 64))],
                                                "kernels", False, rng.choice(kernel_snaps),
                                                [("gemm-tile", hexid(rng, 64))]))  # fmt: skip
            c = rng.randrange(len(lane.configs))
            config = lane.configs[c]
            when = start + rng.uniform(0, 180 * 86400)
            quality = 1 + 0.1 * info.position / sizes.series_len + rng.uniform(-0.05, 0.05)
            result = vllm_result(rng, config, quality, when)
            raw = json.dumps(result, indent=2).replace("Infinity", '"inf"').encode()
            author = f"{rng.choice(('Ana Ruiz', 'Bo Chen', 'Chidi Okafor', 'Dana Levi'))} <lab@example.com>"
            base_id = rng.choice(baselines[(info.lane, c)]) if (info.lane, c) in baselines else ""
            if rng.random() < 0.75:  # `stackmgr run`: a draft, half of them completed by `link --amends`
                log_art = writer.keep(vllm_log(result, rng), "the command's output")
                json_art = writer.keep(raw, f"{tree}/results/bench-{int(when)}.json")
                run_table = {
                    "name": f"{info.name}-r{n}", "command": ["vllm", "bench", "serve", "--model",
                    str(config["model_id"]), "--request-rate", str(result["request_rate"]), "--max-concurrency",
                    str(config["max_concurrency"]), "--num-prompts", str(config["num_prompts"]), "--save-result",
                    "--result-dir", "results"], "cwd": str(tree), "exit_code": 0, "start": stamp(when),
                    "duration_s": round(float(result["duration"]) + 31.5, 3), "host": rng.choice(HOSTS),  # type: ignore[arg-type]
                    "accelerators": [f"GPU {g}: Intel(R) Data Center GPU Max 1550 (UUID: {hexid(rng, 32)})"
                                     for g in range(rng.choice((1, 2, 4)))],
                    "env": {"VLLM_USE_V1": "1", "ZE_AFFINITY_MASK": "0,1", "VLLM_WORKER_MULTIPROC_METHOD": "spawn"},
                    "tainted": False, "interrupted": False,
                    "after": [{"tree": s.tree, "snapshot": s.snapshot} for s in stack],
                    "config": {k: result[k] for k in ("model_id", "request_rate", "max_concurrency", "num_prompts")},
                }  # fmt: skip
                found = metrics.from_vllm_json(raw, json_art.path)
                draft = records.Link(id="", created=stamp(when), author=author, patch=info.name, tree=TREE, sha256=sha,
                                     patch_id=pid, stack=stack, artifacts=[log_art, json_art], metrics=found,
                                     gates=[metrics.Gate("exit", "pass", "exit 0")], verdict="experimental",
                                     run=run_table)  # fmt: skip
                draft_id = writer.link(draft)
                n += 1
                if info.position == 0:
                    baselines.setdefault((info.lane, c), []).append(draft_id)
                if n < todo and rng.random() < 0.5:
                    verdict = rng.choice(VERDICTS)
                    done = records.Link(id="", created=stamp(when + rng.uniform(600, 7200)), author=author,
                                        patch=info.name, tree=TREE, sha256=sha, patch_id=pid, stack=stack,
                                        artifacts=[log_art, json_art], metrics=found,
                                        gates=[metrics.Gate("exit", "pass", "exit 0"),
                                               metrics.Gate("gsm8k", rng.choice(("pass", "pass", "fail")),
                                                            f"{rng.uniform(0.7, 0.8):.3f}")],
                                        verdict=verdict, lesson=f"{verdict} at rate {result['request_rate']}: output "
                                        f"throughput {result['output_throughput']} tok/s on {config['model_id']}",
                                        do_not_revive=verdict == "rejected" and rng.random() < 0.3, amends=draft_id,
                                        baseline=base_id if info.position and rng.random() < 0.6 else "",
                                        run=run_table)  # fmt: skip
                    writer.link(done)
                    n += 1
            else:  # `stackmgr link P results/…json --gate …`: a result put in the store by hand
                json_art = writer.result(f"results/{lane.name}/{info.name}/bench-{int(when)}-{n}.json", raw)
                verdict = rng.choice(("experimental", *VERDICTS))
                lesson = f"by hand, {config['model_id']}" if verdict != "experimental" else ""
                link = records.Link(id="", created=stamp(when), author=author, patch=info.name, tree=TREE, sha256=sha,
                                    patch_id=pid, stack=stack, artifacts=[json_art],
                                    metrics=metrics.from_vllm_json(raw, json_art.path),
                                    gates=[metrics.Gate("json", "pass" if rng.random() < 0.9 else "fail", "8/8")],
                                    verdict=verdict, lesson=lesson,
                                    baseline=base_id if info.position and rng.random() < 0.4 else "")  # fmt: skip
                link_id = writer.link(link)
                n += 1
                if info.position == 0:
                    baselines.setdefault((info.lane, c), []).append(link_id)
        written[info.name] = n
    log(f"evidence store: {writer.count} link records ({', '.join(f'{n} {k}' for k, n in writer.kinds.items())}), "
        f"{sum(len(ps) for ps in (la.patches for la in lanes))} patches, {len(writer.dirs)} directories, "
        f"{writer.bytes / 1024 / 1024:.0f} MiB written (records and artifacts)")  # fmt: skip
    return written


def setup_evidence(workdir: Path, exe: str, env: dict[str, str], tree: Path, base: str, sizes: Sizes,
                   pool: list[str], rng: random.Random) -> tuple[Path, dict[str, int], list[Lane]]:  # fmt: skip
    records, _, patch_ids = evidence_api()
    del records
    store = workdir / "store-evidence"
    run([exe, "init", str(store)], workdir, env)
    run([exe, "--store", str(store), "tree", "add", TREE, str(tree)], workdir, env)
    started = time.monotonic()
    lanes, infos = write_patches(store, tree, base, sizes, pool, rng, patch_ids)
    written = write_records(store, tree, base, sizes, lanes, infos, rng)
    log(f"evidence store written in {time.monotonic() - started:.1f} s")
    return store, written, lanes


def read_store(store: Path) -> float:
    """Read every file of the store once (seconds taken): this VM reclaims idle page cache (DAMON), so without it
    a cold run's time would depend on how long ago the files were written."""
    start = time.monotonic()
    for root, dirs, files in os.walk(store):
        dirs[:] = [d for d in dirs if d not in (".stackmgr", ".git")]
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                while f.read(1 << 20):
                    pass
    return time.monotonic() - start


def run_limited(argv: Sequence[str], cwd: Path, env: dict[str, str], limit: float) -> tuple[float | None, bytes]:
    """(wall ms, stdout) of one run, or (None, b"") when it was stopped at `limit` seconds (its process group,
    which this started, killed)."""
    import signal
    import subprocess

    start = time.perf_counter()
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=limit if limit > 0 else None)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, b""
    ms = (time.perf_counter() - start) * 1000
    if proc.returncode != 0:
        raise BenchError(f"`{' '.join(argv)}` exited {proc.returncode}: {err.decode(errors='replace').strip()}")
    return ms, out


PULLED = 100  # records held aside from the cold `links`, brought back as one `git pull` brings a day's records


def hold_aside(store: Path, workdir: Path, count: int, rng: random.Random) -> list[tuple[Path, Path]]:
    """Move `count` record files (of many patches) out of the store: (where it was, where it is now)."""
    files = sorted((store / "links").glob("*/*.toml"))
    aside = workdir / "pulled-later"
    moved = []
    for i, path in enumerate(rng.sample(files, min(count, len(files) // 10))):
        held = aside / f"{i:04d}-{path.name}"
        held.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, held)
        moved.append((path, held))
    return moved


def bring_back(moved: list[tuple[Path, Path]]) -> None:
    """The held records arrive, as new files (new inode, mtime and ctime), as `git pull` writes them."""
    for path, held in moved:
        shutil.copyfile(held, path)
        held.unlink()


def measure_commands(exe: str, env: dict[str, str], workdir: Path, store: Path, written: dict[str, int],
                     lanes: list[Lane], sizes: Sizes, small: Path, small_patch: str,
                     cold_limit: float) -> tuple[list[Row], list[str]]:  # fmt: skip
    """`links` first, cold to the end, with PULLED records held aside: the first command after a clone reads
    every record, hashes every artifact and indexes every patch once (a one-time cost, reported per record, not
    a target); then the held records come back, as a pull brings them, and `links` is timed once (what a
    teammate's first `links` after a pull costs: the target). Its caches are kept aside. Then `show` and
    `compare`, each cold (caches emptied: they read only their own patches' records and the baselines named)
    but stopped at `cold_limit` seconds (the caches put back then), each warm."""
    busiest = max(written, key=lambda p: (written[p], p))
    lane = next(la for la in lanes if busiest in la.patches)
    other = max((p for p in lane.patches if p != busiest), key=lambda p: (written[p], p))
    nrec = sum(written.values())
    commands = (("links", "links --all", ("links", "--all")),  # every record listed: the amended ones too
                ("show", f"show {busiest} ({written[busiest]} records)", ("show", busiest)),
                ("compare", f"compare {busiest} {other} ({written[busiest]} + {written[other]} records)",
                 ("compare", busiest, other)))  # fmt: skip

    def argv(where: Path, *args: str) -> list[str]:
        return [exe, "--store", str(where), *args]

    for _, _, args in commands:  # byte-compile the commands' modules on the small store: cold is about stackmgr
        run(argv(small, *[small_patch if a in (busiest, other) else a for a in args]), workdir, env)
    rows, lines = [], []
    from stackmgr.store.local_state import state_dir_for  # .stackmgr/, or in the git directory of a repository

    cache, kept = Path(state_dir_for(str(store))[0]) / "cache", workdir / "cache-after-links"
    for key, label, args in commands:
        shutil.rmtree(cache, ignore_errors=True)
        moved = hold_aside(store, workdir, PULLED, random.Random(7)) if key == "links" else []
        log(f"read every store file into the page cache before the cold `{args[0]}` ({read_store(store):.1f} s)")
        cold, out = run_limited(argv(store, *args), workdir, env, 0 if key == "links" else cold_limit)
        text = out.decode(errors="replace")
        if key == "links":
            rows_listed = text.count("\n") - 1  # under its header row
            if rows_listed != nrec - len(moved):
                raise BenchError(f"`stackmgr links` listed {rows_listed} rows, not {nrec - len(moved)}")
            bring_back(moved)
            pulled, out = run_limited(argv(store, *args), workdir, env, 0)
            listed = out.count(b"\n") - 1
            if listed != nrec:
                raise BenchError(f"`stackmgr links` after the pull listed {listed} lines, not {nrec}")
            assert cold is not None and pulled is not None
            shutil.copytree(cache, kept)
            per = cold / (nrec - len(moved))
            rows.append(Row(f"stackmgr links, first on a fresh clone ({nrec - len(moved)} records parsed once, "
                            f"{per:.2f} ms each; not a target)", cold))  # fmt: skip
            rows.append(Row(f"stackmgr links after a pull of {len(moved)} records, as a fraction of 1 s", pulled,
                            pulled / COMMAND_TARGET_MS, 1.0))  # fmt: skip
        if cold is None:
            log(f"cold `{' '.join(args)}` stopped at {cold_limit:.0f} s; the caches put back")
            shutil.rmtree(cache, ignore_errors=True)
            shutil.copytree(kept, cache)
        elif key == "show" and f"links ({written[busiest]}):" not in text:
            raise BenchError(f"`stackmgr show {busiest}` does not list its {written[busiest]} links: {text[:300]}")
        elif key == "compare" and "(reference)" not in text:
            raise BenchError(f"`stackmgr compare` compared nothing: {text[:300]}")
        # no warm-up: the cold run (or the caches put back, which `links` filled) left every cache warm
        warm = statistics.median(timed(lambda args=args: run(argv(store, *args), workdir, env))
                                 for _ in range(sizes.repeats))  # fmt: skip
        rows.append(Row(f"stackmgr {label}, warm, as a fraction of 1 s", warm, warm / COMMAND_TARGET_MS, 1.0))
        if key == "links":
            ok = max(warm, pulled) <= COMMAND_TARGET_MS
            lines.append(f"links on {nrec} records: warm {warm:.0f} ms, after a pull of {len(moved)} records "
                         f"{pulled:.0f} ms (target ≤ 1 s; first on a fresh clone {cold / 1000:.1f} s, once) "
                         f"{'PASS' if ok else 'FAIL'}")  # fmt: skip
            continue
        if cold is None:
            stopped = cold_limit * 1000
            rows.append(Row(f"stackmgr {label}, cold, stopped at {cold_limit:.0f} s (--cold-limit), as a fraction "
                            "of 1 s", stopped, stopped / COMMAND_TARGET_MS, 1.0))  # fmt: skip
        else:
            rows.append(Row(f"stackmgr {label}, cold, as a fraction of 1 s", cold, cold / COMMAND_TARGET_MS, 1.0))
        ok = cold is not None and max(warm, cold) <= COMMAND_TARGET_MS
        shown = f"{cold:.0f} ms" if cold is not None else f"> {cold_limit * 1000:.0f} ms (stopped)"
        lines.append(f"{key} on {nrec} records: warm {warm:.0f} ms, cold {shown} (target ≤ 1 s) "
                     f"{'PASS' if ok else 'FAIL'}")  # fmt: skip
    size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
    log(f"caches after the runs: {size / 1024 / 1024:.0f} MiB in {cache}/")
    return rows, lines


# --- driver -------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1, help="seed of the tree, patches and records (default 1)")
    parser.add_argument("--workdir", type=Path, default=Path(__file__).resolve().parent / "work-evidence",
                        help="scratch directory, wiped and recreated (default bench/work-evidence/)")  # fmt: skip
    parser.add_argument("--records", type=int, help="link records in the evidence store (default 20000)")
    parser.add_argument("--cold-limit", type=float, default=10.0, metavar="S",
                        help="stop a cold show or compare after S seconds (default 10; 0: never)")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="small tree, 200 records, no targets (CI)")
    args = parser.parse_args(argv)
    sizes = SMOKE_SIZES if args.smoke else FULL_SIZES
    if args.records:
        sizes = Sizes(sizes.run_patches, sizes.patches, sizes.series_len, args.records, sizes.run_repeats,
                      sizes.repeats)  # fmt: skip
    load_start = os.getloadavg()[0]
    began = time.monotonic()
    workdir = args.workdir.resolve()
    try:
        evidence_api()
        prepare_workdir(workdir)
        (workdir / MARKER).write_text("created by bench/bench_evidence.py; wiped on every run\n")
        home, tree = workdir / "home", workdir / TREE
        write_gitconfig(home)
        env = hermetic_env(workdir, home)
        exe = shutil.which("stackmgr", path=env.get("PATH"))
        if exe is None:
            raise BenchError("the `stackmgr` console script is not on PATH (activate the venv)")
        rng = random.Random(args.seed)
        tree.mkdir()
        files, lines = build_tree(tree, rng, SMOKE if args.smoke else FULL)
        log(f"tree: {files} files, {lines:,} lines; committing")
        commit_tree(tree, env)
        base = run(["git", "rev-parse", "HEAD"], tree, env).decode().strip()
        sources = tracked_sources(tree, env)
        pool = rng.sample(sources, min(len(sources), sizes.run_patches + 3 * sizes.patches))
        run_store, top = setup_run(workdir, exe, env, tree, base, sizes, pool[: sizes.run_patches], rng)
        evidence_store, written, lanes = setup_evidence(workdir, exe, env, tree, base, sizes, pool[sizes.run_patches :],
                                                        random.Random(args.seed + 1))  # fmt: skip
        os.sync()
        log(f"measuring `stackmgr run --link {top} -- true` against `true` ({sizes.run_repeats} rounds)")
        rows = measure_run(exe, env, tree, run_store, top, sizes)
        log(f"measuring show, links, compare on {sum(written.values())} records (cold, then {sizes.repeats} warm)")
        more, verdict_lines = measure_commands(exe, env, workdir, evidence_store, written, lanes, sizes, run_store,
                                               top, args.cold_limit)  # fmt: skip
        rows += more
        git = run(["git", "--version"], workdir, env).decode().strip()
    except BenchError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    mode = "smoke" if args.smoke else "full"
    print(f"# stackmgr run, show, links, compare ({mode}; seed {args.seed}; {files} files; {sum(written.values())} "
          f"records; {git}; Python {platform.python_version()}; {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; "
          f"{time.monotonic() - began:.0f} s)")  # fmt: skip
    overhead = rows[3]
    verdict = "not judged (smoke)" if args.smoke else overhead.verdict
    print(f"run overhead: {overhead.ms:.0f} ms (target ≤ {RUN_TARGET_MS:.0f} ms) {verdict}")
    for line in verdict_lines:
        print(line if not args.smoke else line.rsplit(" ", 1)[0] + " not judged (smoke)")
    return finish(rows, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
