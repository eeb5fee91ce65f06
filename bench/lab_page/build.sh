#!/usr/bin/env bash
# The lab's "Bugs And Failed Paths" page, regenerated from a store that holds its evidence, recorded with
# stackmgr's own commands only (fake benchmark scripts, a scratch git tree, all in a tmp dir):
#   bash bench/lab_page/build.sh [OUT]       (stackmgr on PATH, e.g. `. .venv/bin/activate`)
# writes OUT/store (the store), OUT/vllm (the live tree, left dirty) and OUT/store/docs/bugs-and-failed-paths.md,
# and copies the page to bench/lab_page/page.md. What the page carries and from which record: FACTS.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$(mktemp -d /tmp/lab-page.XXXXXX)}
mkdir -p "$out"
export HOME="$out/home" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
git config --global user.name "Lab Bot"
git config --global user.email "lab@example.invalid"
git config --global init.defaultBranch main
sm() { stackmgr --store "$out/store" "$@"; }

# --- the live tree: a stand-in for vllm ------------------------------------------------------------------------
tree="$out/vllm"
mkdir -p "$tree/vllm/spec_decode" "$tree/vllm/attention"
printf 'def propose(tokens):\n    return []\n' > "$tree/vllm/spec_decode/proposer.py"
printf 'def attend(q, k, v):\n    return q\n' > "$tree/vllm/attention/backend.py"
printf 'def replay(batch):\n    return batch\n' > "$tree/vllm/replay.py"
printf 'results/\n' > "$tree/.gitignore"
git -C "$tree" init -q && git -C "$tree" add -A && git -C "$tree" commit -qm "vllm base"

stackmgr init "$out/store" >/dev/null
sm tree add vllm "$tree" >/dev/null

# --- the fake benchmark: a vllm bench serve JSON from TPUT / TPOT, exit code EXIT -------------------------------
bench="$out/bench.py"
cat > "$bench" <<'EOF'
import json, os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
print("Output token throughput (tok/s):", os.environ["TPUT"])
json.dump({"model_id": "Qwen3.6-35B-A3B", "request_rate": "inf", "max_concurrency": 8, "num_prompts": 200,
           "output_throughput": float(os.environ["TPUT"]), "mean_tpot_ms": float(os.environ.get("TPOT", "60"))},
          open(os.path.join(out, "bench.json"), "w"))
sys.exit(int(os.environ.get("EXIT", "0")))
EOF
bench_run() {  # NAME TPUT TPOT EXIT [stackmgr run options…]: the run's (first) link id on stdout
    local name=$1 tput=$2 tpot=$3 code=$4 said
    shift 4
    said=$(TPUT=$tput TPOT=$tpot EXIT=$code sm run --name "$name" "$@" --result-dir "$out/results-$name" -- \
        python3 "$bench" "$out/results-$name" 2>&1 >/dev/null) || [ "$code" != 0 ]
    sed -n 's/.*recorded \(lnk-[0-9a-f]\{12\}\).*/\1/p' <<<"$said" | head -1
}

# --- the series: four patches, each a saved change --------------------------------------------------------------
printf 'def replay(batch):\n    return sorted(batch)\n' > "$tree/vllm/replay.py"
sm save replay-boundary-fix --series spec-decode -m "replay: keep request order at the decode boundary" >/dev/null
printf 'def propose(tokens):\n    return tokens[-3:]\n' > "$tree/vllm/spec_decode/proposer.py"
sm save ngram-proposer --series spec-decode -m "spec decode: n-gram proposer" >/dev/null
printf 'def attend(q, k, v):\n    return q + k\n' > "$tree/vllm/attention/backend.py"
sm save eagle3-draft --series spec-decode -m "spec decode: EAGLE-3 draft head" >/dev/null
printf 'def attend(q, k, v):\n    return q + k + v  # tree attention\n' > "$tree/vllm/attention/backend.py"
sm save dflash-tree-attn --series spec-decode -m "spec decode: DFlash block drafting with tree attention" >/dev/null
sm series describe spec-decode -m "Speculative decoding on Qwen3.6 serving: the lab's throughput lane.
Each proposer is measured against the non-spec baseline at the same base and run configuration." >/dev/null

cat >> "$out/store/stackmgr.toml" <<'EOF'

[targets.spec-decode]
target = ["output_throughput > 150", "output_throughput >= baseline +20%"]
note = "not merely within 20% of the non-spec baseline"
EOF

# --- the non-spec baseline: 5 runs at the series' base, one run group named by its role --------------------------
sm pop -a >/dev/null
bench_run non-spec-baseline 118 62 0 --series spec-decode --repeat 5 >/dev/null

# --- each patch measured on its prefix ----------------------------------------------------------------------------
sm push >/dev/null
fix=$(bench_run fix-r1 123 60 0)
sm push >/dev/null
ngram=$(bench_run ngram-r1 109 66 0)
sm push >/dev/null
eagle=$(bench_run eagle3-r1 140 48 0)
sm push >/dev/null
dflash_crash=$(bench_run dflash-r1 171 40 1)     # past the target, but the server crashed mid-run
dflash_ok=$(bench_run dflash-r2 131 51 0)

# --- the verdicts, lessons and notes -----------------------------------------------------------------------------
sm link replay-boundary-fix --amends "$fix" --gate correctness=pass:"replay matches eager on 200 prompts" \
    --verdict promoted >/dev/null
sm link ngram-proposer --amends "$ngram" --verdict rejected --do-not-revive \
    --lesson "Acceptance was 0.12 on the replay prompts: the proposer costs more than it saves.
Do not retry n-gram proposals on this workload." >/dev/null
sm link eagle3-draft --amends "$eagle" --gate correctness=fail:"3 of 200 replays diverge" --verdict rejected \
    --lesson "Fast (140 tok/s) only because the draft head skips the replay boundary check; output diverges." \
    >/dev/null
notes="$out/dflash-notes.md"
printf '# DFlash notes\n\n- day 1: block drafting runs, tree attention crashes at bs>4\n- day 2: 131 tok/s with bs=4\n' \
    > "$notes"
sm link dflash-tree-attn "$notes" --label "detailed chronological notes" --amends "$dflash_ok" \
    --gate correctness=fail:"not checked against replay yet" --verdict experimental \
    --lesson "Most plausible direction; no clean serving result yet." >/dev/null

# --- the live tree: experimental changes on top, not a promoted set ----------------------------------------------
printf 'def attend(q, k, v):\n    return q + k + v  # tree attention, bs 8 try\n' > "$tree/vllm/attention/backend.py"
printf 'BLOCK = 8\n' > "$tree/vllm/spec_decode/dflash_config.py"

mkdir -p "$out/store/docs"
sm report --markdown "$out/store/docs/bugs-and-failed-paths.md" --title "Bugs And Failed Paths"
cp "$out/store/docs/bugs-and-failed-paths.md" "$here/page.md"
echo "store: $out/store; page: $out/store/docs/bugs-and-failed-paths.md (copied to bench/lab_page/page.md)"
echo "links: fix $fix, ngram $ngram, eagle3 $eagle, dflash $dflash_crash (crashed) $dflash_ok"
