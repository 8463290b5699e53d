#!/usr/bin/env bash
# Baton's CPU engine side by side with llama.cpp (and llama2.c on stories260K) on the same
# GGUF files, alternating in one window, printing one table of ratios (issue 27, section 3).
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/peers/run_engine_vs_llama_cpp.sh [options]

Per round and per file, runs llama.cpp's `llama-bench -m FILE -t T -p P -n 64 -r R -o json`
and Baton's `engine_bench --model FILE --threads T --prompt-tokens P --decode-tokens 64
--reps R`, the order flipping every round; on stories260K also llama2.c's run.c (on the file
converted by gguf_to_llama2c.py). Each side's figure for a round is its best repetition
(engine_bench reports the best; llama-bench's samples_ts gives each); the table shows the
median over rounds. A file Baton cannot load is reported as "unsupported" (another failure:
"failed"), and the script goes on.

options:
  --rounds N        rounds (default 3)
  --quick           smoke run: 1 round, the 135M files only, 1 repetition
  --threads T       threads for every engine (default 2)
  --reps R          repetitions inside each llama-bench / engine_bench call (default 3)
  --prompt P        prefill length (default 512; stories260K uses --tiny-prompt)
  --decode D        decode tokens (default 64)
  --tiny-prompt P   prefill length on stories260K, trained at 512 positions (default 128)
  --models-dir DIR  where make_peer_models.sh wrote the files
                    (default build/bench-models/peers)
  --only REGEX      only the files whose name matches (e.g. '135m|stories')
  --decode-at-start Baton's decode figure from a second engine_bench call with a 1-token
                    prompt, so that both sides decode positions 0-64 (llama-bench's tg starts
                    from an empty context; by default Baton decodes after the P-token prompt,
                    which adds attention over P positions to each of its steps)
  --baton-args ARGS more engine_bench arguments, split on spaces (e.g. "--quant-activations f32")
  --results DIR     raw outputs (default build/peers/results/<time>)
  --wait-idle S     before each call, wait up to S seconds for a second in which the other
                    processes keep the CPUs under 25% busy (default 0: do not wait); each
                    call's wait and the busy share seen are logged in calls.log
  -h, --help        this text

Environment: BATON_BIN (engine_bench's directory, default build/release/bin), LLAMA_CPP_BIN
(default build/peers/llama.cpp/bin), LLAMA2C_RUN (default build/peers/llama2.c/run),
STORIES_GGUF (default ../shared/testdata/models/stories260K/stories260K.gguf).
Paths are relative to the repository root.
USAGE
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$repo/bench/peers
rounds=3 threads=2 reps=3 prompt=512 decode=64 tiny_prompt=128 quick=0 only="" wait_idle=0
decode_at_start=0
models=$repo/build/bench-models/peers
results=""
baton_args=""
while [[ $# -gt 0 ]]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --rounds) rounds=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --decode-at-start) decode_at_start=1; shift ;;
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --decode) decode=$2; shift 2 ;;
    --tiny-prompt) tiny_prompt=$2; shift 2 ;;
    --models-dir) models=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    --wait-idle) wait_idle=$2; shift 2 ;;
    --baton-args) baton_args=$2; shift 2 ;;
    *) echo "run_engine_vs_llama_cpp: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
if [[ $quick == 1 ]]; then rounds=1 reps=1; fi

engine_bench=${BATON_BIN:-$repo/build/release/bin}/engine_bench
llama_bench=${LLAMA_CPP_BIN:-$repo/build/peers/llama.cpp/bin}/llama-bench
l2c_run=${LLAMA2C_RUN:-$repo/build/peers/llama2.c/run}
stories=${STORIES_GGUF:-$repo/../shared/testdata/models/stories260K/stories260K.gguf}
results=${results:-$repo/build/peers/results/$(date -u +%Y%m%dT%H%M%SZ)}
for tool in "$engine_bench" "$llama_bench"; do
  [[ -x $tool ]] || { echo "run_engine_vs_llama_cpp: no $tool (see bench/peers/README.md)" >&2; exit 1; }
done
mkdir -p "$results"
raw=$results/raw.tsv   # round, file, phase, side, tok/s (or unsupported/failed/missing)
: > "$raw"

files=()
shapes="smollm2-135m llama3.2-1b"
[[ $quick == 1 ]] && shapes="smollm2-135m"
for shape in $shapes; do
  for type in bf16 Q8_0 Q4_K_M; do files+=("$models/$shape-$type.gguf"); done
done
[[ $quick == 1 ]] || files+=("$stories")
if [[ -n $only ]]; then
  kept=()
  for f in "${files[@]}"; do [[ $(basename "$f") =~ $only ]] && kept+=("$f"); done
  files=("${kept[@]}")
fi

# llama2.c's checkpoint of stories260K, converted once.
l2c_model=$repo/build/peers/stories260K/stories260K.bin
l2c_tok=$repo/build/peers/stories260K/tok512.bin
use_l2c=0
if [[ $quick == 0 && -x $l2c_run && " ${files[*]} " == *" $stories "* ]]; then
  if [[ ! -s $l2c_model || ! -s $l2c_tok ]]; then
    mkdir -p "$(dirname "$l2c_model")"
    python3 "$here/gguf_to_llama2c.py" "$stories" "$l2c_model" "$l2c_tok" >&2
  fi
  use_l2c=1
elif [[ $quick == 0 ]]; then
  echo "run_engine_vs_llama_cpp: no llama2.c run at $l2c_run; skipping that peer" >&2
fi

name_of() { basename "$1" .gguf; }
built() { date -u -r "$1" +%FT%TZ; }  # a binary's modification time

busy_share() {  # share of all CPUs busy over the next second (/proc/stat), as a percentage
  local a b
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  awk -v u1="${a[1]}" -v n1="${a[2]}" -v s1="${a[3]}" -v i1="${a[4]}" -v w1="${a[5]}" \
      -v u2="${b[1]}" -v n2="${b[2]}" -v s2="${b[3]}" -v i2="${b[4]}" -v w2="${b[5]}" 'BEGIN {
    busy = (u2 - u1) + (n2 - n1) + (s2 - s1); idle = (i2 - i1) + (w2 - w1)
    printf "%.0f", (busy + idle > 0) ? 100 * busy / (busy + idle) : 0 }'
}

settle() {  # what: wait (up to --wait-idle seconds) for a quiet machine, and log the call
  local what=$1 waited=0 busy
  busy=$(busy_share)
  while (( wait_idle > 0 && busy > 25 && waited < wait_idle )); do
    waited=$((waited + 1)); busy=$(busy_share)
  done
  echo "$(date -u +%T) $what: others ${busy}% busy after ${waited}s wait; load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$results/calls.log"
}
prompt_for() { [[ $1 == "$stories" ]] && echo "$tiny_prompt" || echo "$prompt"; }

run_llama() {  # round file
  local r=$1 f=$2 n p log
  n=$(name_of "$f"); p=$(prompt_for "$f"); log=$results/llama-$n-r$r.json
  settle "round $r llama.cpp $n"
  if "$llama_bench" -m "$f" -t "$threads" -p "$p" -n "$decode" -r "$reps" -o json \
      > "$log" 2> "$log.err"; then
    python3 - "$log" "$r" "$n" "$p" "$decode" >> "$raw" <<'PY'
import json, sys
log, r, n, p, d = sys.argv[1:]
for t in json.load(open(log)):
    best = max(t["samples_ts"])
    if t["n_prompt"] > 0 and t["n_gen"] == 0:
        print(f"{r}\t{n}\tprefill pp{p}\tllama.cpp\t{best:.1f}")
    elif t["n_gen"] > 0 and t["n_prompt"] == 0:
        print(f"{r}\t{n}\tdecode tg{d}\tllama.cpp\t{best:.1f}")
PY
  else
    printf '%s\t%s\tprefill pp%s\tllama.cpp\tfailed\n%s\t%s\tdecode tg%s\tllama.cpp\tfailed\n' \
      "$r" "$n" "$p" "$r" "$n" "$decode" >> "$raw"
  fi
}

baton_rows() {  # round name log phases: the rows of engine_bench's log for "decode", "prefill" or both
  # The row under the header "model dtype 2MiB decode tok/s GB/s % bound [..] % peak prompt
  # prefill t/s ...": decode tok/s is field 4, prompt 9, prefill t/s 10.
  awk -v r="$1" -v n="$2" -v d="$decode" -v want="$4" '
    hdr && NF >= 10 {
      if (want ~ /decode/) printf "%s\t%s\tdecode tg%s\tBaton\t%s\n", r, n, d, $4
      if (want ~ /prefill/) printf "%s\t%s\tprefill pp%s\tBaton\t%s\n", r, n, $9, $10
      exit }
    /^model +dtype/ { hdr = 1 }' "$3" >> "$raw"
}

run_baton() {  # round file
  local r=$1 f=$2 n p log what
  n=$(name_of "$f"); p=$(prompt_for "$f"); log=$results/baton-$n-r$r.txt
  settle "round $r Baton $n (engine_bench $(built "$engine_bench"))"
  if "$engine_bench" --model "$f" --threads "$threads" --prompt-tokens "$p" \
      --decode-tokens "$decode" --reps "$reps" $baton_args > "$log" 2>&1; then
    if [[ $decode_at_start == 1 ]]; then
      baton_rows "$r" "$n" "$log" prefill
      log=$results/baton-$n-r$r-decode-at-start.txt
      settle "round $r Baton $n decode at start"
      if "$engine_bench" --model "$f" --threads "$threads" --prompt-tokens 1 \
          --decode-tokens "$decode" --reps "$reps" $baton_args > "$log" 2>&1; then
        baton_rows "$r" "$n" "$log" decode
      else
        printf '%s\t%s\tdecode tg%s\tBaton\tfailed\n' "$r" "$n" "$decode" >> "$raw"
      fi
    else
      baton_rows "$r" "$n" "$log" decode,prefill
    fi
    isa=$(sed -n 's/^engine_bench: [0-9]* threads, \([^ ]*\) kernels.*/\1/p' "$log" | head -1)
    [[ -n $isa ]] && echo "$isa" > "$results/baton-isa"
  else
    what=failed
    grep -qiE 'not supported|unsupported' "$log" && what=unsupported
    printf '%s\t%s\tprefill pp%s\tBaton\t%s\n%s\t%s\tdecode tg%s\tBaton\t%s\n' \
      "$r" "$n" "$p" "$what" "$r" "$n" "$decode" "$what" >> "$raw"
  fi
}

run_l2c() {  # round: llama2.c at $threads and at 1 OpenMP thread, best of 5 runs each
  local r=$1 t i best out
  settle "round $r llama2.c"
  for t in $(printf '%s\n' "$threads" 1 | sort -u -n -r); do
    best=0
    for i in 1 2 3 4 5; do
      out=$(OMP_NUM_THREADS=$t "$l2c_run" "$l2c_model" -z "$l2c_tok" -t 0 -n 256 -s 1 2>&1 >/dev/null |
            sed -n 's/^achieved tok\/s: //p')
      echo "round $r OMP $t run $i: ${out:-none}" >> "$results/llama2c.txt"
      [[ -n $out ]] && best=$(awk -v a="$best" -v b="$out" 'BEGIN { print (b > a) ? b : a }')
    done
    printf '%s\tstories260K\tdecode (llama2.c OMP %s)\tllama2.c\t%s\n' "$r" "$t" "$best" >> "$raw"
  done
}

echo "results: $results" >&2
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
eb_start=$(built "$engine_bench")
start=$(date -u +%FT%TZ)
for ((r = 1; r <= rounds; r++)); do
  for f in "${files[@]}"; do
    n=$(name_of "$f")
    if [[ ! -s $f ]]; then
      printf '%s\t%s\t-\t-\tmissing\n' "$r" "$n" >> "$raw"
      echo "round $r: $n missing (run make_peer_models.sh)" >&2
      continue
    fi
    echo "round $r/$rounds: $n" >&2
    if (( r % 2 == 1 )); then run_llama "$r" "$f"; run_baton "$r" "$f"
    else run_baton "$r" "$f"; run_llama "$r" "$f"; fi
    if [[ $f == "$stories" && $use_l2c == 1 ]]; then run_l2c "$r"; fi
  done
done
end=$(date -u +%FT%TZ)
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
eb_end=$(built "$engine_bench")

cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: //')
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512(f|bw|vl|_bf16|_vnni|_fp16)|avx_vnni|amx_(tile|bf16|int8))$' | tr '\n' ' ')
{
  echo "CPU: $cpu, $(nproc) cpus; flags: ${flags% }"
  echo "Baton ISA path: $(cat "$results/baton-isa" 2>/dev/null || echo unknown); engine_bench: $engine_bench, built $eb_start"
  [[ $eb_start == "$eb_end" ]] ||
    echo "WARNING: engine_bench was rebuilt during the run (now $eb_end); calls.log says which call ran which"
  echo "llama.cpp: $(cat "$(dirname "$llama_bench")/../PEER_VERSION" 2>/dev/null || echo unknown)"
  [[ $use_l2c == 1 ]] && echo "llama2.c: $(cat "$l2c_run.PEER_VERSION" 2>/dev/null || echo unknown)"
  echo "threads $threads, $rounds round(s), $reps repetition(s) per call; $start to $end; load average $load_start -> $load_end"
  if [[ $decode_at_start == 1 ]]; then
    echo "decode: both sides from the start of the context (Baton after a 1-token prompt)"
  else
    echo "decode: Baton after its prefill prompt, llama-bench's tg from an empty context"
  fi
  echo
  python3 "$here/peer_table.py" "$raw"
} | tee "$results/table.md"
