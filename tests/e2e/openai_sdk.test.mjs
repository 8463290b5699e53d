// The official `openai` npm SDK (v6) against `baton serve`: models, chat and completions,
// streaming with usage, the prefix cache, n, stop strings, max_tokens, logprobs, seeds, and
// the SDK's typed errors (400, 404, 401).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServe, longPrompt, MODEL_NAME, withLogs } from './harness.mjs';

let server;
let client;
const STORY = 'Once upon a time';

before(async () => {
  server = await startServe();
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
});

after(async () => {
  if (!server) return;
  const exit = await server.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, withLogs(server, 'baton serve did not drain cleanly'));
});

async function streamText(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

test('models.list returns the served model', async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  assert.deepEqual(ids, [MODEL_NAME]);
  assert.equal(page.data[0].object, 'model');
  const one = await client.models.retrieve(MODEL_NAME);
  assert.equal(one.id, MODEL_NAME);
});

test('chat: non-streaming and streaming agree at temperature 0, with usage', async () => {
  const messages = [{ role: 'user', content: 'Tell me a story about a dog.' }];
  const whole = await client.chat.completions.create({
    model: MODEL_NAME, messages, temperature: 0, max_tokens: 40,
  });
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices.length, 1);
  const text = whole.choices[0].message.content;
  assert.equal(typeof text, 'string');
  assert.ok(text.length > 0, 'empty content');
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason), whole.choices[0].finish_reason);
  const u = whole.usage;
  assert.ok(u.prompt_tokens > 0 && u.completion_tokens > 0 && u.completion_tokens <= 40, JSON.stringify(u));
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);

  const chunks = await streamText(await client.chat.completions.create({
    model: MODEL_NAME, messages, temperature: 0, max_tokens: 40, stream: true,
    stream_options: { include_usage: true },
  }));
  // At least one content chunk and the usage chunk. A loaded machine may deliver all 40
  // tokens in one delta (the worker batches tokens for a reader that is behind).
  assert.ok(chunks.length >= 2, `only ${chunks.length} chunks`);
  for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, [], 'the usage chunk has no choices');
  assert.ok(last.usage, 'last chunk has no usage');
  assert.equal(last.usage.prompt_tokens, u.prompt_tokens);
  assert.equal(last.usage.completion_tokens, u.completion_tokens);
  assert.equal(last.usage.total_tokens, u.total_tokens);
  assert.equal(typeof last.usage.prompt_tokens_details?.cached_tokens, 'number');
  for (const c of chunks.slice(0, -1)) assert.ok(!c.usage, 'usage before the last chunk');
  const deltas = chunks.flatMap((c) => c.choices);
  assert.equal(deltas[0].delta.role, 'assistant');
  assert.equal(deltas.map((d) => d.delta.content ?? '').join(''), text);
  const finishes = deltas.filter((d) => d.finish_reason);
  assert.equal(finishes.length, 1, 'exactly one chunk carries finish_reason');
  assert.equal(finishes[0].finish_reason, whole.choices[0].finish_reason);
  assert.equal(deltas.at(-1).finish_reason, whole.choices[0].finish_reason);
});

test('prefix cache: a repeated long prompt reports cached_tokens > 0', async () => {
  // A unique start, so that no earlier request shares the first block.
  const content = `Story number ${process.pid} ${Date.now()}. ${longPrompt(96)}`;
  const ask = async () => {
    const chunks = await streamText(await client.chat.completions.create({
      model: MODEL_NAME, messages: [{ role: 'user', content }], temperature: 0, max_tokens: 4,
      stream: true, stream_options: { include_usage: true },
    }));
    return chunks.at(-1).usage;
  };
  const first = await ask();
  assert.ok(first.prompt_tokens >= 64, `prompt too short for the test: ${first.prompt_tokens}`);
  assert.equal(first.prompt_tokens_details.cached_tokens, 0, 'a fresh prompt hit the cache');
  const second = await ask();
  assert.equal(second.prompt_tokens, first.prompt_tokens);
  const cached = second.prompt_tokens_details.cached_tokens;
  assert.ok(cached > 0, `repeat got cached_tokens ${cached}`);
  assert.ok(cached < second.prompt_tokens, 'at least one prompt token must be computed');
  assert.equal(cached % 16, 0, `cached_tokens ${cached} is not whole 16-token blocks`);
  // And the non-streaming usage says so too.
  const whole = await client.chat.completions.create({
    model: MODEL_NAME, messages: [{ role: 'user', content }], temperature: 0, max_tokens: 4,
  });
  assert.ok(whole.usage.prompt_tokens_details.cached_tokens > 0);
});

