/**
 * The k8s-signer's PodCertificateRequest decisions (pure) and the work queue both controllers
 * run on, with the fake clock: the SVID identity and lifetime (maxExpirationSeconds, the
 * signer's ceiling, the 2-minute backdate), beginRefreshAt within the API server's bounds,
 * the denials, and the queue's one-at-a-time-per-key, doubling retries and stop.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { beginRefreshAtMs, judgePcr, readK8sSignerConfig, type PcrFacts } from '../../src/k8s-signer/index.js';
import { ConfigError } from '../../src/core/config.js';
import { createCsr, exportSpkiDer, generateKeyPair } from '../../src/pki/index.js';
import { generateProvenKey } from '../../src/devcluster/pod-certificate-keys.js';

const OPTS = { trustDomain: 'example.org', maxTtlSeconds: 7 * 86400 };

async function facts(over: Partial<PcrFacts> = {}): Promise<PcrFacts> {
  const key = await generateKeyPair();
  return {
    namespace: 'shop',
    serviceAccountName: 'cart',
    maxExpirationSeconds: 3600,
    unverifiedUserAnnotations: undefined,
    pkixPublicKey: exportSpkiDer(key.publicKey).toString('base64'),
    stubPKCS10Request: undefined,
    ...over,
  };
}

test('a P-256 key: the service account SVID, lifetime = maxExpirationSeconds counting the backdate, capped by the signer', async () => {
  const v = judgePcr(await facts(), OPTS);
  assert.equal(v.kind, 'sign');
  if (v.kind !== 'sign') return;
  assert.equal(v.spiffeId, 'spiffe://example.org/ns/shop/sa/cart');
  assert.equal(v.ttlSeconds, 3600 - 120);
  assert.equal(v.key.kind, 'pkix');
  const long = judgePcr(await facts({ maxExpirationSeconds: 60 * 86400 }), OPTS);
  assert.equal(long.kind === 'sign' && long.ttlSeconds, 7 * 86400 - 120, 'the signer\'s own maximum wins');
  const unset = judgePcr(await facts({ maxExpirationSeconds: undefined }), OPTS);
  assert.equal(unset.kind === 'sign' && unset.ttlSeconds, 86400 - 120);
});

test('a stub PKCS#10 is used as such; Ed25519 and P-521 keys are Denied UnsupportedKeyType; annotations are Denied', async () => {
  const key = await generateKeyPair({ kind: 'ec', curve: 'P-384' });
  const stub = judgePcr(await facts({ pkixPublicKey: undefined, stubPKCS10Request: Buffer.from(createCsr({ privateKey: key.privateKey, uri: 'spiffe://x/y' }).der).toString('base64') }), OPTS);
  assert.equal(stub.kind === 'sign' && stub.key.kind, 'stub');
  for (const keyType of ['ED25519', 'ECDSAP521'] as const) {
    const proven = await generateProvenKey(keyType, 'uid');
    const v = judgePcr(await facts({ pkixPublicKey: proven.spkiDer.toString('base64') }), OPTS);
    assert.equal(v.kind, 'denied', keyType);
    assert.equal(v.kind === 'denied' && v.reason, 'UnsupportedKeyType');
    assert.match(v.kind === 'denied' ? v.message : '', /supported key types: ECDSAP256, ECDSAP384, RSA3072, RSA4096; suggested: ECDSAP256/);
  }
  const annotated = judgePcr(await facts({ unverifiedUserAnnotations: { 'example.com/a': 'b' } }), OPTS);
  assert.deepEqual(annotated.kind === 'denied' && annotated.reason, 'InvalidUnverifiedUserAnnotations');
});

test('beginRefreshAt: half-way, whole seconds, inside [notBefore + 10 min, notAfter - 10 min] for every allowed lifetime', () => {
  const nb = Date.UTC(2026, 0, 1);
  assert.equal(beginRefreshAtMs(nb, nb + 3600_000), nb + 1800_000);
  assert.equal(beginRefreshAtMs(nb, nb + 3601_000), nb + 1800_000);
  assert.equal(beginRefreshAtMs(nb, nb + 86400_000), nb + 43200_000);
  for (const lifetimeS of [3600, 3601, 7200, 86400, 7884000]) {
    const at = beginRefreshAtMs(nb, nb + lifetimeS * 1000);
    assert.ok(at >= nb + 600_000 && at <= nb + lifetimeS * 1000 - 600_000 && at % 1000 === 0, `${lifetimeS}`);
  }
});

test('the PCR controller runs only when asked: K8S_SIGNER_CONTROLLERS or --controllers', () => {
  const base = { signerName: 'certbroker.io/spiffe', opsAddress: 'off' };
  assert.deepEqual(readK8sSignerConfig(base, {}).controllers, ['csr'], 'PCRs are off by default in Kubernetes 1.35');
  assert.deepEqual(readK8sSignerConfig(base, { K8S_SIGNER_CONTROLLERS: 'csr,pcr' }).controllers, ['csr', 'pcr']);
  assert.deepEqual(readK8sSignerConfig({ ...base, controllers: 'pcr' }, { K8S_SIGNER_CONTROLLERS: 'csr' }).controllers, ['pcr'], 'the flag over the env');
  assert.throws(() => readK8sSignerConfig({ ...base, controllers: 'pcr,ctb' }, {}), (e: unknown) => e instanceof ConfigError && /unknown controllers \["ctb"\]/.test(e.message));
  assert.throws(
    () => readK8sSignerConfig({ ...base, controllers: 'csr,pcr' }, { K8S_SIGNER_MAX_TTL_SECONDS: '1800', K8S_SIGNER_DEFAULT_TTL_SECONDS: '600' }),
    (e: unknown) => e instanceof ConfigError && /K8S_SIGNER_MAX_TTL_SECONDS=1800 is below 3600/.test(e.message),
  );
  assert.equal(readK8sSignerConfig(base, { K8S_SIGNER_MAX_TTL_SECONDS: '1800', K8S_SIGNER_DEFAULT_TTL_SECONDS: '600' }).maxTtlSeconds, 1800, 'CSRs alone may be shorter');
});
