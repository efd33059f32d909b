/**
 * `readCaConfig`: flags and env to one frozen config, every problem listed at once in a
 * ConfigError (ERR_CONFIG_INVALID). Pure: each test passes its own env, never process.env.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rejectionCode, thrownCode } from './support/error-code.js';
import { FakeClock } from '../support/fake-clock.js';
import { ConfigError } from '../../src/core/config.js';
import { silentLogger } from '../../src/core/log.js';
import { JwtAuthenticator, TokenCache, startCaServer, DEFAULT_TOKEN_NEGATIVE_CACHE_SECONDS, readCaConfig, type CaCliFlags, type CaServerConfig, DEFAULT_CA_LIMITS } from '../../src/ca/index.js';

/** The problems `readCaConfig` lists for this input (empty when it accepts it). */
function problems(env: Record<string, string>, flags: CaCliFlags = {}): readonly string[] {
  try {
    readCaConfig(flags, env);
    return [];
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    assert.equal(err.code, 'ERR_CONFIG_INVALID');
    return err.problems;
  }
}

test('defaults are accepted', () => {
  const cfg = readCaConfig({}, {});
  assert.deepEqual(cfg.audiences, ['istio-ca']);
  assert.equal(cfg.plaintext, false);
  assert.ok(Object.isFrozen(cfg));
});

test('a bad LOG_LEVEL is a listed problem with the others (not an error after the config was read); a good one is kept', () => {
  const listed = problems({ LOG_LEVEL: 'loud', MAX_WORKLOAD_CERT_TTL_SECONDS: 'ten' });
  assert.ok(listed.some((p) => /^LOG_LEVEL: unknown log level "loud"/.test(p)), listed.join('\n'));
  assert.ok(listed.length >= 2, 'every problem at once');
  assert.equal(readCaConfig({}, { LOG_LEVEL: 'WARN' }).logLevel, 'warn');
});

test('an audience list of only commas and spaces is refused, listed with the other problems', () => {
  for (const raw of [' , ', ',', ' ,, , ']) {
    const listed = problems({ CA_TOKEN_AUDIENCES: raw, MAX_WORKLOAD_CERT_TTL_SECONDS: 'ten' });
    assert.equal(listed.length, 2, listed.join('\n'));
    assert.match(listed.join('\n'), /CA_TOKEN_AUDIENCES=.* names no audience/);
    assert.match(listed.join('\n'), /MAX_WORKLOAD_CERT_TTL_SECONDS="ten" is not an integer/);
  }
  assert.deepEqual(readCaConfig({}, { CA_TOKEN_AUDIENCES: ' istio-ca , ,other ' }).audiences, ['istio-ca', 'other']);
});

test('CA_JWT_ALGORITHMS: HS256, none and unknown names are listed with the other problems', () => {
  const listed = problems({ CA_JWT_ALGORITHMS: 'RS256,HS256,none,RS257', CA_TOKEN_AUDIENCES: ',', CA_OIDC_ISSUER: 'https://issuer.example' });
  assert.equal(listed.length, 4, listed.join('\n'));
  for (const alg of ['HS256', 'none', 'RS257']) {
    assert.ok(listed.some((p) => p.startsWith(`CA_JWT_ALGORITHMS entry "${alg}" is not an allowed JWT algorithm`)), `${alg}: ${listed.join('\n')}`);
  }
  assert.ok(!listed.some((p) => p.includes('"RS256"')), 'a valid entry is not listed');
  assert.match(listed.join('\n'), /CA_TOKEN_AUDIENCES/);
  // Names are case-sensitive, as in the JWS header; a list naming none is refused.
  assert.equal(problems({ CA_JWT_ALGORITHMS: 'rs256' }).length, 1);
  assert.match(problems({ CA_JWT_ALGORITHMS: ' , ' }).join('\n'), /CA_JWT_ALGORITHMS names no JWT algorithm/);
});

