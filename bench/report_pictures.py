"""Build a realistic store and screenshot its report's pictures in headless Chromium.

    python bench/report_pictures.py [DIR]      (default /tmp/pic; DIR is wiped first)

The store: tree `vllm`, series S of four patches (bf16 12,876 tok/s from fp32 9,560; an SDPA "optimization" that
drops it to 918; instrumentation 923; layer skipping 827 whose quality gate fails), a target, `stackmgr ablate S
-n 5` (the base's 5 runs are the series' baseline), and `stackmgr ab sdpa -n 50` (100 runs of one ab). The report
goes to DIR/site, the screenshots (index, each patch page) to DIR/*.png. Chromium is `chromium`, else
`chromium-browser`, else `google-chrome` on PATH; without one the site is built and no screenshot taken.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

BENCH = r"""
import json, os, random, sys
tree = sys.argv[1]
have = lambda n: os.path.exists(os.path.join(tree, n))
tput = 9560.0
if have('bf16.txt'): tput = 12876.0
if have('sdpa.txt'): tput = 918.0
if have('instr.txt'): tput += 5
if have('skip.txt'): tput = 827.0
seed = int.from_bytes(os.urandom(4), 'big')
r = random.Random(seed)
tput *= 1 + r.gauss(0, 0.01)
out = {'output_throughput': tput, 'request_throughput': tput / 256, 'total_token_throughput': tput * 1.9,
       'mean_ttft_ms': 12000 / tput * 100 * (1 + r.gauss(0, .02)), 'median_ttft_ms': 12000 / tput * 95,
       'p99_ttft_ms': 12000 / tput * 180, 'mean_tpot_ms': 1000 / tput * 40, 'median_tpot_ms': 1000 / tput * 39,
       'p99_tpot_ms': 1000 / tput * 60, 'mean_itl_ms': 1000 / tput * 41, 'median_itl_ms': 1000 / tput * 40,
       'p99_itl_ms': 1000 / tput * 90, 'completed': 100, 'num_prompts': 100, 'total_input_tokens': 102400,
       'total_output_tokens': 25600, 'max_concurrency': 16, 'request_rate': 1e9, 'duration': 25600 / tput,
       'accuracy': 0.71 if have('skip.txt') else 0.93, 'model_id': 'meta-llama/Llama-3.1-8B-Instruct'}
os.makedirs(os.path.join(tree, 'out'), exist_ok=True)
json.dump(out, open(os.path.join(tree, 'out', 'bench.json'), 'w'))
print('Output token throughput (tok/s):', round(tput, 2))
"""

CONFIG = """
[evidence]
headline = "output_throughput"

[targets]
S = "output_throughput >= 10000"

[gates.quality]
metric = "accuracy"
min = 0.9
"""

PATCHES = [
    ("bf16", "bf16.txt", "Run the model in bf16"),
    ("sdpa", "sdpa.txt", "SDPA attention <fast path>"),
    ("instr", "instr.txt", "Instrument the attention kernels"),
    ("skip", "skip.txt", "Skip layers 20-28"),
]


def main() -> None:
    where = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/pic").resolve()
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    home = where / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[user]\n\tname = Lab\n\temail = lab@example.com\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "STACKMGR"))}
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", TZ="UTC", LANG="C.UTF-8")

    def sh(*args: str, cwd: Path = where, check: bool = True) -> str:
        done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
        if check and done.returncode != 0:
            sys.exit(f"{' '.join(args)}: exit {done.returncode}\n{done.stdout}{done.stderr}")
        return done.stdout

    def sm(*args: str, check: bool = True) -> str:
        return sh(sys.executable, "-m", "stackmgr", "--store", str(where / "store"), *args, check=check)

    tree = where / "vllm"
    tree.mkdir()
    (tree / "README").write_text("model server\n")
    sh("git", "init", "-q", cwd=tree)
    sh("git", "add", "-A", cwd=tree)
    sh("git", "commit", "-q", "-m", "base", cwd=tree)
    (tree / ".git" / "info" / "exclude").write_text("out/\n")
    sh(sys.executable, "-m", "stackmgr", "init", str(where / "store"))
    sm("tree", "add", "vllm", str(tree))
    config = where / "store" / "stackmgr.toml"
    config.write_text(config.read_text() + 'results = ["out"]\n' + CONFIG)
    for name, file, subject in PATCHES:
        (tree / file).write_text("on\n")
        sm("save", name, "--series", "S", "-m", subject)
    bench = where / "fake_bench.txt"  # a Python script, run by sys.executable
    bench.write_text(BENCH)
    cmd = ["--", sys.executable, str(bench), str(tree)]
    print(sm("ablate", "S", "-n", "5", *cmd, check=False))
    sm("pop", "-a")
    sm("push", "sdpa")  # the applied stack: bf16 + sdpa
    print(sm("ab", "sdpa", "-n", "50", *cmd, check=False)[-1500:])
    sm("push", "-a")
    sm("run", "--name", "skip-gate", *cmd, check=False)  # the quality gate fails: not a valid result
    site = where / "site"
    sm("report", "-o", str(site))
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        print(f"site in {site}; no chromium on PATH: no screenshots")
        return
    pages = {"index": site / "index.html", **{n: site / "patches" / f"{n}.html" for n, _, _ in PATCHES}}
    for label, page in pages.items():
        shot = where / f"{label}.png"
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={shot}", "--window-size=1400,1800", page.as_uri()],
                       env=env, capture_output=True, timeout=120)  # fmt: skip
        print(shot if shot.exists() else f"no screenshot of {page}")


if __name__ == "__main__":
    main()
