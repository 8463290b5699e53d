#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time over its seed corpus.
# usage: run_fuzzer.sh BINARY SECONDS SEED_DIR WORK_DIR
set -euo pipefail
bin=$1 seconds=$2 seeds=$3 work=$4
mkdir -p "$work"
dirs=("$work")
[ -d "$seeds" ] && dirs+=("$seeds")
exec "$bin" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=25 -print_final_stats=1 "${dirs[@]}"
