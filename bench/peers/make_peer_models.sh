#!/usr/bin/env bash
# Write the benchmark files for bench/peers/run_engine_vs_llama_cpp.sh: the 135M and 1B
# synthetic Llama shapes as bf16 GGUF (baton synth-model), then Q8_0 and Q4_K_M of each made
# by llama.cpp's own quantizer.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/peers/make_peer_models.sh [--out DIR] [--shapes "S1 S2"] [--force]

  --out DIR       where to write (default: build/bench-models/peers under the repository root)
  --shapes LIST   synth-model shapes (default: "smollm2-135m llama3.2-1b")
  --force         rewrite files that already exist (default: keep them)

Writes DIR/SHAPE-bf16.gguf, DIR/SHAPE-Q8_0.gguf and DIR/SHAPE-Q4_K_M.gguf for each shape.
Environment: BATON_BIN (default build/release/bin), LLAMA_CPP_BIN (default
build/peers/llama.cpp/bin, see build_llama_cpp.sh), THREADS (quantizer threads, default 2).
The 1B shape takes about 2.5 GB in bf16, 1.3 GB in Q8_0 and 0.8 GB in Q4_K_M.
USAGE
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$repo/build/bench-models/peers
shapes="smollm2-135m llama3.2-1b"
force=0
while [[ $# -gt 0 ]]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --out) out=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --force) force=1; shift ;;
    *) echo "make_peer_models: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
baton=${BATON_BIN:-$repo/build/release/bin}/baton
quantize=${LLAMA_CPP_BIN:-$repo/build/peers/llama.cpp/bin}/llama-quantize
threads=${THREADS:-2}
[[ -x $baton ]] || { echo "make_peer_models: no $baton (build Baton, or set BATON_BIN)" >&2; exit 1; }
[[ -x $quantize ]] || { echo "make_peer_models: no $quantize (run build_llama_cpp.sh, or set LLAMA_CPP_BIN)" >&2; exit 1; }
mkdir -p "$out"

for shape in $shapes; do
  bf16=$out/$shape-bf16.gguf
  if [[ $force == 1 || ! -s $bf16 ]]; then
    tmp=$(mktemp -d "$out/.synth.XXXXXX")
    # synth-model names the model after its output directory: give it the shape's name.
    "$baton" synth-model --shape "$shape" --dtype bf16 --format gguf --out "$tmp/$shape" --quiet
    gguf=$(find "$tmp/$shape" -maxdepth 1 -name '*.gguf' | head -1)
    [[ -n $gguf ]] || { echo "make_peer_models: synth-model wrote no .gguf in $tmp" >&2; exit 1; }
    mv "$gguf" "$bf16"
    rm -rf "$tmp"
    echo "wrote $bf16"
  fi
  for type in Q8_0 Q4_K_M; do
    q=$out/$shape-$type.gguf
    if [[ $force == 1 || ! -s $q ]]; then
      "$quantize" "$bf16" "$q.part" "$type" "$threads" > "$q.log" 2>&1 ||
        { echo "make_peer_models: llama-quantize $type failed, see $q.log" >&2; exit 1; }
      mv "$q.part" "$q"
      echo "wrote $q"
    fi
  done
done
ls -l "$out"/*.gguf
df -h "$out" | tail -1
