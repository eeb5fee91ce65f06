#!/usr/bin/env bash
# On a GPU machine (the device tool): what `run` records of the GPU, and compare's verdicts on repeated runs.
# A git tree holding bench/gpu/decode.py; series S = bf16 (decode in bfloat16), manual-attn (softmax(QK^T)V by hand
# instead of SDPA: the "optimization" to judge). Five runs at the base (baselines of S), five at bf16, five at
# manual-attn; then `links`, `show`, `compare bf16 manual-attn` and the recorded environment.
set -euo pipefail
repo=$(pwd); out=${OUT:-/tmp/out}; mkdir -p "$out"
export GIT_AUTHOR_NAME=lab GIT_AUTHOR_EMAIL=lab@example.com GIT_COMMITTER_NAME=lab GIT_COMMITTER_EMAIL=lab@example.com
sm() { python3 -m stackmgr "$@"; }
w=$(mktemp -d); cd "$w"
git init -q -b main tree && cp "$repo/bench/gpu/decode.py" tree/ && printf 'results/\n' > tree/.gitignore
git -C tree add -A && git -C tree commit -qm base
sm init store >/dev/null && export STACKMGR_STORE=$w/store && sm tree add t "$w/tree" >/dev/null
sed -i 's/^DTYPE = "float32"/DTYPE = "bfloat16"/' tree/decode.py
sm save bf16 --series S -m "decode in bf16"
sed -i 's/^ATTENTION = "sdpa"/ATTENTION = "manual"/' tree/decode.py
sm save manual-attn -m "attention by hand"
cd tree
runs() { sm run --repeat 5 --name "$1" --result-dir results -- python3 decode.py --out results; }
sm pop -a && runs base
sm push && runs bf16
sm push && runs manual
sm links
sm show manual-attn
sm compare bf16 || true
sm compare bf16 manual-attn || true
sm compare --json bf16 manual-attn > "$out/compare.json" || true
sm ab manual-attn -n 5 --result-dir results -- python3 decode.py --out results
sm status
cp "$(ls -t "$w"/store/links/*/*.toml | head -1)" "$out/record.toml"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv
