import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  formatSpiffeId,
  isSpiffeId,
  kubernetesIdentity,
  parseKubernetesIdentity,
  parseSpiffeId,
  SpiffeError,
} from '../../src/spiffe/index.js';

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof SpiffeError, `expected SpiffeError, got ${String(err)}`);
    return err.code;
  }
  return 'no error';
}

test('valid SPIFFE IDs parse into trust domain and path', () => {
  const cases: Array<[string, string, string]> = [
    ['spiffe://cluster.local/ns/default/sa/sleep', 'cluster.local', '/ns/default/sa/sleep'],
    ['spiffe://example.org', 'example.org', ''],
    ['spiffe://a_b-c.9/Path.With-All_Chars/x', 'a_b-c.9', '/Path.With-All_Chars/x'],
    ['spiffe://td/...', 'td', '/...'],
  ];
  for (const [id, td, path] of cases) {
    const p = parseSpiffeId(id);
    assert.equal(p.trustDomain, td, id);
    assert.equal(p.path, path, id);
    assert.equal(p.id, id);
    assert.equal(isSpiffeId(id), true);
  }
});

test('invalid SPIFFE IDs fail with the specific code', () => {
  const cases: Array<[string, string]> = [
    ['', 'ERR_SPIFFE_ID_EMPTY'],
    ['http://example.org/a', 'ERR_SPIFFE_ID_SCHEME'],
    ['SPIFFE://example.org/a', 'ERR_SPIFFE_ID_SCHEME'],
    ['spiffe:/example.org', 'ERR_SPIFFE_ID_SCHEME'],
    ['spiffe://', 'ERR_SPIFFE_ID_TRUST_DOMAIN_MISSING'],
    ['spiffe:///path', 'ERR_SPIFFE_ID_TRUST_DOMAIN_MISSING'],
    ['spiffe://Example.org/a', 'ERR_SPIFFE_ID_TRUST_DOMAIN_CHAR'],
    ['spiffe://exa mple.org', 'ERR_SPIFFE_ID_TRUST_DOMAIN_CHAR'],
    ['spiffe://user@example.org/a', 'ERR_SPIFFE_ID_USERINFO'],
    ['spiffe://example.org:8080/a', 'ERR_SPIFFE_ID_PORT'],
    ['spiffe://example.org/a?x=1', 'ERR_SPIFFE_ID_QUERY'],
    ['spiffe://example.org?x=1', 'ERR_SPIFFE_ID_QUERY'],
    ['spiffe://example.org/a#frag', 'ERR_SPIFFE_ID_FRAGMENT'],
    ['spiffe://example.org#frag', 'ERR_SPIFFE_ID_FRAGMENT'],
    ['spiffe://example.org/', 'ERR_SPIFFE_ID_TRAILING_SLASH'],
    ['spiffe://example.org/a/', 'ERR_SPIFFE_ID_TRAILING_SLASH'],
    ['spiffe://example.org//a', 'ERR_SPIFFE_ID_PATH_EMPTY_SEGMENT'],
    ['spiffe://example.org/a/./b', 'ERR_SPIFFE_ID_PATH_DOT_SEGMENT'],
    ['spiffe://example.org/a/..', 'ERR_SPIFFE_ID_PATH_DOT_SEGMENT'],
    ['spiffe://example.org/a b', 'ERR_SPIFFE_ID_PATH_CHAR'],
    ['spiffe://example.org/a%20b', 'ERR_SPIFFE_ID_PATH_CHAR'],
    ['spiffe://example.org/ü', 'ERR_SPIFFE_ID_PATH_CHAR'],
    [`spiffe://example.org/${'a'.repeat(2048)}`, 'ERR_SPIFFE_ID_TOO_LONG'],
    [`spiffe://${'a'.repeat(256)}`, 'ERR_SPIFFE_ID_TRUST_DOMAIN_TOO_LONG'],
  ];
  for (const [id, code] of cases) {
    assert.equal(codeOf(() => parseSpiffeId(id)), code, JSON.stringify(id.slice(0, 60)));
    assert.equal(isSpiffeId(id), false);
  }
});

