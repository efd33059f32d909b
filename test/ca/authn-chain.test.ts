/**
 * The authenticator chain's fall-through rule, over in-memory authenticators: only "could not
 * decide" (ERR_CA_AUTHN_BACKEND) moves on to the next authenticator; a definite rejection is final.
 * Then the JWT verifier's side of that rule against real JWKS hosts (HTTPS on loopback): an outage
 * is "could not decide", a token the keys refute is final.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:https';
import type { ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { rejectionCode } from './support/error-code.js';
import { FakeClock } from '../support/fake-clock.js';
import { createLogger, silentLogger } from '../../src/core/log.js';
import { Secret } from '../../src/core/secret.js';
import { AuthenticatorChain, type Authenticator, JwtAuthenticator, discoveredJwks, TokenCache, type Caller, authnError, type CaAuthnCode } from '../../src/ca/index.js';
import { makeServingMaterial, type ServingMaterial } from '../../src/devcluster/serving-cert.js';

const CALLER: Caller = { namespace: 'istio-system', serviceAccount: 'ztunnel', clusterId: 'Kubernetes', authenticator: 'jwt' };

function rejecting(kind: Caller['authenticator'], code: CaAuthnCode, asked: string[]): Authenticator {
  return {
    kind,
    authenticate: async () => {
      asked.push(kind);
      throw authnError(code, `${kind} says ${code}`);
    },
  };
}

function accepting(asked: string[]): Authenticator {
  return {
    kind: 'jwt',
    authenticate: async () => {
      asked.push('jwt');
      return CALLER;
    },
  };
}

test('a definite rejection ends the chain: the next authenticator is never asked', async () => {
  for (const code of ['ERR_CA_TOKEN_INVALID', 'ERR_CA_TOKEN_AUDIENCE', 'ERR_CA_TOKEN_EXPIRED', 'ERR_CA_TOKEN_NOT_SERVICE_ACCOUNT'] as const) {
    const asked: string[] = [];
    const chain = new AuthenticatorChain([rejecting('tokenreview', code, asked), accepting(asked)], silentLogger);
    assert.equal(await rejectionCode(chain.authenticate(new Secret('t'))), code);
    assert.deepEqual(asked, ['tokenreview'], code);
  }
});

test('a backend failure falls through to the next authenticator, which decides', async () => {
  const asked: string[] = [];
  const chain = new AuthenticatorChain([rejecting('tokenreview', 'ERR_CA_AUTHN_BACKEND', asked), accepting(asked)], silentLogger);
  assert.deepEqual(await chain.authenticate(new Secret('t')), CALLER);
  assert.deepEqual(asked, ['tokenreview', 'jwt']);

  const no: string[] = [];
  const refusing = new AuthenticatorChain([rejecting('tokenreview', 'ERR_CA_AUTHN_BACKEND', no), rejecting('jwt', 'ERR_CA_TOKEN_INVALID', no)], silentLogger);
  assert.equal(await rejectionCode(refusing.authenticate(new Secret('t'))), 'ERR_CA_TOKEN_INVALID', 'the deciding answer is reported');
});

test('nobody could decide: backend error; an unexpected exception denies without falling through', async () => {
  const asked: string[] = [];
  const allDown = new AuthenticatorChain([rejecting('tokenreview', 'ERR_CA_AUTHN_BACKEND', asked), rejecting('jwt', 'ERR_CA_AUTHN_BACKEND', asked)], silentLogger);
  assert.equal(await rejectionCode(allDown.authenticate(new Secret('t'))), 'ERR_CA_AUTHN_BACKEND');
  assert.deepEqual(asked, ['tokenreview', 'jwt']);

  const after: string[] = [];
  const buggy: Authenticator = { kind: 'tokenreview', authenticate: async () => { throw new TypeError('bug'); } };
  const chain = new AuthenticatorChain([buggy, accepting(after)], silentLogger);
  assert.equal(await rejectionCode(chain.authenticate(new Secret('t'))), 'ERR_CA_AUTHN_BACKEND');
  assert.deepEqual(after, []);
  assert.equal(await rejectionCode(new AuthenticatorChain([], silentLogger).authenticate(new Secret('t'))), 'ERR_CA_AUTHN_BACKEND');
});

test('a chain of one authenticator (the usual cluster): the same verdicts, errors and log as the loop', async () => {
  const asked: string[] = [];
  assert.deepEqual(await new AuthenticatorChain([accepting(asked)], silentLogger).authenticate(new Secret('t')), CALLER);
  for (const code of ['ERR_CA_TOKEN_INVALID', 'ERR_CA_TOKEN_EXPIRED', 'ERR_CA_AUTHN_BACKEND'] as const) {
    assert.equal(await rejectionCode(new AuthenticatorChain([rejecting('tokenreview', code, asked)], silentLogger).authenticate(new Secret('t'))), code);
  }
  const lines: string[] = [];
  const logger = createLogger({ level: 'debug', sink: (line) => lines.push(line) });
  await assert.rejects(new AuthenticatorChain([rejecting('jwt', 'ERR_CA_AUTHN_BACKEND', asked)], logger).authenticate(new Secret('t')));
  assert.equal(lines.filter((l) => l.includes('authenticator could not decide')).length, 1, 'the undecided one is logged, as in the loop');
  const buggy: Authenticator = { kind: 'tokenreview', authenticate: async () => { throw new TypeError('bug'); } };
  assert.equal(await rejectionCode(new AuthenticatorChain([buggy], silentLogger).authenticate(new Secret('t'))), 'ERR_CA_AUTHN_BACKEND');
  const throwsAtOnce = { kind: 'tokenreview', authenticate: () => { throw new TypeError('sync bug'); } } as Authenticator;
  const p = new AuthenticatorChain([throwsAtOnce], silentLogger).authenticate(new Secret('t'));
  assert.ok(p instanceof Promise, 'a synchronous throw is a rejection, not an exception out of authenticate');
  assert.equal(await rejectionCode(p), 'ERR_CA_AUTHN_BACKEND');
});

// --- The JWT verifier's verdicts against real JWKS hosts (HTTPS on loopback) ---

const ISSUER = 'https://issuer.example';
type SigningKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
let signingKey: SigningKey;
const hosts: Server[] = [];
let material: ServingMaterial;
let healthyJwks: string;

/** An HTTPS server on loopback answering every request with `reply`; its base URL. */
async function jwksHost(reply: (res: ServerResponse) => void): Promise<string> {
  const server = createServer({ cert: material.certPem, key: material.keyPem }, (_req, res) => reply(res));
  hosts.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const s = createNetServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

function jwtAuthenticator(keys: { jwksUri?: string; discoveryUrl?: string; timeoutMs?: number }): JwtAuthenticator {
  const clock = new FakeClock(Date.now());
  return new JwtAuthenticator({
    clusterId: 'Kubernetes',
    issuer: ISSUER,
    audiences: ['istio-ca'],
    algorithms: ['ES256'],
    keys: discoveredJwks({ issuer: ISSUER, caPem: material.caCertPem, ...keys }),
    clock,
    cache: new TokenCache({ clock, ttlMs: 60_000, maxEntries: 10 }),
  });
}

async function signed(claims: { aud?: string; iss?: string; kid?: string; key?: SigningKey } = {}): Promise<string> {
  return new SignJWT({ sub: 'system:serviceaccount:istio-system:ztunnel' })
    .setProtectedHeader({ alg: 'ES256', kid: claims.kid ?? 'k1' })
    .setIssuer(claims.iss ?? ISSUER)
    .setAudience(claims.aud ?? 'istio-ca')
    .setExpirationTime('1h')
    .sign(claims.key ?? signingKey);
}

before(async () => {
  material = await makeServingMaterial({ hosts: ['127.0.0.1'], nowMs: Date.now() });
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  signingKey = privateKey;
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  healthyJwks = await jwksHost((res) => res.setHeader('content-type', 'application/json').end(JSON.stringify({ keys: [jwk] })));
});

after(() => {
  for (const s of hosts) s.closeAllConnections(), s.close();
});

test('JWKS outages are ERR_CA_AUTHN_BACKEND (no verdict): the chain asks the next authenticator', async () => {
  const outages: Record<string, { jwksUri?: string; discoveryUrl?: string; timeoutMs?: number }> = {
    'connection refused': { jwksUri: `https://127.0.0.1:${await closedPort()}/openid/v1/jwks` },
    'HTTP 500': { jwksUri: `${await jwksHost((res) => res.writeHead(500).end('{"keys":[]}'))}/jwks` },
    'not JSON': { jwksUri: `${await jwksHost((res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>maintenance</html>'))}/jwks` },
    'JSON but not a key set': { jwksUri: `${await jwksHost((res) => res.end(JSON.stringify({ keys: 'none' })))}/jwks` },
    'no answer in time': { jwksUri: `${await jwksHost(() => undefined)}/jwks`, timeoutMs: 300 },
    'discovery answering 503': { discoveryUrl: await jwksHost((res) => res.writeHead(503).end()) },
  };
  const token = new Secret(await signed());
  for (const [name, keys] of Object.entries(outages)) {
    const jwt = jwtAuthenticator(keys);
    assert.equal(await rejectionCode(jwt.authenticate(token)), 'ERR_CA_AUTHN_BACKEND', name);
    const asked: string[] = [];
    assert.deepEqual(await new AuthenticatorChain([jwt, accepting(asked)], silentLogger).authenticate(token), CALLER, name);
    assert.deepEqual(asked, ['jwt'], `${name}: fell through to the next authenticator`);
  }
});

test('with a healthy JWKS a bad token is a definite rejection that ends the chain', async () => {
  const jwt = jwtAuthenticator({ jwksUri: `${healthyJwks}/jwks` });
  assert.equal((await jwt.authenticate(new Secret(await signed()))).serviceAccount, 'ztunnel', 'a good token passes');
  const otherKey = (await generateKeyPair('ES256')).privateKey;
  const good = await signed();
  const [h, p] = good.split('.');
  const bad: Record<string, [string, string]> = {
    'signed by another key': [await signed({ key: otherKey }), 'ERR_CA_TOKEN_INVALID'],
    'tampered signature': [`${h}.${p}.${Buffer.alloc(64, 7).toString('base64url')}`, 'ERR_CA_TOKEN_INVALID'],
    'key id not in the JWKS': [await signed({ kid: 'k9' }), 'ERR_CA_TOKEN_INVALID'],
    'wrong issuer': [await signed({ iss: 'https://other.example' }), 'ERR_CA_TOKEN_INVALID'],
    'alg not allowed': [`${Buffer.from('{"alg":"HS256"}').toString('base64url')}.${p}.${Buffer.alloc(32, 1).toString('base64url')}`, 'ERR_CA_TOKEN_INVALID'],
    'alg none (unsigned)': [`${Buffer.from('{"alg":"none"}').toString('base64url')}.${p}.`, 'ERR_CA_TOKEN_MALFORMED'],
    'not a JWT': ['opaque-token', 'ERR_CA_TOKEN_MALFORMED'],
    'wrong audience': [await signed({ aud: 'https://kubernetes.default.svc' }), 'ERR_CA_TOKEN_AUDIENCE'],
  };
  for (const [name, [token, code]] of Object.entries(bad)) {
    assert.equal(await rejectionCode(jwt.authenticate(new Secret(token))), code, name);
    const asked: string[] = [];
    assert.equal(await rejectionCode(new AuthenticatorChain([jwt, accepting(asked)], silentLogger).authenticate(new Secret(token))), code, name);
    assert.deepEqual(asked, [], `${name}: the next authenticator is not asked`);
  }
});