test('CA_JWT_ALGORITHMS: a valid list is accepted and reaches the OIDC settings', () => {
  const cfg = readCaConfig({}, { CA_OIDC_ISSUER: 'https://issuer.example', CA_JWT_ALGORITHMS: 'ES384, PS256,EdDSA' });
  assert.deepEqual(cfg.oidc?.algorithms, ['ES384', 'PS256', 'EdDSA']);
  assert.deepEqual(readCaConfig({}, { CA_OIDC_ISSUER: 'https://issuer.example' }).oidc?.algorithms, ['RS256', 'ES256']);
});

test('the JWT authenticator itself refuses a bad allow-list with a coded error', () => {
  const clock = new FakeClock();
  const options = { clusterId: 'Kubernetes', issuer: 'https://issuer.example', audiences: ['istio-ca'], clock, cache: new TokenCache({ clock, ttlMs: 1000, maxEntries: 1 }), keys: async () => { throw new Error('never asked for a key'); } };
  for (const algorithms of [['HS256'], ['none'], ['RS257'], []]) {
    assert.equal(thrownCode(() => new JwtAuthenticator({ ...options, algorithms })), 'ERR_CONFIG_INVALID', JSON.stringify(algorithms));
  }
  assert.equal(new JwtAuthenticator({ ...options, algorithms: ['ES256', 'RS512'] }).kind, 'jwt');
});

test('plaintext only on a loopback address: refused on every interface or a routable one, with the other problems', () => {
  const cases: Record<string, string>[] = [
    { CA_PLAINTEXT: 'true' }, // default 0.0.0.0:15012
    { CA_PLAINTEXT: 'true', CA_GRPC_ADDRESS: '0.0.0.0:15012' },
    { CA_PLAINTEXT: 'true', CA_GRPC_ADDRESS: '[::]:15012' },
    { CA_PLAINTEXT: 'true', CA_GRPC_ADDRESS: ':15012' },
    { CA_PLAINTEXT: 'true', CA_GRPC_ADDRESS: '10.0.0.5:15012' },
    { CA_PLAINTEXT: 'true', CA_GRPC_ADDRESS: 'istiod.istio-system.svc:15012' },
  ];
  for (const env of cases) {
    const listed = problems({ ...env, CA_SIGNER: 'hsm' });
    assert.equal(listed.length, 2, `${JSON.stringify(env)}: ${listed.join('\n')}`);
    assert.match(listed.join('\n'), /CA_PLAINTEXT=true \(gRPC without TLS\) is allowed only on a loopback address; CA_GRPC_ADDRESS host ".*" is not one/);
  }
  // The CLI flags take the same path.
  assert.equal(problems({}, { plaintext: 'true', grpcAddress: '0.0.0.0:15012' }).length, 1);
});

test('plaintext on loopback is accepted; TLS on every interface is fine', () => {
  for (const address of ['127.0.0.1:0', '127.0.0.2:15012', '[::1]:15012', 'localhost:15012', 'LOCALHOST:1']) {
    assert.equal(readCaConfig({ plaintext: 'true', grpcAddress: address }, {}).plaintext, true, address);
  }
  assert.equal(readCaConfig({}, { CA_PLAINTEXT: 'true', CA_GRPC_ADDRESS: '127.0.0.1:15012' }).grpcHost, '127.0.0.1');
  const tls = readCaConfig({}, { CA_GRPC_ADDRESS: '0.0.0.0:15012' });
  assert.equal(tls.plaintext, false);
  assert.equal(tls.grpcHost, '0.0.0.0');
  assert.equal(readCaConfig({}, { CA_PLAINTEXT: 'false', CA_GRPC_ADDRESS: '[::]:15012' }).grpcHost, '::');
});

test('startCaServer refuses plaintext off loopback before it starts anything', async () => {
  const config: CaServerConfig = {
    grpcHost: '0.0.0.0', grpcPort: 0, plaintext: true, trustDomain: 'cluster.local', servingDnsNames: ['localhost'],
    defaultTtlSeconds: 3600, maxTtlSeconds: 7200, trustedNodeAccounts: [], clusters: [], defaultClusterId: 'Kubernetes',
    signer: { kind: 'cacerts', dir: '/nonexistent/cacerts' }, tokenCacheSeconds: 0, signingWorkers: 0, shutdownGraceMs: 0, logger: silentLogger,
  };
  const started = startCaServer(config);
  // Should it start anyway (the bug), stop it so the failure is reported rather than a hang.
  started.then((ca) => ca.stop(), () => undefined);
  assert.equal(await rejectionCode(started), 'ERR_CONFIG_INVALID');
});