test('the 2048-byte limit is inclusive', () => {
  const prefix = 'spiffe://example.org/';
  const exact = prefix + 'a'.repeat(2048 - prefix.length);
  assert.equal(parseSpiffeId(exact).id.length, 2048);
  assert.equal(codeOf(() => parseSpiffeId(exact + 'a')), 'ERR_SPIFFE_ID_TOO_LONG');
});

test('formatSpiffeId validates each segment', () => {
  assert.equal(formatSpiffeId('example.org', 'a', 'b').id, 'spiffe://example.org/a/b');
  assert.equal(formatSpiffeId('example.org').id, 'spiffe://example.org');
  assert.equal(codeOf(() => formatSpiffeId('example.org', 'a', '')), 'ERR_SPIFFE_ID_PATH_EMPTY_SEGMENT');
  assert.equal(codeOf(() => formatSpiffeId('example.org', 'a/b')), 'ERR_SPIFFE_ID_PATH_CHAR');
  assert.equal(codeOf(() => formatSpiffeId('example.org', '..')), 'ERR_SPIFFE_ID_PATH_DOT_SEGMENT');
  assert.equal(codeOf(() => formatSpiffeId('EXAMPLE', 'a')), 'ERR_SPIFFE_ID_TRUST_DOMAIN_CHAR');
});

test('Kubernetes identities format and parse', () => {
  const id = kubernetesIdentity('cluster.local', 'default', 'sleep');
  assert.equal(id, 'spiffe://cluster.local/ns/default/sa/sleep');
  assert.deepEqual(parseKubernetesIdentity(id), {
    trustDomain: 'cluster.local',
    namespace: 'default',
    serviceAccount: 'sleep',
    id,
  });
  assert.equal(parseKubernetesIdentity('spiffe://td/ns/istio-system/sa/ztunnel.v2').serviceAccount, 'ztunnel.v2');
});

test('non-Kubernetes shapes and bad names are rejected', () => {
  const notK8s = [
    'spiffe://td',
    'spiffe://td/ns/default',
    'spiffe://td/ns/default/sa',
    'spiffe://td/ns/default/sa/x/extra',
    'spiffe://td/namespace/default/sa/x',
    'spiffe://td/ns/default/serviceaccount/x',
  ];
  for (const id of notK8s) assert.equal(codeOf(() => parseKubernetesIdentity(id)), 'ERR_SPIFFE_ID_NOT_KUBERNETES', id);
  assert.equal(codeOf(() => parseKubernetesIdentity('spiffe://td/ns/Default/sa/x')), 'ERR_SPIFFE_KUBERNETES_NAME');
  assert.equal(codeOf(() => parseKubernetesIdentity('spiffe://td/ns/-a/sa/x')), 'ERR_SPIFFE_KUBERNETES_NAME');
  assert.equal(codeOf(() => parseKubernetesIdentity('spiffe://td/ns/a/sa/x_y')), 'ERR_SPIFFE_KUBERNETES_NAME');
  assert.equal(codeOf(() => parseKubernetesIdentity(`spiffe://td/ns/${'a'.repeat(64)}/sa/x`)), 'ERR_SPIFFE_KUBERNETES_NAME');
  assert.equal(codeOf(() => kubernetesIdentity('td', 'a.b', 'x')), 'ERR_SPIFFE_KUBERNETES_NAME');
  assert.equal(codeOf(() => kubernetesIdentity('TD', 'a', 'x')), 'ERR_SPIFFE_ID_TRUST_DOMAIN_CHAR');
  assert.equal(codeOf(() => parseKubernetesIdentity('spiffe://td/ns/a/sa/b?x')), 'ERR_SPIFFE_ID_QUERY');
});
