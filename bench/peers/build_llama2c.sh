#!/usr/bin/env bash
# Build llama2.c's run.c, the tiny-model peer for bench/peers/run_engine_vs_llama_cpp.sh.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/peers/build_llama2c.sh SRC_DIR [OUT]

  SRC_DIR  llama2.c source tree (holding run.c; e.g. made by bench/peers/export_peer_src.sh)
  OUT      output binary (default: build/peers/llama2.c/run under the repository root)

Compiles `gcc -Ofast -march=native -fopenmp run.c -lm` (CC overrides gcc) and prints the
commit it built. Set OMP_NUM_THREADS when running it.
USAGE
}

if [[ ${1:-} == -h || ${1:-} == --help ]]; then usage; exit 0; fi
if [[ $# -lt 1 || $# -gt 2 ]]; then usage >&2; exit 2; fi

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
src=$(cd "$1" && pwd)
out=${2:-$repo/build/peers/llama2.c/run}
[[ -f $src/run.c ]] || { echo "build_llama2c: no run.c in $src" >&2; exit 1; }

mkdir -p "$(dirname "$out")"
"${CC:-gcc}" -Ofast -march=native -fopenmp -o "$out" "$src/run.c" -lm

version="unknown"
if [[ -f $src/.peer-commit ]]; then
  version=$(tr '\n' ' ' < "$src/.peer-commit")
elif git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  version="commit=$(git -C "$src" rev-parse HEAD)"
fi
echo "$version" > "$out.PEER_VERSION"
echo "llama2.c run built: $version"
echo "binary: $out"
