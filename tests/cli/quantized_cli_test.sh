#!/usr/bin/env bash
# `baton generate` and `baton serve` on llama.cpp's quantized files as a user runs them:
# with --quant-activations f32 the greedy continuation of the Q4_K_M file (and of every
# other type) equals llama.cpp's run with f32 activations on the same weights
# (../shared/testdata/quantized, f32 KV cache as there), and serve answers with the text
# generate gives, on the default int8 path and on the f32 one.
# usage: quantized_cli_test.sh BATON_BINARY TESTDATA_DIR [SANITIZERS]
# Exits 77 (ctest: skipped) when the shared testdata is absent.
set -uo pipefail
baton=$1
data=$2/quantized
sanitizers=${3:-}
if [ ! -f "$data/q4_k_m.gguf" ]; then
  echo "SKIP: testdata absent at $data"
  exit 77
fi
source "$(dirname "$0")/check_lib.sh"
out=$(mktemp -d)
trap 'kill $(cat "$out"/*.pid 2>/dev/null) 2>/dev/null; rm -rf "$out"' EXIT
json_field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# llama.cpp's 32 greedy ids after "Once upon a time", up to its first EOS (2), where
# `baton generate` stops.
expected() {  # file
  python3 -c "
import json
g = json.load(open('$data/$1.json'))['prompts'][0]['greedy_dequant_f32']
print(' '.join(map(str, g[:g.index(2) + 1] if 2 in g else g)))"
}
for f in q4_k_m q4_0 q5_1 q8_0 q2_k q3_k_m q4_k_s q5_k_m q6_k; do
  want=$(expected $f)
  n=$(echo "$want" | wc -w)
  got=$("$baton" generate --model "$data/$f.gguf" --prompt "Once upon a time" --temperature 0 \
        --max-tokens "$n" --kv-cache-dtype f32 --quant-activations f32 --json | json_field "' '.join(map(str, d['generated_ids']))")
  check "greedy ids of $f.gguf == llama.cpp (f32 activations)" "$want" "$got"
done


# Starts `baton serve` on q4_k_m.gguf (extra arguments and environment given before it, as
# NAME=VALUE words), logging to $out/NAME.out/.err; prints its greedy completion of
# "Once upon a time", 12 tokens.
serve_completion() {  # NAME [VAR=VALUE ...]
  local name=$1 port
  shift
  env "$@" "$baton" serve --model "$data/q4_k_m.gguf" --port 0 --grpc-port -1 --threads 1 \
    --kv-cache-memory 16MiB >"$out/$name.out" 2>"$out/$name.err" &
  echo $! >"$out/$name.pid"
  for _ in $(seq 1 300); do
    grep -q "serving" "$out/$name.out" 2>/dev/null && break
    sleep 0.1
  done
  port=$(sed -n 's/.* on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/$name.out" | head -1)
  curl -sf "http://127.0.0.1:$port/v1/completions" -H 'content-type: application/json' \
    -d '{"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}' |
    json_field "repr(d['choices'][0]['text'])"
}

# serve: the OpenAI completion at temperature 0 is generate's text.
text=$("$baton" generate --model "$data/q4_k_m.gguf" --prompt "Once upon a time" \
       --temperature 0 --max-tokens 12 --json | json_field "repr(d['text'])")
check "serve on q4_k_m.gguf == generate" "$text" "$(serve_completion serve)"
# The ready line names the file's types, as llama.cpp's loader lists them.
contains "ready line lists the weight types" "(q4_K 25, q6_K 5)" "$(cat "$out/serve.err" "$out/serve.out")"

# --quant-activations f32 (here from BATON_QUANT_ACTIVATIONS) reaches serve's worker: its
# completion is generate's with the same flag, and the prompt's logits differ from the
# default int8 path's (llama.cpp's native numerics; engine_quant_oracle_test holds both to
# their oracles).
text32=$(BATON_QUANT_ACTIVATIONS=f32 "$baton" generate --model "$data/q4_k_m.gguf" \
         --prompt "Once upon a time" --temperature 0 --max-tokens 12 --json \
         --logits-out "$out/f32.json" | json_field "repr(d['text'])")
"$baton" generate --model "$data/q4_k_m.gguf" --prompt "Once upon a time" --temperature 0 \
  --max-tokens 1 --logits-out "$out/int8.json" >/dev/null
moved=$(python3 - "$out/int8.json" "$out/f32.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["logits"] for p in sys.argv[1:])
print("yes" if max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)) > 1e-3 else "no")
PY
)
check "f32 activations change the logits" yes "$moved"
check "serve --quant-activations f32 == generate with it" "$text32" \
  "$(serve_completion serve32 BATON_QUANT_ACTIVATIONS=f32)"

# Resident memory of a quantized model is about its file size: the weights stay in their
# blocks (a dequantized f32 copy of the 135M shape would add about 540 MB). The shape's
# rows (576) are not whole K-quant blocks, so q4_0; peak RSS of `generate`, which maps the
# file, against the file plus a bound for the runtime, activations and KV cache.
"$baton" synth-model --shape smollm2-135m --dtype q4_0 --format gguf --out "$out/q4" --quiet
q4=$(ls "$out"/q4/*.gguf | head -1)
read -r file_bytes rss_bytes < <(python3 - "$baton" "$q4" <<'PY'
import os, resource, subprocess, sys
baton, model = sys.argv[1:]
subprocess.run([baton, "generate", "--model", model, "--prompt", "Once upon a time",
                "--max-tokens", "4", "--threads", "1"], check=True, capture_output=True)
print(os.path.getsize(model), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
PY
)
echo "q4_0 135M: file $((file_bytes >> 20)) MiB, peak RSS of generate $((rss_bytes >> 20)) MiB"
if [ -n "$sanitizers" ]; then
  echo "skipping the RSS bound: a $sanitizers build's shadow memory and quarantine are not the engine's"
else
  check "peak RSS (MiB) <= file + 128 MiB" yes \
    "$([ "$rss_bytes" -le $((file_bytes + (128 << 20))) ] && echo yes || echo "no: $((rss_bytes >> 20))")"
fi
exit $fail
