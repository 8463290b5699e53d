#!/usr/bin/env bash
# `baton serve --tensor-parallel-size 2` as a user runs it: the worker in the router's
# process leads a group whose second rank is a child process, the OpenAI API answers with
# the text of plain `baton serve` (seeded sampling), and Ctrl-C stops every process.
# usage: serve_group_test.sh BATON_BIN SOURCE_DIR
set -euo pipefail
baton=$1
src=$2
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
out=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

# shellcheck source=serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"

start plain
start group --tp 2
plain_port=$(cat "$out/plain.port")
group_port=$(cat "$out/group.port")
[ -n "$plain_port" ] && [ -n "$group_port" ] || { cat "$out"/*.err; echo "FAIL: no port"; exit 1; }

want=$(complete "$plain_port")
got=$(complete "$group_port")
[ -n "$want" ] || { echo "FAIL: plain serve gave no text"; exit 1; }
if [ "$got" != "$want" ]; then
  echo "FAIL: the group's answer differs"; echo "plain: $want"; echo "tp=2:  $got"; exit 1
fi

pid=$(cat "$out/group.pid")
children=$(ps -o pid= --ppid "$pid" | tr -d ' ')
[ "$(echo "$children" | wc -w)" -eq 1 ] || { echo "FAIL: expected 1 rank process, got: $children"; exit 1; }
kill -INT "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 0 ] || { echo "FAIL: baton serve exited with $status"; cat "$out/group.err"; exit 1; }
sleep 0.5
for c in $children; do
  if kill -0 "$c" 2>/dev/null; then echo "FAIL: rank $c outlived baton serve"; exit 1; fi
done
kill -INT "$(cat "$out/plain.pid")"
echo "PASS: tp=2 answer equals one rank's; Ctrl-C stopped the router and the group"
