#!/usr/bin/env bash
# Build the llama.cpp peer (llama-bench, llama-quantize, llama-simple) from a source tree
# outside the repository's history, for bench/peers/run_engine_vs_llama_cpp.sh.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/peers/build_llama_cpp.sh SRC_DIR [OUT_DIR]

  SRC_DIR  llama.cpp source tree (e.g. made by bench/peers/export_peer_src.sh)
  OUT_DIR  build directory (default: build/peers/llama.cpp under the repository root)

Configures CMake Release with GGML_NATIVE=ON (tuned for this CPU) and LLAMA_CURL=OFF, builds
only llama-bench, llama-quantize and llama-simple, and prints the commit it built.
Environment: JOBS (parallel build jobs, default 2), CMAKE_GENERATOR (default: Ninja if found),
ISA (native, the default, or avx2: GGML_NATIVE=OFF with AVX, AVX2, FMA and F16C and no
AVX-512, what llama.cpp runs on an AVX2-only EPYC; for the side by side with
BATON_CPU_ISA=avx2 on a machine that has AVX-512).
The binaries land in OUT_DIR/bin.
USAGE
}

if [[ ${1:-} == -h || ${1:-} == --help ]]; then usage; exit 0; fi
if [[ $# -lt 1 || $# -gt 2 ]]; then usage >&2; exit 2; fi

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
src=$(cd "$1" && pwd)
out=${2:-$repo/build/peers/llama.cpp}
jobs=${JOBS:-2}

[[ -f $src/CMakeLists.txt && -d $src/ggml ]] || { echo "build_llama_cpp: $src is not a llama.cpp tree" >&2; exit 1; }

# llama.cpp stamps its build with `git rev-parse` run in the source directory. An exported
# tree has no .git of its own, and git would otherwise walk up into an enclosing repository
# (this one, when the tree sits under build/) and stamp that commit: stop it at SRC_DIR.
GIT_CEILING_DIRECTORIES=$(dirname "$src")
export GIT_CEILING_DIRECTORIES

isa=${ISA:-native}
case $isa in
  native) isa_flags=(-DGGML_NATIVE=ON) ;;
  avx2) isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                   -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF
                   -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF) ;;
  *) echo "build_llama_cpp: ISA=$isa: expected native or avx2" >&2; exit 2 ;;
esac

gen=()
if [[ -z ${CMAKE_GENERATOR:-} ]] && command -v ninja >/dev/null; then gen=(-G Ninja); fi

cmake -S "$src" -B "$out" "${gen[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  "${isa_flags[@]}" \
  -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_SERVER=OFF \
  -DBUILD_SHARED_LIBS=OFF
cmake --build "$out" -j "$jobs" --target llama-bench llama-quantize llama-simple

version="unknown"
if [[ -f $src/.peer-commit ]]; then
  version=$(tr '\n' ' ' < "$src/.peer-commit")
elif git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  version="commit=$(git -C "$src" rev-parse HEAD) describe=$(git -C "$src" describe --tags 2>/dev/null || echo none)"
fi
version="$version isa=$isa"
echo "$version" > "$out/PEER_VERSION"
echo "llama.cpp built: $version"
echo "binaries: $out/bin/{llama-bench,llama-quantize,llama-simple}"
