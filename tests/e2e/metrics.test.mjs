// /metrics after a known mix of requests: the request counters match what was sent, by
// api, endpoint and code, and the latency histograms are complete and consistent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServe, request, scrape, parseMetrics, metricValue, MODEL_NAME, withLogs } from './harness.mjs';

let server;

before(async () => {
  server = await startServe();
});

after(async () => {
  if (!server) return;
  const exit = await server.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, withLogs(server, 'baton serve did not drain cleanly'));
});

const CHAT_OK = 5;
const CHAT_STREAM_OK = 2;
const CHAT_BAD = 3;
const COMPLETIONS_OK = 2;
const MODELS = 4;

test('request counters and histograms match the requests made', async () => {
  const chat = (extra) => request(`${server.url}/v1/chat/completions`, {
    body: { model: MODEL_NAME, messages: [{ role: 'user', content: 'Hello!' }], max_tokens: 4, ...extra },
  });
  for (let i = 0; i < CHAT_OK; ++i) assert.equal((await chat({})).status, 200);
  for (let i = 0; i < CHAT_STREAM_OK; ++i) {
    const r = await chat({ stream: true });
    assert.equal(r.status, 200);
    assert.ok(r.text.endsWith('data: [DONE]\n\n'));
  }
  for (let i = 0; i < CHAT_BAD; ++i) assert.equal((await chat({ temperature: 'x' })).status, 400);
  for (let i = 0; i < COMPLETIONS_OK; ++i) {
    const r = await request(`${server.url}/v1/completions`, {
      body: { model: MODEL_NAME, prompt: 'Once upon a time', max_tokens: 4, ignore_eos: true },
    });
    assert.equal(r.status, 200);
  }
  for (let i = 0; i < MODELS; ++i) assert.equal((await request(`${server.url}/v1/models`, { method: 'GET' })).status, 200);

  const { text, headers } = await scrape(server);
  assert.match(headers.get('content-type') ?? '', /^text\/plain/);
  assert.match(text, /^# HELP baton_router_requests_total /m);
  assert.match(text, /^# TYPE baton_router_requests_total counter$/m);
  assert.match(text, /^# TYPE baton_router_request_duration_seconds histogram$/m);
  const m = parseMetrics(text);
  const count = (endpoint, code) =>
    metricValue(m, 'baton_router_requests_total', { api: 'http', endpoint, code });
  assert.equal(count('/v1/chat/completions', '200'), CHAT_OK + CHAT_STREAM_OK);
  assert.equal(count('/v1/chat/completions', '400'), CHAT_BAD);
  assert.equal(count('/v1/completions', '200'), COMPLETIONS_OK);
  assert.equal(count('/v1/models', '200'), MODELS);
  // Label order is free in the exposition format; our parser ignores it, but the raw line
  // must still carry all three labels.
  assert.ok(text.split('\n').some((l) => l.startsWith('baton_router_requests_total{') &&
    l.includes('api="http"') && l.includes('code="200"') && l.includes('endpoint="/v1/chat/completions"')));

  // The duration histogram of chat: buckets ascend, +Inf equals _count, _sum is positive.
  const hist = 'baton_router_request_duration_seconds';
  const buckets = m.filter((s) => s.name === `${hist}_bucket` && s.labels.endpoint === '/v1/chat/completions');
  assert.ok(buckets.length >= 5, `only ${buckets.length} buckets`);
  const bounds = buckets.map((b) => (b.labels.le === '+Inf' ? Infinity : Number(b.labels.le)));
  for (let i = 1; i < buckets.length; ++i) {
    assert.ok(bounds[i] > bounds[i - 1], 'bucket bounds not ascending');
    assert.ok(buckets[i].value >= buckets[i - 1].value, 'cumulative bucket counts decrease');
  }
  assert.equal(bounds.at(-1), Infinity, 'no +Inf bucket');
  const histCount = metricValue(m, `${hist}_count`, { endpoint: '/v1/chat/completions' });
  const histSum = metricValue(m, `${hist}_sum`, { endpoint: '/v1/chat/completions' });
  assert.equal(histCount, CHAT_OK + CHAT_STREAM_OK + CHAT_BAD);
  assert.equal(buckets.at(-1).value, histCount);
  assert.ok(histSum > 0, `_sum ${histSum}`);

  // Time to first token: one observation per successful generation.
  const ttft = metricValue(m, 'baton_router_time_to_first_token_seconds_count');
  assert.equal(ttft, CHAT_OK + CHAT_STREAM_OK + COMPLETIONS_OK);
  // Completions made exactly 4 tokens each (ignore_eos); chats 1 to 4 each.
  const generated = metricValue(m, 'baton_router_generation_tokens_total');
  const chats = CHAT_OK + CHAT_STREAM_OK;
  assert.ok(generated >= 4 * COMPLETIONS_OK + chats && generated <= 4 * (COMPLETIONS_OK + chats),
    `generation tokens ${generated}`);
  assert.ok(metricValue(m, 'baton_router_prompt_tokens_total') > 0);
  assert.equal(metricValue(m, 'baton_router_client_cancellations_total'), 0);
  assert.equal(metricValue(m, 'baton_router_requests_running'), 0);
});

test('/metrics counts itself and stays within its label set', async () => {
  await request(`${server.url}/no/such/path/${Math.random()}`, { method: 'GET' });
  await request(`${server.url}/another/${Math.random()}`, { method: 'GET' });
  const m = parseMetrics((await scrape(server)).text);
  // Unknown paths share one label value, whatever they were.
  assert.equal(metricValue(m, 'baton_router_requests_total', { api: 'http', endpoint: 'other', code: '404' }), 2);
  const endpoints = new Set(m.filter((s) => s.name === 'baton_router_requests_total').map((s) => s.labels.endpoint));
  for (const e of endpoints) assert.ok(!e.includes('no/such'), `raw path leaked into labels: ${e}`);
  assert.ok(metricValue(m, 'baton_router_requests_total', { api: 'http', endpoint: '/metrics', code: '200' }) >= 1);
});
