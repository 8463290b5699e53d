// A client that goes away mid-request must stop the work in the worker: the worker's
// internal GetStats counts the request as cancelled (not finished), and the router's
// /metrics counts a client cancellation.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import {
  startServe, workerStats, waitForStats, scrape, parseMetrics, metricValue, MODEL_NAME, withLogs, sleep,
} from './harness.mjs';

let server;

before(async () => {
  server = await startServe();
});

after(async () => {
  if (!server) return;
  const exit = await server.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, withLogs(server, 'baton serve did not drain cleanly'));
});

// As long as the context allows, so that the request is surely still running when the
// client leaves.
const LONG = { model: MODEL_NAME, max_tokens: 480, ignore_eos: true, temperature: 1 };
const messages = [{ role: 'user', content: 'Tell me a long story.' }];

// Runs `leave` (which starts a long request and abandons it) and checks that the worker
// cancelled exactly one request and finished none, and that it is idle again.
async function expectOneCancel(leave) {
  const before = await workerStats(server.worker);
  await leave();
  const after = await waitForStats(server.worker,
    (s) => s.requests_cancelled >= before.requests_cancelled + 1 && s.running === 0 && s.waiting === 0);
  assert.equal(after.requests_cancelled, before.requests_cancelled + 1, JSON.stringify({ before, after }));
  assert.equal(after.requests_finished, before.requests_finished, 'the abandoned request ran to its end');
  assert.ok(after.generated_tokens - before.generated_tokens < LONG.max_tokens,
    `generated ${after.generated_tokens - before.generated_tokens} tokens for an abandoned request`);
  return after;
}

test('aborting a streaming fetch cancels the request in the worker', async () => {
  await expectOneCancel(async () => {
    const ac = new AbortController();
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...LONG, messages, stream: true }),
    });
    assert.equal(res.status, 200);
    const reader = res.body.getReader();
    let events = 0;
    const decoder = new TextDecoder();
    while (events < 4) {
      const { value, done } = await reader.read();
      assert.ok(!done, 'the stream ended early');
      events += (decoder.decode(value).match(/^data: /gm) ?? []).length;
    }
    ac.abort();
    await reader.read().catch(() => {});
  });
});

test('abandoning a non-streaming request cancels it in the worker', async () => {
  await expectOneCancel(async () => {
    const before = await workerStats(server.worker);
    const ac = new AbortController();
    const pending = fetch(`${server.url}/v1/completions`, {
      method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...LONG, prompt: 'Once upon a time' }),
    }).catch((e) => e);
    // Leave once the worker is generating for it.
    await waitForStats(server.worker, (s) => s.generated_tokens > before.generated_tokens + 4, 10000, 10);
    ac.abort();
    const outcome = await pending;
    assert.equal(outcome.name, 'AbortError');
  });
});

test('breaking out of an openai SDK stream cancels the request in the worker', async () => {
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  await expectOneCancel(async () => {
    const stream = await client.completions.create({ ...LONG, prompt: 'Once upon a time', stream: true });
    let chunks = 0;
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'text_completion');
      if (++chunks === 3) break;  // the SDK aborts the HTTP request
    }
    assert.equal(chunks, 3);
  });
});

test('/metrics counts the client cancellations', async () => {
  // Give the router a moment to record the last one.
  let value;
  for (let i = 0; i < 50; ++i) {
    value = metricValue(parseMetrics((await scrape(server)).text), 'baton_router_client_cancellations_total');
    if (value >= 3) break;
    await sleep(100);
  }
  assert.equal(value, 3, 'three client cancellations');
  // The requests were recorded as 499 (client closed request), not as successes.
  const samples = parseMetrics((await scrape(server)).text);
  const cancelled = samples.filter((s) => s.name === 'baton_router_requests_total' && s.labels.code === '499')
    .reduce((a, s) => a + s.value, 0);
  assert.equal(cancelled, 3);
  // The worker's engine ended the same three as aborts (vLLM's finished_reason).
  const worker = parseMetrics(await (await fetch(server.workerMetricsUrl)).text());
  assert.equal(metricValue(worker, 'baton_request_success_total', { model_name: server.model, finished_reason: 'abort' }), 3);
  // And the server still serves.
  const res = await fetch(`${server.url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL_NAME, prompt: 'Once upon a time', max_tokens: 3 }),
  });
  assert.equal(res.status, 200);
  const stats = await workerStats(server.worker);
  assert.equal(stats.running, 0);
});
