#!/usr/bin/env bash
# Proves the GPU parts on a machine with an NVIDIA GPU, in two steps (docs/gpu.md):
#
#   scripts/gpu_check.sh pack   # here: build the GPU tests (release preset, CUDA) and pack
#                               # them with the shared libraries they need into build/gpu-pack
#   scripts/gpu_check.sh run    # on the GPU machine, from the repository root, with
#                               # build/gpu-pack carried: run every GPU test, print a table
#   scripts/gpu_check.sh        # both, where one machine has the GPU and the build tools
#
# Why two steps: the lent GPU machine has CUDA, CMake and ninja but none of the Debian
# packages the build needs (Abseil, gRPC, UCX, GoogleTest, ...), and nothing can be
# installed there. The binaries are built here against CUDA 13.0, as there, and their
# Debian libraries travel with them (a few MB). NCCL (218 MB) does not: `run` takes the
# libnccl.so.2 of CUDA's folder or of the PyTorch install there.
#
# `run` prints where each second went and ends with one table; its logs go to $OUT when
# set (the device tool brings them back), else to build/gpu-pack/logs.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
pack=build/gpu-pack
# The GPU test binaries (tests/gpu/CMakeLists.txt); each skips without a device.
tests=(gpu_elementwise_test gpu_ops_test gpu_paged_attention_test gpu_gemm_test gpu_sampling_test
       gpu_ops_contract_test gpu_nccl_communicator_test gpu_forward_test gpu_engine_test
       engine_device_test)
# The benchmark (bench/gpu_bench.cc), after the tests; its arguments can be replaced with
# GPU_BENCH_ARGS (for example "--serve 64" for a shorter run).
bench=gpu_bench
bench_args=${GPU_BENCH_ARGS:---serve 64,256}

now() { date +%s.%N; }
elapsed() { python3 -c "print(f'{$(now) - $1:.1f}')"; }

do_pack() {
  local t0
  t0=$(now)
  if [ ! -d build/release ]; then cmake --preset release >/dev/null; fi
  cmake --build build/release -j"$(nproc)" --target "${tests[@]}" "$bench" baton_cuda
  rm -rf "$pack"
  mkdir -p "$pack/bin" "$pack/lib"
  # The CUDA plugin (engine/device.h) beside the binaries, where they look for it.
  cp build/release/bin/libbaton_cuda.so "$pack/bin/"
  strip --strip-debug "$pack/bin/libbaton_cuda.so"
  for t in "${tests[@]}" "$bench"; do
    if [ ! -x "build/release/bin/$t" ]; then
      echo "gpu_check: build/release/bin/$t was not built (is nvcc at /usr/local/cuda/bin?)" >&2
      exit 1
    fi
    cp "build/release/bin/$t" "$pack/bin/"
    strip --strip-debug "$pack/bin/$t"  # what travels counts against the device's 64 MiB
    # Every library it loads but the C library's own, the driver's and NCCL.
    ldd "build/release/bin/$t" | awk '/=> \// {print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*) ;;
        libnccl.so*|libcublas*) ;;  # hundreds of MB: found there (below)
        *) cp -Ln "$lib" "$pack/lib/" ;;
      esac
    done
  done
  git rev-parse HEAD >"$pack/commit"
  echo "gpu_check pack: $(du -sh "$pack" | cut -f1) in $pack for $(cat "$pack/commit") in $(elapsed "$t0") s"
}

do_run() {
  local logs=${OUT:-$pack/logs}
  mkdir -p "$logs"
  if [ ! -d "$pack/bin" ]; then
    echo "gpu_check: no $pack; run 'scripts/gpu_check.sh pack' first (and carry $pack)" >&2
    exit 1
  fi
  # NCCL and cuBLASLt: CUDA's folder, else the PyTorch install's wheels (same sonames).
  find_lib() {
    local f
    for f in "/usr/local/cuda/lib64/$1" $(find /opt /usr -name "$1" 2>/dev/null | head -3); do
      if [ -e "$f" ]; then dirname "$f"; return; fi
    done
  }
  local nccl_dir cublas_dir
  nccl_dir=$(find_lib libnccl.so.2)
  cublas_dir=$(find_lib libcublasLt.so.13)
  export LD_LIBRARY_PATH="$PWD/$pack/lib${nccl_dir:+:$nccl_dir}${cublas_dir:+:$cublas_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "gpu_check run: commit $(cat "$pack/commit"), NCCL from ${nccl_dir:-nowhere}, cuBLASLt from ${cublas_dir:-nowhere}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
    echo "gpu_check: nvidia-smi found no GPU; every test below will skip"
  local rows=() failed=0
  for t in "${tests[@]}"; do
    local t0 rc=0
    t0=$(now)
    "$pack/bin/$t" --gtest_brief=0 >"$logs/$t.log" 2>&1 || rc=$?
    local secs passed skipped fails
    secs=$(elapsed "$t0")
    passed=$(grep -c '^\[       OK \]' "$logs/$t.log" || true)
    # Per-test lines carry their time; the summary at the end repeats the names without.
    skipped=$(grep -cE '^\[  SKIPPED \] .*\([0-9]+ ms\)$' "$logs/$t.log" || true)
    fails=$(grep -cE '^\[  FAILED  \] .*\([0-9]+ ms\)$' "$logs/$t.log" || true)
    [ "$rc" -ne 0 ] && failed=1
    [ "$rc" -ne 0 ] && tail -20 "$logs/$t.log"
    rows+=("$(printf '%-28s %6s %7s %6s %6s %7s' "$t" "$rc" "$passed" "$skipped" "$fails" "$secs")")
  done
  # The benchmark, bounded so that a slow run still leaves its figures and the table.
  local t0 rc=0
  t0=$(now)
  # shellcheck disable=SC2086
  timeout "${GPU_BENCH_TIMEOUT:-360}" "$pack/bin/$bench" $bench_args >"$logs/$bench.log" 2>&1 || rc=$?
  echo "gpu_check: $bench exit $rc in $(elapsed "$t0") s"
  grep -v '^RESULT' "$logs/$bench.log" || true
  echo
  printf '%-28s %6s %7s %6s %6s %7s\n' "binary" "exit" "passed" "skip" "fail" "seconds"
  printf '%s\n' "${rows[@]}"
  echo
  echo "figures (docs/perf/gpu.md):"
  grep '^RESULT' "$logs/$bench.log" | sed 's/^RESULT //' | tr ' ' '\n' | sed 's/=/ /' |
    awk '{printf "  %-28s %s\n", $1, $2}' || true
  [ "$rc" -ne 0 ] && failed=1
  return $failed
}

case "$mode" in
  pack) do_pack ;;
  run) do_run ;;
  all) do_pack && do_run ;;
  *) echo "usage: scripts/gpu_check.sh [pack|run]" >&2; exit 2 ;;
esac
