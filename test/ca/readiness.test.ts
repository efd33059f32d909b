/**
 * The CA's readiness follows events, with no polling timer: the gRPC health status (read straight
 * from the HealthService, not through the gate) flips when the signer installs or loses its
 * material, when the serving certificate is issued, when the pod informer has listed, and when
 * the informer goes stale and is heard from again. The clock is a FakeClock; it is only advanced
 * for the staleness window, and no readiness timer is ever armed on it.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../support/fake-clock.js';
import { silentLogger } from '../../src/core/log.js';
import { HealthService } from '../../src/grpc/health.js';
import { CA_SERVICE } from '../../src/protocol/istio-ca.js';
import { caReadinessConditions, healthPublisher, PodInformer, ReadinessGate, ServingIdentity } from '../../src/ca/index.js';
import { createPod, kubeConfigFor, startCluster, type DevCluster } from '../support/cluster.js';
import { InstalledSigner, rootMaterial } from './support/installed-signer.js';
import { until } from '../support/until.js';

let cluster: DevCluster;
before(async () => {
  // No bookmarks in practice: a watch is silent unless something changes.
  cluster = await startCluster({ simulateKubelet: false, bookmarkIntervalMs: 3_600_000 });
  await createPod(cluster, { namespace: 'default', name: 'p', nodeName: 'node-a' });
});
after(() => cluster.close());

test('readiness: the health status flips on the signer, serving certificate and informer events, never on a timer', async (t) => {
  const clock = new FakeClock(Date.now());
  const idleTimeoutMs = 30_000;
  const signer = new InstalledSigner({ clock, logger: silentLogger, maxTtlSeconds: 86400 });
  const serving = new ServingIdentity({ signer, dnsNames: ['localhost'], clock, logger: silentLogger });
  const informer = new PodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), clock, logger: silentLogger, settings: { idleTimeoutMs, initialBackoffMs: 1000 } });
  const health = new HealthService({ '': 'NOT_SERVING', [CA_SERVICE]: 'NOT_SERVING' });
  const published: boolean[] = [];
  const publish = healthPublisher(health);
  const gate = new ReadinessGate({
    conditions: caReadinessConditions({ signer, serving, podIndexes: [{ clusterId: 'Kubernetes', informer }] }),
    publish: (ready) => {
      published.push(ready);
      publish(ready);
    },
    logger: silentLogger,
  });
  t.after(async () => {
    gate.stop();
    cluster.faults.clear();
    await serving.stop();
    await informer.stop();
    await signer.close();
  });
  const status = () => [health.status(''), health.status(CA_SERVICE)];

  gate.start();
  assert.deepEqual(status(), ['NOT_SERVING', 'NOT_SERVING']);
  assert.equal(clock.pendingTimers, 0, 'no readiness timer');
  assert.deepEqual(gate.checks().map((c) => c.name), ['signer', 'serving-certificate', 'pods-Kubernetes']);

  // Material and a serving certificate: still not ready, the pods are not listed.
  await serving.start();
  signer.use(await rootMaterial('O=ready'));
  await until(() => serving.problem() === undefined, 'the serving certificate');
  assert.deepEqual(status(), ['NOT_SERVING', 'NOT_SERVING']);

  // The first list: SERVING, told by the informer's event (nobody read `gate.ready`).
  informer.start();
  await until(() => health.status('') === 'SERVING', 'SERVING after the first list');
  assert.deepEqual(status(), ['SERVING', 'SERVING']);
  assert.deepEqual(published, [false, true]);

  // Nothing heard for two watchdog windows: NOT_SERVING the moment the window is over.
  const heardAt = clock.now() - informer.informer.lastEventAgeMs();
  await until(() => cluster.faults.silenceWatches({ match: { path: '/api/v1/pods' } }) > 0, 'the open watch');
  cluster.faults.silenceWatches({ match: { path: '/api/v1/pods' }, newWatches: 1000 });
  cluster.faults.failWith500(1000, { match: { path: '/api/v1/pods', exceptWatch: true } });
  await clock.advance(heardAt + 2 * idleTimeoutMs - clock.now());
  assert.deepEqual(status(), ['SERVING', 'SERVING'], 'not stale at exactly two windows');
  await clock.advance(1);
  assert.deepEqual(status(), ['NOT_SERVING', 'NOT_SERVING'], 'stale: told by the clock event');

  // Heard again (the next re-list works): SERVING.
  cluster.faults.clear();
  for (let i = 0; i < 400 && health.status('') !== 'SERVING'; i++) {
    if (clock.nextDue !== undefined) await clock.advance(clock.nextDue - clock.now());
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.deepEqual(status(), ['SERVING', 'SERVING']);

  // The signer loses its material: NOT_SERVING at once (its close event), no clock advance.
  const now = clock.now();
  await signer.close();
  assert.deepEqual(status(), ['NOT_SERVING', 'NOT_SERVING']);
  assert.equal(clock.now(), now);
  assert.deepEqual(published, [false, true, false, true, false]);
  assert.equal(gate.ready, false);
  assert.match(gate.checks()[0]!.check() ?? '', /signer closed/);
});
