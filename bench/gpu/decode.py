"""A small decoder benchmark for a real GPU: greedy decode of a toy transformer, written as vllm bench's JSON.

`python3 decode.py --out DIR` writes DIR/result.json with output_throughput (tok/s), mean/median TPOT (ms), the
per-step times and the model settings. The settings at the top are what the lab's patches change (dtype, the
attention path, instrumentation); a run prints its throughput on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F

DTYPE = "float32"  # a patch: bfloat16
ATTENTION = "sdpa"  # a patch: "manual" (softmax(QK^T)V by hand)
SYNC_EACH_LAYER = False  # a patch: per-layer torch.cuda.synchronize() (instrumentation)
LAYERS, HIDDEN, HEADS, BATCH, PROMPT, STEPS = 8, 2048, 16, 16, 128, 64


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    if ATTENTION == "sdpa":
        return F.scaled_dot_product_attention(q, k, v)
    scores = (q @ k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
    return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v


# Apart from the settings above, so that its patch's context is not theirs (`ab --leave-out` of one of them).
SKIP_ODD_LAYERS = False  # a patch: odd layers skipped (fast, and wrong: quality_cosine falls)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="results")
    args = parser.parse_args()
    torch.manual_seed(0)
    dtype = getattr(torch, DTYPE)
    dev = "cuda"
    qkv = [torch.randn(HIDDEN, 3 * HIDDEN, device=dev, dtype=dtype) / HIDDEN**0.5 for _ in range(LAYERS)]
    out = [torch.randn(HIDDEN, HIDDEN, device=dev, dtype=dtype) / HIDDEN**0.5 for _ in range(LAYERS)]
    cache = [[torch.randn(BATCH, HEADS, PROMPT, HIDDEN // HEADS, device=dev, dtype=dtype) for _ in range(2)]
             for _ in range(LAYERS)]
    x = torch.randn(BATCH, 1, HIDDEN, device=dev, dtype=dtype)

    def forward(h: torch.Tensor, params: tuple, skip: bool, attend) -> torch.Tensor:  # type: ignore[no-untyped-def]
        w_qkv, w_out, kv = params
        for layer in range(LAYERS):
            if skip and layer % 2:
                continue
            q, k, v = (h @ w_qkv[layer]).view(BATCH, 1, 3, HEADS, HIDDEN // HEADS).unbind(2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            ks = torch.cat([kv[layer][0], k], dim=2)
            vs = torch.cat([kv[layer][1], v], dim=2)
            a = attend(q, ks, vs).transpose(1, 2).reshape(BATCH, 1, HIDDEN)
            h = h + a @ w_out[layer]
            if SYNC_EACH_LAYER:
                torch.cuda.synchronize()
        return h

    steps = []
    for step in range(STEPS + 8):  # 8 warm-up steps
        torch.cuda.synchronize()
        began = time.perf_counter()
        h = forward(x, (qkv, out, cache), SKIP_ODD_LAYERS, attention)
        torch.cuda.synchronize()
        if step >= 8:
            steps.append(time.perf_counter() - began)
    # quality: this step's output against the float32 SDPA reference of every layer (the unpatched model)
    f32 = (tuple(w.float() for w in qkv), tuple(w.float() for w in out), [[t.float() for t in c] for c in cache])
    reference = forward(x.float(), f32, False, F.scaled_dot_product_attention)
    cosine = F.cosine_similarity(h.float().flatten(), reference.flatten(), dim=0).item()
    total = sum(steps)
    result = {
        "backend": "toy-decoder", "model_id": f"toy-{LAYERS}x{HIDDEN}", "dtype": DTYPE, "attention": ATTENTION,
        "num_prompts": BATCH, "request_rate": "inf", "max_concurrency": BATCH, "completed": BATCH,
        "output_throughput": BATCH * STEPS / total,
        "mean_tpot_ms": statistics.fmean(steps) * 1e3, "median_tpot_ms": statistics.median(steps) * 1e3,
        "tpots": list(steps), "quality_cosine": cosine,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(result, f)
    print(f"output throughput: {result['output_throughput']:.1f} tok/s ({DTYPE}, {ATTENTION}), cosine {cosine:.4f}")


if __name__ == "__main__":
    main()