test('completions: streaming and not agree at temperature 0', async () => {
  const whole = await client.completions.create({
    model: MODEL_NAME, prompt: STORY, temperature: 0, max_tokens: 30,
  });
  assert.equal(whole.object, 'text_completion');
  const text = whole.choices[0].text;
  assert.ok(text.length > 0);
  assert.equal(whole.usage.completion_tokens, 30, 'the greedy story is longer than 30 tokens');
  assert.equal(whole.choices[0].finish_reason, 'length');
  const chunks = await streamText(await client.completions.create({
    model: MODEL_NAME, prompt: STORY, temperature: 0, max_tokens: 30, stream: true,
    stream_options: { include_usage: true },
  }));
  const choices = chunks.flatMap((c) => c.choices);
  assert.equal(choices.map((c) => c.text).join(''), text);
  assert.equal(choices.at(-1).finish_reason, 'length');
  assert.equal(chunks.at(-1).usage.completion_tokens, 30);
  assert.equal(chunks.at(-1).usage.prompt_tokens, whole.usage.prompt_tokens);
});

test('n: 2 gives two choices with indexes 0 and 1', async () => {
  const chat = await client.chat.completions.create({
    model: MODEL_NAME, messages: [{ role: 'user', content: 'Hello!' }], n: 2, max_tokens: 12, seed: 7,
  });
  assert.deepEqual(chat.choices.map((c) => c.index).sort(), [0, 1]);
  for (const c of chat.choices) assert.equal(typeof c.message.content, 'string');
  const completion = await client.completions.create({
    model: MODEL_NAME, prompt: STORY, n: 2, max_tokens: 8, seed: 7,
  });
  assert.deepEqual(completion.choices.map((c) => c.index).sort(), [0, 1]);
  assert.equal(completion.usage.completion_tokens, 16, 'usage counts both choices');
  // Streaming: chunks of both choices arrive, each choice finishes once.
  const chunks = await streamText(await client.completions.create({
    model: MODEL_NAME, prompt: STORY, n: 2, max_tokens: 8, seed: 7, stream: true,
  }));
  const byIndex = new Map();
  for (const c of chunks.flatMap((x) => x.choices)) {
    if (!byIndex.has(c.index)) byIndex.set(c.index, { text: '', finishes: 0 });
    byIndex.get(c.index).text += c.text;
    if (c.finish_reason) byIndex.get(c.index).finishes += 1;
  }
  assert.deepEqual([...byIndex.keys()].sort(), [0, 1]);
  for (const v of byIndex.values()) assert.equal(v.finishes, 1);
});

