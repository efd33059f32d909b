/**
 * Fault suite — every outbound call has a deadline and closes its connection when it passes.
 * Each adapter is pointed at a dependency that accepts and never answers (a TCP server that
 * never starts TLS, and a TLS server that completes the handshake and goes silent) with a short
 * deadline, and must reject with its coded error and leave the hung server holding no socket.
 *
 * Before this suite: TokenReview, TokenRequest and the CA root Secret read had no deadline at
 * all (they waited for as long as the connection lived), and closing the CA client left its
 * connection attempt to a CA that never answers the handshake open.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { CaCallError, IstioCaClient, tokenRequestFetcher } from '../../src/broker/index.js';
import { kubeTokenReviewer, discoveredJwks, kubeCaSecretStore } from '../../src/ca/index.js';
import { renderKubeconfigFile } from '../../src/core/kubeconfig-file.js';
import { Secret } from '../../src/core/secret.js';
import { silentTlsMaterial, startHungServer, type HungServer, type TlsMaterial } from '../support/hung-server.js';
import { until } from '../support/until.js';

const SHORT_MS = 300;


function codeOf(err: unknown): unknown {
  return (err as { code?: unknown }).code;
}

describe('fault: outbound calls to a dependency that never answers', () => {
  let material: TlsMaterial;
  const servers: HungServer[] = [];

  before(async () => {
    material = await silentTlsMaterial();
  });

  after(async () => {
    for (const s of servers) await s.close();
  });

  const hung = async (kind: 'tcp' | 'tls'): Promise<HungServer> => {
    const s = await startHungServer(kind === 'tls' ? { tls: material } : {});
    servers.push(s);
    return s;
  };

  const kubeConfigAt = (server: HungServer): KubeConfig => {
    const kc = new KubeConfig();
    kc.loadFromString(
      renderKubeconfigFile({ server: `https://${server.address}`, caPem: material.caCertPem, token: new Secret('t'), clusterName: 'hung', userName: 'u', contextName: 'hung' }),
    );
    return kc;
  };

  for (const kind of ['tcp', 'tls'] as const) {
    const against = kind === 'tcp' ? 'no TLS handshake' : 'silent after TLS';

    it(`CA -> TokenReview: ERR_DEADLINE_EXCEEDED, connection closed (${against})`, { timeout: 20_000 }, async () => {
      const server = await hung(kind);
      const review = kubeTokenReviewer(kubeConfigAt(server), { timeoutMs: SHORT_MS });
      await assert.rejects(review(new Secret('some.jwt.token'), ['istio-ca']), (err) => codeOf(err) === 'ERR_DEADLINE_EXCEEDED');
      await until(() => server.openConnections === 0, 'the review closed its connection');
    });

    it(`broker -> TokenRequest: ERR_DEADLINE_EXCEEDED, connection closed (${against})`, { timeout: 20_000 }, async () => {
      const server = await hung(kind);
      const fetch = tokenRequestFetcher(kubeConfigAt(server), {
        pod: { namespace: 'istio-system', name: 'broker-0', uid: 'u-1', serviceAccount: 'certbroker-node' },
        audience: 'istio-ca',
        expirationSeconds: 3600,
        timeoutMs: SHORT_MS,
      });
      await assert.rejects(fetch(new AbortController().signal), (err) => codeOf(err) === 'ERR_DEADLINE_EXCEEDED');
      await until(() => server.openConnections === 0, 'the TokenRequest closed its connection');
    });

    it(`CA -> root Secret read: ERR_DEADLINE_EXCEEDED, connection closed (${against})`, { timeout: 20_000 }, async () => {
      const server = await hung(kind);
      const store = kubeCaSecretStore({ kubeConfig: kubeConfigAt(server), namespace: 'istio-system', name: 'istio-ca-secret', requestTimeoutMs: SHORT_MS });
      await assert.rejects(store.read(), (err) => codeOf(err) === 'ERR_DEADLINE_EXCEEDED');
      await until(() => server.openConnections === 0, 'the read closed its connection');
    });

    it(`CA -> OIDC discovery: ERR_CA_AUTHN_BACKEND within its timeout (${against})`, { timeout: 20_000 }, async () => {
      const server = await hung(kind);
      const getKey = discoveredJwks({ issuer: `https://${server.address}`, caPem: material.caCertPem, timeoutMs: SHORT_MS });
      await assert.rejects(async () => getKey({ alg: 'RS256' }, { payload: '', signature: '' } as never), (err: unknown) => codeOf(err) === 'ERR_CA_AUTHN_BACKEND');
      await until(() => server.openConnections === 0, 'discovery closed its connection');
    });

    it(`broker -> CA: the call ends at its deadline and close() leaves no connection (${against})`, { timeout: 20_000 }, async () => {
      const server = await hung(kind);
      const ca = new IstioCaClient({
        address: server.address,
        caRootsPem: material.caCertPem,
        tlsServerName: 'localhost',
        tokens: { token: async () => new Secret('t') },
        clusterId: 'Kubernetes',
        certTtlSeconds: 3600,
        impersonate: false,
        callTimeoutMs: 3000,
        handshakeTimeoutMs: SHORT_MS,
      });
      try {
        await assert.rejects(ca.fetchCertificate('spiffe://cluster.local/ns/a/sa/b', new AbortController().signal), (err) => {
          assert.ok(err instanceof CaCallError, String(err));
          // No handshake: abandoned after handshakeTimeoutMs, the call fails UNAVAILABLE at once
          // (the certificate manager retries). Silent after TLS: the call's own deadline.
          if (kind === 'tcp') {
            assert.equal(err.grpcCode, 'UNAVAILABLE');
            assert.match(err.message, /TLS handshake did not complete within 300 ms/);
          } else {
            assert.equal(err.grpcCode, 'DEADLINE_EXCEEDED');
          }
          return true;
        });
      } finally {
        ca.close();
      }
      await until(() => server.openConnections === 0, 'the CA client closed every connection');
    });
  }
});
