#!/usr/bin/env bash
# What `"trace": true` costs a request (docs/inspector.md): one `baton serve` on MODEL,
# non-streamed completions of TOKENS tokens (ignore_eos) sent one at a time, traced and
# untraced alternating in pairs (the order flipped every pair), each with its own prompt
# so that neither hits the other's prefix cache. Prints the client-side medians, the
# ratio traced / untraced, and the traced response's size.
#
# usage: bench/run_trace_overhead.sh [BUILD_DIR] [MODEL] [PAIRS] [TOKENS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
model=${2:-models/baton-tiny}
pairs=${3:-100}
tokens=${4:-64}
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT
grep -m1 "model name" /proc/cpuinfo >&2
source bench/serve_for_bench.sh
start_baton_serve "$build" "$out" --model "$model"
python3 - "$url" "$pairs" "$tokens" <<'PY'
import json, statistics, sys, time, urllib.request
url, pairs, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
model = json.load(urllib.request.urlopen(url + "/v1/models"))["data"][0]["id"]
def call(i, trace):
    body = {"model": model, "prompt": "Request %d: once upon a time, there was a little dog." % i,
            "max_tokens": tokens, "ignore_eos": True, "temperature": 0}
    if trace:
        body["trace"] = True
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    start = time.perf_counter()
    data = urllib.request.urlopen(req).read()
    return time.perf_counter() - start, len(data)
for i in range(5):  # warm-up
    call(-1 - i, i % 2 == 0)
plain, traced, size = [], [], 0
for i in range(pairs):
    for trace in ((False, True) if i % 2 == 0 else (True, False)):
        seconds, n = call(2 * i + trace, trace)
        (traced if trace else plain).append(seconds)
        if trace:
            size = n
p, t = statistics.median(plain), statistics.median(traced)
print("%d pairs, %d tokens: untraced median %.2f ms, traced %.2f ms, ratio %.3f; traced response %d bytes"
      % (pairs, tokens, p * 1e3, t * 1e3, t / p, size))
PY
