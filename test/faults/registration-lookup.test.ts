/**
 * Fault suite — the broker's registration-time pod lookup against an API server that hangs
 * (the devcluster with a 10 min latency on every request). The registration server with the
 * real Kubernetes lookup (`kubePodLookup`, client-node over HTTPS): a registering client that
 * waits gets 503 "timed out" at the lookup deadline (not when the API server finally answers),
 * and registrations abandoned by their clients close their API connections at once, so the API
 * server is left holding none (counted on the devcluster's side).
 */
import assert from 'node:assert/strict';
import { request, type ClientRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { silentLogger } from '../../src/core/log.js';
import { kubePodLookup, NodePods, type RegistrationServer, startRegistrationServer } from '../../src/broker/index.js';
import { createPod, kubeConfigFor, startCluster, type DevCluster } from '../support/cluster.js';
import { eventually } from '../broker/support/eventually.js';
import { Scratch } from '../support/scratch.js';

const HANG_MS = 600_000;
const ABANDONED = 20;

function body(name: string): string {
  return JSON.stringify({ Netns: '/var/run/netns/x', PodName: name, PodNamespace: 'shop', IPs: null });
}

/** POST /cmdadd; `req` is returned at once so the caller can abandon it. */
function register(socketPath: string, payload: string): { req: ClientRequest; answer: Promise<{ status: number; text: string }> } {
  let req!: ClientRequest;
  const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
    req = request({ socketPath, path: '/cmdadd', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
  return { req, answer };
}

describe('fault: registration pod lookup against a hung API server', () => {
  let dc: DevCluster;
  const dir = Scratch.forFile('fault-reg-').dir;
  const servers: RegistrationServer[] = [];

  const startServer = async (name: string, lookupTimeoutMs: number): Promise<string> => {
    const socketPath = join(dir, name, 'pluginevent.sock');
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs: { retain: () => undefined, release: () => undefined }, now: Date.now });
    servers.push(
      await startRegistrationServer({ socketPath, pods, lookup: kubePodLookup(kubeConfigFor(dc, dc.adminToken)), lookupTimeoutMs, logger: silentLogger }),
    );
    return socketPath;
  };

  before(async () => {
    dc = await startCluster({ simulateKubelet: false });
    await createPod(dc, { namespace: 'shop', name: 'web-0', nodeName: 'node-1' });
  });

  after(async () => {
    for (const s of servers) await s.close();
    await dc?.close();
  });

  it('answers 503 "timed out" at the lookup deadline and closes the API connection', { timeout: 30_000 }, async () => {
    const socketPath = await startServer('deadline', 500);
    // The lookup works while the API server answers.
    assert.equal((await register(socketPath, body('web-0')).answer).status, 200);
    await eventually('idle API connections closed', () => dc.openConnections === 0);

    dc.faults.setLatency(HANG_MS);
    try {
      // Bounded by the test runner only; today's code waited for the API server (10 min here).
      const r = await register(socketPath, body('web-0')).answer;
      assert.equal(r.status, 503, r.text);
      assert.match(r.text, /timed out after 500 ms/);
      await eventually('the timed-out lookup closed its API connection', () => dc.openConnections === 0);
    } finally {
      dc.faults.clear();
    }
  });

  it(`closes the API connections of ${ABANDONED} registrations their clients abandoned`, { timeout: 60_000 }, async () => {
    // A deadline far beyond the test: only the client going away can end these lookups.
    const socketPath = await startServer('abandon', 120_000);
    // Connections left over by anything before this test (none, unless the lookup leaks) do not count.
    const baseline = dc.openConnections;
    dc.faults.setLatency(HANG_MS);
    try {
      const pending = Array.from({ length: ABANDONED }, (_, i) => register(socketPath, body(`web-${i}`)));
      for (const p of pending) p.answer.catch(() => undefined);
      await eventually(`${ABANDONED} lookups waiting on the API server`, () => dc.openConnections >= baseline + ABANDONED);
      for (const p of pending) p.req.destroy();
      const left = await eventually('the abandoned lookups closed their API connections', () => (dc.openConnections <= baseline ? 0 : undefined), 800).catch(
        () => dc.openConnections - baseline,
      );
      assert.equal(left, 0, `${left} API connections still open after every registering client left`);
    } finally {
      dc.faults.clear();
    }
  });
});
