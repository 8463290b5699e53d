// The official `openai` npm SDK (v6) as agent frameworks use it, against `baton serve`:
// structured outputs (`response_format` json_object / json_schema, `chat.completions.parse`
// with `zodResponseFormat`), tool calls (`tools`, `tool_choice` auto / none / required /
// named, `parallel_tool_calls`), their streamed deltas, the SDK's `runTools` loop, and the
// 400s for what the grammar engine cannot serve.
//
// Both models are tiny and cannot follow instructions, so every assertion is one that
// constrained decoding guarantees whatever the model: a document that ends with
// finish_reason "stop" validates against the schema sent (ajv is the oracle, not the
// server), tool calls name a tool and their arguments validate against its parameters, and
// a seeded run repeats (streamed or not). A document cut by max_tokens ("length") is
// allowed and reported, but most runs must finish: the schemas are bounded (maxLength,
// maxItems, enums) so that a document of random choices ends well inside max_tokens.
//
// Models: the bundled baton-tiny (its ChatML template) and stories260K from
// ../shared/testdata (BATON_TESTDATA_DIR) with the small template below; the stories260K
// tests skip, saying so, when the testdata is absent. One server per model serves all of
// its tests. Run: tests/e2e/run_node_test.sh tests/e2e/agents_api.test.mjs
// build/release/bin/baton build/release/bin/baton-router "$PWD" (or ctest -R e2e.agents_api).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { LengthFinishReasonError } from 'openai/error';
import { startServe, withLogs, SOURCE_DIR, MODEL_NAME } from './harness.mjs';

// zod, ajv and ajv-formats came with this test; an older `npm install` lacks them.
let z, zodResponseFormat, zodFunction, Ajv, Ajv2020, addFormats;
try {
  ({ z } = await import('zod'));
  ({ zodResponseFormat, zodFunction } = await import('openai/helpers/zod'));
  Ajv = (await import('ajv')).default;
  Ajv2020 = (await import('ajv/dist/2020.js')).default;
  addFormats = (await import('ajv-formats')).default;
} catch (err) {
  console.log(`e2e: SKIP agents_api.test.mjs: ${err.message.split('\n')[0]}; ` +
    "run 'npm install' in tests/e2e (scripts/test.sh does)");
  process.exit(77);
}

const TESTDATA = process.env.BATON_TESTDATA_DIR || path.join(SOURCE_DIR, '../shared/testdata');
const STORIES_HF = path.join(TESTDATA, 'models/stories260K/hf');

// stories260K ships no chat template. This one renders every message, the assistant's tool
// calls and the tool results (with their tool_call_id), so that a tool round trip changes
// the prompt.
const STORIES_TEMPLATE = `{% for m in messages %}{% if m.role == 'tool' %}Tool {{ m.tool_call_id }} said: {{ m.content }}
{% elif m.role == 'assistant' and m.tool_calls %}Assistant called{% for c in m.tool_calls %} {{ c.function.name }} with {{ c.function.arguments }}{% endfor %}.
{% else %}{{ m.role }}: {{ m.content }}
{% endif %}{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}`;

function storiesArgs() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-e2e-agents-'));
  const file = path.join(dir, 'stories.jinja');
  writeFileSync(file, STORIES_TEMPLATE);
  return ['--model', STORIES_HF, '--chat-template', file, '--served-model-name', 'stories260K'];
}

const MODELS = [
  { label: 'baton-tiny', args: () => [], skip: false },
  {
    label: 'stories260K', args: storiesArgs,
    skip: existsSync(STORIES_HF) ? false : `stories260K is absent at ${STORIES_HF} (../shared/testdata)`,
  },
];

// Both models have a 512-token context: prompt + max_tokens must fit.
const MAX_TOKENS = 400;
const TOOL_MAX_TOKENS = 300;
const SEEDS = [11, 22, 33, 44];

// ---- the oracle ----

const ajv7 = new Ajv({ allErrors: true, strict: false });
addFormats(ajv7);
const ajv2020 = new Ajv2020({ allErrors: true, strict: false });
addFormats(ajv2020);
const validators = new Map();

// ajv's verdict on `value` against `schema` (draft-07 when the schema says so, as zod's do;
// else 2020-12, which knows prefixItems): null when valid, else the errors as text.
function schemaErrors(schema, value) {
  const key = JSON.stringify(schema);
  let v = validators.get(key);
  if (!v) {
    const draft7 = typeof schema.$schema === 'string' && schema.$schema.includes('draft-07');
    v = (draft7 ? ajv7 : ajv2020).compile(structuredClone(schema));
    validators.set(key, v);
  }
  return v(value) ? null : JSON.stringify(v.errors);
}

