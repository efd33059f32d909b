/**
 * Local JWT verification through the cluster's OIDC discovery + JWKS (jose), and several
 * clusters selected by `clusterid` — against real devclusters over HTTPS.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { status } from '@grpc/grpc-js';
import { SignJWT, decodeJwt, decodeProtectedHeader, generateKeyPair } from 'jose';
import { FakeClock } from '../support/fake-clock.js';
import type { CaServer } from '../../src/ca/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { caClient, lastDenialReason, startCaEnv, TD, waitForIndex, type CaEnv, type CertResult } from './support/ca-env.js';
import { newCsr } from './support/pki-fixtures.js';

let a: CaEnv;
let b: CaEnv;
const caClock = new FakeClock(Date.now());
let jwtCa: CaServer;
let multiCa: CaServer;
let csr: string;

const id = (ns: string, sa: string) => `spiffe://${TD}/ns/${ns}/sa/${sa}`;

before(async () => {
  [a, b] = await Promise.all([startCaEnv(), startCaEnv()]);
  for (const env of [a, b]) {
    await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
  }
  await a.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  await b.createPod({ namespace: 'default', name: 'remote-a', serviceAccount: 'remote', node: 'node-a' });
  jwtCa = await a.startCa({
    clock: caClock,
    clusters: [
      a.clusterConfig('Kubernetes', {
        tokenReview: false,
        oidc: { issuer: a.cluster.issuer, discoveryUrl: a.cluster.url, caPem: a.cluster.caCertPem, algorithms: ['ES256'], useKubeCredentials: true },
      }),
    ],
  });
  multiCa = await a.startCa({ clusters: [a.clusterConfig('Kubernetes'), b.clusterConfig('cluster-b')] });
  await waitForIndex(jwtCa, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
  await waitForIndex(multiCa, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
  await waitForIndex(multiCa, (i) => i.getPod({ namespace: 'default', name: 'remote-a' }) !== undefined, 'cluster-b');
  csr = await newCsr();
  caClock.set(Date.now());
});

after(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

function denied(r: CertResult, logs: readonly string[], reason: string): void {
  assert.equal(r.code, status.UNAUTHENTICATED, JSON.stringify(r).slice(0, 200));
  assert.equal(r.details, 'authentication failed');
  assert.equal(lastDenialReason(logs), reason);
}

test('JWT via OIDC discovery: bound token issues, impersonation uses the pod claims', async () => {
  const c = caClient(jwtCa.port, jwtCa.rootsPem());
  try {
    const t = await a.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    const own = await c.create({ token: t, csr });
    assert.equal(own.code, undefined, JSON.stringify(own));
    assert.equal(checkX509Svid(own.chain![0]!)?.id, id('istio-system', 'ztunnel'));
    const imp = await c.create({ token: t, csr, impersonate: id('default', 'sleep') });
    assert.equal(imp.code, undefined, JSON.stringify(imp));
    assert.equal(checkX509Svid(imp.chain![0]!)?.id, id('default', 'sleep'));
  } finally {
    c.close();
  }
});

test('JWT: wrong audience, tampered signature, alg none, forged key, another cluster key: denied', async () => {
  const c = caClient(jwtCa.port, jwtCa.rootsPem());
  try {
    const wrongAud = await a.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a', audiences: ['other'] });
    denied(await c.create({ token: wrongAud, csr }), a.logs, 'ERR_CA_TOKEN_AUDIENCE');

    const t = await a.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    const [h, p, sig] = t.split('.') as [string, string, string];
    const flipped = sig.slice(0, 5) + (sig[5] === 'A' ? 'B' : 'A') + sig.slice(6);
    denied(await c.create({ token: `${h}.${p}.${flipped}`, csr }), a.logs, 'ERR_CA_TOKEN_INVALID');

    const none = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
    // Unsigned: not a JWS at all, refused before any verification.
    denied(await c.create({ token: `${none}.${p}.`, csr }), a.logs, 'ERR_CA_TOKEN_MALFORMED');

    // Same claims, signed by a key that is not in the cluster's JWKS (with the cluster's kid).
    const claims = decodeJwt(t);
    const header = decodeProtectedHeader(t);
    const { privateKey } = await generateKeyPair('ES256');
    const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', ...(header.kid ? { kid: header.kid } : {}) }).sign(privateKey);
    denied(await c.create({ token: forged, csr }), a.logs, 'ERR_CA_TOKEN_INVALID');

    // A token from cluster B (another issuer key) presented to cluster A's verifier.
    const fromB = await b.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    denied(await c.create({ token: fromB, csr }), a.logs, 'ERR_CA_TOKEN_INVALID');
  } finally {
    c.close();
  }
});

test('JWT: algorithm allow-list (ES256 tokens refused when only RS256 is allowed)', async () => {
  const rsOnly = await a.startCa({
    clusters: [
      a.clusterConfig('Kubernetes', {
        tokenReview: false,
        oidc: { issuer: a.cluster.issuer, discoveryUrl: a.cluster.url, caPem: a.cluster.caCertPem, algorithms: ['RS256'], useKubeCredentials: true },
      }),
    ],
  });
  const c = caClient(rsOnly.port, rsOnly.rootsPem());
  try {
    const t = await a.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    denied(await c.create({ token: t, csr }), a.logs, 'ERR_CA_TOKEN_INVALID');
  } finally {
    c.close();
    await rsOnly.stop();
  }
});

test('JWT: discovery document for another issuer is refused', async () => {
  const wrong = await a.startCa({
    clusters: [
      a.clusterConfig('Kubernetes', {
        tokenReview: false,
        oidc: { issuer: 'https://issuer.example', discoveryUrl: a.cluster.url, caPem: a.cluster.caCertPem, algorithms: ['ES256'], useKubeCredentials: true },
      }),
    ],
  });
  const c = caClient(wrong.port, wrong.rootsPem());
  try {
    const t = await a.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    // No verdict (the key set cannot be trusted): UNAVAILABLE, not an authentication refusal.
    const r = await c.create({ token: t, csr });
    assert.equal(r.code, status.UNAVAILABLE, JSON.stringify(r).slice(0, 200));
    assert.equal(r.details, 'authentication backend unavailable');
    assert.equal(lastDenialReason(a.logs), 'ERR_CA_AUTHN_BACKEND');
  } finally {
    c.close();
    await wrong.stop();
  }
});

test('JWT: expired token (CA clock past exp) denied', async () => {
  const c = caClient(jwtCa.port, jwtCa.rootsPem());
  try {
    const t = await a.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a', expirationSeconds: 600 });
    assert.equal((await c.create({ token: t, csr: await newCsr() })).code, undefined);
    caClock.set(Date.now() + 700_000); // past exp plus the 10 s tolerance
    denied(await c.create({ token: t, csr }), a.logs, 'ERR_CA_TOKEN_EXPIRED');
  } finally {
    c.close();
  }
});

test('multi-cluster: clusterid selects the authenticator and the pod index', async () => {
  const c = caClient(multiCa.port, multiCa.rootsPem());
  try {
    const tb = await b.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    const ta = await a.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    const ok = await c.create({ token: tb, csr, clusterId: 'cluster-b', impersonate: id('default', 'remote') });
    assert.equal(ok.code, undefined, JSON.stringify(ok));
    assert.equal(checkX509Svid(ok.chain![0]!)?.id, id('default', 'remote'));
    // B's token reviewed by A (default cluster): rejected.
    denied(await c.create({ token: tb, csr }), a.logs, 'ERR_CA_TOKEN_INVALID');
    // A's ztunnel cannot get B's workload: A's index has no such pod on its node.
    denied(await c.create({ token: ta, csr, impersonate: id('default', 'remote') }), a.logs, 'ERR_CA_NO_POD_ON_NODE');
    // B's ztunnel cannot get A's workload through cluster-b.
    denied(await c.create({ token: tb, csr, clusterId: 'cluster-b', impersonate: id('default', 'sleep') }), a.logs, 'ERR_CA_NO_POD_ON_NODE');
    denied(await c.create({ token: tb, csr, clusterId: 'cluster-c' }), a.logs, 'ERR_CA_UNKNOWN_CLUSTER');
  } finally {
    c.close();
  }
});
