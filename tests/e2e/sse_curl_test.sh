#!/usr/bin/env bash
# Server-sent events as curl sees them: `curl -sN` a streaming chat completion and a
# streaming completion from `baton serve`, then check the wire format: text/event-stream,
# chunked, every event one `data: ` line followed by a blank line, each JSON, and the
# stream ends with `data: [DONE]`.
# Usage: sse_curl_test.sh <baton binary> [source dir]. Exit 77 (skip) without curl or node.
set -euo pipefail
baton="${1:?usage: sse_curl_test.sh <baton binary> [source dir]}"
src="${2:-$(cd "$(dirname "$0")/../.." && pwd)}"
for tool in curl node; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "sse_curl_test: SKIP: $tool is not installed"
    exit 77
  fi
done

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "sse_curl_test: FAIL: $*" >&2
  echo "--- server output (tail) ---" >&2
  tail -20 "$work/server.out" "$work/server.err" >&2 || true
  exit 1
}

(cd "$src" && exec "$baton" serve --host 127.0.0.1 --port 0 --grpc-port 0 --threads 1 \
  --kv-cache-memory 64MiB >"$work/server.out" 2>"$work/server.err") &
server_pid=$!
for _ in $(seq 1 900); do
  [ "$(wc -l <"$work/server.out")" -ge 1 ] && break
  kill -0 "$server_pid" 2>/dev/null || fail "baton serve exited before its banner"
  sleep 0.1
done
banner="$(head -1 "$work/server.out")"
port="$(sed -nE 's#^baton serve: serving [^ ]+ on http://127\.0\.0\.1:([0-9]+) .*#\1#p' <<<"$banner")"
[ -n "$port" ] || fail "no port in the banner: $banner"
model="$(sed -nE 's#^baton serve: serving ([^ ]+) on .*#\1#p' <<<"$banner")"

# check_stream <endpoint> <json body> <name>
check_stream() {
  local endpoint="$1" body="$2" name="$3"
  local code
  code="$(curl -sN --max-time 60 -D "$work/$name.headers" -o "$work/$name.body" -w '%{http_code}' \
    -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$port$endpoint")" ||
    fail "$name: curl failed (exit $?): a broken chunked stream?"
  [ "$code" = 200 ] || fail "$name: HTTP $code: $(head -c 500 "$work/$name.body")"
  grep -qiE '^content-type: text/event-stream' "$work/$name.headers" ||
    fail "$name: not text/event-stream: $(cat "$work/$name.headers")"
  grep -qiE '^transfer-encoding: chunked' "$work/$name.headers" ||
    fail "$name: not chunked: $(cat "$work/$name.headers")"
  if grep -qiE '^content-length:' "$work/$name.headers"; then
    fail "$name: a stream with a Content-Length"
  fi
  node - "$work/$name.body" "$name" "$endpoint" <<'EOF' || fail "$name: bad event stream"
const assert = require('node:assert/strict');
const [path, name, endpoint] = process.argv.slice(2);
const bytes = require('node:fs').readFileSync(path);
const raw = new TextDecoder('utf-8', { fatal: true }).decode(bytes);  // must be UTF-8
assert.ok(raw.endsWith('data: [DONE]\n\n'), `${name}: does not end with data: [DONE]: ${JSON.stringify(raw.slice(-80))}`);
assert.ok(!raw.includes('\r'), `${name}: CR in the stream`);
const events = raw.split('\n\n');
assert.equal(events.pop(), '');
assert.ok(events.length >= 3, `${name}: only ${events.length} events`);
let text = '';
let usage = null;
let finishes = 0;
events.forEach((e, i) => {
  const lines = e.split('\n');
  assert.equal(lines.length, 1, `${name}: event ${i} has ${lines.length} lines: ${JSON.stringify(e)}`);
  assert.ok(e.startsWith('data: '), `${name}: event ${i} does not start with "data: ": ${JSON.stringify(e)}`);
  const payload = e.slice('data: '.length);
  if (i === events.length - 1) {
    assert.equal(payload, '[DONE]');
    return;
  }
  assert.notEqual(payload, '[DONE]', `${name}: [DONE] before the end`);
  const obj = JSON.parse(payload);
  assert.ok(!('error' in obj), `${name}: error event ${payload}`);
  if (obj.usage) {
    assert.deepEqual(obj.choices, [], `${name}: usage chunk with choices`);
    assert.equal(i, events.length - 2, `${name}: usage is not the last chunk`);
    usage = obj.usage;
    return;
  }
  assert.equal(obj.choices.length, 1);
  const c = obj.choices[0];
  if (endpoint.includes('chat')) {
    assert.equal(obj.object, 'chat.completion.chunk');
    text += c.delta.content ?? '';
  } else {
    assert.equal(obj.object, 'text_completion');
    text += c.text;
  }
  if (c.finish_reason) finishes += 1;
});
assert.ok(text.length > 0, `${name}: no text`);
assert.equal(finishes, 1, `${name}: ${finishes} finish_reasons`);
assert.ok(usage, `${name}: no usage chunk`);
assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
console.log(`sse_curl_test: ${name}: ${events.length} events, ${usage.completion_tokens} tokens: ${JSON.stringify(text.slice(0, 60))}`);
EOF
}

check_stream /v1/chat/completions \
  "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}],\"max_tokens\":20,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" \
  chat
check_stream /v1/completions \
  "{\"model\":\"$model\",\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" \
  completion

# An error before the stream starts is a plain JSON answer with its status, not SSE.
code="$(curl -s --max-time 30 -o "$work/err.body" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d "{\"model\":\"$model\",\"messages\":[],\"stream\":true}" "http://127.0.0.1:$port/v1/chat/completions")"
[ "$code" = 400 ] || fail "bad streaming request: HTTP $code"
node -e 'const e = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).error;
  if (!e.message.includes("messages")) process.exit(1);' "$work/err.body" || fail "bad streaming request: $(cat "$work/err.body")"

kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
[ "$rc" = 0 ] || fail "baton serve exited with $rc on SIGTERM"
echo "sse_curl_test: PASS"
