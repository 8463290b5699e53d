// Tenants (issue 25 §2): keys of --api-key-file belong to tenants, and each tenant's
// prompts are cached in a namespace of its own. The side channel this closes: with one
// shared cache, `usage.prompt_tokens_details.cached_tokens` told a client whether another
// client had sent a prompt (a right guess of a secret in a system prompt showed more cached
// tokens than a wrong one; CVE-2025-46570 in vLLM). Through the official `openai` SDK.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServe, longPrompt, MODEL_NAME, withLogs } from './harness.mjs';

let server;
const keyFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-tenants-')), 'keys');
writeFileSync(keyFile, '# key tenant [min priority]\nsk-alice alice\nsk-alice-2 alice\nsk-mallory mallory\n');

before(async () => {
  server = await startServe(['--api-key-file', keyFile]);
});

after(async () => {
  if (!server) return;
  const exit = await server.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, withLogs(server, 'baton serve did not drain cleanly'));
});

const client = (apiKey) => new OpenAI({ baseURL: server.baseURL, apiKey, maxRetries: 0, timeout: 60000 });

async function cachedTokens(apiKey, content, extra = {}) {
  const r = await client(apiKey).chat.completions.create({
    model: MODEL_NAME, messages: [{ role: 'system', content }, { role: 'user', content: 'Hi' }],
    temperature: 0, max_tokens: 2, ...extra,
  });
  return r.usage.prompt_tokens_details.cached_tokens;
}

test("another tenant's cached prompt shows no cached tokens; the same tenant's does", async () => {
  const secret = `The door code is ${process.pid}${Date.now()}. ${longPrompt(96)}`;
  assert.equal(await cachedTokens('sk-alice', secret), 0, 'a fresh prompt hit the cache');
  // Mallory guesses Alice's system prompt exactly: nothing cached for her.
  assert.equal(await cachedTokens('sk-mallory', secret), 0, 'mallory saw alice\'s cached blocks');
  // Even choosing a cache_salt cannot reach another tenant's namespace.
  assert.equal(await cachedTokens('sk-mallory', `${secret} `, { cache_salt: 'x' }), 0);
  // Alice, with either of her keys, gets her own cache.
  const again = await cachedTokens('sk-alice-2', secret);
  assert.ok(again > 0, `alice's repeat got cached_tokens ${again}`);
  // A wrong key is a 401, as before.
  await assert.rejects(cachedTokens('sk-nobody', secret), (e) => e.status === 401);
});
