#!/usr/bin/env bash
# Split prefill/decode against colocated under a mixed load (issue 6; DistServe's setting):
# a steady stream of short prompts with longer answers (the ongoing decodes) while long
# prompts arrive. The default rates fit this 2-vCPU machine; a faster one wants more. Both configurations serve the same model on this host with the same
# cores and the same load (`baton bench serve`, two generators at once, fixed seeds):
#   colocated: `baton serve` (one worker, all cores);
#   split:     `baton serve --prefill 1 --decode 1` (each worker half the cores).
# Reported side by side: the decodes' TPOT p99 and mean, the long prompts' TTFT p99, and
# goodput under a TTFT/TPOT SLO (requests per second that meet both, DistServe's
# definition) for each stream. docs/perf/disaggregation.md has the runs.
#
# usage: bench/run_disagg_vs_colocated.sh [BUILD_DIR] [MODEL] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
# GGUF: its synthetic vocabulary is padded to the model's, so every sampled id detokenizes.
model=${2:-build/bench-models/smollm2-135m-gguf/model.gguf}
seconds=${3:-60}
ucx_tls=${UCX_TLS_BENCH:-tcp}
short_rate=${SHORT_RATE:-0.3}    # short prompts per second
short_out=${SHORT_OUT:-64}       # their output tokens
long_rate=${LONG_RATE:-0.05}     # long prompts per second
long_len=${LONG_LEN:-1536}
slo=${SLO:-"ttft:10000 tpot:100"}
cmake --build "$build" --target baton baton-prefill baton-decode >/dev/null
if [ ! -e "$model" ]; then
  echo "writing the synthetic smollm2-135m model (bf16 GGUF) to $(dirname "$model")"
  "$build/bin/baton" synth-model --shape smollm2-135m --dtype bf16 --seed 1 --format gguf \
    --out "$(dirname "$model")"
fi
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

run() {  # name, serve flags...
  local name=$1
  shift
  "$build/bin/baton" serve --model "$model" --port 0 --grpc-port -1 --kv-cache-memory 2GiB \
    --ucx-tls "$ucx_tls" "$@" >"$out/$name.serve" 2>"$out/$name.err" &
  local pid=$!
  for _ in $(seq 1 600); do
    grep -q "serving" "$out/$name.serve" 2>/dev/null && break
    sleep 0.5
  done
  local port
  port=$(sed -n 's/.*http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/$name.serve" | head -1)
  [ -n "$port" ] || { cat "$out/$name.err"; exit 1; }
  local common=(--backend openai --port "$port" --model "" --dataset random --ignore-eos
                --percentiles 50,99 --goodput $slo --quiet --temperature 0)
  # The ongoing decodes and the long prompts, at once.
  "$build/bin/baton" bench serve "${common[@]}" --seed 1 --random-input-len 32 \
    --random-output-len "$short_out" --request-rate "$short_rate" \
    --num-prompts "$(python3 -c "print(max(1, int($short_rate * $seconds)))")" \
    --result-file "$out/$name.short.json" >/dev/null &
  local short=$!
  "$build/bin/baton" bench serve "${common[@]}" --seed 2 --random-input-len "$long_len" \
    --random-output-len 8 --request-rate "$long_rate" \
    --num-prompts "$(python3 -c "print(max(1, int($long_rate * $seconds)))")" \
    --result-file "$out/$name.long.json" >/dev/null
  wait "$short"
  kill -INT "$pid"
  wait "$pid" || true
}

echo "model $model, ${seconds}s of load: short (32 in, $short_out out) at ${short_rate}/s and long" \
  "(${long_len} in, 8 out) at ${long_rate}/s; SLO $slo; UCX $ucx_tls" >&2
run colocated
# SPLIT_FLAGS: more `baton serve` flags for the split run (e.g. --max-local-prefill-tokens 256).
# shellcheck disable=SC2086
run split --prefill 1 --decode 1 ${SPLIT_FLAGS:-}
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
def load(name, kind):
    return json.load(open(f"{d}/{name}.{kind}.json"))
rows = [
    ("decodes: TPOT p99 (ms)", "short", "p99_tpot_ms"),
    ("decodes: TPOT mean (ms)", "short", "mean_tpot_ms"),
    ("decodes: TTFT p99 (ms)", "short", "p99_ttft_ms"),
    ("long prompts: TTFT p99 (ms)", "long", "p99_ttft_ms"),
    ("long prompts: TTFT median (ms)", "long", "median_ttft_ms"),
    ("decodes: goodput (req/s)", "short", "request_goodput"),
    ("long prompts: goodput (req/s)", "long", "request_goodput"),
    ("decodes: completed", "short", "completed"),
    ("long prompts: completed", "long", "completed"),
]
print("| metric | colocated | split 1P+1D | split / colocated |")
print("|---|---|---|---|")
for label, kind, key in rows:
    a, b = load("colocated", kind).get(key), load("split", kind).get(key)
    ratio = f"{b / a:.2f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a else "-"
    fa = f"{a:.1f}" if isinstance(a, float) else str(a)
    fb = f"{b:.1f}" if isinstance(b, float) else str(b)
    print(f"| {label} | {fa} | {fb} | {ratio} |")
PY
