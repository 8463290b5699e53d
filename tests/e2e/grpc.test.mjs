// The public gRPC API (baton.v1.Baton) through @grpc/grpc-js and @grpc/proto-loader:
// Generate from text, chat and token ids; Tokenize/Detokenize; ListModels/ModelInfo;
// INVALID_ARGUMENT naming the field; cancel and deadline reaching the worker; API keys.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import {
  startServe, batonProto, unary, collectStream, workerStats, waitForStats, MODEL_NAME, MAX_MODEL_LEN,
  withLogs,
} from './harness.mjs';

let server;
let client;

before(async () => {
  server = await startServe();
  client = new (batonProto().Baton)(server.grpcAddr, grpc.credentials.createInsecure());
});

after(async () => {
  client?.close();
  if (!server) return;
  const exit = await server.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, withLogs(server, 'baton serve did not drain cleanly'));
});

const GREEDY = { temperature: 0 };

function assertTimings(t) {
  assert.ok(t.time_to_first_token_seconds > 0 && t.time_to_first_token_seconds <= t.total_seconds,
    `time_to_first_token_seconds: ${JSON.stringify(t)}`);
  assert.ok(t.queue_seconds > 0 && t.queue_seconds <= t.time_to_first_token_seconds,
    `queue_seconds: ${JSON.stringify(t)}`);
  assert.ok(t.tokenize_seconds > 0 && t.tokenize_seconds < t.total_seconds, `tokenize_seconds: ${JSON.stringify(t)}`);
}
const generate = (req, md = new grpc.Metadata(), opts = {}) =>
  collectStream(client.Generate(req, md, { deadline: Date.now() + 60000, ...opts }));

// Checks the stream's shape and returns {text, ids, last}.
function summarize(messages, { timings = true } = {}) {
  assert.ok(messages.length >= 1, 'no messages');
  const last = messages.at(-1);
  assert.equal(last.finished, true, 'the last message is not finished');
  for (const m of messages.slice(0, -1)) assert.equal(m.finished, false, 'finished before the end');
  assert.ok(['stop', 'length'].includes(last.finish_reason), `finish_reason ${last.finish_reason}`);
  const ids = messages.flatMap((m) => m.token_ids);
  const text = messages.map((m) => m.text).join('');
  const u = last.usage;
  assert.ok(u, 'no usage');
  assert.ok(Number(u.prompt_tokens) > 0);
  assert.equal(Number(u.completion_tokens), ids.length, 'completion_tokens = token ids streamed');
  const t = last.timings;
  assert.ok(t, 'no timings');
  assert.ok(t.total_seconds > 0, `total_seconds ${t.total_seconds}`);
  if (timings) assertTimings(t);
  const rid = messages[0].request_id;
  assert.ok(rid.length > 0, 'no request_id');
  for (const m of messages) assert.equal(m.request_id, rid);
  return { text, ids, last };
}

test('Generate from text, from the same text\'s token ids, and from chat', async () => {
  const prompt = 'Once upon a time';
  const fromText = summarize(await generate({
    text: prompt, sampling: GREEDY, stop: { max_tokens: 24, ignore_eos: true },
  }));
  assert.equal(fromText.ids.length, 24);
  assert.equal(fromText.last.finish_reason, 'length');
  assert.ok(fromText.text.length > 0);

  const tok = await unary(client, 'Tokenize', { text: prompt });
  assert.ok(tok.token_ids.length > 0);
  assert.equal(Number(tok.count), tok.token_ids.length);
  assert.equal(Number(tok.max_model_len), MAX_MODEL_LEN);
  assert.equal(tok.tokens.length, tok.token_ids.length);
  assert.equal(Number(fromText.last.usage.prompt_tokens), tok.token_ids.length);

  const fromIds = summarize(await generate({
    token_ids: { ids: tok.token_ids }, sampling: GREEDY, stop: { max_tokens: 24, ignore_eos: true },
  }));
  assert.deepEqual(fromIds.ids, fromText.ids);
  assert.equal(fromIds.text, fromText.text);

  // The detokenized ids are the streamed text.
  const detok = await unary(client, 'Detokenize', { token_ids: fromText.ids });
  assert.equal(detok.text, fromText.text);

  const chat = summarize(await generate({
    chat: { messages: [{ role: 'user', content: 'What is 2 plus 3?' }] }, sampling: GREEDY,
    stop: { max_tokens: 30 },
  }));
  assert.ok(chat.text.length > 0);
  const chatTok = await unary(client, 'Tokenize', { chat: { messages: [{ role: 'user', content: 'What is 2 plus 3?' }] } });
  assert.equal(Number(chat.last.usage.prompt_tokens), chatTok.token_ids.length);
});

