/**
 * The ops endpoint has the shared lifecycle shape (src/core/long-lived.ts): aborting the signal
 * it was started with, or `stop()`, closes the listener and its open connections.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { Registry } from 'prom-client';
import { silentLogger } from '../../src/core/log.js';
import { startOpsServer } from '../../src/ops/ops-server.js';

function get(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

test('aborting the start signal closes the ops endpoint', async () => {
  const ac = new AbortController();
  const ops = await startOpsServer({ host: '127.0.0.1', port: 0, registry: new Registry(), readiness: [], logger: silentLogger, signal: ac.signal });
  assert.equal(await get(ops.port, '/readyz'), 200);
  ac.abort();
  await ops.stop(); // waits for the close the abort began
  await assert.rejects(get(ops.port, '/readyz'), { code: 'ECONNREFUSED' });
});

test('stop(deadlineMs) closes a connection held open by a client; a second stop resolves too', async (t) => {
  const ops = await startOpsServer({ host: '127.0.0.1', port: 0, registry: new Registry(), readiness: [], logger: silentLogger });
  const { Agent } = await import('node:http');
  const agent = new Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  await new Promise<void>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: ops.port, path: '/healthz', agent }, (res) => {
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', reject);
    req.end();
  });
  await ops.stop(5000);
  await ops.stop(5000);
  await assert.rejects(get(ops.port, '/healthz'), { code: 'ECONNREFUSED' });
});
