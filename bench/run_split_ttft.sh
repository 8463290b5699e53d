#!/usr/bin/env bash
# Split-mode time to first token against colocated (issue 24): three `baton serve`s at
# once on one model, colocated, split (`--prefill 1 --decode 1`, the decode stream opened
# together with the Prefill) and split with `--no-decode-with-prefill` (the decode stream
# opened after the Prefill's reply), each sent one 64-token prompt at a time for one
# output token, alternating in ROUNDS rounds of 32 requests. Prints the medians, and each
# split TTFT minus the colocated one. docs/perf/serving.md has the runs.
#
# usage: bench/run_split_ttft.sh [BUILD_DIR] [MODEL] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
model=${2:-../shared/testdata/models/stories260K/stories260K.gguf}
rounds=${3:-5}
[ "${NO_BUILD:-0}" = 1 ] || cmake --build "$build" --target baton >/dev/null
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT
grep -m1 "model name" /proc/cpuinfo >&2
echo "model $model; $rounds rounds" >&2

declare -A port
start_server() {  # name, serve flags...
  local name=$1
  shift
  "$build/bin/baton" serve --model "$model" --port 0 --grpc-port -1 "$@" \
    >"$out/$name.serve" 2>"$out/$name.err" &
  for _ in $(seq 1 600); do
    grep -q "serving" "$out/$name.serve" 2>/dev/null && break
    sleep 0.2
  done
  port[$name]=$(sed -n 's/.*http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/$name.serve" | head -1)
  [ -n "${port[$name]}" ] || { cat "$out/$name.serve" "$out/$name.err"; exit 1; }
}

load() {  # name, result-file, prompts, seed
  "$build/bin/baton" bench serve --backend openai --port "${port[$1]}" --model "" \
    --dataset random --random-input-len 64 --random-output-len 1 --ignore-eos \
    --temperature 0 --max-concurrency 1 --num-prompts "$3" --quiet \
    --no-test-request --seed "$4" --result-file "$2" >/dev/null
}

names=(colocated split split_after)
start_server colocated
start_server split --prefill 1 --decode 1
start_server split_after --prefill 1 --decode 1 --no-decode-with-prefill
for n in "${names[@]}"; do load "$n" "$out/warm.json" 8 0; done
for r in $(seq 1 "$rounds"); do
  for n in "${names[@]}"; do load "$n" "$out/$n.$r.json" 32 "$((200 + r))"; done
done

# The KV transfer as the prefill worker measured it (the router's histogram of its
# reported phases: sum / count over every split request of the run).
for n in split split_after; do
  curl -s "localhost:${port[$n]}/metrics" | grep '^baton_router_prefill_phase_seconds_\(sum\|count\)' \
    >"$out/$n.metrics" || true
done

python3 - "$out" "$rounds" <<'PY'
import json, re, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def phase_ms(name, phase):
    vals = {}
    for line in open(f"{d}/{name}.metrics"):
        m = re.match(r'baton_router_prefill_phase_seconds_(sum|count)\{phase="([a-z_]+)"\} (\S+)', line)
        if m and m.group(2) == phase:
            vals[m.group(1)] = float(m.group(3))
    return 1e3 * vals["sum"] / vals["count"] if vals.get("count") else float("nan")
med = {}
for n in ("colocated", "split", "split_after"):
    runs = [json.load(open(f"{d}/{n}.{r}.json")) for r in range(1, rounds + 1)]
    failed = sum(x.get("failed", 0) for x in runs)
    med[n] = statistics.median(x["median_ttft_ms"] for x in runs)
    print(f"{n}: median TTFT {med[n]:.2f} ms (rounds: "
          + ", ".join(f"{x['median_ttft_ms']:.2f}" for x in runs) + f"); failed {failed}")
for n in ("split", "split_after"):
    print(f"{n} - colocated: {med[n] - med['colocated']:.2f} ms; mean KV transfer "
          f"{phase_ms(n, 'transfer'):.2f} ms, of it exposed {phase_ms(n, 'exposed_transfer'):.2f} ms")
PY
