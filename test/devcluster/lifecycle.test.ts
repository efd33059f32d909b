/**
 * The devcluster has the shared lifecycle shape (src/core/long-lived.ts): aborting the signal it
 * was started with stops it (open watches cut, the listener closed); `stop()` then and again
 * resolves at once.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:https';
import { startDevCluster } from '../../src/devcluster/index.js';

function get(url: string, ca: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, headers: { authorization: `Bearer ${token}` }, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

test('aborting the start signal stops the devcluster and ends its watches', async () => {
  const ac = new AbortController();
  const dc = await startDevCluster({ signal: ac.signal });
  assert.equal(await get(`${dc.url}/api/v1/namespaces`, dc.caCertPem, dc.adminToken), 200);
  const watchEnded = new Promise<void>((resolve, reject) => {
    const req = request(`${dc.url}/api/v1/namespaces?watch=true`, { ca: dc.caCertPem, headers: { authorization: `Bearer ${dc.adminToken}` }, agent: false }, (res) => {
      res.resume();
      res.on('close', () => resolve());
      ac.abort(); // the watch is open: stop the cluster under it
    });
    req.on('error', reject);
    req.end();
  });
  await watchEnded;
  await dc.stop();
  await dc.stop();
  await assert.rejects(get(`${dc.url}/api/v1/namespaces`, dc.caCertPem, dc.adminToken), { code: 'ECONNREFUSED' });
});
