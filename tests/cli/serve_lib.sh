# Helpers of the `baton serve` CLI tests (sourced): start a server, ask a completion.
# Needs $baton, $src and $out set by the test.

start() {  # name, extra flags...: `launch` with the source tree's bundled model
  local name=$1
  shift
  launch "$name" --model "$src/models/baton-tiny" "$@"
}

launch() {  # name, flags...; the port goes to $out/NAME.port
  local name=$1
  shift
  "$baton" serve --port 0 --grpc-port -1 --threads 1 --kv-cache-memory 16MiB "$@" \
    >"$out/$name.out" 2>"$out/$name.err" &
  echo $! >"$out/$name.pid"
  for _ in $(seq 1 300); do
    grep -q "serving" "$out/$name.out" 2>/dev/null && break
    sleep 0.1
  done
  sed -n 's/.* on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/$name.out" | head -1 >"$out/$name.port"
}

complete() {  # port
  curl -sf "http://127.0.0.1:$1/v1/completions" -H 'content-type: application/json' \
    -d '{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0.7, "seed": 11}' |
    python3 -c 'import json,sys; c=json.load(sys.stdin)["choices"][0]; print(c["text"]); print(c["finish_reason"])'
}
