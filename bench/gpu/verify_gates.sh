#!/usr/bin/env bash
# On a GPU machine (the device tool): a gate, a target and a baseline end to end, and `ab --leave-out`.
# A git tree holding bench/gpu/decode.py; the lab's stackmgr.toml declares quality_cosine's direction, a quality
# gate (cosine against the float32 reference >= 0.99) and a target for series S. Series S = bf16, manual-attn
# (softmax(QK^T)V by hand), skip-odd (odd layers skipped: fast and wrong). Runs: 5 at the base (the baseline of S),
# 5 at each prefix; then status/links/show/compare/promotion/report, and `ab manual-attn --leave-out` (the whole
# stack with and without manual-attn).
. bench/gpu/lab.sh  # a scratch tree `t` holding decode.py, its store, `sm`
cat >> store/stackmgr.toml <<'TOML'

[metrics.quality_cosine]
direction = "higher"

[gates.quality]
metric = "quality_cosine"
min = 0.99

[targets]
S = "output_throughput >= 22000"
TOML
sed -i 's/^DTYPE = "float32"/DTYPE = "bfloat16"/' tree/decode.py
sm save bf16 --series S -m "decode in bf16"
sed -i 's/^ATTENTION = "sdpa"/ATTENTION = "manual"/' tree/decode.py
sm save manual-attn -m "attention by hand"
sed -i 's/^SKIP_ODD_LAYERS = False/SKIP_ODD_LAYERS = True/' tree/decode.py
sm save skip-odd -m "skip odd layers"
cd tree
runs() { sm run --repeat "$2" --name "$1" --result-dir results -- python3 decode.py --out results 2>&1 | grep -v '^stackmgr: recorded' || true; }
sm pop -a && runs base 5
sm push && runs bf16 5
sm push && runs manual 5
sm push && runs skip 3
sm status
sm links
sm show skip-odd | tail -8
sm compare manual-attn skip-odd || true
sm link skip-odd --amends skip-3 --verdict promoted --lesson "fast" || true
sm report --markdown "$out/lessons.md" && grep -E '^\| `' "$out/lessons.md" | cut -c1-400
sm ab manual-attn --leave-out -n 5 --result-dir results -- python3 decode.py --out results
sm status
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv
