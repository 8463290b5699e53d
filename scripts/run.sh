#!/usr/bin/env bash
# The main job: build, then generate text with Baton's own bundled model on the CPU —
# a story streamed token by token, then a one-turn chat through its chat template.
# BATON_MODEL picks another model (a .gguf file or a Hugging Face directory).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "${BATON_JOBS:-$(nproc)}" --target baton

baton=build/release/bin/baton
model="${BATON_MODEL:-models/baton-tiny}"
echo "== model: $model"
echo "== prompt: Once upon a time"
"$baton" generate --model "$model" --prompt "Once upon a time" --temperature 0 --max-tokens 96
echo "== chat: Tell me a story about a dog named Max."
"$baton" generate --model "$model" --chat --prompt "Tell me a story about a dog named Max." \
  --temperature 0.7 --seed 1 --max-tokens 160
