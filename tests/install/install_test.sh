#!/usr/bin/env bash
# The installed tree is relocatable: `cmake --install BUILD --prefix T/a --strip`, moved to
# T/b, runs from there with nothing of the build or source tree. Checks, in order:
#   - the layout (binaries in bin/, the bundled model under share/baton/models/);
#   - every installed ELF: no RPATH/RUNPATH naming the build or source tree, every shared
#     library it needs resolves (ldd), none of them from either tree;
#   - `T/b/bin/baton serve --help` names T/b's model as the default;
#   - `T/b/bin/baton serve` with no --model (and BATON_MODEL unset) loads T/b's model and
#     answers a completion with tokens, the same text as the build tree's `baton serve
#     --model SOURCE/models/baton-tiny` (the oracle) for the same seeded request;
#   - SIGINT stops it with exit status 0.
# usage: install_test.sh CMAKE BUILD_DIR SOURCE_DIR
set -euo pipefail
cmake=$1
build=$(cd "$2" && pwd)
src=$(cd "$3" && pwd)
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
out=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset BATON_MODEL BATON_CONFIG

if ! "$cmake" --install "$build" --prefix "$out/a" --strip >"$out/install.log" 2>&1; then
  cat "$out/install.log"
  fail "cmake --install failed; build the target baton-installed first"
fi
mv "$out/a" "$out/b"
b="$out/b"
model="$b/share/baton/models/baton-tiny"
for f in bin/baton bin/baton-router bin/baton-prefill bin/baton-decode \
  share/baton/models/baton-tiny/config.json share/baton/models/baton-tiny/model.safetensors \
  share/baton/models/baton-tiny/tokenizer.json share/baton/models/baton-tiny.gguf \
  share/doc/baton/README.md; do
  [ -e "$b/$f" ] || fail "$f is not in the installed tree: $(cd "$b" && find . -maxdepth 3)"
done

for elf in "$b"/bin/*; do
  rpath=$(readelf -d "$elf" | sed -n 's/.*(R\(UN\)\?PATH).*\[\(.*\)\]/\2/p')
  case "$rpath" in *"$build"* | *"$src"*) fail "$elf has RUNPATH $rpath into the build tree" ;; esac
  libs=$(ldd "$elf")
  if grep -q "not found" <<<"$libs"; then fail "$elf needs a library that is not found: $libs"; fi
  case "$libs" in *"$build"* | *"$src"*) fail "$elf loads from the build tree: $libs" ;; esac
done

cd "$out"  # nothing relative to the source tree
"$b/bin/baton" serve --help >"$out/help.txt"
grep -qF "$model)" "$out/help.txt" || fail "--help does not name $model: $(grep -- --model "$out/help.txt")"

# shellcheck source=../cli/serve_lib.sh
source "$src/tests/cli/serve_lib.sh"
baton="$b/bin/baton" launch installed
baton="$build/bin/baton" start reference
port=$(cat "$out/installed.port")
[ -n "$port" ] || { cat "$out/installed.err"; fail "the installed baton serve did not start"; }
# The log line ends with the path (after the logger's time and level).
awk -v want="baton serve: loading $model" \
  'substr($0, length($0) - length(want) + 1) == want { found = 1 } END { exit !found }' \
  "$out/installed.err" ||
  fail "the installed baton serve did not load $model: $(cat "$out/installed.err")"
[ -n "$(cat "$out/reference.port")" ] || { cat "$out/reference.err"; fail "the reference did not start"; }

request='{"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.7, "seed": 5}'
for name in installed reference; do
  curl -sf "http://127.0.0.1:$(cat "$out/$name.port")/v1/completions" \
    -H 'content-type: application/json' -d "$request" >"$out/$name.json" ||
    fail "the $name server's completion failed"
done
python3 - "$out/installed.json" "$out/reference.json" <<'PY' || exit 1
import json, sys
got, want = (json.load(open(p)) for p in sys.argv[1:])
c = got["choices"][0]
problems = []
if got.get("object") != "text_completion": problems.append(f"object {got.get('object')!r}")
if not c["text"]: problems.append("empty text")
if c["finish_reason"] not in ("length", "stop"): problems.append(f"finish_reason {c['finish_reason']!r}")
if not 0 < got["usage"]["completion_tokens"] <= 16: problems.append(f"usage {got['usage']}")
if c["text"] != want["choices"][0]["text"]:
    problems.append(f"text {c['text']!r} differs from the build tree's {want['choices'][0]['text']!r}")
if problems:
    print("FAIL: the installed server's completion:", "; ".join(problems), json.dumps(got))
    sys.exit(1)
print(f"installed tree answered {got['usage']['completion_tokens']} tokens: {c['text']!r}")
PY

for name in installed reference; do
  kill -INT "$(cat "$out/$name.pid")"
  wait "$(cat "$out/$name.pid")" || fail "the $name baton serve did not stop cleanly on SIGINT"
done
echo "PASS: installed, moved to $b, served $model"
