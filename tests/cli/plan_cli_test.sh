#!/usr/bin/env bash
# `baton plan`: its JSON against figures derived here from the bundled model's config.json,
# refusals that name the flag, and (the issue's check) its --device cpu decode estimate
# against a measured engine_bench decode run on a model large enough for the bandwidth
# bound to dominate: the SmolLM2-135M shape in bf16 (270 MB of weights), written here.
# usage: plan_cli_test.sh BATON_BIN ENGINE_BENCH_BIN SOURCE_DIR [SANITIZERS]
set -euo pipefail
baton=$1
engine_bench=$2
src=$3
sanitizers=${4:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$baton" plan "$src/models/baton-tiny" --device h100 --tp 2 --json >"$out/tiny.json"
"$baton" plan "$src/models/baton-tiny" --device h100 --tp 2 >"$out/tiny.txt"
grep -q "tokens that fit" "$out/tiny.txt"
python3 - "$src/models/baton-tiny/config.json" "$out/tiny.json" <<'PY'
import json, math, sys
c = json.load(open(sys.argv[1]))
p = json.load(open(sys.argv[2]))
layers, heads, kv = c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"]
hidden, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
hd = c.get("head_dim", hidden // heads)
tp = 2
kv_rank = 2 * layers * (kv // tp) * hd * 2  # K and V, bf16
assert p["kv_bytes_per_token"]["per_rank"] == kv_rank, p["kv_bytes_per_token"]
layer = layers * (2 * heads * hd * hidden + 2 * kv * hd * hidden + 3 * hidden * inter) * 2
emb = vocab * hidden * 2 * (1 if c["tie_word_embeddings"] else 2)
norms = (2 * layers + 1) * hidden * 2
assert math.isclose(p["weight_bytes"]["total"], layer + emb + tp * norms), p["weight_bytes"]
usable = 81559 * 2**20 * 0.9  # H100 SXM, nvidia-smi's memory.total
assert p["tokens_fit"] == math.floor((usable - p["weight_bytes"]["per_rank"]) / kv_rank)
assert p["max_model_len"] == c["max_position_embeddings"]
print(f"ok   tiny on h100 tp 2: {kv_rank} KV bytes per token per rank, {p['tokens_fit']} tokens")
PY

refuses() {  # refuses EXPECTED_MESSAGE ARGS...
  local want=$1
  shift
  if "$baton" plan "$src/models/baton-tiny" "$@" >/dev/null 2>"$out/err"; then
    echo "FAIL: baton plan $* succeeded"
    exit 1
  fi
  grep -qF -- "$want" "$out/err" || { cat "$out/err"; echo "FAIL: no '$want'"; exit 1; }
  echo "ok   refuses $*: $(cat "$out/err")"
}
refuses "--tensor-parallel-size 3" --tp 3
refuses "--kv-dtype 'int4'" --kv-dtype int4
refuses "--prompt-len 600" --prompt-len 600
refuses "--memory-gb" --memory-gb 0.001

if [ -n "$sanitizers" ]; then
  # Instrumented kernels and probes are slowed by different factors: no speed to compare.
  echo "skipping the cpu decode estimate check: a $sanitizers build measures no real speed"
  exit 0
fi

# Decode at batch 1 on this CPU: the estimate (bytes of a step over the measured read
# bandwidth) against engine_bench's best repetition, at the same context (the prompt plus
# half the decode steps) and thread count. The host is shared and its bandwidth drifts
# between runs, so the plan is measured just before and just after the engine and the two
# estimates averaged; an attempt that misses is retried (three in all), each one printed.
"$baton" synth-model --shape smollm2-135m --dtype bf16 --format hf --seed 1 --out "$out/smol" --quiet
prompt=64
steps=32
for attempt in 1 2 3; do
  "$baton" plan "$out/smol" --device cpu --prompt-len $((prompt + steps / 2)) --json >"$out/before.json"
  "$engine_bench" --model "$out/smol" --prompt-tokens $prompt --decode-tokens $steps --reps 2 \
    >"$out/bench.txt"
  "$baton" plan "$out/smol" --device cpu --prompt-len $((prompt + steps / 2)) --json >"$out/after.json"
  if python3 - "$out/before.json" "$out/after.json" "$out/bench.txt" "$attempt" <<'PY'; then exit 0; fi
import json, sys
before, after = (json.load(open(f)) for f in sys.argv[1:3])
rows = [l.split() for l in open(sys.argv[3]) if l.startswith("smol")]
measured = float(rows[0][3])  # decode tok/s
estimate = (before["decode"]["tokens_per_second"] + after["decode"]["tokens_per_second"]) / 2
bw = [p["device"]["cpu"]["read_gbs"] for p in (before, after)]
ratio = measured / estimate
print(f"attempt {sys.argv[4]}: engine_bench {measured:.1f} tok/s, baton plan {estimate:.1f} tok/s "
      f"(read {bw[0]:.1f} / {bw[1]:.1f} GB/s), measured/estimate {ratio:.3f}")
sys.exit(0 if abs(ratio - 1) <= 0.25 else 1)
PY
done
echo "FAIL: the cpu decode estimate missed engine_bench by more than 25 % in three attempts"
cat "$out/bench.txt"
exit 1
