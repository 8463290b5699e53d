// The request inspector (docs/inspector.md): `baton serve --enable-inspector` serves /inspect,
// and Debian's headless Chromium, driven by puppeteer-core, loads it, runs a traced request
// and draws it. The DOM is checked against the trace the router answered with, every
// request the page makes must go to the router that served it, and a full-page screenshot
// is kept as an artifact (${BATON_ARTIFACT_DIR:-<build dir>/artifacts}/inspector.png, and
// inspector-split.png). The capacity panel is checked against `baton plan --json` on the same
// model files. Then split workers behind an API key (HTTP Basic login, the prefill
// leg and its K/V transfer), and without --enable-inspector /inspect is 404. Skips (exit 77)
// without Chromium or puppeteer-core (scripts/install_deps.sh and `npm install` in
// tests/e2e install them).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { BATON_BIN, MODEL_DIR, startServe, startWorker, startSplitRouter, request, withLogs } from './harness.mjs';

const CHROMIUM = process.env.BATON_CHROMIUM || '/usr/bin/chromium';
if (!existsSync(CHROMIUM)) {
  console.log(`e2e: SKIP inspector.test.mjs: no Chromium at ${CHROMIUM} (scripts/install_deps.sh installs Debian's chromium)`);
  process.exit(77);
}
let puppeteer;
try {
  puppeteer = (await import('puppeteer-core')).default;
} catch (e) {
  console.log(`e2e: SKIP inspector.test.mjs: puppeteer-core is not installed (npm install in tests/e2e): ${e.message}`);
  process.exit(77);
}

const ARTIFACT_DIR = process.env.BATON_ARTIFACT_DIR ||
  path.join(path.dirname(path.dirname(path.resolve(BATON_BIN))), 'artifacts');  // <build>/bin/baton
const CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
  "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'";
const PROMPT = 'Once upon a time, there was a little dog named Toby. He liked to play with his red ball.';

let server;
let browser;
let page;
const requests = [];  // every URL the page asked for
const pageErrors = [];

before(async () => {
  server = await startServe(['--enable-inspector']);
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // A container has no user namespaces for Chromium's sandbox and a small /dev/shm.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
      '--no-default-browser-check', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--disable-extensions'],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(`console: ${m.text()}`);
  });
});

after(async () => {
  if (browser) await browser.close();
  if (!server) return;
  const exit = await server.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, withLogs(server, 'baton serve did not drain cleanly'));
});

