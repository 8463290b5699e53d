#!/usr/bin/env bash
# The main job: build, start `baton serve` with Baton's own bundled model on the CPU (the
# OpenAI-compatible HTTP API and the baton.v1 gRPC API, one colocated worker), and stream
# a chat completion from it with curl, as any OpenAI client would. The server stops at the
# end; run `build/release/bin/baton serve` yourself to keep it up.
# BATON_MODEL picks another model (a .gguf file or a Hugging Face directory).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "${BATON_JOBS:-$(nproc)}" --target baton

baton=build/release/bin/baton
model="${BATON_MODEL:-models/baton-tiny}"
log="$(mktemp)"
"$baton" serve --model "$model" --port 0 --grpc-port 0 --kv-cache-memory 256MiB >"$log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 1 600); do
  grep -q "serving" "$log" && break
  kill -0 $server 2>/dev/null || { echo "baton serve exited"; exit 1; }
  sleep 0.1
done
banner="$(head -n 1 "$log")"
echo "== $banner"
url="$(echo "$banner" | sed -n 's#.*\(http://[^ ]*\).*#\1#p')"

echo "== GET $url/v1/models"
curl -s "$url/v1/models"
echo
request='{"messages":[{"role":"user","content":"Tell me a story about a dog named Max."}],
          "max_tokens":160,"temperature":0.7,"seed":1,"stream":true,
          "stream_options":{"include_usage":true}}'
echo "== POST $url/v1/chat/completions (stream); the first server-sent events:"
events="$(curl -sN "$url/v1/chat/completions" -H "Content-Type: application/json" -d "$request")"
printf "%s\n" "$events" | sed -n 1,6p
echo "$events" | node -e '
  let buf = "", text = "", usage = null;
  process.stdin.on("data", (d) => (buf += d));
  process.stdin.on("end", () => {
    for (const line of buf.split("\n")) {
      if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
      const chunk = JSON.parse(line.slice(6));
      for (const c of chunk.choices) text += c.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    console.log("== the streamed reply, joined:\n" + text);
    console.log("== usage: " + JSON.stringify(usage));
  });'