function assertValid(schema, text, what) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    assert.fail(`${what}: not JSON (${err.message}): ${JSON.stringify(text)}`);
  }
  const errors = schemaErrors(schema, value);
  assert.equal(errors, null, `${what}: does not validate: ${errors}\ndocument: ${text}\nschema: ${JSON.stringify(schema)}`);
  return value;
}

// ---- schemas ----

// The structured-outputs guide's examples, bounded, and a few of every construct.
const STRUCTURED = [
  {
    name: 'math_reasoning',
    prompt: 'How can I solve 8x + 7 = -23?',
    zod: z.object({
      steps: z.array(z.object({ explanation: z.string().max(40), output: z.string().max(20) })).max(3),
      final_answer: z.string().max(20),
    }),
  },
  {
    // Recursive through "#" (a getter): zod emits {"$ref": "#"} for the children.
    name: 'ui',
    prompt: 'Make a user profile form.',
    zod: (() => {
      const UI = z.object({
        type: z.enum(['div', 'button', 'header', 'section', 'field', 'form']),
        label: z.string().max(12),
        get children() { return z.array(UI).max(2); },
        attributes: z.array(z.object({ name: z.string().max(8), value: z.string().max(8) })).max(1),
      });
      return UI;
    })(),
  },
  {
    // Recursive through definitions (z.lazy): "#/definitions/__schema0".
    name: 'ui_lazy',
    prompt: 'Make a page with a button.',
    zod: (() => {
      const Node = z.lazy(() => z.object({
        type: z.enum(['div', 'button', 'text']),
        label: z.string().max(10),
        children: z.array(Node).max(2),
      }));
      return z.object({ root: Node });
    })(),
  },
  {
    name: 'calendar_event',
    prompt: 'Alice and Bob are going to a science fair on Friday.',
    zod: z.object({
      name: z.string().max(24),
      date: z.string().max(16),
      participants: z.array(z.string().max(12)).max(3),
    }),
  },
  {
    name: 'research_paper',
    prompt: 'Extract the paper: "Tiny models" by Ann Lee and Tom Wu, about small stories.',
    zod: z.object({
      title: z.string().max(30),
      authors: z.array(z.string().max(16)).max(3),
      abstract: z.string().max(60),
      keywords: z.array(z.string().max(12)).max(3),
    }),
  },
  {
    // Nested objects, enums, nullable (a string and an object), a discriminated union
    // (anyOf), a union of types, numbers, booleans and a literal.
    name: 'pet_record',
    prompt: 'Tell me about a pet.',
    zod: z.object({
      id: z.string().max(8),
      kind: z.enum(['cat', 'dog', 'bird']),
      age: z.number(),
      friendly: z.boolean(),
      nickname: z.string().max(10).nullable(),
      owner: z.object({ name: z.string().max(10), city: z.string().max(10).nullable() }).nullable(),
      tags: z.array(z.enum(['small', 'big', 'fast', 'slow'])).max(3),
      toy: z.discriminatedUnion('type', [
        z.object({ type: z.literal('ball'), color: z.enum(['red', 'blue']) }),
        z.object({ type: z.literal('stick'), length: z.number() }),
      ]),
      score: z.union([z.number(), z.string().max(5)]),
      version: z.literal('v1'),
    }),
  },
];

