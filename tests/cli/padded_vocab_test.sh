#!/usr/bin/env bash
# A model whose embedding has rows past its tokenizer (a padded vocabulary, as Qwen2.5's):
# the synthetic "tiny" shape, 320 rows for 265 tokens, on which most draws would land in
# the padding. `baton generate` and `baton serve` (through the router, which turns ids
# into text) answer every request and never emit an id the tokenizer lacks.
# usage: padded_vocab_test.sh BATON_BIN
set -euo pipefail
baton=$1
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
out=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

# Both formats: the GGUF's vocabulary lists the padding as unused [PADn] tokens, as
# llama.cpp's converter writes it.
"$baton" synth-model --shape tiny --seed 3 --format both --out "$out/padded" --quiet
for seed in 1 2 3 4; do
  model="$out/padded"
  [ $seed -gt 2 ] && model="$out/padded/model.gguf"
  "$baton" generate --model "$model" --prompt "Hello" --temperature 1.5 --seed $seed \
    --max-tokens 32 --logprobs 3 --json >"$out/gen$seed.json"
  python3 - "$out/gen$seed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ids = d["generated_ids"]
assert ids, "no tokens"
bad = [i for i in ids if i >= 265]
assert not bad, f"ids past the tokenizer: {bad}"
print(f"ok   generate: {len(ids)} ids, all below 265")
PY
done

"$baton" serve --model "$out/padded" --port 0 --grpc-port -1 --threads 1 \
  --kv-cache-memory 16MiB >"$out/serve.out" 2>"$out/serve.err" &
for _ in $(seq 1 300); do
  grep -q "serving" "$out/serve.out" 2>/dev/null && break
  sleep 0.1
done
port=$(sed -n 's/.* on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/serve.out" | head -1)
[ -n "$port" ] || { cat "$out/serve.err"; echo "FAIL: baton serve gave no port"; exit 1; }
for seed in 1 2 3 4; do
  curl -s -o "$out/c$seed.json" -w '%{http_code}\n' "http://127.0.0.1:$port/v1/completions" \
    -H 'content-type: application/json' \
    -d "{\"prompt\": \"Hello\", \"max_tokens\": 32, \"temperature\": 1.5, \"seed\": $seed, \"n\": 2, \"logprobs\": 3}" \
    >"$out/c$seed.code"
  python3 - "$out/c$seed.json" "$(cat "$out/c$seed.code")" <<'PY'
import json, sys
code = sys.argv[2]
body = open(sys.argv[1]).read()
assert code == "200", f"HTTP {code}: {body}"
d = json.loads(body)
assert len(d["choices"]) == 2, body
for c in d["choices"]:
    assert c["finish_reason"] in ("length", "stop"), c
print(f"ok   serve: HTTP 200, {d['usage']['completion_tokens']} tokens in 2 choices")
PY
done