test('connection and stream limits: defaults, env in seconds and counts, every bad value listed at once', () => {
  const d = readCaConfig({}, {});
  assert.deepEqual(d.limits, DEFAULT_CA_LIMITS);
  assert.equal(d.tokenNegativeCacheSeconds, DEFAULT_TOKEN_NEGATIVE_CACHE_SECONDS);
  assert.ok(Object.isFrozen(d.limits));
  const set = readCaConfig({}, {
    CA_TLS_HANDSHAKE_TIMEOUT_SECONDS: '3', CA_IDLE_SESSION_TIMEOUT_SECONDS: '60', CA_REQUEST_BODY_TIMEOUT_SECONDS: '5',
    CA_MAX_CONCURRENT_STREAMS: '50', CA_MAX_CONNECTIONS: '1000', CA_MAX_STREAMS: '2000', CA_MAX_HEADER_LIST_BYTES: '8192', CA_TOKEN_NEGATIVE_CACHE_SECONDS: '0',
    CA_SETTINGS_ACK_TIMEOUT_SECONDS: '30',
  });
  assert.deepEqual(set.limits, { tlsHandshakeTimeoutMs: 3000, idleSessionTimeoutMs: 60_000, requestBodyTimeoutMs: 5000, maxConcurrentStreams: 50, maxConnections: 1000, maxStreams: 2000, maxHeaderListBytes: 8192, settingsAckTimeoutMs: 30_000 });
  assert.equal(set.tokenNegativeCacheSeconds, 0);
  const bad = problems({
    CA_TLS_HANDSHAKE_TIMEOUT_SECONDS: '0', CA_IDLE_SESSION_TIMEOUT_SECONDS: 'soon', CA_REQUEST_BODY_TIMEOUT_SECONDS: '301',
    CA_MAX_CONCURRENT_STREAMS: '0', CA_MAX_CONNECTIONS: '-1', CA_MAX_STREAMS: '1.5', CA_MAX_HEADER_LIST_BYTES: '1024', CA_TOKEN_NEGATIVE_CACHE_SECONDS: '3601',
    CA_SETTINGS_ACK_TIMEOUT_SECONDS: '301',
  });
  for (const name of ['CA_TLS_HANDSHAKE_TIMEOUT_SECONDS', 'CA_IDLE_SESSION_TIMEOUT_SECONDS', 'CA_REQUEST_BODY_TIMEOUT_SECONDS', 'CA_MAX_CONCURRENT_STREAMS', 'CA_MAX_CONNECTIONS', 'CA_MAX_STREAMS', 'CA_MAX_HEADER_LIST_BYTES', 'CA_TOKEN_NEGATIVE_CACHE_SECONDS', 'CA_SETTINGS_ACK_TIMEOUT_SECONDS']) {
    assert.ok(bad.some((p) => p.startsWith(`${name}=`)), `${name} listed: ${bad.join('; ')}`);
  }
  assert.equal(bad.length, 9, bad.join('; '));
});

test('CA_TOKEN_REVIEW_TIMEOUT_SECONDS (--token-review-timeout-seconds): 5 s by default, env or flag (the flag wins), 1-60 s, listed with the other problems', () => {
  assert.equal(readCaConfig({}, {}).tokenReviewTimeoutMs, 5000);
  assert.equal(readCaConfig({}, { CA_TOKEN_REVIEW_TIMEOUT_SECONDS: '12' }).tokenReviewTimeoutMs, 12_000);
  assert.equal(readCaConfig({ tokenReviewTimeoutSeconds: '2' }, { CA_TOKEN_REVIEW_TIMEOUT_SECONDS: '12' }).tokenReviewTimeoutMs, 2000);
  for (const bad of ['0', '61', '1.5', 'soon']) {
    const listed = problems({ CA_TOKEN_REVIEW_TIMEOUT_SECONDS: bad, MAX_WORKLOAD_CERT_TTL_SECONDS: 'ten' });
    assert.equal(listed.length, 2, listed.join('\n'));
    assert.ok(listed.some((p) => p.startsWith(`CA_TOKEN_REVIEW_TIMEOUT_SECONDS=`)), listed.join('\n'));
  }
});

