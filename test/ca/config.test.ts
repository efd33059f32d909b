/**
 * `readCaConfig`: flags and env to one frozen config, every problem listed at once in a
 * ConfigError (ERR_CONFIG_INVALID). Pure: each test passes its own env, never process.env.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { thrownCode } from './support/error-code.js';
import { FakeClock } from '../../src/core/clock.js';
import { ConfigError } from '../../src/core/config.js';
import { JwtAuthenticator } from '../../src/ca/authn/jwt-verifier.js';
import { TokenCache } from '../../src/ca/authn/token-cache.js';
import { readCaConfig, type CaCliFlags } from '../../src/ca/config.js';

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
