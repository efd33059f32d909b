/**
 * `unverifiedJwtExpiryMs` (src/ca/authn/authenticator.ts) reads `exp` with jose's `decodeJwt`, the
 * same decoder as the broker's token source: a compact JWS with a JSON-object payload and a
 * strictly base64url-encoded payload, or nothing (the TokenReview cache then keeps its own TTL).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SignJWT } from 'jose';
import { generateKeyPair } from 'node:crypto';
import { promisify } from 'node:util';
import { unverifiedJwtExpiryMs } from '../../src/ca/index.js';

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

test('exp of a signed JWT, in milliseconds', async () => {
  const { privateKey } = await promisify(generateKeyPair)('ec', { namedCurve: 'P-256' });
  const token = await new SignJWT({ sub: 'x' }).setProtectedHeader({ alg: 'ES256' }).setExpirationTime(1_900_000_000).sign(privateKey);
  assert.equal(unverifiedJwtExpiryMs(token), 1_900_000_000_000);
});

test('undefined for anything that is not a readable JWT with a numeric exp', () => {
  const cases: Record<string, string> = {
    'no exp': `${b64({ alg: 'ES256' })}.${b64({ sub: 'x' })}.c2ln`,
    'string exp': `${b64({ alg: 'ES256' })}.${b64({ exp: '1900000000' })}.c2ln`,
    'not a JWT': 'opaque-token',
    'two parts': `${b64({ alg: 'ES256' })}.${b64({ exp: 1 })}`,
    'JWE (five parts)': `${b64({ alg: 'RSA-OAEP' })}.${b64({ exp: 1 })}.iv.ct.tag`,
    'array payload': `${b64({ alg: 'ES256' })}.${b64([{ exp: 1 }])}.c2ln`,
    'payload not JSON': `${b64({ alg: 'ES256' })}.${Buffer.from('exp=1').toString('base64url')}.c2ln`,
    // Node's lenient base64 decoder skips the stray characters and would read exp: 1.
    'payload not base64url': `${b64({ alg: 'ES256' })}.${b64({ exp: 1 })}!!.c2ln`,
  };
  for (const [what, token] of Object.entries(cases)) assert.equal(unverifiedJwtExpiryMs(token), undefined, what);
});
