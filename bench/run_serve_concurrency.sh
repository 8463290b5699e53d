#!/usr/bin/env bash
# How `baton serve` scales with concurrent streams (issue 24): `baton bench serve` against a
# colocated `baton serve` on one model, 64 prompt tokens and 128 output tokens, greedy,
# EOS ignored. Measured in one run, alternating the configurations ROUNDS times:
#   - output tokens/s at 1, 16 and 64 concurrent streams, and the 64/1 ratio;
#   - 16 requests one after another against the same 16 at once (wall-clock ratio);
#   - CPU time per streamed token at 64 streams: the server process's user+system time
#     (router and worker together; `baton serve` runs both in one process) over the
#     tokens streamed, from /proc/PID/stat; and the load generator's own (bash `times`),
#     with the p99 inter-token latency it measured;
#   - with SPLIT=1, also split (`--prefill 1 --decode 1`) TTFT minus colocated TTFT for a
#     64-token prompt, one request at a time (median over 32 requests).
# docs/perf/serving.md has the runs.
#
# usage: [SPLIT=1] [BACKEND=baton-grpc] [CLIENT=BATON] [NO_BUILD=1] bench/run_serve_concurrency.sh [BUILD_DIR] [MODEL] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
model=${2:-../shared/testdata/models/stories260K/stories260K.gguf}
rounds=${3:-3}
backend=${BACKEND:-openai}
# CLIENT=path/to/baton: the `baton` whose `bench serve` loads the server (e.g. an older
# build, to see what the load generator itself changes).
client=${CLIENT:-$build/bin/baton}
# NO_BUILD=1: run the binary as it is (e.g. an older build, for a before/after pair).
[ "${NO_BUILD:-0}" = 1 ] || cmake --build "$build" --target baton >/dev/null
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT
grep -m1 "model name" /proc/cpuinfo >&2
echo "model $model; backend $backend; $rounds rounds" >&2

start_server() {  # name, serve flags... ; sets pid, port, grpc
  local name=$1
  shift
  "$build/bin/baton" serve --model "$model" --port 0 --grpc-port 0 "$@" \
    >"$out/$name.serve" 2>"$out/$name.err" &
  pid=$!
  for _ in $(seq 1 600); do
    grep -q "serving" "$out/$name.serve" 2>/dev/null && break
    sleep 0.2
  done
  port=$(sed -n 's/.*http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/$name.serve" | head -1)
  grpc=$(sed -n 's/.*(gRPC 127\.0\.0\.1:\([0-9]*\)).*/\1/p' "$out/$name.serve" | head -1)
  [ -n "$port" ] || { cat "$out/$name.serve" "$out/$name.err"; exit 1; }
}

stop_server() {
  kill -INT "$pid"
  wait "$pid" || true
}

cpu_ticks() {  # utime + stime of the server, in clock ticks
  awk '{print $14 + $15}' "/proc/$pid/stat"
}

child_seconds() {  # user+system seconds of this shell's waited-for children (the clients)
  # Not in $(...): a subshell would report its own children, none.
  times >"$out/times"
  tail -1 "$out/times" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] } print n }'
}

load() {  # result-file, concurrency, prompts, seed, [output tokens]
  local file=$1 conc=$2 n=$3 seed=$4 outlen=${5:-128}
  local target=(--port "$port")
  [ "$backend" = baton-grpc ] && target=(--grpc-target "127.0.0.1:$grpc")
  "$client" bench serve --backend "$backend" "${target[@]}" --model "" \
    --dataset random --random-input-len 64 --random-output-len "$outlen" --ignore-eos \
    --temperature 0 --max-concurrency "$conc" --num-prompts "$n" --quiet \
    --no-test-request --seed "$seed" --result-file "$file" >/dev/null
}

start_server colocated
load "$out/warm.json" 16 32 0  # page in the model, warm the caches
hz=$(getconf CLK_TCK)
for r in $(seq 1 "$rounds"); do
  load "$out/c1.$r.json" 1 16 "$r"
  load "$out/c16.$r.json" 16 128 "$r"
  before=$(cpu_ticks)
  child_seconds >"$out/client64.$r"
  load "$out/c64.$r.json" 64 256 "$r"
  after=$(cpu_ticks)
  echo "$((after - before))" >"$out/cpu64.$r"
  child_seconds >>"$out/client64.$r"
  load "$out/seq16.$r.json" 1 16 "$((100 + r))"
  load "$out/par16.$r.json" 16 16 "$((100 + r))"
done
if [ "${SPLIT:-0}" = 1 ]; then
  for r in $(seq 1 "$rounds"); do
    load "$out/ttft_colo.$r.json" 1 32 "$((200 + r))" 1
  done
fi
stop_server
if [ "${SPLIT:-0}" = 1 ]; then
  start_server split --prefill 1 --decode 1
  load "$out/warm.json" 4 8 0
  for r in $(seq 1 "$rounds"); do
    load "$out/ttft_split.$r.json" 1 32 "$((200 + r))" 1
  done
  stop_server
fi

python3 - "$out" "$rounds" "$hz" <<'PY'
import json, statistics, sys
d, rounds, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def j(name, r):
    return json.load(open(f"{d}/{name}.{r}.json"))
rows = []
for r in range(1, rounds + 1):
    c1, c16, c64 = (j(n, r)["output_throughput"] for n in ("c1", "c16", "c64"))
    seq, par = j("seq16", r)["duration"], j("par16", r)["duration"]
    ticks = int(open(f"{d}/cpu64.{r}").read())
    toks = j("c64", r)["total_output_tokens"]
    failed = sum(j(n, r).get("failed", 0) for n in ("c1", "c16", "c64", "seq16", "par16"))
    c0, c1s = (float(x) for x in open(f"{d}/client64.{r}").read().split())
    client_us = (c1s - c0) / toks * 1e6
    p99 = j("c64", r)["p99_itl_ms"]
    rows.append((c1, c16, c64, c64 / c1, seq / par, ticks / hz / toks * 1e6, failed, client_us,
                 p99))
    print(f"round {r}: tok/s c1 {c1:.0f} c16 {c16:.0f} c64 {c64:.0f}; c64/c1 {c64/c1:.2f}x; "
          f"16 sequential/concurrent {seq/par:.2f}x; CPU per token at 64 "
          f"{ticks / hz / toks * 1e6:.1f} us (client {client_us:.1f} us); p99 ITL at 64 "
          f"{p99:.2f} ms; failed {failed}")
med = [statistics.median(col) for col in zip(*rows)]
print(f"median: tok/s c1 {med[0]:.0f} c16 {med[1]:.0f} c64 {med[2]:.0f}; c64/c1 {med[3]:.2f}x "
      f"(goal >= 4); 16 sequential/concurrent {med[4]:.2f}x (goal >= 2); "
      f"CPU per token at 64 streams {med[5]:.1f} us (goal < 30); the client's own "
      f"{med[7]:.1f} us; p99 ITL at 64 streams {med[8]:.2f} ms")
import os
if os.path.exists(f"{d}/ttft_split.1.json"):
    colo = statistics.median(j("ttft_colo", r)["median_ttft_ms"] for r in range(1, rounds + 1))
    split = statistics.median(j("ttft_split", r)["median_ttft_ms"] for r in range(1, rounds + 1))
    print(f"TTFT of a 64-token prompt, one at a time: colocated {colo:.2f} ms, split "
          f"{split:.2f} ms, split - colocated {split - colo:.2f} ms")
PY
