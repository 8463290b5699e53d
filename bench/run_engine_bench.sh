#!/usr/bin/env bash
# The engine's speed figures (docs/perf/engine.md): decode at batch 1 against the
# memory-bandwidth bound and prefill of a 512-token prompt against the GEMM probe, on the
# bundled model and on synthetic bf16 models in the shapes of SmolLM2-135M and
# Llama-3.2-1B (written once into build/bench-models; ~2.8 GB).
# usage: bench/run_engine_bench.sh [BUILD_DIR] [engine_bench flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
shift || true
cmake --build "$build" --target baton engine_bench >/dev/null
models=build/bench-models
mkdir -p "$models"
for shape in smollm2-135m llama3.2-1b; do
  if [ ! -f "$models/$shape/config.json" ]; then
    echo "writing the synthetic $shape model (bf16) to $models/$shape"
    "$build/bin/baton" synth-model --shape "$shape" --dtype bf16 --seed 1 --format hf --out "$models/$shape"
  fi
done
"$build/bin/engine_bench" --model models/baton-tiny --model "$models/smollm2-135m" \
  --model "$models/llama3.2-1b" "$@"
