#!/usr/bin/env bash
# End-to-end checks of `baton tokenize` as a user runs it: flags, environment, YAML
# config, --decode, --chat, --help and errors. Exits 77 (ctest: skipped) without testdata.
# usage: tokenize_cli_test.sh BATON_BINARY TESTDATA_DIR
set -uo pipefail
baton=$1
data=$2
llama3="$data/tokenizers/hf/llama3/tokenizer.json"
stories="$data/models/stories260K/hf"
if [ ! -f "$llama3" ] || [ ! -d "$stories" ]; then
  echo "SKIP: testdata absent at $data"
  exit 77
fi
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Llama 3 ids for "Hello world", from the upstream tokenizer: 9906 1917. This early
# Llama 3 tokenizer.json has a ByteLevel post-processor, so upstream adds no BOS either;
# BOS insertion is checked on stories260K below.
check "encode" "9906 1917" "$(printf 'Hello world' | "$baton" tokenize --tokenizer "$llama3")"
check "--no-special" "9906 1917" \
  "$(printf 'Hello world' | "$baton" tokenize --tokenizer "$llama3" --no-special)"
check "--decode" "Hello world" \
  "$(echo '128000 9906 1917' | "$baton" tokenize --tokenizer "$llama3" --decode)"
check "special parsed" "128009" \
  "$(printf '<|eot_id|>' | "$baton" tokenize --tokenizer "$llama3")"
plain=$(printf '<|eot_id|>' | "$baton" tokenize --tokenizer "$llama3" --no-parse-special --no-special)
case " $plain " in *" 128009 "*) echo "FAIL --no-parse-special matched the special token"; fail=1;; *) echo "ok   --no-parse-special";; esac
check "--no-parse-special round-trips as text" "<|eot_id|>" \
  "$(echo "$plain" | "$baton" tokenize --tokenizer "$llama3" --decode)"
check "env BATON_TOKENIZER" "9906 1917" \
  "$(printf 'Hello world' | BATON_TOKENIZER="$llama3" "$baton" tokenize)"
printf 'tokenize:\n  tokenizer: %s\n  no-special: true\n' "$llama3" >"$tmp/baton.yaml"
check "yaml --config" "9906 1917" \
  "$(printf 'Hello world' | "$baton" --config "$tmp/baton.yaml" tokenize)"
# The flag overrides the file's tokenizer; the file's no-special still applies.
check "flag beats yaml" "403 407 261 378" \
  "$(printf 'Once upon a time' | "$baton" --config "$tmp/baton.yaml" tokenize --tokenizer "$stories")"
check "model dir (stories260K, BOS from tokenizer_config)" "1 403 407 261 378" \
  "$(printf 'Once upon a time' | "$baton" tokenize --tokenizer "$stories")"

# --chat: a Llama 3 conversation renders with the header tokens and ends open for the assistant.
chat=$(printf '[{"role":"user","content":"Hi"}]' | "$baton" tokenize --tokenizer "$(dirname "$llama3")" --chat)
check "--chat starts with BOS once" "128000 128006" "$(echo "$chat" | cut -d' ' -f1-2)"
check "--chat ends with an open assistant header" "128007 271" "$(echo "$chat" | awk '{print $(NF-1), $NF}')"

"$baton" tokenize --help >"$tmp/help" 2>&1
check "--help exits 0" "0" "$?"
grep -q -- "--tokenizer" "$tmp/help"
check "--help documents --tokenizer" "0" "$?"

err=$(printf 'x' | "$baton" tokenize --tokenizer /nonexistent.json 2>&1)
check "missing file exits 1" "1" "$(printf 'x' | "$baton" tokenize --tokenizer /nonexistent.json >/dev/null 2>&1; echo $?)"
case "$err" in *"does not exist"*) echo "ok   missing file message";; *) echo "FAIL message: $err"; fail=1;; esac
err=$(echo '12 abc' | "$baton" tokenize --tokenizer "$llama3" --decode 2>&1)
case "$err" in *"'abc' is not an integer"*) echo "ok   bad id message";; *) echo "FAIL bad id: $err"; fail=1;; esac
err=$(echo '999999999' | "$baton" tokenize --tokenizer "$llama3" --decode 2>&1)
case "$err" in *"outside the vocabulary"*) echo "ok   id out of range";; *) echo "FAIL range: $err"; fail=1;; esac
err=$(echo 'not json' | "$baton" tokenize --tokenizer "$llama3" --chat 2>&1)
case "$err" in *"JSON list of messages"*) echo "ok   --chat bad input";; *) echo "FAIL chat: $err"; fail=1;; esac
head -c 2000 /dev/zero | tr '\0' 'a' >"$tmp/big"
err=$("$baton" tokenize --tokenizer "$llama3" --max-input-bytes 1000 <"$tmp/big" 2>&1)
case "$err" in *"max_input_bytes"*"1000"*) echo "ok   input bound";; *) echo "FAIL bound: $err"; fail=1;; esac
exit $fail
