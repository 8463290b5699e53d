#!/usr/bin/env bash
# How late the router sees a token (docs/inspector.md, "Known limits"): one `baton serve
# --enable-inspector` on the bundled model, N non-streamed traced requests of 8 tokens
# one at a time, each with its own prompt (no prefix-cache hit). For each: the router's
# TTFT minus the end of the worker's first sampled step (both on the trace's clock, which
# starts at the router's arrival), and the end-to-end time minus TTFT. Prints medians and
# p90, the first request left out (warm-up).
#
# usage: bench/run_router_ttft_gap.sh [BUILD_DIR] [N]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
n=${2:-40}
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT
grep -m1 "model name" /proc/cpuinfo >&2
source bench/serve_for_bench.sh
start_baton_serve "$build" "$out" --enable-inspector
for i in $(seq 1 "$n"); do
  "$build/bin/baton" trace --url "$url" --max-tokens 8 --json \
    "Once upon a time, there was a little dog named Toby number $i."
  echo
done | python3 -c '
import json, statistics, sys
gaps, tails = [], []
for line in sys.stdin:
    if not line.strip():
        continue
    t = json.loads(line)["trace"]
    first = next(s for s in t["steps"] if s.get("sampled"))
    end = first["start_seconds"] + first["forward_seconds"] + first["sample_seconds"]
    gaps.append((t["time_to_first_token_seconds"] - end) * 1e3)
    tails.append((t["total_seconds"] - t["time_to_first_token_seconds"]) * 1e3)
gaps, tails = gaps[1:], tails[1:]
p90 = sorted(gaps)[int(0.9 * (len(gaps) - 1))]
print("n=%d  router TTFT - worker first token: median %.2f ms, p90 %.2f ms;"
      " end to end - TTFT: median %.2f ms" % (len(gaps), statistics.median(gaps), p90,
                                              statistics.median(tails)))
'
