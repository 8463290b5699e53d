#!/usr/bin/env bash
# What the load generator itself adds: two builds' `baton bench serve` against one
# `baton serve`, alternating in one window (ROUNDS pairs), 64 concurrent streams of 256
# requests, 64 prompt tokens and 128 output tokens. Prints, per client: output tok/s,
# median and p99 ITL, p99 TTFT, and the client's own CPU per token (/usr/bin/time).
# docs/perf/serving.md, "The load generator on one loop", has a run.
#
# usage: bench/run_load_generator_ab.sh OTHER_BATON [BUILD_DIR] [MODEL] [ROUNDS]
#   OTHER_BATON: the `baton` to compare with BUILD_DIR/bin/baton (e.g. an older build's)
set -euo pipefail
cd "$(dirname "$0")/.."
other=${1:?usage: $0 OTHER_BATON [BUILD_DIR] [MODEL] [ROUNDS]}
build=${2:-build/release}
model=${3:-../shared/testdata/models/stories260K/stories260K.gguf}
rounds=${4:-5}
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT
grep -m1 "model name" /proc/cpuinfo >&2
"$build/bin/baton" serve --model "$model" --port 0 --grpc-port 0 >"$out/serve" 2>"$out/err" &
pid=$!
for _ in $(seq 1 600); do
  grep -q serving "$out/serve" 2>/dev/null && break
  sleep 0.2
done
port=$(sed -n 's/.*http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/serve" | head -1)
[ -n "$port" ] || { cat "$out/serve" "$out/err"; exit 1; }

load() {  # baton, result-file, concurrency, prompts, seed
  /usr/bin/time -f "%U %S" -o "$2.time" "$1" bench serve --port "$port" --model "" \
    --dataset random --random-input-len 64 --random-output-len 128 --ignore-eos \
    --temperature 0 --max-concurrency "$3" --num-prompts "$4" --quiet --no-test-request \
    --seed "$5" --result-file "$2" >/dev/null
}
load "$build/bin/baton" "$out/warm.json" 16 32 0
for r in $(seq 1 "$rounds"); do
  load "$other" "$out/other.$r.json" 64 256 "$r"
  load "$build/bin/baton" "$out/this.$r.json" 64 256 "$r"
done
kill -INT "$pid"
wait "$pid" || true

python3 - "$out" "$rounds" "$other" "$build/bin/baton" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
for name, label in (("other", sys.argv[3]), ("this", sys.argv[4])):
    rows = []
    for r in range(1, rounds + 1):
        j = json.load(open(f"{d}/{name}.{r}.json"))
        user, system = map(float, open(f"{d}/{name}.{r}.json.time").read().split()[-2:])
        rows.append((j["output_throughput"], j["median_itl_ms"], j["p99_itl_ms"],
                     j["p99_ttft_ms"], (user + system) / j["total_output_tokens"] * 1e6))
    m = [statistics.median(col) for col in zip(*rows)]
    print(f"{label}: median of {rounds}: {m[0]:.0f} tok/s; ITL median {m[1]:.2f} ms, p99 "
          f"{m[2]:.2f} ms; p99 TTFT {m[3]:.1f} ms; client CPU {m[4]:.1f} us/token")
PY
