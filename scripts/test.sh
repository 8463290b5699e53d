#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, then
#   1. the ASan+UBSan build (clang) with its unit tests and a short run of every fuzzer,
#      and the TSan build of the multithreaded tests;
#   2. the release build (gcc, with CUDA where nvcc exists) and every test.
# It ends with ctest's summary of the release run.
# Env: BATON_FUZZ_SECONDS (default 20 per fuzzer), BATON_CHAOS_SECONDS (default 20; the
# chaos suite runs in the release stage only), BATON_SKIP_ASAN=1 to skip stage 1.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Paths relative to the checkout, and the build directory left out of the hash (it is in
# the debug info's compile dir otherwise): a fresh clone elsewhere hits the same cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
jobs="${BATON_JOBS:-$(nproc)}"

scripts/install_deps.sh
if command -v npm >/dev/null 2>&1; then
  echo "test.sh: installing the oracle npm packages (tests/oracle)"
  (cd tests/oracle && npm install --no-audit --no-fund --no-package-lock --loglevel=error)
  echo "test.sh: installing the e2e clients (tests/e2e: openai, @grpc/grpc-js, grpc-health-check)"
  (cd tests/e2e && npm install --no-audit --no-fund --no-package-lock --loglevel=error)
  echo "test.sh: installing the manifest validators (tests/deploy: kubernetes-models)"
  (cd tests/deploy && npm install --no-audit --no-fund --no-package-lock --loglevel=error)
fi

if [ "${BATON_SKIP_ASAN:-0}" != 1 ]; then
  echo "test.sh: [1/2] ASan+UBSan build, unit tests and fuzzers"
  cmake --preset asan -DBATON_FUZZ_SECONDS="${BATON_FUZZ_SECONDS:-20}" >/dev/null
  cmake --build --preset asan -j "$jobs"
  # `install`: the packaging checks are of the release tree, which the image ships.
  ctest --preset asan -j "$jobs" -LE "oracle|e2e|chaos|install"

  echo "test.sh: [1b/2] TSan build of the multithreaded tests"
  cmake --preset tsan >/dev/null
  tsan_tests="tokenizer_concurrency_test common_thread_pool_test kernels_matmul_test
              engine_stories_reference_test engine_engine_test service_http_server_test
              service_cancel_watcher_test engine_kv_transfer_engine_test
              tools_bench_serve_load_test"
  cmake --build --preset tsan -j "$jobs" --target $tsan_tests
  for t in $tsan_tests; do build/tsan/bin/$t --gtest_brief=1; done
fi

echo "test.sh: [2/2] release build and all tests"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"
