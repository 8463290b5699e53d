// Shared plumbing for Baton's end-to-end tests: start `baton serve`, `baton worker` and
// `baton-router` on free ports, read the ports from their first stdout line, stop them
// (and kill them if the test process dies), and call the worker's internal GetStats.
//
// Run one file: `node --test-reporter=spec tests/e2e/grpc.test.mjs` (after `npm install` in
// tests/e2e), or all of them with ctest -L e2e. Set BATON_E2E_VERBOSE=1 to log drain times.
// Binaries and sources come from the environment (tests/e2e/CMakeLists.txt sets them):
//   BATON_BIN          the `baton` binary
//   BATON_ROUTER_BIN   the `baton-router` binary
//   BATON_SOURCE_DIR   the repository root (proto/ and models/ live there)
// Without them the defaults point into the repository's build/release tree.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const here = path.dirname(fileURLToPath(import.meta.url));
export const SOURCE_DIR = process.env.BATON_SOURCE_DIR || path.resolve(here, '../..');
export const PROTO_DIR = path.join(SOURCE_DIR, 'proto');
export const MODEL_DIR = path.join(SOURCE_DIR, 'models/baton-tiny');
export const MODEL_NAME = 'baton-tiny';
export const MAX_MODEL_LEN = 512;

function defaultBin(name) {
  for (const dir of ['build/release/bin', 'build/h-e2e/bin']) {
    const p = path.join(SOURCE_DIR, dir, name);
    if (existsSync(p)) return p;
  }
  return path.join(SOURCE_DIR, 'build/release/bin', name);
}
export const BATON_BIN = process.env.BATON_BIN || defaultBin('baton');
export const ROUTER_BIN = process.env.BATON_ROUTER_BIN || defaultBin('baton-router');

// Engine flags that keep each server small: the tests run beside compilers on 2 cores.
export const SMALL_ENGINE = ['--threads', '1', '--kv-cache-memory', '64MiB'];

const live = new Set();
function killAll() {
  for (const p of live) {
    try {
      p.child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    killAll();
    process.exit(130);
  });
}

// A started process: its first stdout line, the rest of its output (for diagnostics), and
// stop()/kill() that resolve with how it ended.
class Proc {
  constructor(name, child) {
    this.name = name;
    this.child = child;
    this.output = '';
    this.exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        live.delete(this);
        this.exit = { code, signal };
        resolve(this.exit);
      });
    });
    live.add(this);
  }

  get running() {
    return this.exit === undefined;
  }

  tail(n = 2000) {
    return this.output.slice(-n);
  }

  // SIGTERM (a graceful drain), then SIGKILL after `graceMs`. Resolves with {code, signal}.
  async stop(graceMs = 15000) {
    if (!this.running) return this.exit;
    const start = Date.now();
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    const keepAlive = setInterval(() => {}, 1000);  // the child is unref'd: wait for its exit
    const exit = await this.exited;
    clearTimeout(timer);
    clearInterval(keepAlive);
    this.stopMs = Date.now() - start;
    if (process.env.BATON_E2E_VERBOSE) console.error(`${this.name}: stopped in ${this.stopMs} ms`);
    return exit;
  }

  async kill(signal = 'SIGKILL') {
    if (!this.running) return this.exit;
    this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 15000);
    const keepAlive = setInterval(() => {}, 1000);  // the child is unref'd: wait for its exit
    const exit = await this.exited;
    clearTimeout(timer);
    clearInterval(keepAlive);
    return exit;
  }
}

