// Bounds and bad input over plain `fetch`: each gets its exact HTTP status and an OpenAI
// error envelope whose message names the parameter; none crashes the server. Also the
// queue bound (429), a dead worker (503), the API key (401), 405 and 404.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServe, startWorker, startRouter, request, MODEL_NAME, withLogs, sleep } from './harness.mjs';

const KEY = 'sk-limits';
const AUTH = { authorization: `Bearer ${KEY}` };
let server;

before(async () => {
  server = await startServe(['--api-key', KEY, '--max-body-bytes', '4096']);
});

after(async () => {
  if (!server) return;
  const exit = await server.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, withLogs(server, 'baton serve did not drain cleanly'));
});

const chatUrl = () => `${server.url}/v1/chat/completions`;
const compUrl = () => `${server.url}/v1/completions`;
const hi = [{ role: 'user', content: 'Hello!' }];

// Asserts an OpenAI error envelope with `status`; `param` (if given) must be named both in
// error.param and in the message; `pattern` must match the message. Returns the error.
function assertError(res, status, { param, pattern } = {}) {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${res.text}`);
  assert.ok(res.json && typeof res.json.error === 'object', `not an error envelope: ${res.text}`);
  const e = res.json.error;
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  assert.equal(typeof e.type, 'string');
  assert.ok('param' in e && 'code' in e, `envelope lacks param/code: ${res.text}`);
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  if (param !== undefined) {
    assert.equal(e.param, param, `param: ${res.text}`);
    assert.ok(e.message.includes(param), `message does not name '${param}': ${e.message}`);
  }
  if (pattern) assert.match(e.message, pattern);
  return e;
}

const post = (url, body, headers = AUTH) => request(url, { body, headers });

// Ranges the worker checks against its model (vocabulary size, sampling bounds): the
// error crosses the internal gRPC hop with its field (a google.rpc.BadRequest), so the
// client still learns which parameter was wrong.
test('values the worker refuses name their parameter', async () => {
  const cases = [
    [{ temperature: 500 }, 'temperature', /\[0, 100\]/],
    [{ top_p: 2 }, 'top_p', /\(0, 1\]/],
    [{ top_k: 10000000 }, 'top_k', /vocabulary/],
    [{ min_p: 2 }, 'min_p', /\[0, 1\]/],
    [{ repetition_penalty: 5 }, 'repetition_penalty', /\(0, 2\]/],
    [{ presence_penalty: 3 }, 'presence_penalty', /\[-2, 2\]/],
    [{ frequency_penalty: -3 }, 'frequency_penalty', /\[-2, 2\]/],
    [{ logit_bias: { 9999999: 1 } }, 'logit_bias', /9999999/],
    [{ stop_token_ids: [9999999] }, 'stop_token_ids', /9999999/],
  ];
  for (const [extra, param, pattern] of cases) {
    for (const url of [compUrl(), chatUrl()]) {
      const body = url === chatUrl() ? { messages: hi, max_tokens: 2, ...extra }
                                      : { prompt: 'x', max_tokens: 2, ...extra };
      assertError(await post(url, body), 400, { param, pattern });
    }
  }
});

test('malformed JSON is a 400', async () => {
  for (const raw of ['{"model": ', '{"messages": [}', 'not json', '[1, 2]', '']) {
    const res = await request(chatUrl(), { body: raw, raw: true, headers: AUTH });
    assertError(res, 400, { pattern: /JSON|parse|object|empty/i });
  }
});

test('wrong types are a 400 naming the parameter', async () => {
  const cases = [
    [chatUrl(), { messages: hi, temperature: 'hot' }, 'temperature', /must be a number/],
    [chatUrl(), { messages: 'hello' }, 'messages', /must be an array/],
    [chatUrl(), { messages: hi, max_tokens: '10' }, 'max_tokens', /integer/],
    [chatUrl(), { messages: hi, max_tokens: 2.5 }, 'max_tokens', /integer/],
    [chatUrl(), { messages: hi, stream: 'yes' }, 'stream', /boolean/],
    [chatUrl(), { messages: hi, top_p: [1] }, 'top_p', /number/],
    [chatUrl(), { messages: hi, stop: 7 }, 'stop', /string/],
    [chatUrl(), { messages: hi, logit_bias: { abc: 1 } }, 'logit_bias', /token id/],
    [chatUrl(), { messages: [{ role: 'user' }] }, 'messages[0].content', /required/],
    [chatUrl(), { messages: [{ content: 'x' }] }, 'messages[0].role', /required/],
    [chatUrl(), { messages: [{ role: 'narrator', content: 'x' }] }, 'messages[0].role',
      /Invalid value for 'messages\[0\]\.role': 'narrator'\. Supported values are/],
    [compUrl(), { prompt: 'x', top_k: -5 }, 'top_k', /at least -1, got -5/],
    [compUrl(), { prompt: { text: 'x' } }, 'prompt', /string/],
    [compUrl(), { prompt: 'x', max_tokens: 0 }, 'max_tokens', /at least 1/],
    [compUrl(), { prompt: 'x', logprobs: 21 }, 'logprobs', /maximum is 20/],
    [compUrl(), { prompt: [5, 99999] }, 'prompt', /99999/],
  ];
  for (const [url, body, param, pattern] of cases) {
    const res = await post(url, { model: MODEL_NAME, ...body });
    assertError(res, 400, { param, pattern });
  }
  // A missing prompt names it.
  assertError(await post(compUrl(), { model: MODEL_NAME }), 400, { param: 'prompt', pattern: /required/ });
});

test('an unknown model is a 404', async () => {
  const res = await post(chatUrl(), { model: 'gpt-17', messages: hi });
  const e = assertError(res, 404, { pattern: /gpt-17/ });
  assert.equal(e.type, 'invalid_request_error');
  assertError(await request(`${server.url}/v1/models/gpt-17`, { method: 'GET', headers: AUTH }), 404,
    { pattern: /gpt-17/ });
});

test('empty messages are a 400', async () => {
  assertError(await post(chatUrl(), { model: MODEL_NAME, messages: [] }), 400,
    { param: 'messages', pattern: /empty/ });
});

// ~3 bytes per token: " dog" is one token of the tiny model's vocabulary.
const tokens = (n) => 'dog'.concat(' dog'.repeat(n - 1));

test('a prompt longer than the context is a 400 with vLLM\'s message', async () => {
  const res = await post(compUrl(), { model: MODEL_NAME, prompt: tokens(700), max_tokens: 5 });
  const e = assertError(res, 400, {
    param: 'prompt',
    pattern: /^This model's maximum context length is 512 tokens\. However, your request has (\d+) input tokens\./,
  });
  const n = Number(/has (\d+) input tokens/.exec(e.message)[1]);
  assert.ok(n > 512, `input tokens ${n}`);
  // Chat says the same of its messages.
  const chat = await post(chatUrl(), { model: MODEL_NAME, messages: [{ role: 'user', content: tokens(700) }] });
  assertError(chat, 400, {
    param: 'messages',
    pattern: /maximum context length is 512 tokens\. However, your request has \d+ input tokens/,
  });
});

test('max_tokens beyond the context is a 400 with vLLM\'s message', async () => {
  const res = await post(compUrl(), { model: MODEL_NAME, prompt: 'Once upon a time', max_tokens: 1000 });
  const e = assertError(res, 400, {
    param: 'max_tokens',
    pattern: /maximum context length is 512 tokens\. However, you requested (\d+) tokens \((\d+) in the prompt, 1000 in the completion\)/,
  });
  const [, total, prompt] = /requested (\d+) tokens \((\d+) in/.exec(e.message);
  assert.equal(Number(total), Number(prompt) + 1000);
  assert.ok(e.message.includes('max_tokens'));
  const chat = await post(chatUrl(), { model: MODEL_NAME, messages: hi, max_completion_tokens: 600 });
  // The error names the field the client sent.
  assertError(chat, 400, {
    param: 'max_completion_tokens',
    pattern: /However, you requested \d+ tokens \(\d+ in the messages, 600 in the completion\)/,
  });
});

// Client ids are the client's: two requests in flight with the same one both run (the
// workers see the router's own ids), and each response carries the client's id.
test('two requests in flight with the same request_id both succeed', async () => {
  const body = {
    model: MODEL_NAME, prompt: 'Once upon a time', max_tokens: 64, ignore_eos: true,
    request_id: 'same-id',
  };
  const answers = await Promise.all([0, 1, 2, 3].map(() => post(compUrl(), body)));
  for (const res of answers) {
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.id, 'same-id');
    assert.equal(res.json.usage.completion_tokens, 64);
  }
});

// The longest id a client may give (256 bytes, here of two-byte characters) is served:
// the workers see the router's id with the start of the client's, within their own bound
// (they once refused it: "request_id is 288 bytes; the limit is 256").
test('a request_id of the maximum length is served, with n > 1 too', async () => {
  const id = 'é'.repeat(128);
  assert.equal(Buffer.byteLength(id), 256);
  for (const n of [1, 2]) {
    const res = await post(compUrl(), { model: MODEL_NAME, prompt: 'Once', max_tokens: 2, n, request_id: id });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.id, id);
    assert.equal(res.json.choices.length, n);
  }
  const long = await post(compUrl(), { model: MODEL_NAME, prompt: 'Once', max_tokens: 2, request_id: 'x'.repeat(257) });
  assertError(long, 400, { param: 'request_id', pattern: /256/ });
});

test('n too large and too many stop strings are a 400 naming the limit', async () => {
  assertError(await post(chatUrl(), { model: MODEL_NAME, messages: hi, n: 1000 }), 400,
    { param: 'n', pattern: /1000.*maximum is 16/ });
  const stop = Array.from({ length: 100 }, (_, i) => `stop${i}`);
  assertError(await post(chatUrl(), { model: MODEL_NAME, messages: hi, stop }), 400,
    { param: 'stop', pattern: /100 entries; the maximum is 16/ });
  assertError(await post(compUrl(), { model: MODEL_NAME, prompt: 'x', stop: ['x'.repeat(2000)] }), 400,
    { param: 'stop[0]', pattern: /maximum is/ });
});

test('a body over --max-body-bytes is a 413', async () => {
  const body = JSON.stringify({ model: MODEL_NAME, messages: [{ role: 'user', content: 'a'.repeat(10 * 1024) }] });
  const res = await request(chatUrl(), { body, raw: true, headers: AUTH });
  assertError(res, 413, { pattern: /4096|too large|limit/i });
  // The bound is exact: 4096 bytes pass, 4097 do not (JSON whitespace pads the body).
  const json = JSON.stringify({ model: MODEL_NAME, messages: hi, max_tokens: 2 });
  const atLimit = await request(chatUrl(), { body: json + ' '.repeat(4096 - json.length), raw: true, headers: AUTH });
  assert.equal(atLimit.status, 200, atLimit.text);
  const over = await request(chatUrl(), { body: json + ' '.repeat(4097 - json.length), raw: true, headers: AUTH });
  assertError(over, 413);
});

test('invalid UTF-8 in the body is a 400', async () => {
  const head = Buffer.from(`{"model":"${MODEL_NAME}","messages":[{"role":"user","content":"bad `);
  const tail = Buffer.from(' bytes"}],"max_tokens":2}');
  const body = Buffer.concat([head, Buffer.from([0xff, 0xfe]), tail]);
  const res = await request(chatUrl(), { body, raw: true, headers: AUTH });
  assertError(res, 400, { pattern: /UTF-8/ });
  // An overlong encoding and a lone surrogate are not UTF-8 either.
  for (const bad of [[0xc0, 0xaf], [0xed, 0xa0, 0x80]]) {
    const r = await request(chatUrl(), { body: Buffer.concat([head, Buffer.from(bad), tail]), raw: true, headers: AUTH });
    assertError(r, 400, { pattern: /UTF-8/ });
  }
});

test('a missing or wrong API key is a 401', async () => {
  const body = { model: MODEL_NAME, messages: hi, max_tokens: 2 };
  const none = await post(chatUrl(), body, {});
  const e = assertError(none, 401, { pattern: /API key/ });
  assert.equal(e.code, 'invalid_api_key');
  assertError(await post(chatUrl(), body, { authorization: 'Bearer nope' }), 401, { pattern: /API key/ });
  assertError(await post(chatUrl(), body, { authorization: KEY }), 401);  // no scheme
  assertError(await request(`${server.url}/v1/models`, { method: 'GET' }), 401);
  // Health and metrics stay open for probes and scrapers.
  assert.equal((await request(`${server.url}/health`, { method: 'GET' })).status, 200);
  assert.equal((await request(`${server.url}/metrics`, { method: 'GET' })).status, 200);
  // The right key in any case of "Bearer" works.
  const ok = await post(chatUrl(), body, { authorization: `bearer ${KEY}` });
  assert.equal(ok.status, 200, ok.text);
});

test('a wrong method is a 405, an unknown path a 404', async () => {
  const get = await request(chatUrl(), { method: 'GET', headers: AUTH });
  assertError(get, 405);
  assert.match(get.headers.get('allow') ?? '', /POST/);
  const put = await request(`${server.url}/v1/models`, { method: 'DELETE', headers: AUTH });
  assertError(put, 405);
  assert.match(put.headers.get('allow') ?? '', /GET/);
  assertError(await request(`${server.url}/health`, { method: 'POST', body: {} }), 405);
  assertError(await request(`${server.url}/v1/nothing-here`, { method: 'POST', body: {}, headers: AUTH }), 404);
  assertError(await request(`${server.url}/nothing`, { method: 'GET' }), 404);
});

test('a client that half-closes after its request still gets its answer', async () => {
  // RFC 9112 §9.6 allows a client to shut down its sending side once the request is sent.
  const url = new URL(server.url);
  const body = JSON.stringify({ model: MODEL_NAME, prompt: 'Once upon a time', max_tokens: 4 });
  const text = await new Promise((resolve, reject) => {
    const socket = net.createConnection({ host: url.hostname, port: Number(url.port), allowHalfOpen: true }, () => {
      socket.end(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\n`
        + `Content-Type: application/json\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    let got = '';
    socket.on('data', (d) => { got += d; });
    socket.on('end', () => resolve(got));
    socket.on('error', reject);
  });
  // An interim 100 Continue may come first; the final answer is a 200 with the completion.
  const final = text.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '');
  assert.match(final, /^HTTP\/1\.1 200 /, text);
  const json = JSON.parse(final.slice(final.indexOf('\r\n\r\n') + 4));
  assert.equal(json.usage.completion_tokens, 4, final);
});

test('after all that bad input the server still serves', async () => {
  const res = await post(chatUrl(), { model: MODEL_NAME, messages: hi, max_tokens: 8 });
  assert.equal(res.status, 200, res.text);
  assert.equal(typeof res.json.choices[0].message.content, 'string');
  assert.ok(server.proc.running, withLogs(server, 'server died'));
});

test('a full queue answers 429 to the overflow and serves the rest', { timeout: 120000 }, async () => {
  const small = await startServe(['--max-running', '1', '--max-waiting', '1']);
  try {
    const body = { model: MODEL_NAME, prompt: 'Once upon a time', max_tokens: 400, ignore_eos: true };
    const results = await Promise.all(Array.from({ length: 20 }, () =>
      request(`${small.url}/v1/completions`, { body, timeoutMs: 110000 })));
    const codes = results.map((r) => r.status);
    const rejected = results.filter((r) => r.status === 429);
    const served = results.filter((r) => r.status === 200);
    assert.equal(rejected.length + served.length, 20, `unexpected codes: ${codes}`);
    assert.ok(rejected.length >= 1, `no 429 among ${codes}`);
    assert.ok(served.length >= 1, `nothing served: ${codes}`);
    for (const r of rejected) {
      const e = assertError(r, 429);
      assert.match(e.message, /queue|capacity|busy|waiting/i);
    }
    for (const r of served) {
      assert.equal(r.json.usage.completion_tokens, 400);
      assert.equal(r.json.choices[0].finish_reason, 'length');
    }
    assert.equal((await request(`${small.url}/health`, { method: 'GET' })).status, 200);
    // Once the queue drains, a new request is served again.
    const again = await request(`${small.url}/v1/completions`, { body: { ...body, max_tokens: 4 } });
    assert.equal(again.status, 200, again.text);
    assert.ok(small.proc.running, withLogs(small, 'server died'));
  } finally {
    const exit = await small.stop();
    assert.deepEqual(exit, { code: 0, signal: null }, withLogs(small, 'unclean exit'));
  }
});

test('a dead worker is a 503 naming the worker; /ready says 503 too', { timeout: 120000 }, async () => {
  const worker = await startWorker();
  let router;
  try {
    router = await startRouter(worker.addr);
    assert.equal((await request(`${router.url}/ready`, { method: 'GET' })).status, 200);
    const body = { model: MODEL_NAME, messages: hi, max_tokens: 4 };
    const ok = await request(`${router.url}/v1/chat/completions`, { body });
    assert.equal(ok.status, 200, ok.text);
    await worker.kill('SIGKILL');
    await sleep(200);
    for (const stream of [false, true]) {
      const res = await request(`${router.url}/v1/chat/completions`, { body: { ...body, stream }, timeoutMs: 30000 });
      const e = assertError(res, 503);
      assert.match(e.message, /worker/i);
    }
    const ready = await request(`${router.url}/ready`, { method: 'GET', timeoutMs: 30000 });
    assertError(ready, 503);
    // The router itself is alive.
    assert.equal((await request(`${router.url}/health`, { method: 'GET' })).status, 200);
    assert.ok(router.proc.running, withLogs(router, 'router died'));
  } finally {
    await worker.kill('SIGKILL');
    if (router) {
      const exit = await router.stop();
      assert.deepEqual(exit, { code: 0, signal: null }, withLogs(router, 'router did not drain cleanly'));
    }
  }
});
