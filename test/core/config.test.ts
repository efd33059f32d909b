import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, ConfigReader } from '../../src/core/config.js';

test('ConfigReader lists every problem at once with the name and value', () => {
  const r = new ConfigReader({ CA_PORT: 'abc', LOG_JSON: 'maybe', MODE: 'x', TTL: '5' });
  r.int('CA_PORT', 15012);
  r.bool('LOG_JSON', true);
  r.oneOf('MODE', ['a', 'b'] as const, 'a');
  r.int('TTL', 10, { min: 60 });
  r.required('POD_NAME');
  try {
    r.done();
    assert.fail('expected ConfigError');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    assert.equal(err.code, 'ERR_CONFIG_INVALID');
    assert.equal(err.problems.length, 5);
    assert.match(err.message, /CA_PORT="abc"/);
    assert.match(err.message, /POD_NAME is required/);
  }
});

test('explicit values win over env; lists split and trim', () => {
  const r = new ConfigReader({ PORT: '1', NAMES: ' a, b ,,c' });
  assert.equal(r.int('PORT', 0, { explicit: '2' }), 2);
  assert.deepEqual(r.list('NAMES', []), ['a', 'b', 'c']);
  assert.equal(r.string('MISSING', 'dflt'), 'dflt');
  r.done();
});