test('/inspect is the page, with its Content-Security-Policy', async () => {
  const res = await request(`${server.url}/inspect`, { method: 'GET' });
  assert.equal(res.status, 200, res.text);
  assert.match(res.headers.get('content-type'), /^text\/html/);
  assert.equal(res.headers.get('content-security-policy'), CSP);
  assert.match(res.text, /<svg id="timeline"/);
  assert.doesNotMatch(res.text, /\bsrc=["']?https?:|href=["']?https?:/, 'the page loads nothing from elsewhere');
  assert.equal((await request(`${server.url}/inspect`, { method: 'POST', body: {} })).status, 405);
});

// Runs the page's request and waits for the Run button to come back; returns the
// router's JSON answer as the page received it.
async function runOnPage({ prompt, maxTokens, chat = false }) {
  await page.$eval('#prompt', (e) => { e.value = ''; });
  await page.type('#prompt', prompt);
  await page.$eval('#max-tokens', (e, v) => { e.value = v; }, String(maxTokens));
  const checked = await page.$eval('#chat', (e) => e.checked);
  if (checked !== chat) await page.click('#chat');
  const endpoint = chat ? '/v1/chat/completions' : '/v1/completions';
  const answered = page.waitForResponse((r) => new URL(r.url()).pathname === endpoint && r.request().method() === 'POST',
    { timeout: 30000 });
  await page.click('#run');
  const res = await answered;
  const body = await res.json();
  await page.waitForFunction(() => !document.querySelector('#run').disabled &&
    document.querySelector('#status').textContent !== 'Running…', { timeout: 30000 });
  return { status: res.status(), body };
}

const count = (sel) => page.$$eval(sel, (l) => l.length);

// What every drawn trace must show, checked against the answer the page received.
async function checkJourney(body) {
  const t = body.trace;
  assert.ok(t, 'the answer carries a trace');
  const statusBox = await page.$eval('#status', (e) => ({ cls: e.className, text: e.textContent }));
  assert.notEqual(statusBox.cls, 'error', statusBox.text);
  assert.match(statusBox.text, /^Done: /);
  assert.deepEqual(pageErrors, []);

  // Tokens: every prompt token (specials and cached ones marked), then one per sampled step.
  const all = [...t.prefill.steps, ...t.steps];
  const sampled = all.filter((s) => s.sampled);
  assert.ok(body.usage.prompt_tokens > 0 && body.usage.completion_tokens > 0, JSON.stringify(body.usage));
  assert.equal(t.prompt_tokens.length, body.usage.prompt_tokens);
  assert.equal(await count('#token-strip .token.prompt'), body.usage.prompt_tokens);
  assert.equal(await count('#token-strip .token.cached'), t.cached_tokens);
  assert.equal(await count('#token-strip .token.special'), t.prompt_tokens.filter((x) => x.special).length);
  assert.equal(await count('#token-strip .token.generated'), sampled.length);
  assert.equal(sampled.length, body.usage.completion_tokens, 'one sampled step per output token');
  const shownPrompt = await page.$$eval('#token-strip .token.prompt', (l) => l.map((e) => e.textContent));
  const visible = (s) => (s === '' ? '∅' : s.replace(/ /g, '·').replace(/\n/g, '↵').replace(/\t/g, '→').replace(/\r/g, '␍'));
  assert.deepEqual(shownPrompt, t.prompt_tokens.map((x) => visible(x.text)));
  // Token text is text, never markup.
  assert.equal(await page.$$eval('#token-strip .token', (l) => l.filter((e) => e.childElementCount).length), 0);

  // Timeline: one .step per step, prefill and decode, on both legs; TTFT marked.
  assert.equal(await count('#timeline .step'), all.length);
  assert.equal(await count('#timeline .step.prefill'), all.filter((s) => s.prefill).length);
  assert.equal(await count('#timeline .step.decode'), all.filter((s) => !s.prefill).length);
  assert.ok(all.some((s) => s.prefill) && all.some((s) => !s.prefill), 'the prompt was prefilled and tokens decoded');
  assert.equal(await count('#timeline .ttft'), 1);
  // The serving worker's steps lie in time order on the shared axis, inside the chart.
  const xs = await page.$$eval('#timeline .step', (l) => l.map((e) => Number(e.getAttribute('x'))));
  const own = xs.slice(t.prefill.steps.length);
  for (let i = 1; i < own.length; ++i) assert.ok(own[i] >= own[i - 1], `step ${i} drawn before step ${i - 1}: ${own}`);
  assert.ok(xs.every((x) => x >= 0 && x <= 1000), JSON.stringify(xs));
  // Layer groups: one marker in the transfer lane and one on the chunk per group.
  const groups = all.reduce((n, s) => n + s.layer_groups.length, 0);
  assert.equal(await count('#timeline .layer-group'), 2 * groups);

  // Routing: the candidates, the chosen ones highlighted, the serving worker among them.
  assert.equal(await count('#route tbody tr'), t.route.candidates.length);
  const chosen = await page.$$eval('#route tbody tr.chosen td:first-child', (l) => l.map((e) => e.textContent));
  assert.deepEqual(chosen, t.route.candidates.filter((c) => c.chosen).map((c) => c.worker));
  assert.ok(chosen.includes(t.worker), `the serving worker ${t.worker} is among the chosen rows ${chosen}`);
  const summary = await page.$eval('#route-summary', (e) => e.textContent);
  assert.ok(summary.includes(`expected ${t.route.expected_cached_tokens.toLocaleString('en-US')}, ` +
    `actual ${t.cached_tokens.toLocaleString('en-US')}`), summary);

  // Memory: the request's K/V line, the weights' horizontal line, the crossover.
  assert.ok(t.weight_bytes > 0 && t.kv_bytes_per_token > 0, JSON.stringify({ w: t.weight_bytes, kv: t.kv_bytes_per_token }));
  assert.equal(await count('#kv-chart .kv-line'), 1);
  const weight = await page.$eval('#kv-chart .weight-line', (e) => [e.getAttribute('y1'), e.getAttribute('y2')]);
  assert.equal(weight[0], weight[1], 'the weight line is horizontal');
  assert.equal(await count('#kv-chart .crossover'), 1);
  const crossover = Math.ceil(t.weight_bytes / t.kv_bytes_per_token).toLocaleString('en-US');
  assert.match(await page.$eval('#kv-chart', (e) => e.textContent), new RegExp(`crossover: ${crossover} tokens`));

  // Sampling: one card per sampled token, the chosen candidate marked.
  assert.equal(await count('#candidates .cand-step'), sampled.length);

  // Totals.
  const totals = await page.$eval('#totals', (e) => e.textContent);
  for (const k of ['TTFT', 'TPOT', 'end to end', 'output tokens']) assert.ok(totals.includes(k), totals);

  // Capacity: the served model on the chosen GPU, for a conversation as long as this one.
  await checkCapacity(body, { device: 'h200', tp: 1 });
}

// `baton plan --json` on the served model's files: the oracle of the capacity panel.
function batonPlan(args) {
  return JSON.parse(execFileSync(BATON_BIN, ['plan', '--model', MODEL_DIR, '--json', ...args], { encoding: 'utf8' }));
}

// Waits for the panel to show the plan of this request's lengths on `device` x `tp`, and
// compares every figure with `baton plan`.
async function checkCapacity(body, { device, tp, kvDtype }) {
  const prompt = body.usage.prompt_tokens;
  const conversation = prompt + body.usage.completion_tokens;
  const want = new URLSearchParams({ device, tp: String(tp), 'prompt-len': String(prompt),
    'max-model-len': String(conversation) });
  if (kvDtype) want.set('kv-dtype', kvDtype);
  await page.waitForFunction((q) => document.querySelector('#capacity-figures').getAttribute('data-query') === q,
    { timeout: 10000 }, want.toString());
  const note = await page.$eval('#capacity-note', (e) => ({ cls: e.className, text: e.textContent }));
  assert.equal(note.cls, 'note', note.text);
  const shown = Object.fromEntries(await page.$$eval('#capacity-figures .metric',
    (l) => l.map((e) => [e.getAttribute('data-field'), e.getAttribute('data-value')])));
  const plan = batonPlan(['--device', device, '--tp', String(tp), '--prompt-len', String(prompt),
    '--max-model-len', String(conversation), ...(kvDtype ? ['--kv-dtype', kvDtype] : [])]);
  const same = (field, value) => assert.ok(Math.abs(Number(shown[field]) - value) <= 1e-9 * Math.abs(value),
    `${field}: the page shows ${shown[field]}, baton plan says ${value}`);
  same('kv_bytes_per_token', plan.kv_bytes_per_token.total);
  same('weight_bytes', plan.weight_bytes.per_rank);
  same('kv_cache_bytes', plan.kv_cache_bytes.per_rank);
  same('conversations_fit', plan.conversations_fit);
  same('decode_floor', plan.decode.floor_seconds_per_token);
  same('prefill', plan.prefill.seconds);
  if (plan.compute_bound_batch === null) assert.equal(shown.compute_bound_batch, 'null');
  else same('compute_bound_batch', plan.compute_bound_batch);
  assert.ok(plan.conversations_fit > 0 && plan.weight_bytes.per_rank > 0, JSON.stringify(plan));
  assert.match(note.text, new RegExp(`on ${tp} × ${device} `));
  return plan;
}

async function screenshot(name) {
  mkdirSync(ARTIFACT_DIR, { recursive: true });
  const shot = path.join(ARTIFACT_DIR, name);
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`inspector screenshot: ${shot}`);
  const png = readFileSync(shot);
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG');
  assert.ok(png.length > 30000, `the screenshot ${shot} is ${png.length} bytes`);
}

// Every request the page made since `mark` went to `server` (nothing left the machine).
function assertStayedOn(server, mark) {
  const origin = new URL(server.url);
  const made = requests.slice(mark);
  assert.ok(made.length >= 2, JSON.stringify(made));
  for (const u of made) {
    const url = new URL(u);
    assert.equal(url.host, `127.0.0.1:${origin.port}`, `the page asked ${u}`);
    assert.ok(['/inspect', '/inspect/plan', '/v1/models', '/v1/completions', '/v1/chat/completions',
      '/favicon.ico'].includes(url.pathname), u);
  }
}

test('the page runs a traced request and draws its journey', async () => {
  await page.goto(`${server.url}/inspect`, { waitUntil: 'load' });
  const first = await runOnPage({ prompt: PROMPT, maxTokens: 12 });
  assert.equal(first.status, 200, JSON.stringify(first.body));
  await checkJourney(first.body);
  assert.equal(first.body.trace.prefill.steps.length, 0, 'a colocated worker has no prefill leg');

  // The same prompt again: its prefix comes from the cache, and the strip marks it.
  const again = await runOnPage({ prompt: PROMPT, maxTokens: 12 });
  assert.equal(again.status, 200, JSON.stringify(again.body));
  await checkJourney(again.body);
  assert.ok(again.body.trace.cached_tokens > 0, 'the second run hit the prefix cache');
  const strip = await page.$$eval('#token-strip .token.prompt', (l) => l.map((e) => e.classList.contains('cached')));
  assert.deepEqual(strip, strip.map((_, i) => i < again.body.trace.cached_tokens), 'the cached tokens lead the prompt');
  await screenshot('inspector.png');

  // The temperature slider reshapes the candidates: at 0 (greedy) each keeps exactly one.
  await page.$eval('#explore-temperature', (e) => { e.value = '0'; e.dispatchEvent(new Event('input')); });
  const kept = await page.$$eval('#candidates .cand-step', (cards) => cards.map((c) =>
    [...c.querySelectorAll('tbody tr')].map((r) => r.cells[3] && r.cells[3].textContent)));
  for (const card of kept) {
    assert.deepEqual(card.filter((v) => v !== 'cut'), ['100%'], `greedy keeps exactly one: ${card}`);
  }
  // ... and back at the request's own values (temperature 0.8, top_p 0.95) more survive somewhere.
  await page.click('#explore-reset');
  assert.equal(await page.$eval('#explore-temperature', (e) => Number(e.value)), again.body.trace.temperature);
  const reshaped = await page.$$eval('#candidates .cand-step', (cards) => cards.map((c) =>
    [...c.querySelectorAll('tbody tr')].map((r) => r.cells[3] && r.cells[3].textContent).filter((v) => v !== 'cut')));
  for (const card of reshaped) {
    const sum = card.reduce((a, v) => a + (v.startsWith('<') ? 0 : parseFloat(v)), 0);
    assert.ok(Math.abs(sum - 100) < 1.5, `the kept candidates' shares add up to 100%: ${card}`);
  }
});

test('the capacity panel plans the served model on another GPU, TP and cache type, as baton plan does', async () => {
  const { status, body } = await runOnPage({ prompt: PROMPT, maxTokens: 6 });
  assert.equal(status, 200, JSON.stringify(body));
  await checkCapacity(body, { device: 'h200', tp: 1 });
  // The choices are the model's: every TP its heads and KV heads split into.
  const tps = await page.$$eval('#plan-tp option', (l) => l.map((e) => Number(e.value)));
  const heads = JSON.parse(readFileSync(path.join(MODEL_DIR, 'config.json'), 'utf8')).num_attention_heads;
  assert.ok(tps.length > 1 && tps[0] === 1 && tps.every((tp) => heads % tp === 0), JSON.stringify(tps));
  await page.select('#plan-device', 'h100');
  await page.select('#plan-tp', String(tps[1]));
  await page.select('#plan-kv-dtype', 'fp8');
  const plan = await checkCapacity(body, { device: 'h100', tp: tps[1], kvDtype: 'fp8' });
  const single = batonPlan(['--device', 'h100', '--prompt-len', '8', '--kv-dtype', 'fp8']);
  assert.ok(plan.weight_bytes.per_rank < single.weight_bytes.per_rank, 'TP splits the weights');
  await screenshot('inspector-capacity.png');

  // /inspect/plan itself: `baton plan`'s flags as parameters, and refusals naming them.
  for (const [query, param] of [['tp=3', 'tp'], ['device=b200', 'device'], ['prompt-len=100000', 'prompt-len'],
    ['memory-gb=-1', 'memory-gb'], ['colour=red', 'colour']]) {
    const res = await request(`${server.url}/inspect/plan?${query}`, { method: 'GET' });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json.error.param, param, res.text);
  }
});

