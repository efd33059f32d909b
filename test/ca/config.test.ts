/**
 * `readCaConfig`: flags and env to one frozen config, every problem listed at once in a
 * ConfigError (ERR_CONFIG_INVALID). Pure: each test passes its own env, never process.env.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '../../src/core/config.js';
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