test('stop strings: the text ends before the stop string, finish_reason "stop"', async () => {
  const greedy = (await client.completions.create({
    model: MODEL_NAME, prompt: STORY, temperature: 0, max_tokens: 40,
  })).choices[0].text;
  assert.ok(greedy.length > 30, `greedy text too short: ${JSON.stringify(greedy)}`);
  const stop = greedy.slice(20, 26);
  const expected = greedy.slice(0, greedy.indexOf(stop));
  const r = await client.completions.create({
    model: MODEL_NAME, prompt: STORY, temperature: 0, max_tokens: 40, stop,
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'stop');
  assert.ok(!c.text.includes(stop), `text ${JSON.stringify(c.text)} contains stop ${JSON.stringify(stop)}`);
  assert.equal(c.text, expected);
  assert.equal(c.stop_reason, stop, 'vLLM reports the matched stop string as stop_reason');

  // An array of stop strings, streamed: the same cut, and no chunk leaks the stop string.
  const chunks = await streamText(await client.completions.create({
    model: MODEL_NAME, prompt: STORY, temperature: 0, max_tokens: 40, stop: ['never-appears', stop],
    stream: true,
  }));
  const choices = chunks.flatMap((x) => x.choices);
  assert.equal(choices.map((x) => x.text).join(''), expected);
  assert.equal(choices.at(-1).finish_reason, 'stop');

  // Chat: build the stop string from the chat's own greedy answer.
  const messages = [{ role: 'user', content: 'Tell me a story about a cat.' }];
  const chatGreedy = (await client.chat.completions.create({
    model: MODEL_NAME, messages, temperature: 0, max_tokens: 40,
  })).choices[0].message.content;
  assert.ok(chatGreedy.length > 12, `chat greedy text too short: ${JSON.stringify(chatGreedy)}`);
  const chatStop = chatGreedy.slice(8, 12);
  const chat = await client.chat.completions.create({
    model: MODEL_NAME, messages, temperature: 0, max_tokens: 40, stop: [chatStop],
  });
  assert.equal(chat.choices[0].finish_reason, 'stop');
  assert.equal(chat.choices[0].message.content, chatGreedy.slice(0, chatGreedy.indexOf(chatStop)));
});

test('max_tokens 5 gives finish_reason "length" and 5 completion tokens', async () => {
  const r = await client.completions.create({ model: MODEL_NAME, prompt: STORY, max_tokens: 5, ignore_eos: true });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 5);
  const chat = await client.chat.completions.create({
    model: MODEL_NAME, messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 5, ignore_eos: true,
  });
  assert.equal(chat.choices[0].finish_reason, 'length');
  assert.equal(chat.usage.completion_tokens, 5);
  const mct = await client.chat.completions.create({
    model: MODEL_NAME, messages: [{ role: 'user', content: 'Tell me a story.' }], max_completion_tokens: 3,
    ignore_eos: true,
  });
  assert.equal(mct.usage.completion_tokens, 3);
  assert.equal(mct.choices[0].finish_reason, 'length');
});

function assertDescending(values, what) {
  for (let i = 1; i < values.length; ++i) {
    assert.ok(values[i - 1] >= values[i], `${what} not descending: ${values}`);
  }
}

test('logprobs: chat top_logprobs 3, completions logprobs 2', async () => {
  const chat = await client.chat.completions.create({
    model: MODEL_NAME, messages: [{ role: 'user', content: 'Hello!' }], max_tokens: 6, ignore_eos: true,
    logprobs: true, top_logprobs: 3,
  });
  const content = chat.choices[0].logprobs?.content;
  assert.ok(Array.isArray(content), 'no logprobs.content');
  assert.equal(content.length, 6, 'one logprob entry per generated token');
  assert.equal(content.map((e) => e.token).join(''), chat.choices[0].message.content);
  for (const e of content) {
    assert.equal(typeof e.token, 'string');
    assert.ok(e.logprob <= 0, `logprob ${e.logprob} > 0`);
    assert.ok(Array.isArray(e.bytes));
    assert.equal(e.top_logprobs.length, 3);
    assertDescending(e.top_logprobs.map((t) => t.logprob), 'top_logprobs');
    for (const t of e.top_logprobs) assert.ok(t.logprob <= 0);
  }
  // Greedy: the chosen token is the most likely one.
  const greedy = await client.chat.completions.create({
    model: MODEL_NAME, messages: [{ role: 'user', content: 'Hello!' }], max_tokens: 4, ignore_eos: true,
    temperature: 0, logprobs: true, top_logprobs: 3,
  });
  for (const e of greedy.choices[0].logprobs.content) {
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-5);
  }

  const comp = await client.completions.create({
    model: MODEL_NAME, prompt: STORY, max_tokens: 5, ignore_eos: true, logprobs: 2,
  });
  const lp = comp.choices[0].logprobs;
  assert.ok(lp, 'no logprobs');
  assert.equal(lp.tokens.length, 5);
  assert.equal(lp.token_logprobs.length, 5);
  assert.equal(lp.top_logprobs.length, 5);
  assert.equal(lp.text_offset.length, 5);
  assert.equal(lp.tokens.join(''), comp.choices[0].text);
  for (const top of lp.top_logprobs) {
    const values = Object.values(top);
    assert.ok(values.length >= 1 && values.length <= 2, `top_logprobs entry ${JSON.stringify(top)}`);
    assertDescending(values, 'completion top_logprobs');
  }
});