test('chat mode calls /v1/chat/completions and shows the template\'s tokens', async () => {
  const { status, body } = await runOnPage({ prompt: 'Tell me about Toby.', maxTokens: 4, chat: true });
  assert.equal(status, 200, JSON.stringify(body));
  assert.notEqual(await page.$eval('#status', (e) => e.className), 'error');
  assert.equal(await count('#token-strip .token.prompt'), body.usage.prompt_tokens);
  assert.equal(await count('#timeline .step'), body.trace.prefill.steps.length + body.trace.steps.length);
  // The chat template's control tokens are marked special.
  const specials = body.trace.prompt_tokens.filter((x) => x.special).length;
  assert.ok(specials > 0, JSON.stringify(body.trace.prompt_tokens));
  assert.equal(await count('#token-strip .token.special'), specials);
});

test('an API error shows its message in #status', async () => {
  const { status, body } = await runOnPage({ prompt: PROMPT, maxTokens: 4096 });
  assert.equal(status, 400, JSON.stringify(body));
  const s = await page.$eval('#status', (e) => ({ cls: e.className, text: e.textContent }));
  assert.equal(s.cls, 'error');
  assert.ok(s.text.includes(body.error.message), `${s.text} shows ${body.error.message}`);
});

test('every request the page made stayed on the router', async () => {
  assertStayedOn(server, 0);
  assert.ok(requests.some((u) => new URL(u).pathname === '/v1/models'), 'the model came from /v1/models');
  assert.ok(requests.some((u) => new URL(u).pathname === '/v1/chat/completions'), 'chat mode ran');
  assert.deepEqual(pageErrors.filter((e) => !/status of 400/.test(e)), []);
});

