#!/usr/bin/env bash
# On a GPU machine (the device tool): which patch of a stack did it. Series S = bf16 (decode in bfloat16),
# manual-attn (softmax(QK^T)V by hand: the hidden regression), sync (per-layer torch.cuda.synchronize(),
# instrumentation). `ablate` measures every prefix 5 times in turn; `bisect --repeat 4 --metric` judges each
# tested prefix against the base, measured first; `--regression` each against the prefix below.
. bench/gpu/lab.sh  # a scratch tree `t` holding decode.py, its store, `sm`
sed -i 's/^DTYPE = "float32"/DTYPE = "bfloat16"/' tree/decode.py
sm save bf16 --series S -m "decode in bf16"
sed -i 's/^ATTENTION = "sdpa"/ATTENTION = "manual"/' tree/decode.py
sm save manual-attn -m "attention by hand"
sed -i 's/^SYNC_EACH_LAYER = False/SYNC_EACH_LAYER = True/' tree/decode.py
sm save sync -m "per-layer sync (instrumentation)"
cd tree
sm ablate S -n 5 --result-dir results -- python3 decode.py --out results
sm bisect S --metric output_throughput --repeat 4 --result-dir results -- python3 decode.py --out results || true
sm bisect S --metric output_throughput --repeat 4 --regression --result-dir results -- python3 decode.py --out results || true
sm status
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv
