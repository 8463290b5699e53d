#!/usr/bin/env bash
# `baton trace` against a local split cluster (`baton serve --prefill 1 --decode 1`), as a
# user runs it: every figure of the journey is present, the steps match the tokens, the
# timings add up to the end-to-end time, and a prompt sent twice shows its cached blocks
# the second time. Then the text form, and the bounds (docs/inspector.md).
# usage: trace_cli_test.sh BATON_BIN SOURCE_DIR
set -euo pipefail
baton=$1
src=$2
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
out=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

# shellcheck source=serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"

start split --ucx-tls tcp --prefill 1 --decode 1
port=$(cat "$out/split.port")
[ -n "$port" ] || { cat "$out"/split.err; echo "FAIL: no port"; exit 1; }
url="http://127.0.0.1:$port"

# 62 tokens, three full blocks of 16: the second run finds them in the prefix cache.
sentence="Once upon a time there was a little girl named Lily who loved to play in the park with her friends and her dog every sunny day."
prompt="$sentence $sentence"
"$baton" trace --url "$url" --max-tokens 12 --temperature 0 --ignore-eos --json "$prompt" >"$out/first.json"
"$baton" trace --url "$url" --max-tokens 12 --temperature 0 --ignore-eos --json "$prompt" >"$out/second.json"

python3 - "$out/first.json" "$out/second.json" <<'PY'
import json, sys

def check(path, warm):
    r = json.load(open(path))
    t = r["trace"]
    fail = lambda m: sys.exit(f"FAIL ({path}): {m}")
    for key in ["model", "prompt_tokens", "route", "prefill", "steps", "weight_bytes",
                "kv_bytes_per_token", "num_layers", "tokenize_seconds", "time_to_first_token_seconds",
                "time_per_output_token_seconds", "total_seconds", "completion_tokens"]:
        if key not in t: fail(f"no {key}")
    n = r["usage"]["completion_tokens"]
    if n != 12 or t["completion_tokens"] != n: fail(f"completion tokens {n} / {t['completion_tokens']}")
    if len(t["prompt_tokens"]) != r["usage"]["prompt_tokens"]: fail("prompt tokens differ from usage")
    route = t["route"]
    if route["policy"] != "baton" or len(route["candidates"]) != 2: fail(f"route {route}")
    if not route["prefill_worker"] or not route["decode_worker"]: fail("no split route")
    if sum(c["chosen"] for c in route["candidates"]) != 2: fail("want both workers chosen")
    p = t["prefill"]
    if p["worker"] != route["prefill_worker"] or not p["steps"]: fail(f"prefill leg {p}")
    if p["kv_bytes_sent"] <= 0 or p["compute_seconds"] <= 0: fail("prefill figures missing")
    if t["worker"] != route["decode_worker"]: fail("serving worker is not the decode worker")
    # One sampled step per token: the first on the prefill worker, the rest on the decode one.
    sampled = [s for s in p["steps"] if s["sampled"]] + [s for s in t["steps"] if s["sampled"]]
    if len(sampled) != n: fail(f"{len(sampled)} sampled steps for {n} tokens")
    if any(len(s["top"]) < 5 or not s["chosen"]["text"] for s in sampled): fail("alternatives missing")
    # The response's text skips special tokens (skip_special_tokens, as vLLM's default).
    text = "".join(s["chosen"]["text"] for s in sampled if not s["chosen"]["special"])
    if text != r["text"]: fail(f"the steps' tokens {text!r} differ from the text {r['text']!r}")
    if any(not s["layer_groups"] for s in p["steps"] if s["prefill"]): fail("no layer groups")
    # The timings add up: every step inside the request, the last one close to its end,
    # the first token's step close to TTFT.
    total = t["total_seconds"]
    ends = [s["start_seconds"] + s["forward_seconds"] + s["sample_seconds"] + s["kv_wait_seconds"]
            for s in p["steps"] + t["steps"]]
    if max(ends) > total + 1e-3: fail(f"a step ends at {max(ends)} after the request ({total})")
    if total - max(ends) > 0.2 * total + 0.02: fail(f"{total - max(ends)} s unaccounted after the last step")
    first_end = ends[len(p["steps"]) - 1]
    if abs(t["time_to_first_token_seconds"] - first_end) > 0.2 * t["time_to_first_token_seconds"] + 0.02:
        fail(f"TTFT {t['time_to_first_token_seconds']} vs first token's step {first_end}")
    ctx = [s["context_tokens"] for s in t["steps"]]
    if ctx != sorted(ctx) or t["steps"][-1]["kv_bytes"] != ctx[-1] * t["kv_bytes_per_token"]:
        fail("KV bytes do not follow the context")
    if warm:
        if t["cached_tokens"] < 32: fail(f"second run cached {t['cached_tokens']} tokens")
        if route["expected_cached_tokens"] < 32: fail("the router expected nothing cached")
    elif t["cached_tokens"] != 0:
        fail("first run found tokens cached")

check(sys.argv[1], False)
check(sys.argv[2], True)
print("trace json ok")
PY

# The text form: the sections a reader looks for.
"$baton" trace --url "$url" --max-tokens 4 "$prompt" >"$out/text.txt"
for want in "TTFT" "prefill" "decode" "KV"; do
  grep -qi "$want" "$out/text.txt" || { cat "$out/text.txt"; echo "FAIL: no '$want' in the text form"; exit 1; }
done

# Bounds: refused with the parameter named, before anything runs.
if "$baton" trace --url "$url" --max-tokens 4096 "$prompt" >"$out/big.txt" 2>&1; then
  echo "FAIL: max_tokens 4096 was traced"; exit 1
fi
grep -q "max_tokens" "$out/big.txt" || { cat "$out/big.txt"; echo "FAIL: the refusal does not name max_tokens"; exit 1; }
echo "PASS"
