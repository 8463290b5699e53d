#!/usr/bin/env bash
# Runs one tests/e2e/*.test.mjs file under node's test runner, with the binaries it
# starts passed in the environment. Exit 77 (ctest: skipped) when node or the npm
# packages are missing; `npm install` in tests/e2e (scripts/test.sh does it) installs them.
# Usage: run_node_test.sh <test file> <baton binary> <baton-router binary> <source dir>
set -euo pipefail
test_file="${1:?usage: run_node_test.sh <test file> <baton> <baton-router> <source dir>}"
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node >/dev/null 2>&1; then
  echo "e2e: SKIP $(basename "$test_file"): node is not installed"
  exit 77
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "e2e: SKIP $(basename "$test_file"): node $major is older than 20"
  exit 77
fi
if [ ! -d "$here/node_modules/openai" ] || [ ! -d "$here/node_modules/@grpc/grpc-js" ]; then
  echo "e2e: SKIP $(basename "$test_file"): tests/e2e/node_modules is missing;" \
       "run 'npm install' in tests/e2e (scripts/test.sh does)"
  exit 77
fi
export BATON_BIN="${2:?baton binary}"
export BATON_ROUTER_BIN="${3:?baton-router binary}"
export BATON_SOURCE_DIR="${4:?source dir}"
exec node --test-reporter=spec "$test_file"