// Spawns `bin args`, waits for the first stdout line that matches `pattern` (the
// banner), and returns [proc, match]. Rejects with the process's output if it exits or
// takes longer than `timeoutMs`.
async function startWithBanner(name, bin, args, pattern, timeoutMs = 90000) {
  if (!existsSync(bin)) throw new Error(`${name}: no binary at ${bin} (set BATON_BIN / BATON_ROUTER_BIN)`);
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: SOURCE_DIR });
  // A server left running (a failed test) must not keep node alive; the exit hook kills it.
  child.unref();
  child.stdout.unref();
  child.stderr.unref();
  const proc = new Proc(name, child);
  let firstLine = null;
  let stdoutBuf = '';
  const banner = new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name}: no banner within ${timeoutMs} ms; output:\n${proc.tail()}`));
    }, timeoutMs);
    child.stdout.on('data', (d) => {
      const s = d.toString();
      proc.output += s;
      if (firstLine !== null) return;
      stdoutBuf += s;
      const nl = stdoutBuf.indexOf('\n');
      if (nl < 0) return;
      firstLine = stdoutBuf.slice(0, nl);
      clearTimeout(timer);
      const m = pattern.exec(firstLine);
      if (m) resolve(m);
      else {
        child.kill('SIGKILL');
        reject(new Error(`${name}: first stdout line does not match ${pattern}: ${JSON.stringify(firstLine)}`));
      }
    });
    child.stderr.on('data', (d) => {
      proc.output += d.toString();
    });
    proc.exited.then((e) => {
      clearTimeout(timer);
      if (firstLine === null) {
        reject(new Error(`${name} exited (${JSON.stringify(e)}) before its banner; output:\n${proc.tail()}`));
      }
    });
  });
  const m = await banner;
  return [proc, m];
}

const SERVE_BANNER =
  /^baton serve: serving (\S+) on https?:\/\/(\S+):(\d+) \(gRPC (\S+):(\d+)\), worker (\S+):(\d+)(?:; worker metrics (\S+))?$/;
const WORKER_BANNER = /^baton worker: serving (\S+) on (\S+):(\d+)\b/;
const ROUTER_BANNER =
  /^baton-router: serving (\S+) on https?:\/\/(\S+):(\d+) \(gRPC (\S+):(\d+)\), worker (\S+)$/;

const schemeOf = (banner) => (banner.includes(' on https://') ? 'https' : 'http');

function hostFor(h) {
  // A wildcard listen address is reached on loopback.
  if (h === '0.0.0.0' || h === '::' || h === '[::]') return '127.0.0.1';
  return h;
}

function serverInfo(proc, model, httpHost, httpPort, grpcHost, grpcPort, worker, scheme = 'http') {
  const host = hostFor(httpHost);
  return {
    proc,
    model,
    url: `${scheme}://${host}:${httpPort}`,
    baseURL: `${scheme}://${host}:${httpPort}/v1`,
    httpPort: Number(httpPort),
    grpcAddr: `${hostFor(grpcHost)}:${grpcPort}`,
    worker,
    stop: (graceMs) => proc.stop(graceMs),
    kill: (signal) => proc.kill(signal),
  };
}

// The cluster token every process started here shares (--internal-token-file), so that
// the tests can call the worker's internal API as the router does.
export const INTERNAL_TOKEN = randomBytes(32).toString('hex');
const TOKEN_FILE = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-e2e-')), 'internal-token');
writeFileSync(TOKEN_FILE, INTERNAL_TOKEN, { mode: 0o600 });
const TOKEN_ARGS = ['--internal-token-file', TOKEN_FILE];

// `baton serve` on free ports with a colocated worker. Returns {url, baseURL, grpcAddr,
// worker, model, proc, stop()}.
export async function startServe(extraArgs = [], { engine = SMALL_ENGINE } = {}) {
  const args = ['serve', '--host', '127.0.0.1', '--port', '0', '--grpc-port', '0', ...TOKEN_ARGS, ...engine, ...extraArgs];
  const [proc, m] = await startWithBanner('baton serve', BATON_BIN, args, SERVE_BANNER);
  const info = serverInfo(proc, m[1], m[2], m[3], m[4], m[5], `${m[6]}:${m[7]}`, schemeOf(m[0]));
  info.workerMetricsUrl = m[8] ?? null;  // the in-process worker's /metrics (--metrics-port)
  return info;
}

// `baton worker` alone. Returns {addr, model, proc, stop()}.
export async function startWorker(extraArgs = [], { engine = SMALL_ENGINE } = {}) {
  const args = ['worker', '--model', MODEL_DIR, '--host', '127.0.0.1', '--port', '0', ...TOKEN_ARGS, ...engine, ...extraArgs];
  const [proc, m] = await startWithBanner('baton worker', BATON_BIN, args, WORKER_BANNER);
  const metrics = /, metrics http:\/\/\S+:(\d+)\/metrics/.exec(m.input);
  return {
    proc,
    model: m[1],
    addr: `${hostFor(m[2])}:${m[3]}`,
    metricsPort: metrics ? Number(metrics[1]) : null,  // with --metrics-port
    stop: (g) => proc.stop(g),
    kill: (s) => proc.kill(s),
  };
}

// `baton-router` in front of `worker` (host:port).
export async function startRouter(worker, extraArgs = []) {
  const args = ['--worker', worker, '--model', MODEL_DIR, '--host', '127.0.0.1', '--port', '0',
    '--grpc-port', '0', ...TOKEN_ARGS, ...extraArgs];
  const [proc, m] = await startWithBanner('baton-router', ROUTER_BIN, args, ROUTER_BANNER);
  return serverInfo(proc, m[1], m[2], m[3], m[4], m[5], m[6], schemeOf(m[0]));
}

const SPLIT_ROUTER_BANNER =
  /^baton-router: serving (\S+) on https?:\/\/(\S+):(\d+) \(gRPC (\S+):(\d+)\), worker (.+)$/;

