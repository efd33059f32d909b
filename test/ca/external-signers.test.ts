/**
 * The external signers' pure parts: their settings in `readCaConfig` (every problem at once), the
 * gRPC status -> CaError mapping of an upstream's answer, and the `istio-upstream` checks of an
 * answer (identity, key, expiry, chain to the upstream roots with and without an intermediate).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { status } from '@grpc/grpc-js';
import { ConfigError } from '../../src/core/config.js';
import { checkWorkloadAnswer, readCaConfig, upstreamFailure, type CaCliFlags } from '../../src/ca/index.js';
import { AnchoredTails, caKeyMaterial, createCsr, createIntermediateCa, createRootCa, exportSpkiDer, FastLeafIssuer, generateKeyPair } from '../../src/pki/index.js';

const ID = 'spiffe://cluster.local/ns/default/sa/sleep';

function problems(env: Record<string, string>, flags: CaCliFlags = {}): readonly string[] {
  try {
    readCaConfig(flags, env);
    return [];
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.problems;
  }
}

test('readCaConfig: istio-upstream needs address, root file and token file (all named at once); module: needs a name; the timeout is bounded', () => {
  const missing = problems({ CA_SIGNER: 'istio-upstream' });
  assert.equal(missing.length, 3, missing.join('\n'));
  for (const name of ['CA_UPSTREAM_ADDRESS', 'CA_UPSTREAM_ROOT_CERT_FILE', 'CA_UPSTREAM_TOKEN_FILE']) assert.ok(missing.some((p) => p.includes(name)), name);
  assert.ok(problems({ CA_SIGNER: 'istio-upstream', CA_UPSTREAM_ADDRESS: 'no-port', CA_UPSTREAM_ROOT_CERT_FILE: '/r', CA_UPSTREAM_TOKEN_FILE: '/t' }).some((p) => p.includes('is not host:port')));
  const cfg = readCaConfig(
    { signer: 'istio-upstream', upstreamAddress: 'istiod.istio-system.svc:15012', upstreamRootCertFile: '/etc/upstream/root.pem', upstreamTokenFile: '/var/run/secrets/upstream/token', upstreamClusterId: 'east' },
    { CA_SIGNER_TIMEOUT_SECONDS: '3', CA_UPSTREAM_TLS_SERVER_NAME: 'istiod.istio-system.svc' },
  );
  assert.equal(cfg.signerKind, 'istio-upstream');
  assert.deepEqual(cfg.externalSigner, {
    kind: 'istio-upstream',
    address: 'istiod.istio-system.svc:15012',
    rootCertFile: '/etc/upstream/root.pem',
    tokenFile: '/var/run/secrets/upstream/token',
    clusterId: 'east',
    tlsServerName: 'istiod.istio-system.svc',
    timeoutMs: 3000,
  });
  assert.ok(problems({ CA_SIGNER: 'module:' }).some((p) => p.includes('names no module')));
  assert.deepEqual(readCaConfig({}, { CA_SIGNER: 'module:@acme/hsm-signer' }).externalSigner, { kind: 'module', specifier: '@acme/hsm-signer', timeoutMs: 10_000 });
  assert.ok(problems({ CA_SIGNER: 'module:./m.mjs', CA_SIGNER_TIMEOUT_SECONDS: '0' }).some((p) => p.includes('CA_SIGNER_TIMEOUT_SECONDS')));
  assert.ok(problems({ CA_SIGNER: 'hsm' }).some((p) => p.includes('CA_SIGNER')), 'an unknown kind is still refused');
  assert.ok(problems({ CA_TRUSTED_REGISTRATION_AUTHORITIES: 'not an account' }).some((p) => p.includes('CA_TRUSTED_REGISTRATION_AUTHORITIES')));
  assert.deepEqual(readCaConfig({}, { CA_TRUSTED_REGISTRATION_AUTHORITIES: 'istio-system/certbroker-ra' }).trustedRegistrationAuthorities, ['istio-system/certbroker-ra']);
});

test('upstreamFailure: refusals keep their status as ERR_CA_UPSTREAM_REFUSED; a deadline is DEADLINE_EXCEEDED; everything else UNAVAILABLE', () => {
  const of = (code: status) => {
    const e = upstreamFailure(code, 'details');
    return [e.code, e.status];
  };
  assert.deepEqual(of(status.UNAUTHENTICATED), ['ERR_CA_UPSTREAM_REFUSED', 'unauthenticated']);
  assert.deepEqual(of(status.PERMISSION_DENIED), ['ERR_CA_UPSTREAM_REFUSED', 'permission-denied']);
  assert.deepEqual(of(status.INVALID_ARGUMENT), ['ERR_CA_UPSTREAM_REFUSED', 'invalid-argument']);
  assert.deepEqual(of(status.DEADLINE_EXCEEDED), ['ERR_CA_UPSTREAM_TIMEOUT', 'deadline-exceeded']);
  for (const code of [status.UNAVAILABLE, status.INTERNAL, status.RESOURCE_EXHAUSTED, status.UNKNOWN, status.UNIMPLEMENTED]) {
    assert.deepEqual(of(code), ['ERR_CA_UPSTREAM_UNAVAILABLE', 'unavailable'], status[code]);
  }
  assert.equal(upstreamFailure(status.UNAUTHENTICATED, 'secret detail').publicMessage, 'upstream CA refused the request (UNAUTHENTICATED)');
});

test('istio-upstream answer check: accepted for the identity and key under the upstream roots; refused otherwise', async () => {
  const root = await createRootCa({ subject: 'CN=upstream root', ttlSeconds: 86_400 });
  const other = await createRootCa({ subject: 'CN=other root', ttlSeconds: 86_400 });
  const inter = await createIntermediateCa({ subject: 'CN=upstream inter', ttlSeconds: 86_400, issuer: { cert: root.cert, privateKey: root.privateKey } });
  const fromInter = new FastLeafIssuer({ signer: caKeyMaterial({ cert: inter.cert, keyObject: inter.privateKey, roots: [root.cert] }).leafSigner });
  const fromRoot = new FastLeafIssuer({ signer: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }).leafSigner });
  const fromOther = new FastLeafIssuer({ signer: caKeyMaterial({ cert: other.cert, keyObject: other.privateKey }).leafSigner });
  const key = await generateKeyPair();
  const csr = createCsr({ privateKey: key.privateKey, uri: ID }).pem;
  const spki = exportSpkiDer(key.publicKey);
  const tails = new AnchoredTails(root.pem);
  const now = Date.now();
  const viaInter = await fromInter.issueAsync({ csr, spiffeId: ID, ttlSeconds: 3600 });
  const viaRoot = await fromRoot.issueAsync({ csr, spiffeId: ID, ttlSeconds: 3600 });
  const want = { identity: ID, spki, tails, nowMs: now };
  const code = (chain: string[], over: Partial<typeof want> = {}) => {
    try {
      checkWorkloadAnswer({ cert_chain: chain }, { ...want, ...over });
      return 'accepted';
    } catch (err) {
      return (err as { code?: string }).code;
    }
  };
  assert.equal(code([viaInter.pem, inter.pem, root.pem]), 'accepted');
  assert.equal(code([viaInter.pem, inter.pem, root.pem]), 'accepted', 'the verified tail is remembered');
  assert.equal(code([viaRoot.pem, root.pem]), 'accepted', 'no intermediate: a trusted root signed it');
  assert.equal(checkWorkloadAnswer({ cert_chain: [viaInter.pem, inter.pem, root.pem] }, want).serialHex, viaInter.serialHex.toLowerCase());
  assert.equal(code([viaInter.pem, inter.pem, root.pem], { identity: 'spiffe://cluster.local/ns/default/sa/admin' }), 'ERR_CA_UPSTREAM_BAD_RESPONSE', 'another identity');
  assert.equal(code([viaInter.pem, inter.pem, root.pem], { spki: exportSpkiDer((await generateKeyPair()).publicKey) }), 'ERR_CA_UPSTREAM_BAD_RESPONSE', 'another key');
  assert.equal(code([viaInter.pem, inter.pem, root.pem], { nowMs: viaInter.notAfterMs + 1 }), 'ERR_CA_UPSTREAM_BAD_RESPONSE', 'expired');
  const otherLeaf = await fromOther.issueAsync({ csr, spiffeId: ID, ttlSeconds: 3600 });
  assert.equal(code([otherLeaf.pem, other.pem]), 'ERR_CA_UPSTREAM_BAD_RESPONSE', 'a root the file does not hold, even though the answer brings it');
  assert.equal(code([viaInter.pem, inter.pem, root.pem], { tails: new AnchoredTails(other.pem) }), 'ERR_CA_UPSTREAM_BAD_RESPONSE', 'an intermediate under another root');
  assert.equal(code([viaInter.pem]), 'ERR_CA_UPSTREAM_BAD_RESPONSE', 'no root element');
});