test('Generate with tools and response_format: forced calls come back as tool_calls deltas', async () => {
  const parameters = {
    type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } },
    required: ['city', 'unit'], additionalProperties: false,
  };
  const messages = await generate({
    chat: {
      messages: [{ role: 'user', content: 'Weather in Oslo?' }],
      tools: [{ name: 'get_weather', parameters_json: JSON.stringify(parameters) }],
      tool_choice: 'get_weather',
    },
    sampling: { temperature: 1, seed: 5 }, stop: { max_tokens: 200 },
  });
  const last = messages.at(-1);
  const deltas = messages.flatMap((m) => m.tool_calls);
  assert.ok(deltas.length > 0, 'no tool_calls in the stream');
  assert.equal(deltas[0].name, 'get_weather');
  assert.ok(deltas[0].id.length > 0);
  assert.ok(deltas.slice(1).every((d) => d.name === '' && d.index === 0));
  assert.equal(messages.map((m) => m.text).join(''), '', 'a forced call has no content');
  if (last.finish_reason === 'tool_calls') {
    const args = JSON.parse(deltas.map((d) => d.arguments).join(''));
    assert.deepEqual(Object.keys(args), ['city', 'unit']);
    assert.ok(['c', 'f'].includes(args.unit));
  } else {
    assert.equal(last.finish_reason, 'length');
  }

  const json = summarize(await generate({
    text: 'A JSON object:', response_format: { json_object: true }, sampling: { temperature: 1, seed: 2 },
    stop: { max_tokens: 64 },
  }));
  if (json.last.finish_reason === 'stop') {
    const value = JSON.parse(json.text);
    assert.equal(typeof value, 'object');
    assert.ok(!Array.isArray(value) && value !== null);
  }
  await assert.rejects(generate({ text: 'x', response_format: { json_schema: '{"type": "string", "pattern": "a"}' } }),
    (e) => e.code === grpc.status.INVALID_ARGUMENT && /pattern/.test(e.details));
});

test('Generate: stop strings, logprobs, seeds', async () => {
  const base = { text: 'Once upon a time', sampling: GREEDY, stop: { max_tokens: 40 } };
  const greedy = summarize(await generate(base)).text;
  const stop = greedy.slice(15, 20);
  // (Timings of a stop-string finish are checked by their own test below.)
  const cut = summarize(await generate({ ...base, stop: { max_tokens: 40, stop: [stop] } }), { timings: false });
  assert.equal(cut.last.finish_reason, 'stop');
  assert.equal(cut.last.stop_reason, stop);
  assert.equal(cut.text, greedy.slice(0, greedy.indexOf(stop)));

  const lp = await generate({ ...base, stop: { max_tokens: 5, ignore_eos: true }, logprobs: 3 });
  const entries = lp.flatMap((m) => m.logprobs);
  assert.equal(entries.length, 5);
  for (const e of entries) {
    assert.equal(e.top.length, 3);
    for (let i = 1; i < 3; ++i) assert.ok(e.top[i - 1].logprob >= e.top[i].logprob, 'top not descending');
    assert.equal(e.top[0].token_id, e.token_id, 'greedy picks the top token');
  }

  const seeded = (seed) => generate({
    text: 'Once upon a time', sampling: { temperature: 1, seed: String(seed) }, stop: { max_tokens: 20, ignore_eos: true },
  }).then((m) => summarize(m).text);
  assert.equal(await seeded(42), await seeded(42));
});