// Split workers behind an API key: the browser logs in with HTTP Basic (the key as the
// password) and its /v1/* calls carry the same credentials.
test('split workers behind an API key: the prefill leg, its layer groups and the K/V transfer', async () => {
  const key = `sk-inspector-${process.pid}`;
  const workerArgs = ['--ucx-tls', 'tcp'];
  const engine = { engine: ['--threads', '1', '--kv-cache-memory', '16MiB'] };
  const prefill = await startWorker(['--role', 'prefill', ...workerArgs], engine);
  const decode = await startWorker(['--role', 'decode', ...workerArgs], engine);
  const router = await startSplitRouter(prefill.addr, decode.addr, ['--enable-inspector', '--api-key', key]);
  try {
    for (const p of ['/inspect', '/inspect/plan']) {
      const denied = await request(`${router.url}${p}`, { method: 'GET' });
      assert.equal(denied.status, 401, denied.text);
      assert.match(denied.headers.get('www-authenticate') || '', /^Basic /);
    }

    const mark = requests.length;
    pageErrors.length = 0;
    await page.authenticate({ username: 'inspector', password: key });
    await page.goto(`${router.url}/inspect`, { waitUntil: 'load' });
    const { status, body } = await runOnPage({ prompt: PROMPT, maxTokens: 8 });
    assert.equal(status, 200, JSON.stringify(body));
    await checkJourney(body);
    const t = body.trace;
    assert.equal(t.prefill.worker, prefill.addr);
    assert.equal(t.worker, decode.addr);
    assert.ok(t.prefill.steps.length > 0, 'the prefill worker computed the prompt');
    assert.equal(await count('#timeline .step'), t.prefill.steps.length + t.steps.length);
    const lanes = await page.$$eval('#timeline .lane-label', (l) => l.map((e) => e.textContent));
    assert.ok(lanes.some((l) => l.startsWith('prefill ')) && lanes.some((l) => l.startsWith('decode ')), lanes.join(', '));
    if (t.prefill.transfer_seconds > 0) assert.equal(await count('#timeline rect.transfer'), 1);
    const chosen = await page.$$eval('#route tbody tr.chosen td:first-child', (l) => l.map((e) => e.textContent));
    assert.ok(chosen.includes(prefill.addr) && chosen.includes(decode.addr), chosen.join(', '));
    assertStayedOn(router, mark);
    await screenshot('inspector-split.png');

    // The key field is sent as a Bearer token, in place of the Basic credentials: a wrong
    // key is refused, and the page says so.
    await page.type('#api-key', 'sk-wrong');
    const wrong = await runOnPage({ prompt: PROMPT, maxTokens: 2 });
    assert.equal(wrong.status, 401, JSON.stringify(wrong.body));
    const s = await page.$eval('#status', (e) => ({ cls: e.className, text: e.textContent }));
    assert.equal(s.cls, 'error');
    assert.ok(s.text.startsWith('401') && s.text.includes(wrong.body.error.message), s.text);
  } finally {
    await page.authenticate(null);
    await router.stop();
    await Promise.all([prefill.stop(), decode.stop()]);
  }
});

test('without --enable-inspector, /inspect is 404', async () => {
  const off = await startServe();
  try {
    const res = await request(`${off.url}/inspect`, { method: 'GET' });
    assert.equal(res.status, 404, res.text);
    assert.match(res.json.error.message, /--enable-inspector/);
  } finally {
    await off.stop();
  }
});
