/**
 * The local JWT shape check that runs before any TokenReview (src/ca/authn/token-shape.ts):
 * real service-account tokens pass, everything that cannot be a signed JWT is named and refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPair, SignJWT } from 'jose';
import { jwtShapeProblem, MAX_TOKEN_BYTES } from '../../src/ca/index.js';

const enc = (o: unknown) => Buffer.from(typeof o === 'string' ? o : JSON.stringify(o)).toString('base64url');
const sig = Buffer.alloc(64, 9).toString('base64url');

test('signed JWTs pass (ES256 and RS256, with and without exp, as Kubernetes issues them)', async () => {
  for (const alg of ['ES256', 'RS256'] as const) {
    const { privateKey } = await generateKeyPair(alg);
    const withExp = await new SignJWT({ 'kubernetes.io': { namespace: 'default' } }).setProtectedHeader({ alg, kid: 'k1' }).setSubject('system:serviceaccount:default:sleep').setExpirationTime('1h').sign(privateKey);
    const legacy = await new SignJWT({ 'kubernetes.io/serviceaccount/namespace': 'default' }).setProtectedHeader({ alg }).setIssuer('kubernetes/serviceaccount').sign(privateKey);
    assert.equal(jwtShapeProblem(withExp), undefined);
    assert.equal(jwtShapeProblem(legacy), undefined);
  }
});

test('anything that cannot be a signed JWT is refused, with a reason that quotes none of it', () => {
  const h = enc({ alg: 'RS256' });
  const p = enc({ sub: 'x' });
  const cases: Record<string, string> = {
    empty: '',
    opaque: 'abcdef0123456789',
    'bootstrap-token shape': 'abcdef.0123456789abcdef',
    'four segments': `${h}.${p}.${sig}.${sig}`,
    'empty signature (unsigned)': `${h}.${p}.`,
    'empty header': `.${p}.${sig}`,
    'padded base64': `${h}==.${p}.${sig}`,
    'standard base64 alphabet': `${h}.${p}.${sig}+/`,
    'header not JSON': `${enc('not json')}.${p}.${sig}`,
    'header a JSON array': `${enc([1])}.${p}.${sig}`,
    'header without alg': `${enc({ typ: 'JWT' })}.${p}.${sig}`,
    'alg none': `${enc({ alg: 'none' })}.${p}.${sig}`,
    'alg not a string': `${enc({ alg: 7 })}.${p}.${sig}`,
    'payload not JSON': `${h}.${enc('hello')}.${sig}`,
    'payload a JSON string': `${h}.${enc('"s"')}.${sig}`,
    'too long': `${h}.${enc({ pad: 'x'.repeat(MAX_TOKEN_BYTES) })}.${sig}`,
  };
  for (const [name, token] of Object.entries(cases)) {
    const problem = jwtShapeProblem(token);
    assert.ok(problem !== undefined, `${name}: accepted`);
    if (token.length > 8) assert.ok(!problem.includes(token.slice(0, 8)), `${name}: the reason quotes the token`);
  }
});
