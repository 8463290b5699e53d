// Health: the `grpc-health-check` package's service definition as a client of the router's
// gRPC port (and of the worker's), plus HTTP /health and /ready.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { startServe, unary, request, withLogs } from './harness.mjs';

const HealthClient = grpc.makeClientConstructor(healthService, 'grpc.health.v1.Health');
let server;

before(async () => {
  server = await startServe();
});

after(async () => {
  if (!server) return;
  const exit = await server.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, withLogs(server, 'baton serve did not drain cleanly'));
});

test('grpc.health.v1 Check: the server and baton.v1.Baton are SERVING', async () => {
  const c = new HealthClient(server.grpcAddr, grpc.credentials.createInsecure());
  try {
    assert.equal((await unary(c, 'check', { service: '' })).status, 'SERVING');
    assert.equal((await unary(c, 'check', { service: 'baton.v1.Baton' })).status, 'SERVING');
    await assert.rejects(unary(c, 'check', { service: 'no.such.Service' }),
      (e) => e.code === grpc.status.NOT_FOUND);
  } finally {
    c.close();
  }
});

test('grpc.health.v1 Watch streams SERVING', async () => {
  const c = new HealthClient(server.grpcAddr, grpc.credentials.createInsecure());
  try {
    const call = c.watch({ service: 'baton.v1.Baton' });
    const first = await new Promise((resolve, reject) => {
      call.once('data', resolve);
      call.once('error', reject);
    });
    assert.equal(first.status, 'SERVING');
    call.cancel();
  } finally {
    c.close();
  }
});

test('the worker\'s gRPC port answers health checks too', async () => {
  const c = new HealthClient(server.worker, grpc.credentials.createInsecure());
  try {
    assert.equal((await unary(c, 'check', { service: '' })).status, 'SERVING');
  } finally {
    c.close();
  }
});

test('HTTP /health and /ready are 200', async () => {
  const health = await request(`${server.url}/health`, { method: 'GET' });
  assert.equal(health.status, 200, health.text);
  const ready = await request(`${server.url}/ready`, { method: 'GET' });
  assert.equal(ready.status, 200, ready.text);
  // HEAD-less probes: a load balancer's GET with a query string still works.
  assert.equal((await request(`${server.url}/health?probe=1`, { method: 'GET' })).status, 200);
});
