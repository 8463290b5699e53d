// Slow and idle connections (issue 25 §3): each HTTP connection once held a thread of the
// router for its whole life, so 16 idle or slow-header connections took all 16 places of
// `--max-connections 16` for 30-60 s. Now a connection waits for its request head without
// a thread (service/request_waiter.h), and at the limit the connection that has waited the
// longest makes room. Measured on a real `baton-router` in front of a real worker, with raw
// sockets (node:net) as the slow clients and the `openai` SDK as the normal one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { readdirSync } from 'node:fs';
import OpenAI from 'openai';
import { startWorker, startRouter, MODEL_NAME, withLogs, sleep } from './harness.mjs';

let worker;
let router;
let small;

before(async () => {
  worker = await startWorker();
  router = await startRouter(worker.addr);
  small = await startRouter(worker.addr, ['--max-connections', '16']);
});

after(async () => {
  await small?.stop();
  await router?.stop();
  await worker?.stop();
});

const threadsOf = (server) => readdirSync(`/proc/${server.proc.child.pid}/task`).length;

// Opens `n` connections: even ones stay idle, odd ones send the start of a request head
// and then one more byte every `trickleMs`, never finishing it.
async function slowClients(server, n, trickleMs = 200) {
  const { port } = new URL(server.url);
  const ended = new Array(n).fill(false);
  const sockets = await Promise.all(Array.from({ length: n }, (_, i) => new Promise((resolve, reject) => {
    const s = net.connect(Number(port), '127.0.0.1', () => {
      if (i % 2 === 1) s.write('POST /v1/completions HTTP/1.1\r\nHost: a\r\n');
      resolve(s);
    });
    s.on('error', () => {});  // an evicted or timed-out socket is expected
    s.on('end', () => { ended[i] = true; });
    s.resume();
    s.once('error', reject);
  })));
  const timer = setInterval(() => {
    for (let i = 1; i < sockets.length; i += 2) if (!sockets[i].destroyed) sockets[i].write('X');
  }, trickleMs);
  return { sockets, ended, close: () => { clearInterval(timer); for (const s of sockets) s.destroy(); } };
}

async function timedCompletion(server) {
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 20000 });
  const start = performance.now();
  const out = await client.completions.create({ model: MODEL_NAME, prompt: 'Once upon a time', max_tokens: 4, temperature: 0 });
  return { ms: performance.now() - start, text: out.choices[0].text };
}

test('a normal request gets through while 1,000 slow connections are open, and they hold no threads', async () => {
  const baseline = await timedCompletion(router);
  const threadsBefore = threadsOf(router);
  const slow = await slowClients(router, 1000);
  try {
    await sleep(1000);  // a few trickled bytes on each slow head
    const threadsDuring = threadsOf(router);
    const during = await timedCompletion(router);
    // And a stream, which holds a thread while it is answered.
    const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    let pieces = 0;
    for await (const chunk of await client.completions.create(
      { model: MODEL_NAME, prompt: 'Once upon a time', max_tokens: 4, stream: true })) {
      pieces += chunk.choices.length;
    }
    console.log(`# router threads ${threadsBefore} -> ${threadsDuring} with 1000 slow connections; ` +
      `completion ${baseline.ms.toFixed(1)} ms alone, ${during.ms.toFixed(1)} ms among them`);
    assert.equal(during.text, baseline.text);
    assert.ok(pieces > 0);
    assert.ok(threadsDuring <= threadsBefore + 4,
      withLogs(router, `router threads ${threadsBefore} -> ${threadsDuring}`));
    assert.ok(during.ms < 5000, `completion took ${during.ms} ms`);
  } finally {
    slow.close();
  }
});

test('with --max-connections 16, 16 idle or slow-header connections do not lock others out', async () => {
  const slow = await slowClients(small, 16);
  try {
    await sleep(500);
    const { ms, text } = await timedCompletion(small);
    console.log(`# --max-connections 16 full of slow clients: completion in ${ms.toFixed(1)} ms`);
    assert.ok(text.length > 0);
    assert.ok(ms < 5000, withLogs(small, `completion took ${ms} ms`));
    // What made room was an idle connection (the longest waiting), closed by the router.
    await sleep(200);
    const closed = slow.ended.flatMap((e, i) => (e ? [i] : []));
    assert.ok(closed.length >= 1, 'no slow connection was closed');
    assert.ok(closed.every((i) => i % 2 === 0), `closed: ${closed}`);
  } finally {
    slow.close();
  }
});
