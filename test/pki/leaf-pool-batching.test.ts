/**
 * The pool's batching under steady load: each event-loop turn's requests must reach a worker in
 * whole chunks. Balancing request by request split every turn over both workers and let batches
 * shrink to ~2 requests per message, which tripled the main thread's cost per certificate. The
 * count of batch messages is read by wrapping Worker.prototype.postMessage, which still sends
 * every message to the real worker.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { createCsr, generateKeyPair, LeafIssuerPool } from '../../src/pki/index.js';
import { makeRoot } from './fixtures.js';

test('under steady load with 128 requests in flight, batch messages carry many requests each', async () => {
  const ca = await makeRoot('O=cluster.local', 86400);
  const keys = await Promise.all(Array.from({ length: 16 }, () => generateKeyPair()));
  const csrs = keys.map((k) => createCsr({ privateKey: k.privateKey, uri: 'spiffe://ignored/x' }).pem);
  const pool = new LeafIssuerPool({ signer: ca.material.leafSigner, size: 2 });
  let batches = 0;
  let requests = 0;
  const original = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (this: Worker, message: unknown, transfer?: never) {
    const m = message as { kind?: string; ids?: readonly number[] };
    if (m.kind === 'batch' && m.ids) {
      batches++;
      requests += m.ids.length;
    }
    return original.call(this, message, transfer);
  };
  try {
    const total = 1536;
    let started = 0;
    const serials = new Set<string>();
    await new Promise<void>((resolve, reject) => {
      const next = (): void => {
        if (started >= total) return;
        const i = started++;
        pool
          .issue({ csr: csrs[i % csrs.length]!, spiffeId: `spiffe://cluster.local/ns/a/sa/s${i}`, ttlSeconds: 3600 })
          .then((leaf) => {
            serials.add(leaf.serialHex);
            if (serials.size === total) resolve();
            else next();
          }, reject);
      };
      for (let k = 0; k < 128; k++) next();
    });
    assert.equal(serials.size, total);
    assert.equal(requests, total);
    // With per-request balancing this averaged ~2; with whole chunks it stays near the number of
    // answers per worker message (16).
    assert.ok(total / batches >= 6, `${batches} batch messages for ${total} requests (${(total / batches).toFixed(1)} per message)`);
  } finally {
    Worker.prototype.postMessage = original;
    await pool.close();
  }
});