test('trace = true: the final message carries the request\'s journey (docs/inspector.md)', async () => {
  const req = { text: 'Once upon a time', sampling: GREEDY, stop: { max_tokens: 6, ignore_eos: true }, trace: true };
  const msgs = await generate(req);
  const { text, ids, last } = summarize(msgs);
  const t = last.trace;
  assert.ok(t, 'no trace on the final message');
  for (const m of msgs.slice(0, -1)) assert.equal(m.trace, null, 'a trace before the final message');
  assert.equal(t.model, MODEL_NAME);
  assert.equal(t.prompt_tokens.length, Number(last.usage.prompt_tokens));
  assert.equal(Number(t.completion_tokens), ids.length);
  const sampled = t.steps.filter((s) => s.sampled);
  assert.equal(sampled.length, ids.length, 'one sampled step per token');
  assert.deepEqual(sampled.map((s) => s.chosen.id), ids, 'the steps chose the streamed tokens');
  assert.equal(sampled.map((s) => s.chosen.text).join(''), text);
  for (const s of sampled) assert.equal(s.top.length, 5, 'five alternatives per token');
  assert.equal(t.route.policy.length > 0, true);
  assert.ok(t.route.candidates.some((c) => c.chosen), 'no chosen worker in the route');
  assert.ok(Number(t.weight_bytes) > 0 && Number(t.kv_bytes_per_token) > 0);
  assert.ok(t.total_seconds > 0 && t.time_to_first_token_seconds <= t.total_seconds);
  // Untraced requests carry none; a traced one asking too much is refused naming the field (this
  // model's 512-token context comes before the trace's 2048-token bound, which
  // router_trace_bounds_test checks).
  const plain = await generate({ ...req, trace: false });
  assert.equal(plain.at(-1).trace, null);
  await assert.rejects(generate({ ...req, stop: { max_tokens: 4096 } }),
    (e) => e.code === grpc.status.INVALID_ARGUMENT && /max_tokens/.test(e.details));
});

test('a stop-string finish still reports the worker\'s timings and usage', async () => {
  const base = { text: 'Once upon a time', sampling: GREEDY, stop: { max_tokens: 40 } };
  const greedy = summarize(await generate(base));
  const stop = greedy.text.slice(15, 20);
  const cut = summarize(await generate({ ...base, stop: { max_tokens: 40, stop: [stop] } }), { timings: false });
  assert.equal(cut.last.finish_reason, 'stop');
  assert.equal(cut.last.usage.prompt_tokens, greedy.last.usage.prompt_tokens);
  // The first token came before the stop string did, so its time is known.
  assertTimings(cut.last.timings);
});

test('Tokenize and Detokenize round-trip', async () => {
  for (const text of ['Hello world!', 'The cat has 3 red balls.\nNew line, "quotes" and émoji 🙂.']) {
    const tok = await unary(client, 'Tokenize', { text });
    const back = await unary(client, 'Detokenize', { token_ids: tok.token_ids });
    assert.equal(back.text, text);
  }
  // Special tokens: kept unless skipped.
  const special = await unary(client, 'Tokenize', { text: '<|im_start|>user' });
  assert.equal(special.token_ids[0], 1);
  const kept = await unary(client, 'Detokenize', { token_ids: special.token_ids, skip_special_tokens: false });
  assert.equal(kept.text, '<|im_start|>user');
  const skipped = await unary(client, 'Detokenize', { token_ids: special.token_ids });
  assert.equal(skipped.text, 'user');
});

