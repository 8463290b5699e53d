// Per-request latency of small requests on one keep-alive HTTP connection, against a
// running `baton serve` or `baton-router`: what the HTTP server adds per request before a
// handler runs. Usage: node bench/http_request_rate.mjs URL [COUNT]
// Prints p50/p99/mean in microseconds for GET /health and for a 1-token completion.
import http from 'node:http';

const url = new URL(process.argv[2] ?? 'http://127.0.0.1:8000');
const count = Number(process.argv[3] ?? 2000);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function once(method, path, body) {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const req = http.request({ host: url.hostname, port: url.port, method, path, agent,
      headers: body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {} },
    (res) => {
      res.resume();
      res.on('end', () => resolve(Number(process.hrtime.bigint() - start) / 1000));
    });
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

async function series(name, method, path, body, n) {
  for (let i = 0; i < 50; i++) await once(method, path, body);  // warm-up
  const t = [];
  for (let i = 0; i < n; i++) t.push(await once(method, path, body));
  t.sort((a, b) => a - b);
  const mean = t.reduce((a, b) => a + b, 0) / t.length;
  console.log(`${name}: p50 ${t[Math.floor(n * 0.5)].toFixed(0)} us, p99 ${t[Math.floor(n * 0.99)].toFixed(0)} us, mean ${mean.toFixed(0)} us (${n})`);
}

await series('GET /health', 'GET', '/health', null, count);
await series('completion, 1 token', 'POST', '/v1/completions',
  JSON.stringify({ model: 'baton-tiny', prompt: 'Once upon a time', max_tokens: 1 }), Math.ceil(count / 4));
agent.destroy();
