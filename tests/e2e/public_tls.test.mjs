// TLS on the public ports (issue 25 §1): `baton serve --public-tls-cert/--public-tls-key`
// serves HTTPS on the OpenAI port and TLS on the public gRPC port. Clients no one here
// wrote: the `openai` SDK over node's https agent, @grpc/grpc-js with SSL credentials. A
// plaintext client, and one that does not trust the CA, get nothing. Certificates are
// made here with the openssl command.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import OpenAI from 'openai';
import { startServe, batonProto, collectStream, MODEL_NAME, withLogs } from './harness.mjs';

const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-tls-'));
const file = (n) => path.join(dir, n);

function makeCertificates() {
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  for (const ca of ['ca', 'other_ca']) {
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${ca}`,
      '-keyout', `${ca}.key`, '-out', `${ca}.pem`);
  }
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=baton', '-keyout', 'server.key',
    '-out', 'server.csr');
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
    '-days', '2', '-extfile', 'san.ext', '-out', 'server.pem');
}

// The SDK's fetch, over node's https with `agent` (which trusts the test CA): the SDK's own
// global fetch cannot be given a CA.
function httpsFetch(agent) {
  return (url, init = {}) => new Promise((resolve, reject) => {
    const req = https.request(String(url), {
      method: init.method ?? 'GET', headers: Object.fromEntries(new Headers(init.headers)), agent,
      signal: init.signal ?? undefined,
    }, (res) => {
      const headers = new Headers();
      for (const [k, v] of Object.entries(res.headers)) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
      resolve(new Response(Readable.toWeb(res), { status: res.statusCode, headers }));
    });
    req.on('error', reject);
    if (init.body) req.write(init.body);
    req.end();
  });
}

let server;
let skip = '';

before(async () => {
  try {
    makeCertificates();
  } catch (e) {
    skip = `no openssl command to make test certificates (${e.message})`;
    return;
  }
  server = await startServe(['--public-tls-cert', file('server.pem'), '--public-tls-key', file('server.key')]);
});

after(async () => {
  if (!server) return;
  const exit = await server.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, withLogs(server, 'baton serve did not drain cleanly'));
});

test('the OpenAI SDK gets answers over HTTPS, streamed and not', async (t) => {
  if (skip) return t.skip(skip);
  assert.match(server.url, /^https:\/\//);
  const agent = new https.Agent({ ca: readFileSync(file('ca.pem')), keepAlive: true });
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'none', fetch: httpsFetch(agent), maxRetries: 0 });
  const r = await client.chat.completions.create({
    model: MODEL_NAME, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0,
  });
  assert.equal(r.choices.length, 1);
  assert.ok(r.usage.completion_tokens > 0);
  let text = '';
  const stream = await client.completions.create({ model: MODEL_NAME, prompt: 'Once upon a time',
    max_tokens: 6, temperature: 0, stream: true });
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  const once = await client.completions.create({ model: MODEL_NAME, prompt: 'Once upon a time',
    max_tokens: 6, temperature: 0 });
  assert.equal(text, once.choices[0].text, 'the stream and the whole answer agree');
  agent.destroy();
});

test('plaintext HTTP and an untrusted certificate get nothing', async (t) => {
  if (skip) return t.skip(skip);
  const plain = server.url.replace('https://', 'http://');
  await assert.rejects(fetch(`${plain}/v1/models`));
  const stranger = new https.Agent({ ca: readFileSync(file('other_ca.pem')) });
  await assert.rejects(new Promise((resolve, reject) => {
    https.get(`${server.url}/v1/models`, { agent: stranger }, resolve).on('error', reject);
  }), /self[- ]signed|unable to verify|certificate/i);
});

test('gRPC over TLS: Generate answers; insecure credentials do not', async (t) => {
  if (skip) return t.skip(skip);
  const Baton = batonProto().Baton;
  const secure = new Baton(server.grpcAddr, grpc.credentials.createSsl(readFileSync(file('ca.pem'))));
  const messages = await collectStream(secure.Generate({ text: 'Once upon a time', stop: { max_tokens: 3 } },
    new grpc.Metadata(), { deadline: Date.now() + 30000 }));
  assert.ok(messages.at(-1).finished, JSON.stringify(messages.at(-1)));
  secure.close();
  const insecure = new Baton(server.grpcAddr, grpc.credentials.createInsecure());
  await assert.rejects(collectStream(insecure.Generate({ text: 'hi', stop: { max_tokens: 1 } },
    new grpc.Metadata(), { deadline: Date.now() + 5000 })));
  insecure.close();
});
