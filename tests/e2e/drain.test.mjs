// Drain on SIGTERM (docs/operations.md, "Drain"): readiness goes first, new requests get
// 503 with Retry-After (not a refused connection), streams in flight go on for
// --shutdown-grace-seconds, and a stream that cannot finish ends with an error event and
// [DONE], never a silent cut. A draining worker refuses new calls and the router routes
// around it; its streams left at the grace continue on another worker.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  startWorker, startRouter, request, workerStats, waitForStats, scrape, parseMetrics, metricValue, MODEL_NAME,
  withLogs, sleep,
} from './harness.mjs';

// Slow steps make a stream of 400 tokens last ~16 s, far past a 2 s grace, while one of 8
// tokens ends well within it.
const SLOW = ['--debug-step-delay-ms', '40'];
const GRACE = ['--shutdown-grace-seconds', '2'];

// Opens a streamed completion and reads its SSE events as they come. Returns
// {firstEvent: Promise, done: Promise<{events, text}>}: events are the data payloads.
function openStream(url, body) {
  let sawFirst;
  const firstEvent = new Promise((resolve) => { sawFirst = resolve; });
  const done = (async () => {
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL_NAME, stream: true, ...body }),
    });
    assert.equal(res.status, 200);
    const decoder = new TextDecoder();
    let text = '';
    const events = [];
    for await (const chunk of res.body) {
      text += decoder.decode(chunk, { stream: true });
      let end;
      while ((end = text.indexOf('\n\n')) >= 0) {
        const block = text.slice(0, end);
        text = text.slice(end + 2);
        if (block.startsWith('data: ')) events.push(block.slice(6));
        if (events.length === 1) sawFirst();
      }
    }
    return { events, rest: text };
  })();
  done.catch(() => sawFirst());
  return { firstEvent, done };
}

const prompt = 'Once upon a time';

test('the router drains: 503 with Retry-After for new work, short streams finish, long ones end with an error event and [DONE]', async () => {
  const worker = await startWorker(SLOW);
  const router = await startRouter(worker.addr, GRACE);
  try {
    const long = openStream(router.url, { prompt, max_tokens: 400, ignore_eos: true, temperature: 0 });
    await long.firstEvent;
    const short = openStream(router.url, { prompt, max_tokens: 8, ignore_eos: true, temperature: 0 });
    await short.firstEvent;

    const stopped = router.stop(20000);
    const sigterm = Date.now();
    // Readiness first: /ready turns 503 while /health (liveness) stays 200.
    let ready;
    for (let i = 0; i < 50; ++i) {
      ready = await request(`${router.url}/ready`, { method: 'GET' });
      if (ready.status === 503) break;
      await sleep(20);
    }
    assert.equal(ready.status, 503, ready.text);
    assert.equal((await request(`${router.url}/health`, { method: 'GET' })).status, 200);
    // A new connection is still accepted, and told to come back.
    const fresh = await request(`${router.url}/v1/completions`, {
      body: { model: MODEL_NAME, prompt, max_tokens: 4 },
      headers: { connection: 'close' },
    });
    assert.equal(fresh.status, 503, fresh.text);
    assert.equal(fresh.headers.get('retry-after'), '1');
    assert.match(fresh.json.error.message, /shutting down/);

    const s = await short.done;
    assert.equal(s.events.at(-1), '[DONE]');
    const finishes = s.events.slice(0, -1).map((e) => JSON.parse(e)).filter((e) => e.choices?.[0]?.finish_reason);
    assert.equal(finishes.length, 1, JSON.stringify(s.events));
    assert.equal(finishes[0].choices[0].finish_reason, 'length');

    const l = await long.done;
    const elapsed = Date.now() - sigterm;
    assert.equal(l.events.at(-1), '[DONE]', JSON.stringify(l.events.slice(-3)));
    const error = JSON.parse(l.events.at(-2));
    assert.ok(error.error, `the event before [DONE] is not an error: ${l.events.at(-2)}`);
    assert.match(error.error.message, /--shutdown-grace-seconds/);
    // It went on for the grace (2 s), and not much longer.
    assert.ok(elapsed >= 1800 && elapsed < 8000, `the long stream ended ${elapsed} ms after SIGTERM`);
    assert.ok(l.events.length > 10, 'the long stream was cut before the grace');
    assert.deepEqual(await stopped, { code: 0, signal: null }, withLogs(router, 'the router did not exit cleanly'));
  } finally {
    await router.stop();
    await worker.stop();
  }
});

test('a draining worker is routed around, and its stream left at the grace continues on another worker', async () => {
  const workers = [await startWorker([...SLOW, ...GRACE]), await startWorker([...SLOW, ...GRACE])];
  const router = await startRouter(workers.map((w) => w.addr).join(','));
  try {
    const body = { prompt, max_tokens: 120, ignore_eos: true, temperature: 0 };
    // The oracle: the same greedy request, uninterrupted.
    const reference = await request(`${router.url}/v1/completions`, { body: { model: MODEL_NAME, ...body } });
    assert.equal(reference.status, 200, reference.text);

    const stream = openStream(router.url, body);
    await stream.firstEvent;
    const stats = await Promise.all(workers.map((w) => workerStats(w.addr)));
    const serving = stats.findIndex((s) => s.running > 0);
    assert.ok(serving >= 0, JSON.stringify(stats));
    const draining = workers[serving];
    const other = workers[1 - serving];
    const stopped = draining.stop(20000);

    // New requests during the drain go to the other worker and succeed.
    await sleep(200);
    const during = await request(`${router.url}/v1/completions`,
      { body: { model: MODEL_NAME, prompt, max_tokens: 4 } });
    assert.equal(during.status, 200, during.text);

    const s = await stream.done;
    assert.equal(s.events.at(-1), '[DONE]');
    const chunks = s.events.slice(0, -1).map((e) => JSON.parse(e));
    assert.ok(chunks.every((c) => !c.error), JSON.stringify(chunks.filter((c) => c.error)));
    const text = chunks.map((c) => c.choices[0].text).join('');
    assert.equal(text, reference.json.choices[0].text, 'the migrated stream differs from an uninterrupted run');
    // It was cut at the grace and continued elsewhere, not finished where it began.
    assert.equal(metricValue(parseMetrics((await scrape(router)).text), 'baton_router_migrations_total'), 1);
    assert.deepEqual(await stopped, { code: 0, signal: null }, withLogs(draining, 'the worker did not exit cleanly'));
    // The other worker took the rest of the stream and the request made during the drain.
    await waitForStats(other.addr, (st) => st.running === 0 && st.requests_finished >= 2);
  } finally {
    await router.stop();
    for (const w of workers) await w.stop();
  }
});