// What zod does not write (zod's .int() adds minimum/maximum, its string formats add a
// pattern): integers, formats, prefixItems, const, $defs, nullable, an optional property.
const RAW_SCHEMA = {
  type: 'object',
  properties: {
    count: { type: 'integer' },
    ratio: { type: 'number' },
    ok: { type: 'boolean' },
    day: { type: 'string', format: 'date' },
    at: { type: 'string', format: 'date-time' },
    clock: { type: 'string', format: 'time' },
    id: { type: 'string', format: 'uuid' },
    pair: { type: 'array', prefixItems: [{ type: 'string', maxLength: 6 }, { type: 'integer' }], items: false, minItems: 2 },
    pet: { $ref: '#/$defs/pet' },
    note: { type: 'string', maxLength: 8, nullable: true },
    level: { const: 3 },
    mode: { anyOf: [{ type: 'null' }, { enum: ['a', 'b', 1, true] }] },
    extra: { type: 'string', maxLength: 5 },
  },
  required: ['count', 'ratio', 'ok', 'day', 'at', 'clock', 'id', 'pair', 'pet', 'note', 'level', 'mode'],
  additionalProperties: false,
  $defs: {
    pet: {
      type: 'object',
      properties: { name: { type: 'string', maxLength: 8 }, legs: { enum: [2, 4] } },
      required: ['name', 'legs'],
      additionalProperties: false,
    },
  },
};

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', maxLength: 16 },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'add',
      description: 'Adds two numbers',
      parameters: {
        type: 'object',
        properties: { a: { type: 'integer' }, b: { type: 'number' } },
        required: ['a', 'b'],
        additionalProperties: false,
      },
    },
  },
  {
    // Local definitions: the server moves them when it combines the tools' schemas.
    type: 'function',
    function: {
      name: 'find_pet',
      description: 'Finds a pet',
      parameters: {
        type: 'object',
        properties: {
          name: { type: 'string', maxLength: 12 },
          kinds: { type: 'array', items: { enum: ['cat', 'dog'] }, maxItems: 2 },
          owner: { anyOf: [{ type: 'null' }, { $ref: '#/$defs/person' }] },
        },
        required: ['name', 'kinds', 'owner'],
        additionalProperties: false,
        $defs: {
          person: {
            type: 'object',
            properties: { name: { type: 'string', maxLength: 10 } },
            required: ['name'],
            additionalProperties: false,
          },
        },
      },
    },
  },
  // No parameters: a function that takes none (its arguments are "{}").
  { type: 'function', function: { name: 'ping', description: 'Checks the line' } },
];
const NO_PARAMETERS = { type: 'object', properties: {}, additionalProperties: false };
const parametersOf = (name) => TOOLS.find((t) => t.function.name === name)?.function.parameters ?? NO_PARAMETERS;
const TOOL_NAMES = TOOLS.map((t) => t.function.name);

// ---- helpers ----

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

// The content and finish_reason of a streamed choice 0.
function streamedText(chunks) {
  let content = '';
  const finishes = [];
  for (const c of chunks) {
    for (const ch of c.choices) {
      content += ch.delta?.content ?? '';
      if (ch.finish_reason) finishes.push(ch.finish_reason);
    }
  }
  assert.equal(finishes.length, 1, `finish_reason in ${finishes.length} chunks`);
  return { content, finish: finishes[0] };
}

// Tool calls put together from streamed deltas, checking the delta protocol: the first
// delta of each index carries a non-empty id, type "function" and the name; later ones
// only add argument fragments (an id or name again must be the same).
function streamedToolCalls(chunks) {
  const calls = [];
  let content = '';
  const finishes = [];
  for (const c of chunks) {
    for (const ch of c.choices) {
      content += ch.delta?.content ?? '';
      if (ch.finish_reason) finishes.push(ch.finish_reason);
      for (const d of ch.delta?.tool_calls ?? []) {
        assert.equal(typeof d.index, 'number', `tool call delta without an index: ${JSON.stringify(d)}`);
        const call = calls[d.index];
        if (!call) {
          assert.ok(typeof d.id === 'string' && d.id.length > 0, `first delta of call ${d.index} has no id: ${JSON.stringify(d)}`);
          assert.equal(d.type, 'function', `first delta of call ${d.index}: ${JSON.stringify(d)}`);
          assert.ok(typeof d.function?.name === 'string' && d.function.name.length > 0,
            `first delta of call ${d.index} has no function.name: ${JSON.stringify(d)}`);
          calls[d.index] = { id: d.id, type: 'function', function: { name: d.function.name, arguments: d.function.arguments ?? '' } };
        } else {
          if (d.id) assert.equal(d.id, call.id, `call ${d.index} changed its id`);
          if (d.function?.name) assert.equal(d.function.name, call.function.name, `call ${d.index} changed its name`);
          call.function.arguments += d.function?.arguments ?? '';
        }
      }
    }
  }
  assert.equal(finishes.length, 1, `finish_reason in ${finishes.length} chunks`);
  for (let i = 0; i < calls.length; ++i) assert.ok(calls[i], `tool call indexes skip ${i}`);
  return { calls, content, finish: finishes[0] };
}

const callSummary = (calls) => (calls ?? []).map((c) => ({ name: c.function.name, arguments: c.function.arguments }));