// `baton-router` in front of split workers: `prefill` and `decode` are host:port lists.
export async function startSplitRouter(prefill, decode, extraArgs = []) {
  const args = ['--prefill-worker', prefill, '--decode-worker', decode, '--model', MODEL_DIR,
    '--host', '127.0.0.1', '--port', '0', '--grpc-port', '0', ...TOKEN_ARGS, ...extraArgs];
  const [proc, m] = await startWithBanner('baton-router', ROUTER_BIN, args, SPLIT_ROUTER_BANNER);
  return serverInfo(proc, m[1], m[2], m[3], m[4], m[5], m[6], schemeOf(m[0]));
}

// ---- gRPC ----

const LOADER_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
  includeDirs: [PROTO_DIR] };

let publicPkg = null;
export function batonProto() {
  if (!publicPkg) {
    const def = protoLoader.loadSync('baton/v1/baton.proto', LOADER_OPTIONS);
    publicPkg = grpc.loadPackageDefinition(def).baton.v1;
  }
  return publicPkg;
}

let internalPkg = null;
function workerProto() {
  if (!internalPkg) {
    const def = protoLoader.loadSync('baton/internal/v1/worker.proto', LOADER_OPTIONS);
    internalPkg = grpc.loadPackageDefinition(def).baton.internal.v1;
  }
  return internalPkg;
}

// The worker's internal counters (GetStats), with int64 fields as Numbers.
export async function workerStats(addr) {
  const client = new (workerProto().Worker)(addr, grpc.credentials.createInsecure());
  try {
    const r = await new Promise((resolve, reject) => {
      const md = new grpc.Metadata();
      md.set('x-baton-internal-token', INTERNAL_TOKEN);
      client.GetStats({}, md, { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res)));
    });
    const out = {};
    for (const [k, v] of Object.entries(r)) out[k] = Number(v);
    return out;
  } finally {
    client.close();
  }
}

// Polls the worker until `pred(stats)` holds; returns the stats, or throws with the last
// stats after `timeoutMs`.
export async function waitForStats(addr, pred, timeoutMs = 10000, intervalMs = 100) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await workerStats(addr);
    if (pred(last)) return last;
    if (Date.now() > end) throw new Error(`worker stats never matched in ${timeoutMs} ms: ${JSON.stringify(last)}`);
    await sleep(intervalMs);
  }
}

// Promisified unary call: unary(client, 'Tokenize', req, metadata?, options?).
export function unary(client, method, req, metadata = new grpc.Metadata(), options = {}) {
  return new Promise((resolve, reject) => {
    client[method](req, metadata, { deadline: Date.now() + 30000, ...options },
      (err, res) => (err ? reject(err) : resolve(res)));
  });
}

// Reads a server stream to its end: resolves with the messages, or rejects with the
// gRPC error (err.code, err.details) and the messages so far on err.messages.
export function collectStream(call) {
  return new Promise((resolve, reject) => {
    const messages = [];
    call.on('data', (m) => messages.push(m));
    call.on('error', (err) => {
      err.messages = messages;
      reject(err);
    });
    call.on('end', () => resolve(messages));
  });
}

// ---- HTTP ----

// POST (or other method) of a JSON value or a raw body; resolves with {status, headers,
// text, json} (json null when the body is not JSON).
export async function request(url, { method = 'POST', body, headers = {}, raw = false, timeoutMs = 60000 } = {}) {
  const init = { method, headers: { ...headers }, signal: AbortSignal.timeout(timeoutMs) };
  if (body !== undefined) {
    init.body = raw ? body : JSON.stringify(body);
    if (!init.headers['content-type']) init.headers['content-type'] = 'application/json';
  }
  const res = await fetch(url, init);
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, headers: res.headers, text, json };
}

// Reads Prometheus text into [{name, labels, value}].
export function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) throw new Error(`unparsable metrics line: ${JSON.stringify(line)}`);
    const labels = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      let l;
      while ((l = re.exec(m[3])) !== null) labels[l[1]] = l[2];
    }
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

// The value of one series (labels matched exactly, order-free); undefined if absent.
export function metricValue(samples, name, labels = {}) {
  const want = Object.entries(labels);
  const hit = samples.find((s) => s.name === name && want.every(([k, v]) => s.labels[k] === v) &&
    Object.keys(s.labels).length === want.length);
  return hit?.value;
}

export async function scrape(server) {
  const res = await fetch(`${server.url}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return { text: await res.text(), headers: res.headers };
}

// A prompt of well over `minTokens` tokens for the tiny model (words it knows).
export function longPrompt(minTokens = 80) {
  const sentence = 'Once upon a time, there was a little dog named Toby. He liked to play with his red ball in the park. ';
  // Each sentence is about 25 tokens.
  return sentence.repeat(Math.ceil(minTokens / 20)).trim();
}

// Fails the assertion with the server's recent output, to make failures readable.
export function withLogs(server, msg) {
  return `${msg}\n--- ${server.proc.name} output (tail) ---\n${server.proc.tail()}`;
}

export { sleep };