// Text longer in bytes than any context's worth of tokens can spell is refused before it
// is tokenized (tokenizing 3 MB cost the router ~0.5 s of CPU), on every API.
test('text too long for the context is refused before tokenizing, on every API', async () => {
  const huge = 'the quick brown fox jumps over the lazy dog. '.repeat(60000);  // 2.7 MB
  const started = performance.now();
  await assert.rejects(unary(client, 'Tokenize', { text: huge }), (e) =>
    e.code === grpc.status.INVALID_ARGUMENT && /maximum context length.*bytes at most/.test(e.details));
  const ms = performance.now() - started;
  await assert.rejects(collectStream(client.Generate({ text: huge, stop: { max_tokens: 1 } })), (e) =>
    e.code === grpc.status.INVALID_ARGUMENT && /bytes at most/.test(e.details));
  console.log(`# Tokenize of 2.7 MB refused in ${ms.toFixed(0)} ms`);
  const http = (path, body) => fetch(`${server.url}${path}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  for (const [path, body, param] of [
    ['/v1/completions', { prompt: huge, max_tokens: 1 }, 'prompt'],
    // (Under the chat template's own 1 MiB bound on what it writes.)
    ['/v1/chat/completions', { messages: [{ role: 'user', content: huge.slice(0, 200000) }], max_tokens: 1 },
      'messages'],
  ]) {
    const res = await http(path, body);
    const e = (await res.json()).error;
    assert.equal(res.status, 400, JSON.stringify(e));
    assert.equal(e.param, param);
    assert.match(e.message, /maximum context length is \d+ tokens.*bytes at most/);
  }
});

test('ListModels and ModelInfo', async () => {
  const list = await unary(client, 'ListModels', {});
  assert.equal(list.models.length, 1);
  const card = list.models[0];
  assert.equal(card.id, MODEL_NAME);
  assert.equal(Number(card.max_model_len), MAX_MODEL_LEN);
  assert.equal(card.vocab_size, 1280);
  assert.equal(Number(card.block_size), 16);
  // The proto's example is "llama"; the worker reports the HF class name (LlamaForCausalLM).
  assert.match(card.architecture, /llama/i);
  assert.ok(card.eos_token_ids.includes(2), `eos ${card.eos_token_ids}`);
  const info = await unary(client, 'ModelInfo', {});
  assert.equal(info.id, MODEL_NAME);
  const named = await unary(client, 'ModelInfo', { model: MODEL_NAME });
  assert.equal(named.id, MODEL_NAME);
  await assert.rejects(unary(client, 'ModelInfo', { model: 'nope' }), (e) => e.code === grpc.status.NOT_FOUND);
});

test('invalid input is INVALID_ARGUMENT naming the field', async () => {
  const cases = [
    [{}, /input/],
    [{ text: 'hi', stop: { max_tokens: 0 } }, /max_tokens/],
    [{ text: 'hi', stop: { max_tokens: 100000 } }, /maximum context length is 512/],
    [{ text: 'hi', stop: { stop: Array.from({ length: 100 }, (_, i) => `s${i}`) } }, /stop/],
    [{ text: 'hi', stop: { stop: [''] } }, /stop/],
    [{ text: 'hi', logprobs: 50 }, /logprobs/],
    [{ token_ids: { ids: [5, 100000] } }, /100000/],
    [{ token_ids: { ids: [] } }, /empty|token_ids/],
    [{ chat: { messages: [] } }, /chat\.messages/],
    [{ text: 'dog '.repeat(700) }, /maximum context length is 512 tokens/],
    [{ text: 'hi', sampling: { temperature: -1 } }, /temperature/],
    [{ text: 'hi', sampling: { top_p: 2 } }, /top_p/],
  ];
  for (const [req, pattern] of cases) {
    await assert.rejects(generate(req), (e) => {
      assert.equal(e.code, grpc.status.INVALID_ARGUMENT, `${JSON.stringify(req).slice(0, 80)}: ${e.code} ${e.details}`);
      assert.match(e.details, pattern);
      assert.equal(e.messages.length, 0, 'no messages before the error');
      return true;
    });
  }
  await assert.rejects(unary(client, 'Detokenize', { token_ids: [99999] }),
    (e) => e.code === grpc.status.INVALID_ARGUMENT && /99999/.test(e.details));
  await assert.rejects(generate({ model: 'nope', text: 'hi' }), (e) => e.code === grpc.status.NOT_FOUND);
});

const LONG = { text: 'Once upon a time', sampling: { temperature: 1 }, stop: { max_tokens: 480, ignore_eos: true } };

test('call.cancel() mid-stream: the client sees CANCELLED, the worker cancels', async () => {
  const before = await workerStats(server.worker);
  const call = client.Generate(LONG);
  let got = 0;
  const outcome = await new Promise((resolve) => {
    call.on('data', () => {
      if (++got === 3) call.cancel();
    });
    call.on('error', resolve);
    call.on('end', () => resolve(null));
  });
  assert.ok(outcome, 'the stream ended normally');
  assert.equal(outcome.code, grpc.status.CANCELLED);
  const after = await waitForStats(server.worker,
    (s) => s.requests_cancelled >= before.requests_cancelled + 1 && s.running === 0);
  assert.equal(after.requests_cancelled, before.requests_cancelled + 1);
  assert.equal(after.requests_finished, before.requests_finished);
});

test('a short deadline: DEADLINE_EXCEEDED, and the worker cancels too', async () => {
  // A deadline well inside the request's run time, whatever this machine's speed: a third
  // of a whole run's time, measured first.
  const t0 = Date.now();
  const whole = summarize(await generate({ ...LONG, sampling: { temperature: 0 } }));
  assert.equal(whole.ids.length, 480);
  const deadlineMs = Math.max(20, Math.floor((Date.now() - t0) / 3));
  const before = await workerStats(server.worker);
  await assert.rejects(generate(LONG, new grpc.Metadata(), { deadline: Date.now() + deadlineMs }),
    (e) => e.code === grpc.status.DEADLINE_EXCEEDED);
  const after = await waitForStats(server.worker,
    (s) => s.requests_cancelled >= before.requests_cancelled + 1 && s.running === 0 && s.waiting === 0);
  assert.equal(after.requests_cancelled, before.requests_cancelled + 1);
  assert.equal(after.requests_failed, before.requests_failed);
  assert.equal(after.requests_finished, before.requests_finished, 'the request ran to its end');
  assert.ok(after.generated_tokens - before.generated_tokens < 480);
});

test('API key in metadata: UNAUTHENTICATED without it, served with it', async () => {
  const keyed = await startServe(['--api-key', 'grpc-key']);
  const c = new (batonProto().Baton)(keyed.grpcAddr, grpc.credentials.createInsecure());
  try {
    const bad = new grpc.Metadata();
    bad.set('authorization', 'Bearer wrong');
    for (const md of [new grpc.Metadata(), bad]) {
      await assert.rejects(unary(c, 'ListModels', {}, md), (e) => e.code === grpc.status.UNAUTHENTICATED);
      await assert.rejects(unary(c, 'Tokenize', { text: 'hi' }, md), (e) => e.code === grpc.status.UNAUTHENTICATED);
      await assert.rejects(collectStream(c.Generate({ text: 'hi' }, md)),
        (e) => e.code === grpc.status.UNAUTHENTICATED && /authorization|API key/i.test(e.details));
    }
    const good = new grpc.Metadata();
    good.set('authorization', 'Bearer grpc-key');
    assert.equal((await unary(c, 'ListModels', {}, good)).models[0].id, MODEL_NAME);
    const msgs = await collectStream(c.Generate({ text: 'hi', stop: { max_tokens: 3, ignore_eos: true } }, good));
    assert.equal(msgs.at(-1).finished, true);
    assert.equal(Number(msgs.at(-1).usage.completion_tokens), 3);
  } finally {
    c.close();
    await keyed.stop();
  }
});
