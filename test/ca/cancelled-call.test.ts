/**
 * A CreateCertificate whose caller gave up while the call waited for its token review is not
 * signed: under a fleet's cold start reviews queue behind CA_MAX_CONCURRENT_TOKEN_REVIEWS, and
 * past the brokers' deadline the CA would otherwise spend its signing workers on answers nobody
 * reads. The service answers ERR_CA_CALL_CANCELLED (gRPC CANCELLED) and the signer is never asked;
 * a call still waited for is signed as before. Over the real transports every call gets that
 * signal (`cancellable`), not only those of signers that call elsewhere.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CaMetrics, CertificateService, type Signer } from '../../src/ca/index.js';
import { systemClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/log.js';

const TD = 'cluster.local';

function harness() {
  let release!: () => void;
  const reviewed = new Promise<void>((r) => (release = r));
  const signed: string[] = [];
  const signer = {
    ready: true,
    sign: async (req: { spiffeId: string }) => {
      signed.push(req.spiffeId);
      return { chainPem: ['leaf'], rootsPem: ['root'], serialHex: '01' };
    },
  } as unknown as Signer;
  const cluster = {
    authn: { authenticate: async () => (await reviewed, { namespace: 'default', serviceAccount: 'sleep', clusterId: 'Kubernetes' }) },
    authorizer: { authorize: () => assert.fail('no impersonation here') },
  };
  const service = new CertificateService({
    trustDomain: TD,
    clusters: new Map([['Kubernetes', cluster as never]]),
    defaultClusterId: 'Kubernetes',
    signer: () => signer,
    ttl: { defaultTtlSeconds: 3600, maxTtlSeconds: 86_400, backdateSeconds: 120 },
    clock: systemClock,
    metrics: new CaMetrics(),
    logger: silentLogger,
    maxCsrBytes: 64 * 1024,
  });
  const metadata = { get: (key: string) => (key === 'authorization' ? ['Bearer t'] : []) };
  const call = (signal: AbortSignal) => service.createCertificate({ csr: 'pem', validity_duration: 3600 } as never, metadata as never, signal);
  return { service, signed, release, call };
}

test('a caller gone during its token review: CANCELLED, nothing signed; one still there is signed', async () => {
  const h = harness();
  const gone = new AbortController();
  const waiting = new AbortController();
  const goneCall = h.call(gone.signal);
  const waitingCall = h.call(waiting.signal);
  gone.abort();
  h.release();
  await assert.rejects(goneCall, (e: unknown) => (e as { code?: string }).code === 'ERR_CA_CALL_CANCELLED');
  await waitingCall;
  assert.deepEqual(h.signed, [`spiffe://${TD}/ns/default/sa/sleep`], 'only the call still waited for is signed');
  assert.equal(h.service.cancellable, true, 'the transports pass the signal for every signer');
});