function assertIds(calls) {
  const ids = calls.map((c) => c.id);
  for (const id of ids) assert.ok(typeof id === 'string' && id.length > 0, `tool call id ${JSON.stringify(id)}`);
  assert.equal(new Set(ids).size, ids.length, `tool call ids repeat: ${ids}`);
}

// Checks the tool calls of one choice: each names a tool (`names`) and its arguments
// validate against that tool's parameters.
function assertToolCalls(calls, names, what) {
  assert.ok(Array.isArray(calls) && calls.length >= 1, `${what}: no tool_calls`);
  assertIds(calls);
  for (const c of calls) {
    assert.equal(c.type, 'function', `${what}: ${JSON.stringify(c)}`);
    assert.ok(names.includes(c.function.name), `${what}: tool ${JSON.stringify(c.function.name)} is not among ${names}`);
    assert.equal(typeof c.function.arguments, 'string', `${what}: arguments must be a JSON string`);
    assertValid(parametersOf(c.function.name), c.function.arguments, `${what}: ${c.function.name} arguments`);
  }
}

// Tallies finish reasons; most runs must finish, the cut ones are reported.
class Finishes {
  constructor(t, what) {
    this.t = t;
    this.what = what;
    this.counts = {};
    this.total = 0;
  }

  add(finish, detail) {
    this.counts[finish] = (this.counts[finish] ?? 0) + 1;
    this.total += 1;
    if (finish === 'length') this.t.diagnostic(`${this.what}: cut by max_tokens (finish_reason "length"): ${detail}`);
  }

  assertMostly(expected) {
    const ok = this.counts[expected] ?? 0;
    this.t.diagnostic(`${this.what}: finish reasons ${JSON.stringify(this.counts)} of ${this.total}`);
    for (const f of Object.keys(this.counts)) {
      assert.ok(f === expected || f === 'length', `${this.what}: unexpected finish_reason ${f}`);
    }
    assert.ok(ok * 2 > this.total, `${this.what}: only ${ok} of ${this.total} runs finished with "${expected}"`);
  }
}

// One `chat.completions.parse` run. The SDK throws on "length" (LengthFinishReasonError)
// and when zod refuses the document; the same seeded request made with `create` then gives
// the content, and ajv decides (zod counts maxLength in UTF-16 units, JSON Schema in code
// points).
async function parseRun(client, body) {
  try {
    const c = await client.chat.completions.parse(body);
    const choice = c.choices[0];
    return { finish: choice.finish_reason, content: choice.message.content, parsed: choice.message.parsed, message: choice.message };
  } catch (err) {
    if (err instanceof LengthFinishReasonError) return { finish: 'length' };
    if (!(err instanceof z.ZodError)) throw err;
    const raw = (await client.chat.completions.create(body)).choices[0];
    return { finish: raw.finish_reason, content: raw.message.content, zodError: err.message };
  }
}

// ---- the tests, once per model ----