test('seed: the same seed at temperature 1 repeats, different seeds differ', async () => {
  const gen = async (seed) => (await client.completions.create({
    model: MODEL_NAME, prompt: STORY, temperature: 1, max_tokens: 24, ignore_eos: true, seed,
  })).choices[0].text;
  const a1 = await gen(1234);
  const a2 = await gen(1234);
  assert.equal(a1, a2, 'same seed, different text');
  const others = await Promise.all([gen(1), gen(2), gen(3)]);
  const distinct = new Set([a1, ...others]);
  assert.ok(distinct.size >= 2, `four seeds gave one text: ${JSON.stringify(a1)}`);
  // Concurrently, the same seed still repeats (batching must not change sampling).
  const [b1, b2] = await Promise.all([gen(99), gen(99)]);
  assert.equal(b1, b2);
});

test('SDK errors: BadRequestError names the parameter, NotFoundError for an unknown model', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model: MODEL_NAME, messages: [{ role: 'user', content: 'hi' }], temperature: 'hot',
    }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.status, 400);
      assert.match(err.message, /temperature/);
      assert.equal(err.param, 'temperature');
      assert.equal(err.type, 'invalid_request_error');
      return true;
    });
  await assert.rejects(
    client.completions.create({ model: MODEL_NAME, prompt: STORY, n: 1000 }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.param, 'n');
      assert.match(err.message, /'n'.*1000.*maximum is 16/);
      return true;
    });
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
    (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.status, 404);
      assert.match(err.message, /no-such-model/);
      return true;
    });
  await assert.rejects(client.models.retrieve('no-such-model'), OpenAI.NotFoundError);
});

test('API key: AuthenticationError without the right key, success with it', async () => {
  const keyed = await startServe(['--api-key', 'sk-e2e-secret']);
  try {
    for (const apiKey of ['wrong-key', 'sk-e2e-secre', 'sk-e2e-secretX']) {
      const bad = new OpenAI({ baseURL: keyed.baseURL, apiKey, maxRetries: 0 });
      await assert.rejects(bad.models.list(), (err) => {
        assert.ok(err instanceof OpenAI.AuthenticationError, `${err.constructor.name}: ${err.message}`);
        assert.equal(err.status, 401);
        return true;
      });
      await assert.rejects(
        bad.chat.completions.create({ model: MODEL_NAME, messages: [{ role: 'user', content: 'hi' }] }),
        OpenAI.AuthenticationError);
    }
    const good = new OpenAI({ baseURL: keyed.baseURL, apiKey: 'sk-e2e-secret', maxRetries: 0 });
    const models = await good.models.list();
    assert.equal(models.data[0].id, MODEL_NAME);
    const r = await good.chat.completions.create({
      model: MODEL_NAME, messages: [{ role: 'user', content: 'hi' }], max_tokens: 3,
    });
    assert.ok(r.choices[0].message.content !== undefined);
  } finally {
    await keyed.stop();
  }
});
