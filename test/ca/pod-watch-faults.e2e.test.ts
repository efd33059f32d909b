/**
 * The CA's pod index when the API server misbehaves, end to end (devcluster over HTTPS, the CA
 * as its own service account, CreateCertificate over gRPC+TLS):
 * - the first list fails: /readyz says so (503) and impersonation is refused as not synced,
 *   never as "caller pod missing"; then the list works and the CA is ready and issues;
 * - the pod watch goes silent (a hung replica): the watchdog re-opens it and a pod created
 *   meanwhile authorizes;
 * - every watch silent and every list failing: /readyz reports the stale watch, the metrics
 *   show it, and the CA recovers when the API server answers again.
 * The CA's clock is a SkipClock: the watchdog fires when the test skips time, not by waiting.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { status } from '@grpc/grpc-js';
import type { CaServer } from '../../src/ca/index.js';
import { SkipClock } from '../support/skip-clock.js';
import { caClient, httpGet, lastDenialReason, startCaEnv, TD, waitForIndex, type CaEnv } from './support/ca-env.js';
import { newCsr } from './support/pki-fixtures.js';

// Long against real time (the SkipClock runs on it too): a loaded machine must not fire the watchdog
// between silencing the watch and the call that shows it silent; the test skips the window instead.
const IDLE_MS = 60_000;
const sleepId = `spiffe://${TD}/ns/default/sa/sleep`;
let env: CaEnv;
let csr: string;
let ztunnel: string;

before(async () => {
  // Bookmarks every 100 ms: a healthy watch is never idle for the watchdog's 1 s.
  env = await startCaEnv({ bookmarkIntervalMs: 100 });
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  ztunnel = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
  csr = await newCsr();
});
after(() => env?.close());


/** Polls `probe` every 20 ms (at most ~10 s) until it returns a value; `step` runs before each try. */
async function eventually<T>(what: string, probe: () => Promise<T | undefined>, step?: () => void): Promise<T> {
  for (let i = 0; i < 500; i++) {
    step?.();
    const v = await probe();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const podsList = { path: '/api/v1/pods', exceptWatch: true };
const podsWatch = { path: '/api/v1/pods', onlyWatch: true };

test('first pod list fails: not ready (and says why), impersonation refused as not synced; then ready and issuing', async (t) => {
  env.cluster.faults.failWith500(1_000_000, { match: podsList });
  const ca = await env.startCa({ opsHost: '127.0.0.1', opsPort: 0, informer: { initialBackoffMs: 20, maxBackoffMs: 100 } });
  const client = caClient(ca.port, ca.rootsPem());
  t.after(async () => {
    env.cluster.faults.clear();
    client.close();
    await ca.stop();
  });
  const notReady = await eventually('a failed list', async () => {
    const r = await httpGet(ca.opsPort!, '/readyz');
    return r.body.includes('last error') ? r : undefined;
  });
  assert.equal(notReady.status, 503);
  assert.match(notReady.body, /\[-\]pods-Kubernetes failed: pods not listed yet; last error: ERR_KUBE_API_STATUS: list \/api\/v1\/pods: HTTP 500/);
  assert.equal(ca.ready, false);
  const denied = await client.create({ token: ztunnel, csr, impersonate: sleepId });
  assert.equal(denied.code, status.UNAUTHENTICATED);
  assert.equal(lastDenialReason(env.logs), 'ERR_CA_POD_INDEX_NOT_SYNCED');

  env.cluster.faults.clear();
  await eventually('ready', async () => ((await httpGet(ca.opsPort!, '/readyz')).status === 200 ? true : undefined));
  assert.equal(ca.ready, true);
  const issued = await client.create({ token: ztunnel, csr, impersonate: sleepId });
  assert.equal(issued.code, undefined, JSON.stringify(issued).slice(0, 200));
});

test('a silent pod watch: the watchdog re-opens it and a pod created meanwhile authorizes; a stale watch fails readiness', async (t) => {
  const clock = new SkipClock();
  const ca: CaServer = await env.startCa({ clock, opsHost: '127.0.0.1', opsPort: 0, informer: { idleTimeoutMs: IDLE_MS, initialBackoffMs: 50, maxBackoffMs: 200 } });
  const client = caClient(ca.port, ca.rootsPem());
  t.after(async () => {
    env.cluster.faults.clear();
    client.close();
    await ca.stop();
  });
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
  await eventually('ready', async () => ((await httpGet(ca.opsPort!, '/readyz')).status === 200 ? true : undefined));

  // The replica serving the CA's watch hangs: its connection stays open and says nothing.
  // (Only this CA watches here; the stopped one's connection must be gone first.)
  await eventually('only this CA watching', async () => (env.cluster.faults.openWatches === 1 ? true : undefined));
  assert.equal(env.cluster.faults.silenceWatches({ match: podsWatch }), 1);
  await env.createPod({ namespace: 'default', name: 'late-a', serviceAccount: 'late', node: 'node-a' });
  const lateId = `spiffe://${TD}/ns/default/sa/late`;
  const before = await client.create({ token: ztunnel, csr, impersonate: lateId });
  assert.equal(before.code, status.UNAUTHENTICATED, 'the silent watch did not deliver the pod');
  assert.equal(lastDenialReason(env.logs), 'ERR_CA_NO_POD_ON_NODE');

  clock.skip(IDLE_MS);
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'late-a' }) !== undefined);
  const issued = await client.create({ token: ztunnel, csr, impersonate: lateId });
  assert.equal(issued.code, undefined, JSON.stringify(issued).slice(0, 200));
  assert.ok(env.logs.some((l) => l.includes('"msg":"watch silent (no event or bookmark), re-watching"') && l.includes('"cluster":"Kubernetes"')));
  const metrics = (await httpGet(ca.opsPort!, '/metrics')).body;
  assert.match(metrics, /certbroker_informer_restarts_total\{resource="pods",cluster="Kubernetes",reason="watchdog"\} [1-9]/);
  assert.match(metrics, /certbroker_informer_last_event_age_seconds\{resource="pods",cluster="Kubernetes"\} /);

  // Every watch hangs and every list fails: nothing is heard any more. Readiness says so.
  env.cluster.faults.silenceWatches({ match: podsWatch, newWatches: 1_000_000 });
  env.cluster.faults.failWith500(1_000_000, { match: podsList });
  const stale = await eventually(
    'a stale watch',
    async () => {
      const r = await httpGet(ca.opsPort!, '/readyz');
      return r.body.includes('watch stale') ? r : undefined;
    },
    () => clock.skip(IDLE_MS / 2),
  );
  assert.equal(stale.status, 503);
  assert.match(stale.body, /\[-\]pods-Kubernetes failed: pods watch stale: no list, event or bookmark for [\d.]+ s \(watchdog 60 s, \d+ watchdog restarts\)/);
  assert.equal(ca.ready, false);
  const age = /certbroker_informer_last_event_age_seconds\{resource="pods",cluster="Kubernetes"\} ([\d.]+)/.exec((await httpGet(ca.opsPort!, '/metrics')).body);
  assert.ok(age && Number(age[1]) > (2 * IDLE_MS) / 1000, `age ${age?.[1]} s is over two watchdog windows`);
  assert.match((await httpGet(ca.opsPort!, '/metrics')).body, /^certbroker_informer_ready\{resource="pods",cluster="Kubernetes"\} 0$/m);

  // The API server answers again.
  env.cluster.faults.clear();
  await eventually('ready again', async () => ((await httpGet(ca.opsPort!, '/readyz')).status === 200 ? true : undefined), () => clock.skip(100));
  assert.equal(ca.ready, true);
});