for (const model of MODELS) {
  describe(model.label, { skip: model.skip }, () => {
    let server;
    let client;
    let name;
    const chat = (content) => [{ role: 'user', content }];

    before(async () => {
      server = await startServe(model.args());
      client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
      name = server.model;
    });

    after(async () => {
      if (!server) return;
      const exit = await server.stop();
      assert.deepEqual(exit, { code: 0, signal: null }, withLogs(server, 'baton serve did not drain cleanly'));
    });

    test('parse with zodResponseFormat: every finished document validates (ajv), parsed equals content', async (t) => {
      const runs = [];
      for (const spec of STRUCTURED) {
        const response_format = zodResponseFormat(spec.zod, spec.name);
        for (const seed of SEEDS) {
          const body = { model: name, messages: chat(spec.prompt), response_format, max_tokens: MAX_TOKENS, temperature: 1, seed };
          runs.push(parseRun(client, body).then((r) => ({ ...r, spec, schema: response_format.json_schema.schema, seed })));
        }
      }
      const results = await Promise.all(runs);
      const all = new Finishes(t, `${model.label} structured outputs`);
      for (const spec of STRUCTURED) {
        const mine = results.filter((r) => r.spec === spec);
        let stops = 0;
        for (const r of mine) {
          const what = `${spec.name} seed ${r.seed}`;
          all.add(r.finish, what);
          if (r.finish !== 'stop') continue;
          stops += 1;
          const value = assertValid(r.schema, r.content, what);
          if (r.zodError) {
            t.diagnostic(`${what}: zod refused a document that JSON Schema accepts: ${r.zodError}`);
          } else {
            assert.deepEqual(r.parsed, value, `${what}: message.parsed differs from JSON.parse(content)`);
            assert.equal(r.message.refusal ?? null, null);
          }
        }
        assert.ok(stops >= 1, `${spec.name}: none of ${mine.length} seeds finished within ${MAX_TOKENS} tokens`);
      }
      all.assertMostly('stop');
    });

    test('parse with a hand-written schema: integers, formats, prefixItems, const, $defs, nullable', async (t) => {
      const response_format = { type: 'json_schema', json_schema: { name: 'record', schema: RAW_SCHEMA, strict: true } };
      const results = await Promise.all(SEEDS.map((seed) => parseRun(client, {
        model: name, messages: chat('Fill in the record.'), response_format, max_tokens: MAX_TOKENS, temperature: 1, seed,
      }).then((r) => ({ ...r, seed }))));
      const finishes = new Finishes(t, `${model.label} hand-written schema`);
      for (const r of results) {
        finishes.add(r.finish, `seed ${r.seed}`);
        if (r.finish !== 'stop') continue;
        const value = assertValid(RAW_SCHEMA, r.content, `seed ${r.seed}`);
        assert.deepEqual(r.parsed, value);
      }
      finishes.assertMostly('stop');
    });

    test('response_format json_object: the content is a JSON object', async (t) => {
      const results = await Promise.all(SEEDS.map(async (seed) => {
        const c = await client.chat.completions.create({
          model: name, messages: chat('Describe a cat as a JSON object.'), response_format: { type: 'json_object' },
          max_tokens: MAX_TOKENS, temperature: 1, seed,
        });
        return { seed, finish: c.choices[0].finish_reason, content: c.choices[0].message.content };
      }));
      const finishes = new Finishes(t, `${model.label} json_object`);
      for (const r of results) {
        finishes.add(r.finish, `seed ${r.seed}`);
        if (r.finish !== 'stop') continue;
        let value;
        assert.doesNotThrow(() => { value = JSON.parse(r.content); }, `seed ${r.seed}: not JSON: ${JSON.stringify(r.content)}`);
        assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value),
          `seed ${r.seed}: not an object: ${r.content}`);
      }
      // json_object bounds no string or nesting: a random model may run long, so only one
      // finished document is required.
      const stops = finishes.counts.stop ?? 0;
      t.diagnostic(`${model.label} json_object: finish reasons ${JSON.stringify(finishes.counts)}`);
      assert.ok(stops >= 1, `no json_object run finished within ${MAX_TOKENS} tokens`);
    });

    test('streamed structured output equals the non-streamed run of the same seed, and validates', async (t) => {
      const cases = [];
      for (const spec of [STRUCTURED[0], STRUCTURED[5]]) {
        for (const seed of SEEDS.slice(0, 2)) cases.push({ spec, seed });
      }
      const finishes = new Finishes(t, `${model.label} streamed structured outputs`);
      await Promise.all(cases.map(async ({ spec, seed }) => {
        const response_format = zodResponseFormat(spec.zod, spec.name);
        const schema = response_format.json_schema.schema;
        const body = { model: name, messages: chat(spec.prompt), response_format, max_tokens: MAX_TOKENS, temperature: 1, seed };
        const what = `${spec.name} seed ${seed}`;
        const whole = (await client.chat.completions.create(body)).choices[0];
        const streamed = streamedText(await collect(await client.chat.completions.create({ ...body, stream: true })));
        assert.equal(streamed.content, whole.message.content, `${what}: streamed deltas differ from the whole response`);
        assert.equal(streamed.finish, whole.finish_reason, `${what}: finish_reason`);
        finishes.add(whole.finish_reason, what);
        if (whole.finish_reason !== 'stop') return;
        const value = assertValid(schema, streamed.content, what);
        // The SDK's stream helper puts the chunks together and parses with zod.
        const helper = client.chat.completions.stream(body);
        try {
          const final = await helper.finalChatCompletion();
          assert.equal(final.choices[0].message.content, whole.message.content, `${what}: the SDK's stream helper`);
          assert.deepEqual(final.choices[0].message.parsed, value, `${what}: the SDK's stream helper parsed`);
        } catch (err) {
          if (!(err instanceof z.ZodError)) throw err;
          t.diagnostic(`${what}: zod refused a document that JSON Schema accepts: ${err.message}`);
        }
      }));
      finishes.assertMostly('stop');
    });

    test('tool_choice named: one call of that function, arguments validate, finish_reason tool_calls', async (t) => {
      const finishes = new Finishes(t, `${model.label} named tool_choice`);
      const cases = TOOL_NAMES.flatMap((fn) => SEEDS.slice(0, 2).map((seed) => ({ fn, seed })));
      await Promise.all(cases.map(async ({ fn, seed }) => {
        const what = `${fn} seed ${seed}`;
        const c = await client.chat.completions.create({
          model: name, messages: chat('What is the weather in Paris?'), tools: TOOLS,
          tool_choice: { type: 'function', function: { name: fn } }, max_tokens: TOOL_MAX_TOKENS, temperature: 1, seed,
        });
        const choice = c.choices[0];
        finishes.add(choice.finish_reason, what);
        if (choice.finish_reason !== 'tool_calls') return;
        const calls = choice.message.tool_calls;
        assert.equal(calls?.length, 1, `${what}: ${JSON.stringify(choice.message)}`);
        assert.equal(calls[0].function.name, fn);
        assertToolCalls(calls, [fn], what);
        assert.ok(!choice.message.content, `${what}: content beside a forced call: ${JSON.stringify(choice.message.content)}`);
        assert.equal(choice.message.role, 'assistant');
      }));
      finishes.assertMostly('tool_calls');
    });

    test('tool_choice required: at least one call, each of a given tool; parallel_tool_calls false: exactly one', async (t) => {
      const finishes = new Finishes(t, `${model.label} required tool_choice`);
      const cases = SEEDS.flatMap((seed) => [{ seed, parallel: undefined }, { seed, parallel: false }]);
      await Promise.all(cases.map(async ({ seed, parallel }) => {
        const what = `seed ${seed} parallel_tool_calls ${parallel}`;
        const c = await client.chat.completions.create({
          model: name, messages: chat('Add 2 and 3, then find my dog.'), tools: TOOLS, tool_choice: 'required',
          ...(parallel === undefined ? {} : { parallel_tool_calls: parallel }),
          max_tokens: TOOL_MAX_TOKENS, temperature: 1, seed,
        });
        const choice = c.choices[0];
        finishes.add(choice.finish_reason, what);
        if (choice.finish_reason !== 'tool_calls') return;
        assertToolCalls(choice.message.tool_calls, TOOL_NAMES, what);
        if (parallel === false) assert.equal(choice.message.tool_calls.length, 1, `${what}: more than one call`);
        t.diagnostic(`${what}: ${choice.message.tool_calls.map((x) => x.function.name).join(', ')}`);
      }));
      finishes.assertMostly('tool_calls');
    });

    test('streamed tool calls (named and required) equal the non-streamed ones of the same seed', async (t) => {
      const cases = [
        { tool_choice: { type: 'function', function: { name: 'get_weather' } }, seed: SEEDS[0] },
        { tool_choice: { type: 'function', function: { name: 'find_pet' } }, seed: SEEDS[1] },
        { tool_choice: 'required', seed: SEEDS[2] },
        { tool_choice: 'required', seed: SEEDS[3] },
        { tool_choice: 'required', parallel_tool_calls: false, seed: SEEDS[0] },
      ];
      const finishes = new Finishes(t, `${model.label} streamed tool calls`);
      await Promise.all(cases.map(async (k) => {
        const what = `tool_choice ${JSON.stringify(k.tool_choice)} seed ${k.seed}`;
        const body = {
          model: name, messages: chat('Find my cat Tom.'), tools: TOOLS, tool_choice: k.tool_choice,
          ...(k.parallel_tool_calls === undefined ? {} : { parallel_tool_calls: k.parallel_tool_calls }),
          max_tokens: TOOL_MAX_TOKENS, temperature: 1, seed: k.seed,
        };
        const whole = (await client.chat.completions.create(body)).choices[0];
        const streamed = streamedToolCalls(await collect(await client.chat.completions.create({ ...body, stream: true })));
        assert.equal(streamed.finish, whole.finish_reason, `${what}: finish_reason`);
        finishes.add(whole.finish_reason, what);
        assert.deepEqual(callSummary(streamed.calls), callSummary(whole.message.tool_calls), `${what}: streamed calls differ`);
        if (whole.finish_reason !== 'tool_calls') return;
        const names = typeof k.tool_choice === 'string' ? TOOL_NAMES : [k.tool_choice.function.name];
        assertToolCalls(streamed.calls, names, `${what} (streamed)`);
        if (typeof k.tool_choice !== 'string' || k.parallel_tool_calls === false) assert.equal(streamed.calls.length, 1);
        // The SDK's stream helper checks the deltas too (it throws on a call without an id,
        // type or name) and puts the same calls together.
        const final = await client.chat.completions.stream(body).finalChatCompletion();
        assert.deepEqual(callSummary(final.choices[0].message.tool_calls), callSummary(whole.message.tool_calls),
          `${what}: the SDK's stream helper`);
        assertIds(final.choices[0].message.tool_calls);
      }));
      finishes.assertMostly('tool_calls');
    });

    test('parse with zodFunction: parsed_arguments equal the arguments', async () => {
      const weather = zodFunction({
        name: 'get_weather',
        parameters: z.object({ city: z.string().max(16), unit: z.enum(['celsius', 'fahrenheit']) }),
      });
      const c = await client.chat.completions.parse({
        model: name, messages: chat('Weather in Oslo?'), tools: [weather],
        tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: TOOL_MAX_TOKENS, temperature: 1, seed: 5,
      });
      const call = c.choices[0].message.tool_calls[0];
      assert.equal(c.choices[0].finish_reason, 'tool_calls');
      const value = assertValid(weather.function.parameters, call.function.arguments, 'zodFunction arguments');
      assert.deepEqual(call.function.parsed_arguments, value);
    });

    test('runTools: the SDK calls the function, sends the tool result back, the model answers', async (t) => {
      const weatherTool = TOOLS[0].function;
      const received = [];
      const tools = [{
        type: 'function',
        function: {
          name: weatherTool.name,
          description: weatherTool.description,
          parameters: weatherTool.parameters,
          parse: JSON.parse,
          function: async (args) => {
            received.push(args);
            return { city: args.city, temperature: 21, unit: args.unit, sky: 'sunny with a few small clouds' };
          },
        },
      }];
      // A named tool_choice: the SDK runs the call and stops after one function call
      // (AbstractChatCompletionRunner._runTools), so the first leg cannot loop.
      const first = client.chat.completions.runTools({
        model: name, messages: chat('What is the weather in Paris?'), tools,
        tool_choice: { type: 'function', function: { name: weatherTool.name } },
        max_tokens: TOOL_MAX_TOKENS, temperature: 1, seed: 3,
      }, { maxChatCompletions: 3 });
      await first.done();
      assert.ok(received.length >= 1, `the tool function was never called; messages: ${JSON.stringify(first.messages)}`);
      for (const args of received) assertValid(weatherTool.parameters, JSON.stringify(args), 'arguments the function got');
      const callMessage = first.messages.find((m) => m.role === 'assistant' && m.tool_calls?.length);
      assert.ok(callMessage, 'no assistant message with tool_calls');
      const toolMessage = first.messages.find((m) => m.role === 'tool');
      assert.ok(toolMessage, `no tool message: ${JSON.stringify(first.messages)}`);
      assert.equal(toolMessage.tool_call_id, callMessage.tool_calls[0].id);
      assert.match(toolMessage.content, /sunny/);
      const firstTurn = first.allChatCompletions().at(-1);
      assert.equal(firstTurn.choices[0].finish_reason, 'tool_calls');

      // Second leg: the conversation with the tool result, tool_choice none; the model
      // answers in text and the SDK's loop ends. The runner throws on finish_reason
      // "length", so the answer ends at its first sentence (tiny models rarely stop alone).
      const second = client.chat.completions.runTools({
        model: name, messages: first.messages, tools, tool_choice: 'none', max_tokens: 200, temperature: 1, seed: 3,
        stop: ['.', '!', '?', '\n'],
      }, { maxChatCompletions: 2 });
      const answer = await second.finalContent();
      assert.equal(typeof answer, 'string');
      const answerTurn = second.allChatCompletions().at(-1);
      assert.ok(['stop', 'length'].includes(answerTurn.choices[0].finish_reason), answerTurn.choices[0].finish_reason);
      assert.ok(!answerTurn.choices[0].message.tool_calls?.length, 'tool_choice none gave tool calls');
      assert.ok(second.messages.some((m) => m.role === 'tool' && m.tool_call_id === toolMessage.tool_call_id),
        'the final messages lack the tool message');
      // The tool result reached the prompt through the chat template: the prompt grew, and
      // a longer tool result makes it longer still.
      assert.ok(answerTurn.usage.prompt_tokens > firstTurn.usage.prompt_tokens,
        `prompt_tokens ${answerTurn.usage.prompt_tokens} after the tool result, ${firstTurn.usage.prompt_tokens} before`);
      const longer = first.messages.map((m) => (m.role === 'tool' ? { ...m, content: `${m.content} and then it rained all day long` } : m));
      const probe = await client.chat.completions.create({ model: name, messages: longer, max_tokens: 1 });
      assert.ok(probe.usage.prompt_tokens > answerTurn.usage.prompt_tokens, 'the tool message content is not in the prompt');
      t.diagnostic(`${model.label}: tool called with ${JSON.stringify(received)}; answer ${JSON.stringify(answer)}`);

      // The streaming runner puts the call together from deltas and calls the function too.
      const before = received.length;
      const streamed = client.chat.completions.runTools({
        model: name, messages: chat('What is the weather in Rome?'), tools, stream: true,
        tool_choice: { type: 'function', function: { name: weatherTool.name } },
        max_tokens: TOOL_MAX_TOKENS, temperature: 1, seed: 4,
      }, { maxChatCompletions: 3 });
      await streamed.done();
      assert.ok(received.length > before, 'the streaming runner never called the function');
      assert.ok(streamed.messages.some((m) => m.role === 'tool'), 'the streaming runner sent no tool message');
    });

    if (model.label !== MODEL_NAME) return;

    // The request's own errors do not depend on the model: once, on baton-tiny.
    test('errors: unsupported schema constructs, unknown tool_choice, json_schema without a schema', async () => {
      const bad = async (body, check) => assert.rejects(
        client.chat.completions.create({ model: name, messages: chat('hi'), max_tokens: 4, ...body }),
        (err) => {
          assert.ok(err instanceof OpenAI.BadRequestError, `${err.constructor.name}: ${err.message}`);
          assert.equal(err.status, 400);
          check(err);
          return true;
        });
      const withPattern = { type: 'object', properties: { code: { type: 'string', pattern: '^[A-Z]{3}$' } }, required: ['code'] };
      await bad({ response_format: { type: 'json_schema', json_schema: { name: 'p', schema: withPattern } } },
        (err) => assert.match(err.message, /pattern/));
      await bad({ tools: [{ type: 'function', function: { name: 'f', parameters: withPattern } }], tool_choice: 'required' },
        (err) => assert.match(err.message, /pattern/));
      await bad({ tools: [{ type: 'function', function: { name: 'f', parameters: withPattern } }],
        tool_choice: { type: 'function', function: { name: 'f' } } },
      (err) => assert.match(err.message, /pattern/));
      await bad({ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'no_such_function' } } },
        (err) => assert.match(err.message, /no_such_function/));
      // The message names the missing 'schema' (not merely the type 'json_schema').
      await bad({ response_format: { type: 'json_schema', json_schema: { name: 'empty' } } },
        (err) => assert.match(err.message, /(^|[^_])schema/));
    });

    // zod writes constructs a user does not see: .int() adds minimum/maximum (the safe
    // integer range) and z.iso.date() a pattern. Either the server serves them (and the
    // document validates) or it refuses with a 400 that names the construct.
    test('zod schemas with hidden constructs: served and valid, or a 400 naming the construct', async (t) => {
      const cases = [
        { label: 'z.number().int()', zod: z.object({ n: z.number().int() }), construct: /minimum|maximum/ },
        { label: 'z.iso.date()', zod: z.object({ d: z.iso.date() }), construct: /pattern/ },
      ];
      for (const k of cases) {
        const response_format = zodResponseFormat(k.zod, 'hidden');
        try {
          const r = await parseRun(client, {
            model: name, messages: chat('A number, please.'), response_format, max_tokens: 64, temperature: 1, seed: 9,
          });
          assert.equal(r.finish, 'stop', `${k.label}: finish_reason ${r.finish}`);
          assertValid(response_format.json_schema.schema, r.content, k.label);
          t.diagnostic(`${k.label}: served (${r.content})`);
        } catch (err) {
          if (!(err instanceof OpenAI.BadRequestError)) throw err;
          assert.match(err.message, k.construct, `${k.label}: the 400 does not name the construct`);
          t.diagnostic(`${k.label}: refused: ${err.message}`);
        }
      }
    });
  });
}
