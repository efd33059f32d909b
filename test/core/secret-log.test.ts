import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { Secret } from '../../src/core/secret.js';
import { createLogger, isSecretFieldName, parseLogLevel } from '../../src/core/log.js';

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

test('parseLogLevel rejects unknown levels', () => {
  assert.equal(parseLogLevel('DEBUG'), 'debug');
  assert.equal(parseLogLevel(undefined, 'warn'), 'warn');
  assert.throws(() => parseLogLevel('loud'));
});
