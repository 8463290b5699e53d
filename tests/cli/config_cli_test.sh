#!/usr/bin/env bash
# The configuration layer of every binary (common/cli_setup.h): for one flag of each
# program, the command line beats the environment, which beats the YAML file of --config;
# BATON_CONFIG names the file; an unknown key (a typo) is an error naming the key, its
# section and the file; --version prints the CMake project version; --help shows the
# default that --print-config reports when nothing is set. Values are read back with
# --print-config and parsed with a real YAML parser.
# The ConfigMap of deploy/kubernetes is read by the binaries that use it.
# usage: config_cli_test.sh VERSION BATON BATON_ROUTER BATON_PREFILL BATON_DECODE SOURCE_DIR
set -uo pipefail
version=$1
baton=$2
router=$3
prefill=$4
decode=$5
src=$6
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# yaml_get SECTION KEY: the value at SECTION (dot-separated, may be empty) / KEY of stdin.
yaml_get() {
  python3 -c "
import sys, yaml
d = yaml.safe_load(sys.stdin) or {}
for s in [p for p in '$1'.split('.') if p]:
    d = d.get(s, {})
print(d.get('$2', '<unset>'))"
}
# yaml_file SECTION KEY VALUE: a config file setting KEY under SECTION.
yaml_file() {
  python3 -c "
import sys, yaml
d = {'$2': '$3'}
for s in reversed([p for p in '$1'.split('.') if p]):
    d = {s: d}
print(yaml.safe_dump(d))"
}

# program NAME SECTION FLAG ENV FILE_VALUE ENV_VALUE CLI_VALUE -- COMMAND...
# COMMAND runs the program (its subcommands included); SECTION is where its flags live
# in the file.
program() {
  local name=$1 section=$2 flag=$3 env=$4 a=$5 b=$6 c=$7
  shift 8
  local cmd=("$@")
  local file="$tmp/$name.yaml"
  yaml_file "$section" "$flag" "$a" > "$file"
  local got
  got=$(env -u "$env" "${cmd[@]}" --config "$file" --print-config | yaml_get "$section" "$flag")
  check "$name: file sets --$flag" "$a" "$got"
  got=$(env "$env=$b" "${cmd[@]}" --config "$file" --print-config | yaml_get "$section" "$flag")
  check "$name: $env beats the file" "$b" "$got"
  got=$(env "$env=$b" "${cmd[@]}" --config "$file" "--$flag" "$c" --print-config |
        yaml_get "$section" "$flag")
  check "$name: the command line beats $env" "$c" "$got"
  got=$(env -u "$env" BATON_CONFIG="$file" "${cmd[@]}" --print-config | yaml_get "$section" "$flag")
  check "$name: BATON_CONFIG names the file" "$a" "$got"
  # A typo: rejected, naming the key, the section and the file.
  yaml_file "$section" "${flag}x" "$a" > "$tmp/typo.yaml"
  local err rc
  err=$("${cmd[@]}" --config "$tmp/typo.yaml" --print-config 2>&1 >/dev/null)
  rc=$?
  check "$name: an unknown key fails" 1 "$([ $rc -ne 0 ] && echo 1 || echo 0)"
  contains "$name: the error names the key" "'${flag}x'" "$err"
  contains "$name: the error names the file" "$tmp/typo.yaml" "$err"
  [ -n "$section" ] && contains "$name: the error names the section" "'$section'" "$err"
  # --help shows the default that applies when nothing is set.
  local default help
  default=$(env -u "$env" -u BATON_CONFIG "${cmd[@]}" --print-config | yaml_get "$section" "$flag")
  help=$("${cmd[@]}" --help)
  contains "$name: --help shows --$flag's default" "=$default " "$(grep -- "--$flag " <<<"$help")"
}

program generate generate top-k BATON_TOP_K 5 6 7 -- "$baton" generate
program tokenize tokenize max-input-bytes BATON_MAX_INPUT_BYTES 1000 2000 3000 -- "$baton" tokenize
program synth-model synth-model seed BATON_SEED 5 6 7 -- "$baton" synth-model
program worker worker max-waiting BATON_MAX_WAITING 10 20 30 -- "$baton" worker
program serve serve max-waiting BATON_MAX_WAITING 10 20 30 -- "$baton" serve
program bench-serve bench.serve num-prompts BATON_NUM_PROMPTS 10 20 30 -- "$baton" bench serve
program baton-router "" max-n BATON_MAX_N 3 4 5 -- "$router"
program baton-prefill "" max-waiting BATON_MAX_WAITING 10 20 30 -- "$prefill"
program baton-decode "" max-waiting BATON_MAX_WAITING 10 20 30 -- "$decode"

# Common flags reach every binary, from the file's top level too.
for bin in "$baton" "$router" "$prefill" "$decode"; do
  name=$(basename "$bin")
  check "$name --version" "$name $version" "$("$bin" --version)"
done
printf 'log-level: debug\nserve:\n  max-waiting: 11\n' > "$tmp/top.yaml"
got=$(BATON_LOG_LEVEL=warn "$baton" serve --config "$tmp/top.yaml" --print-config | yaml_get "" log-level)
check "BATON_LOG_LEVEL beats the file's top-level log-level" warn "$got"
got=$("$baton" serve --config "$tmp/top.yaml" --print-config | yaml_get serve max-waiting)
check "baton serve --config FILE (after the subcommand)" 11 "$got"
got=$("$baton" serve "$tmp/model-dir" --print-config | yaml_get serve model)
check "baton serve MODEL (positional)" "$tmp/model-dir" "$got"
got=$("$router" --max-num-seqs 3 --print-config 2>&1)
contains "vLLM aliases only where the flag exists: the router has no --max-num-seqs" \
  "max-num-seqs" "$got"
got=$("$decode" m --max-num-seqs 3 --max-num-batched-tokens 77 --print-config)
check "--max-num-seqs is --max-running" 3 "$(yaml_get "" max-running <<<"$got")"
check "--max-num-batched-tokens is --max-batched-tokens" 77 \
  "$(yaml_get "" max-batched-tokens <<<"$got")"
err=$(BATON_CONFIG="$tmp/absent.yaml" "$router" --print-config 2>&1)
contains "BATON_CONFIG naming no file is an error" "BATON_CONFIG names '$tmp/absent.yaml'" "$err"

# deploy/kubernetes's ConfigMap: each file is accepted by the binaries that read it.
configmap="$src/deploy/kubernetes/base/config.yaml"
for key in router.yaml worker.yaml colocated.yaml; do
  python3 -c "
import sys, yaml
print(yaml.safe_load(open('$configmap'))['data']['$key'])" > "$tmp/$key"
done
for run in "$router --config $tmp/router.yaml" "$prefill --config $tmp/worker.yaml" \
           "$decode --config $tmp/worker.yaml" "$baton worker --config $tmp/colocated.yaml"; do
  got=$(env -u BATON_MODEL $run --print-config 2>&1)
  contains "ConfigMap: $run" "model: /usr/local/share/baton/models/baton-tiny" "$got"
done
exit $fail
