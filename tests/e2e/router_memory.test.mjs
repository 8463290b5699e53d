// Router memory under large bodies (issue 25 §3): one 8 MiB body once cost the router
// ~350 MB and 15 at once 4.73 GB. Now a request costs a small multiple of its body, and
// --max-inflight-body-bytes bounds the bodies held at once (429 past it). A real
// `baton-router` in front of a real worker; the measure is the router's own peak resident
// memory (VmHWM in /proc), the bodies three kinds of near-8 MiB input: a text prompt, a
// token-id prompt and a chat message.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { startWorker, startRouter, MODEL_NAME, withLogs } from './harness.mjs';

let worker;
let router;

before(async () => {
  worker = await startWorker();
  router = await startRouter(worker.addr);
});

after(async () => {
  await router?.stop();
  await worker?.stop();
});

const MiB = 1 << 20;
const peakMiB = (pid) =>
  Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

function bodies() {
  const size = 8 * MiB - 4096;  // under --max-body-bytes (8 MiB) with the JSON around it
  const text = 'the quick brown fox jumps over the lazy dog. '.repeat(Math.floor(size / 45));
  const ids = [];
  for (let n = 2; n < size; n += 6) ids.push(12345);  // "12345," per id
  const out = [];
  for (let i = 0; i < 5; i++) {
    out.push(['/v1/completions', JSON.stringify({ model: MODEL_NAME, prompt: text, max_tokens: 1 })]);
    out.push(['/v1/completions', JSON.stringify({ model: MODEL_NAME, prompt: ids, max_tokens: 1 })]);
    out.push(['/v1/chat/completions',
      JSON.stringify({ model: MODEL_NAME, messages: [{ role: 'user', content: text }], max_tokens: 1 })]);
  }
  return out;
}

test('15 concurrent 8 MiB bodies keep the router under 1 GB, and it still serves', async () => {
  const pid = router.proc.child.pid;
  const before = peakMiB(pid);
  const all = bodies();
  const statuses = await Promise.all(all.map(async ([path, body]) => {
    assert.ok(body.length <= 8 * MiB, `body of ${body.length} bytes`);
    const res = await fetch(`${router.url}${path}`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body,
    });
    await res.text();
    return res.status;
  }));
  const peak = peakMiB(pid);
  const counts = {};
  for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1;
  console.log(`# router peak RSS ${before.toFixed(0)} -> ${peak.toFixed(0)} MiB; answers ${JSON.stringify(counts)}`);
  assert.ok(peak < 1024, withLogs(router, `router peak RSS ${peak.toFixed(0)} MiB`));
  for (const s of statuses) assert.ok(s === 400 || s === 429, `status ${s}`);
  // It still answers an ordinary request.
  const ok = await fetch(`${router.url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL_NAME, prompt: 'Once upon a time', max_tokens: 2 }),
  });
  assert.equal(ok.status, 200, await ok.text());
});
