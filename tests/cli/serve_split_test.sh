#!/usr/bin/env bash
# `baton serve --prefill 1 --decode 1` as a user runs it: it starts a prefill and a decode
# worker as child processes and the router in front, answers a completion through the split
# path (the same text as plain `baton serve`), and Ctrl-C stops every process it started.
# Then the same with worker groups of different shapes on the two sides
# (--prefill-tensor-parallel-size 2, --decode-pipeline-parallel-size 2) and an f32 KV cache
# (--kv-cache-dtype f32, which every worker and rank it starts must get: against plain
# `baton serve --kv-cache-dtype f32`). The default bf16 cache is the first pair's.
# usage: serve_split_test.sh BATON_BIN SOURCE_DIR
set -euo pipefail
baton=$1
src=$2
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
out=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

# shellcheck source=serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"

start plain --ucx-tls tcp
start split --ucx-tls tcp --prefill 1 --decode 1
start plain32 --ucx-tls tcp --kv-cache-dtype f32
start groups --ucx-tls tcp --prefill 1 --decode 1 --prefill-tensor-parallel-size 2 \
  --decode-pipeline-parallel-size 2 --kv-cache-dtype f32
plain_port=$(cat "$out/plain.port")
split_port=$(cat "$out/split.port")
[ -n "$plain_port" ] && [ -n "$split_port" ] || { cat "$out"/*.err; echo "FAIL: no port"; exit 1; }
grep -q "prefill workers 127.0.0.1:" "$out/split.out" || { echo "FAIL: $(cat "$out/split.out")"; exit 1; }

want=$(complete "$plain_port")
got=$(complete "$split_port")
[ -n "$want" ] || { echo "FAIL: plain serve gave no text"; exit 1; }
if [ "$got" != "$want" ]; then
  echo "FAIL: the split answer differs"; echo "plain: $want"; echo "split: $got"; exit 1
fi
# Each child serves the worker metrics at the URL the banner prints, the whole set with
# the model_name label, and each counted the one split request above once.
urls=$(grep -o 'metrics http://[^ ,]*/metrics' "$out/split.out" | cut -d' ' -f2)
[ "$(echo "$urls" | wc -w)" -eq 2 ] || { echo "FAIL: want 2 metrics URLs: $(cat "$out/split.out")"; exit 1; }
for url in $urls; do
  body=$(curl -sf "$url") || { echo "FAIL: GET $url"; exit 1; }
  for name in baton_num_requests_running baton_num_requests_waiting baton_kv_cache_usage_ratio \
    baton_prefix_cache_queried_tokens_total baton_prefix_cache_hit_tokens_total \
    baton_num_preemptions_total baton_request_success_total baton_iteration_tokens \
    baton_request_prompt_tokens baton_request_generation_tokens baton_request_queue_time_seconds \
    baton_request_prefill_time_seconds baton_request_decode_time_seconds; do
    grep -q "^${name}[_{].*model_name=\"" <<<"$body" || { echo "FAIL: $url: no $name{model_name}"; exit 1; }
  done
  for name in baton_build_info process_cpu_seconds_total process_resident_memory_bytes process_open_fds; do
    grep -q "^${name}[ {]" <<<"$body" || { echo "FAIL: $url: no $name"; exit 1; }
  done
  ended=$(awk '/^baton_request_success_total\{/ {s += $NF} END {print s + 0}' <<<"$body")
  [ "$ended" = 1 ] || { echo "FAIL: $url: $ended requests ended, want 1"; exit 1; }
done

groups_port=$(cat "$out/groups.port")
[ -n "$groups_port" ] || { cat "$out/groups.err"; echo "FAIL: the split groups gave no port"; exit 1; }
grep -q "prefill (tp=2 pp=1) and 1 decode (tp=1 pp=2)" "$out/groups.err" ||
  { cat "$out/groups.err"; echo "FAIL: the pools' shapes were not announced"; exit 1; }
# Both workers (group leaders) and their ranks were started with the f32 cache.
for w in $(ps -o pid= --ppid "$(cat "$out/groups.pid")"); do
  for p in $w $(ps -o pid= --ppid "$w"); do
    args=$(tr '\0' ' ' <"/proc/$p/cmdline")
    case "$args" in *"--kv-cache-dtype f32"*) ;; *) echo "FAIL: process $p: $args"; exit 1 ;; esac
  done
done
want32=$(complete "$(cat "$out/plain32.port")")
[ -n "$want32" ] || { cat "$out/plain32.err"; echo "FAIL: plain f32 serve gave no text"; exit 1; }
got=$(complete "$groups_port")
if [ "$got" != "$want32" ]; then
  echo "FAIL: the split groups' answer differs"; echo "plain:  $want32"; echo "groups: $got"; exit 1
fi
kill -INT "$(cat "$out/groups.pid")"
wait "$(cat "$out/groups.pid")" || { echo "FAIL: the split groups' baton serve failed to stop"; exit 1; }

pid=$(cat "$out/split.pid")
children=$(ps -o pid= --ppid "$pid" | tr -d ' ')
[ "$(echo "$children" | wc -w)" -eq 2 ] || { echo "FAIL: expected 2 worker processes, got: $children"; exit 1; }
kill -INT "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 0 ] || { echo "FAIL: baton serve exited with $status"; cat "$out/split.err"; exit 1; }
for c in $children; do
  if kill -0 "$c" 2>/dev/null; then echo "FAIL: worker $c outlived baton serve"; exit 1; fi
done
kill -INT "$(cat "$out/plain.pid")"
kill -INT "$(cat "$out/plain32.pid")"
echo "PASS: split answers (one rank, and groups P tp=2 -> D pp=2) equal colocated; Ctrl-C stopped the router and both workers"