test('CA_MAX_CONCURRENT_TOKEN_REVIEWS: 16 by default, 1-1024', () => {
  assert.equal(readCaConfig({}, {}).maxConcurrentTokenReviews, 16);
  assert.equal(readCaConfig({}, { CA_MAX_CONCURRENT_TOKEN_REVIEWS: '64' }).maxConcurrentTokenReviews, 64);
  for (const bad of ['0', '1025', 'many']) assert.ok(problems({ CA_MAX_CONCURRENT_TOKEN_REVIEWS: bad }).some((p) => p.startsWith('CA_MAX_CONCURRENT_TOKEN_REVIEWS=')), bad);
});

test('CA_GRANTABLE_SERVING_NAMES: loopback by default; a configured list replaces it; a name that is neither DNS nor IP is listed with the other problems', () => {
  assert.deepEqual(readCaConfig({}, {}).grantableServingNames, ['localhost', '127.0.0.1', '::1']);
  assert.deepEqual(readCaConfig({}, { CA_GRANTABLE_SERVING_NAMES: 'localhost,node-ca.istio-system.svc' }).grantableServingNames, ['localhost', 'node-ca.istio-system.svc']);
  const listed = problems({ CA_GRANTABLE_SERVING_NAMES: 'localhost,*.svc', MAX_WORKLOAD_CERT_TTL_SECONDS: 'ten' });
  assert.equal(listed.length, 2, listed.join('\n'));
  assert.match(listed.join('\n'), /CA_GRANTABLE_SERVING_NAMES entry "\*\.svc" is neither an IP address nor a DNS host name/);
});

test('CA_SIGNER=kubernetes-csr needs a signer name and a roots file; a bad name and the other problems are listed together', () => {
  const listed = problems({ CA_SIGNER: 'kubernetes-csr', CA_K8S_SIGNER_NAME: 'no-domain', MAX_WORKLOAD_CERT_TTL_SECONDS: 'ten' });
  assert.equal(listed.length, 3, listed.join('\n'));
  assert.match(listed.join('\n'), /CA_K8S_SIGNER_NAME \(--k8s-signer-name\) "no-domain": must be a fully qualified domain and path/);
  assert.match(listed.join('\n'), /needs CA_K8S_CSR_ROOTS_FILE/);
  assert.match(listed.join('\n'), /MAX_WORKLOAD_CERT_TTL_SECONDS/);
  assert.match(problems({ CA_SIGNER: 'kubernetes-csr' }).join('\n'), /needs CA_K8S_SIGNER_NAME[\s\S]*needs CA_K8S_CSR_ROOTS_FILE/);
  assert.match(problems({ CA_K8S_SIGNER_NAME: 'example.com/spiffe' }).join('\n'), /are for CA_SIGNER=kubernetes-csr only/, 'a stray setting is not ignored');
});

test('CA_SIGNER=kubernetes-csr: flags and env reach the config (auto-approve off by default, 30 s wait)', () => {
  const cfg = readCaConfig({ signer: 'kubernetes-csr', k8sSignerName: 'example.com/spiffe', k8sCsrRootsFile: '/etc/roots.pem' }, {});
  assert.deepEqual(cfg.k8sCsr, { signerName: 'example.com/spiffe', autoApprove: false, rootsFile: '/etc/roots.pem', timeoutMs: 30_000 });
  const env = readCaConfig({}, { CA_SIGNER: 'kubernetes-csr', CA_K8S_SIGNER_NAME: 'example.com/spiffe', CA_K8S_CSR_ROOTS_FILE: '/r.pem', CA_K8S_CSR_AUTO_APPROVE: 'true', CA_K8S_CSR_TIMEOUT_SECONDS: '5' });
  assert.deepEqual(env.k8sCsr, { signerName: 'example.com/spiffe', autoApprove: true, rootsFile: '/r.pem', timeoutMs: 5000 });
  assert.equal(readCaConfig({}, {}).k8sCsr, undefined);
});
