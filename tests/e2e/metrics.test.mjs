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
  const ttft = metricValue(m, 'baton_router_time_to_first_token_seconds_count', { model_name: server.model });
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

// The set a vLLM operator expects (docs/operations.md, "Metrics"), on each process.
const PROCESS_SET = ['process_cpu_seconds_total', 'process_resident_memory_bytes',
  'process_virtual_memory_bytes', 'process_open_fds', 'process_max_fds', 'process_start_time_seconds'];
const ROUTER_SET = ['baton_router_time_to_first_token_seconds', 'baton_router_inter_token_latency_seconds',
  'baton_router_time_per_output_token_seconds', 'baton_router_e2e_request_latency_seconds'];
const WORKER_GAUGES = ['baton_num_requests_running', 'baton_num_requests_waiting', 'baton_kv_cache_usage_ratio'];
const WORKER_COUNTERS = ['baton_prefix_cache_queried_tokens_total', 'baton_prefix_cache_hit_tokens_total',
  'baton_num_preemptions_total', 'baton_request_success_total'];
const WORKER_HISTOGRAMS = ['baton_iteration_tokens', 'baton_request_prompt_tokens', 'baton_request_generation_tokens',
  'baton_request_queue_time_seconds', 'baton_request_prefill_time_seconds', 'baton_request_decode_time_seconds'];

// The sum of every sample named `name` whose labels include `labels`.
const total = (samples, name, labels = {}) => samples
  .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  .reduce((a, s) => a + s.value, 0);

function assertCommon(text, samples, who) {
  for (const name of PROCESS_SET) assert.ok(samples.some((s) => s.name === name), `${who}: no ${name}`);
  assert.ok(total(samples, 'process_resident_memory_bytes') > 0, `${who}: no resident memory`);
  const info = samples.filter((s) => s.name === 'baton_build_info');
  assert.equal(info.length, 1, `${who}: baton_build_info`);
  assert.equal(info[0].value, 1);
  assert.match(info[0].labels.version ?? '', /^\d+\.\d+\.\d+$/);
  assert.ok(info[0].labels.commit, `${who}: no commit label`);
  assert.match(text, /^# TYPE process_cpu_seconds_total counter$/m);
}

function assertModelLabelled(samples, names, model, who) {
  for (const name of names) {
    const of = samples.filter((s) => s.name === name || s.name.startsWith(`${name}_`));
    assert.ok(of.length > 0, `${who}: no ${name}`);
    for (const s of of) assert.equal(s.labels.model_name, model, `${who}: ${s.name} without model_name`);
  }
}

test('the metrics set on the router and the colocated worker moves with the requests', async () => {
  assert.ok(server.workerMetricsUrl, 'the banner names no worker metrics URL');
  const scrapeWorker = async () => parseMetrics(await (await fetch(server.workerMetricsUrl)).text());
  const routerBefore = parseMetrics((await scrape(server)).text);
  const workerBefore = await scrapeWorker();
  const N = 3;
  let prompt = 0;
  let completion = 0;
  for (let i = 0; i < N; ++i) {
    const r = await request(`${server.url}/v1/completions`, {
      body: { model: MODEL_NAME, prompt: `Set ${i}: once upon a time`, max_tokens: 5, ignore_eos: true },
    });
    assert.equal(r.status, 200);
    prompt += r.json.usage.prompt_tokens;
    completion += r.json.usage.completion_tokens;
  }
  assert.equal(completion, 5 * N);
  const routerText = (await scrape(server)).text;
  const router = parseMetrics(routerText);
  const workerText = await (await fetch(server.workerMetricsUrl)).text();
  const worker = parseMetrics(workerText);

  assertCommon(routerText, router, 'router');
  assertCommon(workerText, worker, 'worker');
  assertModelLabelled(router, ROUTER_SET, server.model, 'router');
  assertModelLabelled(worker, [...WORKER_GAUGES, ...WORKER_COUNTERS, ...WORKER_HISTOGRAMS], server.model, 'worker');
  for (const name of WORKER_HISTOGRAMS) assert.match(workerText, new RegExp(`^# TYPE ${name} histogram$`, 'm'));
  for (const name of WORKER_COUNTERS) assert.match(workerText, new RegExp(`^# TYPE ${name} counter$`, 'm'));

  const delta = (after, before, name, labels) => total(after, name, labels) - total(before, name, labels);
  // Router: one end-to-end and one per-output-token observation per request (5 tokens each).
  for (const name of ['baton_router_e2e_request_latency_seconds_count',
    'baton_router_time_per_output_token_seconds_count', 'baton_router_time_to_first_token_seconds_count']) {
    assert.equal(delta(router, routerBefore, name), N, name);
  }
  // e2e at least covers the first token, summed over the same requests.
  assert.ok(delta(router, routerBefore, 'baton_router_e2e_request_latency_seconds_sum') >=
    delta(router, routerBefore, 'baton_router_time_to_first_token_seconds_sum'));
  // Worker: every request ended by length (ignore_eos), with the tokens usage reported.
  assert.equal(delta(worker, workerBefore, 'baton_request_success_total', { finished_reason: 'length' }), N);
  assert.equal(delta(worker, workerBefore, 'baton_request_success_total'), N);
  assert.equal(delta(worker, workerBefore, 'baton_request_prompt_tokens_sum'), prompt);
  assert.equal(delta(worker, workerBefore, 'baton_request_generation_tokens_sum'), completion);
  for (const name of ['baton_request_queue_time_seconds_count', 'baton_request_prefill_time_seconds_count',
    'baton_request_decode_time_seconds_count']) {
    assert.equal(delta(worker, workerBefore, name), N, name);
  }
  // Each token after a request's first is computed in a step of its own.
  assert.ok(delta(worker, workerBefore, 'baton_iteration_tokens_sum') >= completion - N);
  const usage = total(worker, 'baton_kv_cache_usage_ratio');
  assert.ok(usage >= 0 && usage <= 1, `KV usage ratio ${usage}`);
  assert.ok(total(worker, 'baton_prefix_cache_hit_tokens_total') <= total(worker, 'baton_prefix_cache_queried_tokens_total'));
  assert.equal(total(worker, 'baton_num_requests_running'), 0);
});
