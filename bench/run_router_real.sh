#!/usr/bin/env bash
# The routing simulator's ranking, checked on real workers (issue 7): four `baton worker`
# processes (one thread each, small KV pools so that they evict) behind `baton-router
# --policy P` for each policy in turn, and `baton bench serve` replaying the same
# shared-prefix workload against each. Every policy gets fresh workers (cold caches).
# Reported per policy: the prefix cache hit rate (cached / prompt tokens, from the
# workers' usage), TTFT p50 and p99, and output tokens/s. docs/perf/routing.md has runs.
#
# usage: bench/run_router_real.sh [BUILD_DIR] [MODEL]
# env:   PROMPTS (600), RATE (requests/s, 20), KV (per worker, 2MiB), PREFIXES (24),
#        PREFIX_LEN (384), POLICIES (all five)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
model=${2:-models/baton-tiny}
prompts=${PROMPTS:-600}
rate=${RATE:-20}
kv=${KV:-2MiB}
prefixes=${PREFIXES:-24}
prefix_len=${PREFIX_LEN:-384}
policies=${POLICIES:-"baton sglang_cache_aware round_robin least_loaded power_of_two"}
cmake --build "$build" --target baton baton-router >/dev/null
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

wait_for() {  # file, pattern
  for _ in $(seq 1 600); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "run_router_real: no '$2' in $1" >&2
  cat "$1" >&2
  exit 1
}

for policy in $policies; do
  echo "run_router_real: $policy" >&2
  targets=""
  pids=""
  for w in 1 2 3 4; do
    "$build/bin/baton" worker --model "$model" --port 0 --threads 1 --kv-cache-memory "$kv" \
      >"$out/$policy.w$w" 2>/dev/null &
    pids="$pids $!"
    wait_for "$out/$policy.w$w" "on 127.0.0.1:"
    targets="$targets,$(sed -n 's/.*on \(127\.0\.0\.1:[0-9]*\).*/\1/p' "$out/$policy.w$w" | head -1)"
  done
  "$build/bin/baton-router" --model "$model" --port 0 --grpc-port -1 --worker "${targets#,}" \
    --policy "$policy" >"$out/$policy.router" 2>"$out/$policy.router.err" &
  router=$!
  wait_for "$out/$policy.router" "http://127.0.0.1:"
  port=$(sed -n 's/.*http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/$policy.router" | head -1)
  "$build/bin/baton" bench serve --backend openai --port "$port" --model "" --tokenizer "$model" \
    --dataset prefix \
    --num-prefixes "$prefixes" --prefix-len "$prefix_len" --random-input-len 48 \
    --random-output-len 16 --num-prompts "$prompts" --request-rate "$rate" --seed 1 \
    --temperature 0 --percentiles 50,99 --quiet --result-file "$out/$policy.json" >/dev/null
  kill -INT "$router" $pids
  wait "$router" $pids 2>/dev/null || true
done

python3 - "$out" $policies <<'PY'
import json, sys
out, policies = sys.argv[1], sys.argv[2:]
print("| policy | completed | hit rate | TTFT p50 ms | TTFT p99 ms | output tok/s |")
print("|---|---|---|---|---|---|")
rows = {}
for p in policies:
    j = json.load(open(f"{out}/{p}.json"))
    hit = j.get("total_cached_tokens", 0) / max(1, j["total_input_tokens"])
    rows[p] = (hit, j["median_ttft_ms"])
    print(f"| {p} | {j['completed']} | {hit:.3f} | {j['median_ttft_ms']:.0f} | "
          f"{j['p99_ttft_ms']:.0f} | {j['output_throughput']:.0f} |")
if "baton" in rows:
    b = rows["baton"]
    for p, (hit, ttft) in rows.items():
        if p != "baton":
            print(f"baton / {p}: hit rate {b[0] / max(hit, 1e-9):.2f}x, TTFT p50 {b[1] / max(ttft, 1e-9):.2f}x")
PY
