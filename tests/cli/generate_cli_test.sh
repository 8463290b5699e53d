#!/usr/bin/env bash
# End-to-end checks of `baton generate` as a user runs it, on stories260K (both formats)
# against llama2.c's reference outputs, and on the bundled default model.
# usage: generate_cli_test.sh BATON_BINARY TESTDATA_DIR SOURCE_DIR
# Exits 77 (ctest: skipped) when the shared testdata is absent.
set -uo pipefail
baton=$1
data=$2
src=$3
stories="$data/models/stories260K"
if [ ! -d "$stories/hf" ]; then
  echo "SKIP: testdata absent at $data"
  exit 77
fi
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
json_field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# Greedy "Once upon a time" for 60 tokens in both formats: llama2.c's ids (its sequence
# is prompt + generated; it stops on BOS, id 1, so --stop-ids 1). llama2.c keeps an f32 KV
# cache and some of its greedy steps are near ties (testdata README), so the comparisons
# with it run with --kv-cache-dtype f32; the default bf16 cache is checked below.
ref=$(python3 -c "
import json
for l in open('$stories/reference/ref_greedy.jsonl'):
    d = json.loads(l)
    if d['prompt'] == 'Once upon a time':
        print(' '.join(map(str, d['sequence_ids'][5:65])))")
for model in "$stories/stories260K.gguf" "$stories/hf"; do
  out=$("$baton" generate --model "$model" --prompt "Once upon a time" --temperature 0 \
        --max-tokens 60 --stop-ids 1 --kv-cache-dtype f32 --json)
  check "greedy ids ($(basename "$model"))" "$ref" \
    "$(echo "$out" | json_field "' '.join(map(str, d['generated_ids']))")"
  check "prompt ids ($(basename "$model"))" "1 403 407 261 378" \
    "$(echo "$out" | json_field "' '.join(map(str, d['prompt_ids']))")"
  check "finish length ($(basename "$model"))" "length" "$(echo "$out" | json_field "d['finish_reason']")"
done

# Streaming text equals the --json text.
streamed=$("$baton" generate --model "$stories/hf" --prompt "Once upon a time" --temperature 0 \
           --max-tokens 40 --quiet)
jtext=$("$baton" generate --model "$stories/hf" --prompt "Once upon a time" --temperature 0 \
        --max-tokens 40 --json | json_field "d['text']")
check "streamed text == json text" "$jtext" "$streamed"
contains "greedy text is the story" "Lily" "$streamed"

# A stop string ends the text before it; a stop id ends with finish_reason stop.
out=$("$baton" generate --model "$stories/hf" --prompt "Once upon a time" --temperature 0 \
      --max-tokens 60 --stop "Lily" --json)
check "stop string: finish" "stop" "$(echo "$out" | json_field "d['finish_reason']")"
check "stop string: not in text" "False" "$(echo "$out" | json_field "'Lily' in d['text']")"
first=$(echo "$ref" | cut -d' ' -f3)
out=$("$baton" generate --model "$stories/hf" --prompt "Once upon a time" --temperature 0 \
      --max-tokens 60 --stop-ids "$first" --json)
check "--stop-ids: 3 tokens" "3" "$(echo "$out" | json_field "len(d['generated_ids'])")"
check "--stop-ids: reason" "$first" "$(echo "$out" | json_field "d['stop_reason']")"

# Seeds: the same seed gives the same tokens; sampling is not greedy.
a=$("$baton" generate --model "$stories/hf" --prompt "Once" --seed 7 --max-tokens 30 --json | json_field "d['generated_ids']")
b=$("$baton" generate --model "$stories/hf" --prompt "Once" --seed 7 --max-tokens 30 --json | json_field "d['generated_ids']")
c=$("$baton" generate --model "$stories/hf" --prompt "Once" --seed 8 --max-tokens 30 --json | json_field "d['generated_ids']")
check "same seed, same tokens" "$a" "$b"
if [ "$a" == "$c" ]; then echo "FAIL different seeds gave the same 30 tokens"; fail=1; else echo "ok   seeds differ"; fi

# Logprobs: N alternatives per token, the chosen one among them under greedy.
out=$("$baton" generate --model "$stories/hf" --prompt "Once" --temperature 0 --max-tokens 3 \
      --logprobs 2 --json)
check "logprobs: 3 x 2 alternatives" "[2, 2, 2]" \
  "$(echo "$out" | json_field "[len(x['top_logprobs']) for x in d['logprobs']]")"
check "greedy token is the top alternative" "True" \
  "$(echo "$out" | json_field "all(x['id'] == x['top_logprobs'][0]['id'] for x in d['logprobs'])")"

# --logits-out: the prompt's logits match llama2.c within 1e-4 (f32 KV, as llama2.c's).
"$baton" generate --model "$stories/stories260K.gguf" --prompt "Once upon a time" \
  --max-tokens 1 --kv-cache-dtype f32 --logits-out "$tmp/logits.json" --quiet >/dev/null
check "--logits-out vs llama2.c" "True" "$(python3 -c "
import json
a = json.load(open('$tmp/logits.json')); b = json.load(open('$stories/reference/ref_logits_once_upon_a_time.json'))
print(a['input_ids'] == b['input_ids'] and max(abs(x - y) for ra, rb in zip(a['logits'], b['logits']) for x, y in zip(ra, rb)) < 1e-4)")"

# Environment and YAML config.
check "env BATON_MODEL" "$ref" "$(BATON_MODEL="$stories/hf" BATON_KV_CACHE_DTYPE=f32 "$baton" generate \
  --prompt "Once upon a time" --temperature 0 --max-tokens 60 --stop-ids 1 --json \
  | json_field "' '.join(map(str, d['generated_ids']))")"
printf 'generate:\n  model: %s\n  max-tokens: 2\n' "$stories/hf" >"$tmp/baton.yaml"
check "yaml --config" "2" "$("$baton" --config "$tmp/baton.yaml" generate --prompt "Once" --json | json_field "len(d['generated_ids'])")"

# --kv-cache-dtype: bf16 is the default; the flag also comes from BATON_KV_CACHE_DTYPE and
# the YAML key kv-cache-dtype; the two caches give different logits (bf16 rounds K and V;
# how far apart is engine_stories_reference_test's); and a value other than bf16 or f32 is
# refused naming the flag and the choices.
logits_of() { "$baton" generate --model "$stories/stories260K.gguf" --prompt "Once upon a time" \
  --max-tokens 1 --logits-out "$1" --quiet >/dev/null; }
BATON_KV_CACHE_DTYPE=bf16 logits_of "$tmp/env_bf16.json"
BATON_KV_CACHE_DTYPE=f32 logits_of "$tmp/env_f32.json"
printf 'generate:\n  kv-cache-dtype: f32\n' >"$tmp/kv.yaml"
"$baton" --config "$tmp/kv.yaml" generate --model "$stories/stories260K.gguf" \
  --prompt "Once upon a time" --max-tokens 1 --logits-out "$tmp/yaml_f32.json" --quiet >/dev/null
same_logits() { python3 -c "import json; print(json.load(open('$1'))['logits'] == json.load(open('$2'))['logits'])"; }
check "BATON_KV_CACHE_DTYPE=f32 is --kv-cache-dtype f32" "True" "$(same_logits "$tmp/env_f32.json" "$tmp/logits.json")"
check "BATON_KV_CACHE_DTYPE=bf16 rounds K/V (other logits)" "False" "$(same_logits "$tmp/env_bf16.json" "$tmp/logits.json")"
logits_of "$tmp/default.json"
check "the default KV cache is bf16" "True" "$(same_logits "$tmp/default.json" "$tmp/env_bf16.json")"
check "yaml kv-cache-dtype: f32" "True" "$(same_logits "$tmp/yaml_f32.json" "$tmp/logits.json")"
err=$("$baton" generate --model "$stories/hf" --prompt "x" --kv-cache-dtype f16 2>&1); rc=$?
check "--kv-cache-dtype f16 fails" "True" "$([ "$rc" -ne 0 ] && echo True || echo False)"
contains "--kv-cache-dtype f16 names the flag" "--kv-cache-dtype" "$err"
contains "--kv-cache-dtype f16 names the choices" "{bf16,f32}" "$err"
contains "--help lists --kv-cache-dtype" "--kv-cache-dtype" "$("$baton" generate --help)"

# Errors name the problem and exit non-zero without a crash.
err=$("$baton" generate --model "$tmp/none" --prompt "x" 2>&1); rc=$?
check "missing model exits 1" "1" "$rc"
contains "missing model message" "$tmp/none" "$err"
err=$("$baton" generate --model "$stories/hf" --prompt "x" --top-p 1.5 2>&1); rc=$?
check "bad top_p exits 1" "1" "$rc"
contains "bad top_p names it" "top_p" "$err"
long=$(python3 -c "print('Once upon a time ' * 200)")
err=$("$baton" generate --model "$stories/hf" --prompt "$long" 2>&1); rc=$?
check "prompt past the context exits 1" "1" "$rc"
contains "context message" "maximum context length is 512" "$err"
contains "--help lists --logits-out" "--logits-out" "$("$baton" generate --help)"

# A synthetic model (baton synth-model): the HF and GGUF copies agree, and no id in the
# embedding's padding past the tokenizer (vocab 320, tokenizer 265; the GGUF's vocabulary
# lists the padding as unused [PADn] tokens) is ever drawn (docs/sampling.md).
"$baton" synth-model --shape tiny --dtype f32 --seed 3 --out "$tmp/tiny" --quiet
a=$("$baton" generate --model "$tmp/tiny" --prompt "hello" --seed 5 --ignore-eos --max-tokens 64 --json | json_field "d['generated_ids']")
b=$("$baton" generate --model "$tmp/tiny/model.gguf" --prompt "hello" --seed 5 --ignore-eos --max-tokens 64 --json | json_field "d['generated_ids']")
check "synthetic model: HF and GGUF sample the same ids" "$a" "$b"
check "synthetic model: 64 tokens, none past the tokenizer" "64 False" \
  "$(python3 -c "ids = $a; print(len(ids), any(i >= 265 for i in ids))")"

# The bundled model: writes its corpus and answers a chat.
tiny="$src/models/baton-tiny"
if [ -d "$tiny" ]; then
  for model in "$tiny" "$src/models/baton-tiny.gguf"; do
    out=$("$baton" generate --model "$model" --prompt "Once upon a time" --temperature 0 \
          --max-tokens 48 --json)
    # The corpus opens every story "Once upon a time, there was a <adjective> <animal>."
    check "bundled model writes its corpus ($(basename "$model"))" "True" \
      "$(echo "$out" | json_field "__import__('re').match(r', there was an? [a-z]+ [a-z]+\\. ', d['text']) is not None")"
    out=$("$baton" generate --model "$model" --chat --prompt "What is 2 plus 3?" \
          --temperature 0 --max-tokens 32 --json)
    check "bundled chat ends its turn ($(basename "$model"))" "stop" \
      "$(echo "$out" | json_field "d['finish_reason']")"
    contains "bundled chat answers ($(basename "$model"))" "5" "$(echo "$out" | json_field "d['text']")"
  done
fi

# --device cuda where it cannot run (no CUDA build or no GPU; and the CUDA forward is not
# built yet) exits 1 with a message that names the flag and the way out, before loading.
err=$("$baton" generate --model "$stories/hf" --prompt "x" --device cuda 2>&1 >/dev/null)
check "--device cuda: exit status" "1" "$("$baton" generate --model "$stories/hf" --prompt x \
  --device cuda >/dev/null 2>&1; echo $?)"
contains "--device cuda: names the flag" "--device cuda" "$err"
contains "--device cuda: says what to do" "run with --device cpu" "$err"
err=$(BATON_DEVICE=gpu "$baton" generate --model "$stories/hf" --prompt "x" 2>&1 >/dev/null)
contains "BATON_DEVICE=gpu: names the choices" "not in {cpu,cuda}" "$err"

# stories260K ships no chat template: --chat says to give one; with --chat-template, a
# template that writes the message as is gives the plain prompt's tokens (no BOS).
err=$("$baton" generate "$stories/hf" --chat --prompt "Once upon" 2>&1 >/dev/null)
contains "--chat without a template: says to give one" "--chat-template FILE" "$err"
printf '{%% for m in messages %%}{{ m.content }}{%% endfor %%}' > "$tmp/plain.jinja"
check "--chat-template FILE: the template's prompt" \
  "$("$baton" generate "$stories/hf" --prompt "Once upon" --no-special --max-tokens 1 --json |
     json_field "d['prompt_ids']")" \
  "$("$baton" generate "$stories/hf" --chat --chat-template "$tmp/plain.jinja" \
       --prompt "Once upon" --max-tokens 1 --json | json_field "d['prompt_ids']")"
printf '{%% for m in messages %%}' > "$tmp/broken.jinja"
err=$("$baton" generate "$stories/hf" --chat --chat-template "$tmp/broken.jinja" --prompt x 2>&1)
contains "--chat-template: a broken file is named" "$tmp/broken.jinja" "$err"
exit $fail
