/**
 * The `outcome` label of per-call metrics: one mapping (src/ops/call-outcome.ts), the table of
 * docs/operations.md (*Call outcomes*), and the CA's `certbroker_ca_requests_total` and the Istio
 * CA front's observer give the same label for the same failure (an external signer's timeout,
 * an upstream refusal, a bad request, a caller over its limits, ...).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CaError, CaMetrics, CertificateService } from '../../src/ca/index.js';
import { CallerLimits, FrontAuthorizer, NodePods } from '../../src/broker/index.js';
import { IstioCaFrontService, type FrontOutcome } from '../../src/broker/fronts/istio-ca/index.js';
import { systemClock } from '../../src/core/clock.js';
import { CertbrokerError, type ErrorStatus } from '../../src/core/errors.js';
import { silentLogger } from '../../src/core/log.js';
import { callOutcome } from '../../src/ops/call-outcome.js';
import { createCsr } from '../../src/pki/csr.js';
import { generateKeyPair } from '../../src/pki/keys.js';
import { FakeClock } from '../support/fake-clock.js';

const TD = 'cluster.local';

test('every status has its outcome; anything that is not a CertbrokerError is an error', () => {
  const table: Record<ErrorStatus, string> = {
    unauthenticated: 'denied',
    'permission-denied': 'denied',
    'invalid-argument': 'invalid',
    'resource-exhausted': 'limited',
    unavailable: 'unavailable',
    'deadline-exceeded': 'unavailable',
    'not-found': 'error',
    'already-exists': 'error',
    'failed-precondition': 'error',
    unimplemented: 'error',
    cancelled: 'error',
    internal: 'error',
  };
  for (const [status, outcome] of Object.entries(table) as [ErrorStatus, string][]) {
    assert.equal(callOutcome(new CertbrokerError('ERR_TEST', 'x', { status })), outcome, status);
  }
  assert.equal(callOutcome(new Error('boom')), 'error');
  assert.equal(callOutcome(undefined), 'error');
});

/** A CertificateService as the CA assembles it, over no cluster: only its rejection path is used. */
function caService(metrics: CaMetrics): CertificateService {
  return new CertificateService({
    trustDomain: TD,
    clusters: new Map(),
    defaultClusterId: 'Kubernetes',
    signer: () => assert.fail('no signing here'),
    ttl: { defaultTtlSeconds: 3600, maxTtlSeconds: 86_400, backdateSeconds: 120 },
    clock: systemClock,
    metrics,
    logger: silentLogger,
    maxCsrBytes: 64 * 1024,
  });
}

/** An Istio CA front whose CA answer is `err`; returns the outcome its observer saw. */
async function frontOutcome(err: unknown): Promise<FrontOutcome> {
  const pods = new NodePods({ nodeName: 'node-1', trustDomain: TD, certs: { retain: () => undefined, release: () => undefined }, now: () => 0, ownPodUid: 'broker' });
  pods.upsert({ uid: 'zt-1', namespace: 'istio-system', name: 'ztunnel-abc', serviceAccount: 'ztunnel', nodeName: 'node-1', hostNetwork: false, deleting: false, phase: 'Running' });
  const seen: FrontOutcome[] = [];
  const svc = new IstioCaFrontService({
    clusterId: 'Kubernetes',
    authenticator: { authenticate: async () => ({ namespace: 'istio-system', serviceAccount: 'ztunnel', podName: 'ztunnel-abc', podUid: 'zt-1' }) },
    authorizer: new FrontAuthorizer({ trustDomain: TD, allowedAccounts: ['istio-system/ztunnel'], pods, podsSynced: () => true }),
    limits: new CallerLimits({ clock: new FakeClock(), ratePerSecond: 1, burst: 10, maxInFlight: 4 }),
    forwarder: { forwardCsr: async () => Promise.reject(err) },
    logger: silentLogger,
    observer: { answered: (outcome) => seen.push(outcome) },
  });
  const csr = createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: `spiffe://${TD}/ns/istio-system/sa/ztunnel` }).pem;
  const metadata = { get: (key: string) => (key === 'authorization' ? ['Bearer t'] : []) };
  await assert.rejects(svc.createCertificate({ csr, validity_duration: 3600 } as never, metadata as never));
  assert.equal(seen.length, 1);
  return seen[0]!;
}

test('the CA and the Istio CA front count the same failure under the same outcome', async () => {
  const failures: readonly unknown[] = [
    new CaError('ERR_CA_UPSTREAM_TIMEOUT', 'upstream CA did not answer in time', { status: 'deadline-exceeded' }),
    new CaError('ERR_CA_MODULE_TIMEOUT', 'signer module did not answer in time', { status: 'deadline-exceeded' }),
    new CaError('ERR_CA_MODULE_FAILED', 'signer module failed', { status: 'unavailable' }),
    new CaError('ERR_CA_TTL_OVER_MAX', 'too long', { status: 'invalid-argument' }),
    new CaError('ERR_CA_TOKEN_INVALID', 'no', { status: 'unauthenticated' }),
    new CertbrokerError('ERR_TEST_LIMITED', 'over the limit', { status: 'resource-exhausted' }),
    new CaError('ERR_CA_MODULE_BAD_RESULT', 'another identity', { status: 'internal' }),
    new Error('unexpected'),
  ];
  for (const err of failures) {
    const metrics = new CaMetrics();
    caService(metrics).rejection(err, 'test');
    const counted = (await metrics.requests.get()).values;
    assert.equal(counted.length, 1);
    const front = await frontOutcome(err);
    assert.equal(counted[0]!.labels['outcome'], front, `${err instanceof CertbrokerError ? err.code : 'unexpected'}: CA ${counted[0]!.labels['outcome']}, front ${front}`);
    assert.equal(front, callOutcome(err));
  }
});
