#!/usr/bin/env bash
# Rebuilds Baton's default model, models/baton-tiny/ and models/baton-tiny.gguf, from
# nothing: grammar corpus -> byte-level BPE -> training -> export -> checks and model card.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

python="${PYTHON:-/usr/bin/python3}"
work="$root/build/default_model"
out="$root/models"
seed=1234
bpe_seed=1
bpe_docs=20000
vocab=1280
steps=1400
threads=1
stage=all

usage() {
  cat <<EOF
usage: scripts/default_model/make.sh [options]

Trains Baton's default model (baton-tiny, a ~1.3M-parameter Llama) from a corpus the
project generates itself, and writes:
  models/baton-tiny/{config.json,generation_config.json,model.safetensors,
                     tokenizer.json,tokenizer_config.json,README.md}
  models/baton-tiny.gguf
Needs python3 with torch and numpy (Debian 12: apt install python3-torch). Everything is
seeded; about 25 minutes on two busy cores. Intermediate files go to build/default_model/.

options:
  --python PATH    python with torch (default: \$PYTHON or /usr/bin/python3)
  --work DIR       scratch directory (default: build/default_model)
  --out DIR        where models/ is (default: <repo>/models)
  --steps N        training steps (default: $steps)
  --threads N      torch CPU threads (default: $threads; the stored model used 1)
  --from STAGE     start at a stage, reusing the scratch files of the earlier ones:
                   corpus, bpe, train, export, check (default: corpus)
  -h, --help       this text
EOF
}

while (($#)); do
  case "$1" in
    --python) python="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --from) stage="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "make.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

stages=(corpus bpe train export check)
run_from=0
if [[ "$stage" != all ]]; then
  run_from=-1
  for i in "${!stages[@]}"; do [[ "${stages[$i]}" == "$stage" ]] && run_from=$i; done
  if ((run_from < 0)); then echo "make.sh: unknown stage '$stage'" >&2; exit 2; fi
fi
want() {
  local i
  for i in "${!stages[@]}"; do [[ "${stages[$i]}" == "$1" ]] && ((i >= run_from)) && return 0; done
  return 1
}

"$python" -c 'import torch, numpy' 2>/dev/null || {
  echo "make.sh: $python cannot import torch and numpy (Debian: apt install python3-torch)" >&2
  exit 1
}
mkdir -p "$work" "$out/baton-tiny"
export PYTHONHASHSEED=0
start=$(date +%s)

if want corpus; then
  echo "== corpus: $bpe_docs documents (seed $bpe_seed) for the tokenizer"
  "$python" "$here/corpus.py" --seed "$bpe_seed" --docs "$bpe_docs" --out "$work/bpe_corpus.txt"
fi
if want bpe; then
  echo "== bpe: vocabulary of $vocab"
  "$python" "$here/bpe.py" --corpus "$work/bpe_corpus.txt" --vocab-size "$vocab" \
    --out "$work/tokenizer"
fi
if want train; then
  echo "== train: $steps steps (seed $seed, $threads thread(s)); the corpus is generated on the fly"
  "$python" "$here/train.py" --tokenizer "$work/tokenizer" --out "$work/baton-tiny.pt" \
    --seed "$seed" --steps "$steps" --threads "$threads"
fi
if want export; then
  echo "== export"
  "$python" "$here/export.py" --checkpoint "$work/baton-tiny.pt" --tokenizer "$work/tokenizer" \
    --out-dir "$out/baton-tiny" --gguf "$out/baton-tiny.gguf"
fi
if want check; then
  echo "== check: reference forward, GGUF round trip, greedy samples; model card"
  "$python" "$here/sample.py" --model-dir "$out/baton-tiny" --gguf "$out/baton-tiny.gguf" \
    --checkpoint "$work/baton-tiny.pt" --bpe-docs "$bpe_docs" --card --threads "$threads"
fi
echo "== done in $(( ($(date +%s) - start) / 60 )) min:"
ls -l "$out/baton-tiny" "$out/baton-tiny.gguf"
