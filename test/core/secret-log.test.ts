import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { Secret } from '../../src/core/secret.js';
import { createLogger, isSecretFieldName, parseLogLevel, redactSecretText } from '../../src/core/log.js';

test('Secret never prints its value', () => {
  const s = new Secret('eyJhbGciOi.top-secret');
  assert.equal(String(s), '[redacted]');
  assert.equal(JSON.stringify({ s }), '{"s":"[redacted]"}');
  assert.ok(!inspect({ s }).includes('top-secret'));
  assert.equal(s.reveal(), 'eyJhbGciOi.top-secret');
});

test('logger writes one JSON line per record and redacts secret-looking fields', () => {
  const lines: string[] = [];
  const log = createLogger({ level: 'info', sink: (l) => lines.push(l), now: () => 0, fields: { component: 'test' } });
  log.debug('dropped');
  log.info('hello', { token: 'abc', nested: { privateKey: 'k', authorization: 'Bearer x', serial: '01' }, s: new Secret('zz') });
  log.child({ identity: 'spiffe://td/ns/a/sa/b' }).warn('child');
  assert.equal(lines.length, 2);
  const rec = JSON.parse(lines[0]!) as Record<string, unknown>;
  assert.equal(rec.msg, 'hello');
  assert.equal(rec.level, 'info');
  assert.equal(rec.component, 'test');
  assert.equal(rec.token, '[redacted]');
  assert.deepEqual(rec.nested, { privateKey: '[redacted]', authorization: '[redacted]', serial: '01' });
  assert.equal(rec.s, '[redacted]');
  assert.ok(!lines.join('\n').includes('abc'));
  const child = JSON.parse(lines[1]!) as Record<string, unknown>;
  assert.equal(child.identity, 'spiffe://td/ns/a/sa/b');
  assert.equal(child.component, 'test');
});

test('secret field names', () => {
  for (const n of ['token', 'bearer_token', 'password', 'authorization', 'privateKey', 'private_key', 'jwt']) {
    assert.ok(isSecretFieldName(n), n);
  }
  for (const n of ['serial', 'identity', 'notAfter', 'tokenExpiry', 'keyUsage']) assert.ok(!isSecretFieldName(n), n);
});

test('camel-case and kebab-case secret field names are redacted too', () => {
  for (const n of ['accessToken', 'bearerToken', 'idToken', 'saToken', 'x-auth-token', 'Authorization', 'clientSecret', 'caKeyPem', 'signingPrivateKey', 'PRIVATE_KEY', 'apiTOKEN', 'credentials']) {
    assert.ok(isSecretFieldName(n), n);
  }
  for (const n of ['secretName', 'tokenSource', 'keyId', 'publicKey', 'key', 'authenticator', 'tokenFile', 'expiresAt']) assert.ok(!isSecretFieldName(n), n);
  const lines: string[] = [];
  const log = createLogger({ level: 'info', sink: (l) => lines.push(l) });
  log.info('camel', { accessToken: 'tok-123', nested: { clientSecret: 'sec-456', secretName: 'istio-ca-secret' } });
  const rec = JSON.parse(lines[0]!) as { accessToken: string; nested: Record<string, string> };
  assert.equal(rec.accessToken, '[redacted]');
  assert.deepEqual(rec.nested, { clientSecret: '[redacted]', secretName: 'istio-ca-secret' });
  assert.ok(!lines[0]!.includes('tok-123') && !lines[0]!.includes('sec-456'));
});

test('JWTs and PEM private keys are cut out of any logged text, error messages included', () => {
  const jwt = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YTpiIn0.c2lnbmF0dXJlLWJ5dGVz';
  const pem = '-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n';
  assert.equal(redactSecretText(`upstream said: invalid bearer ${jwt} (expired)`), 'upstream said: invalid bearer [redacted] (expired)');
  assert.equal(redactSecretText(`key: ${pem}`), 'key: [redacted]\n');
  assert.equal(redactSecretText('-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI'), '[redacted]', 'a cut-off key block too');
  const plain = 'spiffe://cluster.local/ns/a/sa/b serial=0a1b notAfter=2026-01-01T00:00:00Z -----BEGIN CERTIFICATE-----';
  assert.equal(redactSecretText(plain), plain);
  const lines: string[] = [];
  const log = createLogger({ level: 'debug', sink: (l) => lines.push(l) });
  log.warn('request failed', { err: new Error(`401 for ${jwt}`), detail: `got ${pem}`, list: [jwt] });
  const out = lines.join('\n');
  assert.ok(!out.includes('c2lnbmF0dXJlLWJ5dGVz'), out);
  assert.ok(!out.includes('MIGHAgEAMBMGByqGSM49'), out);
  const rec = JSON.parse(lines[0]!) as { err: { message: string }; detail: string; list: string[] };
  assert.equal(rec.err.message, '401 for [redacted]');
  assert.deepEqual(rec.list, ['[redacted]']);
});

test('parseLogLevel rejects unknown levels', () => {
  assert.equal(parseLogLevel('DEBUG'), 'debug');
  assert.equal(parseLogLevel(undefined, 'warn'), 'warn');
  assert.throws(() => parseLogLevel('loud'));
});
