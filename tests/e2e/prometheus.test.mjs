// A real Prometheus (Debian's) scrapes a local split cluster under load, with the rules of
// deploy/prometheus loaded: every recording and alert rule evaluates without error, every
// expression of every panel of deploy/grafana/baton-cluster.json runs through its HTTP API
// without error, and the core panels return data. Skips (exit 77) without `prometheus`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, readdirSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  startWorker, startSplitRouter, request, sleep, MODEL_NAME, SOURCE_DIR, withLogs,
} from './harness.mjs';

function which(bin) {
  try {
    return execFileSync('sh', ['-c', `command -v ${bin}`]).toString().trim();
  } catch {
    return '';
  }
}
const PROMETHEUS = which('prometheus');
if (!PROMETHEUS) {
  console.log('e2e: SKIP prometheus.test.mjs: no prometheus binary (Debian package "prometheus", scripts/install_deps.sh)');
  process.exit(77);
}

const DEPLOY = path.join(SOURCE_DIR, 'deploy');
const WORKER_ARGS = ['--ucx-tls', 'tcp', '--metrics-port', '0'];
const ENGINE = { engine: ['--threads', '1', '--kv-cache-memory', '16MiB'] };

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

let prefill, decode, router, prom, promUrl, promLog = '';

before(async () => {
  prefill = await startWorker(['--role', 'prefill', ...WORKER_ARGS], ENGINE);
  decode = await startWorker(['--role', 'decode', ...WORKER_ARGS], ENGINE);
  assert.ok(prefill.metricsPort && decode.metricsPort, 'workers did not say their metrics ports');
  router = await startSplitRouter(prefill.addr, decode.addr);

  // The rules as shipped, evaluated every second here instead of every 15 s.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-prometheus-'));
  const ruleFiles = [];
  for (const f of readdirSync(path.join(DEPLOY, 'prometheus/rules'))) {
    const text = readFileSync(path.join(DEPLOY, 'prometheus/rules', f), 'utf8').replace(/interval: 15s/g, 'interval: 1s');
    writeFileSync(path.join(dir, f), text);
    ruleFiles.push(path.join(dir, f));
  }
  const job = (name, port) => `  - job_name: ${name}\n    static_configs:\n      - targets: ["127.0.0.1:${port}"]\n`;
  writeFileSync(path.join(dir, 'prometheus.yml'),
    'global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n' +
    `rule_files:\n${ruleFiles.map((f) => `  - ${f}\n`).join('')}` +
    'scrape_configs:\n' + job('baton-router', router.httpPort) +
    job('baton-prefill', prefill.metricsPort) + job('baton-decode', decode.metricsPort));
  const port = await freePort();
  promUrl = `http://127.0.0.1:${port}`;
  prom = spawn(PROMETHEUS, [`--config.file=${path.join(dir, 'prometheus.yml')}`,
    `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
  { stdio: ['ignore', 'pipe', 'pipe'] });
  prom.stdout.on('data', (d) => { promLog += d; });
  prom.stderr.on('data', (d) => { promLog += d; });
  for (let i = 0; i < 100; ++i) {
    try {
      if ((await fetch(`${promUrl}/-/ready`)).ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`prometheus did not become ready:\n${promLog.slice(-2000)}`);
});

after(async () => {
  if (prom) prom.kill('SIGKILL');
  for (const p of [router, prefill, decode]) if (p) await p.kill('SIGKILL');
});

async function query(expr) {
  const r = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
  const body = await r.json();
  return body;
}

test('every rule and every dashboard expression evaluates, and the core panels have data', async () => {
  // Load for a while, across several scrapes: completions (some streamed), a bad request.
  const end = Date.now() + 8000;
  let ok = 0;
  while (Date.now() < end) {
    const r = await request(`${router.url}/v1/completions`, {
      body: { model: MODEL_NAME, prompt: `Once upon a time ${ok % 7}`, max_tokens: 8, stream: ok % 2 === 0 },
    });
    assert.equal(r.status, 200, withLogs(router, r.text));
    ++ok;
    if (ok % 10 === 0) {
      assert.equal((await request(`${router.url}/v1/completions`, { body: { model: MODEL_NAME, prompt: 'x', temperature: -1 } })).status, 400);
    }
  }
  assert.ok(ok > 5, `only ${ok} completions in 8 s`);

  // Every target up.
  const up = await query('up');
  assert.equal(up.status, 'success');
  const jobs = Object.fromEntries(up.data.result.map((s) => [s.metric.job, s.value[1]]));
  assert.deepEqual(jobs, { 'baton-router': '1', 'baton-prefill': '1', 'baton-decode': '1' }, JSON.stringify(up));

  // Rules: evaluated by Prometheus itself, each healthy.
  await sleep(2500);
  const rules = await (await fetch(`${promUrl}/api/v1/rules`)).json();
  assert.equal(rules.status, 'success');
  const all = rules.data.groups.flatMap((g) => g.rules);
  assert.ok(all.length >= 30, `only ${all.length} rules loaded`);
  for (const r of all) {
    assert.equal(r.health, 'ok', `rule ${r.name}: ${r.lastError}`);
    const q = await query(r.query);
    assert.equal(q.status, 'success', `rule ${r.name}: ${JSON.stringify(q)}`);
  }

  // Every panel's expressions; the core ones must have data.
  const dashboard = JSON.parse(readFileSync(path.join(DEPLOY, 'grafana/baton-cluster.json'), 'utf8'));
  const empty = [];
  let exprs = 0;
  for (const panel of dashboard.panels) {
    for (const t of panel.targets ?? []) {
      ++exprs;
      const q = await query(t.expr);
      assert.equal(q.status, 'success', `panel "${panel.title}": ${t.expr}: ${JSON.stringify(q)}`);
      if (q.data.result.length === 0) empty.push(`${panel.title}: ${t.expr}`);
    }
  }
  assert.ok(exprs >= 20, `only ${exprs} panel expressions`);
  const core = ['Requests per second by code', 'Requests in flight', 'Tokens per second',
    'Errors and load shedding',
    'Time to first token', 'Inter-token latency', 'End-to-end request time',
    'KV cache usage per worker', 'Prefix cache hit rate', 'KV transfer bytes per second',
    'Healthy workers seen by each router', 'Targets up'];
  for (const title of core) {
    assert.ok(!empty.some((e) => e.startsWith(`${title}:`)), `core panel "${title}" has no data; empty: ${empty.join('; ')}`);
  }
  console.log(`prometheus e2e: ${ok} completions, ${all.length} rules healthy, ${exprs} panel expressions, empty: ${empty.length ? empty.join('; ') : 'none'}`);
});
