/** `certbroker k8s-signer` configuration: flags over env, every problem listed at once (ERR_CONFIG_INVALID). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '../../src/core/config.js';
import { readK8sSignerConfig } from '../../src/k8s-signer/index.js';

test('a signer name is required; a bad one, unknown controllers, a bad ops address and TTLs are listed together', () => {
  assert.throws(() => readK8sSignerConfig({}, {}), (e: unknown) => e instanceof ConfigError && /K8S_SIGNER_NAME.*Required value/.test(e.problems.join('\n')));
  try {
    readK8sSignerConfig({ signerName: 'Example.com/x' }, { K8S_SIGNER_CONTROLLERS: 'csr,pcr-typo', K8S_SIGNER_OPS_ADDRESS: 'nope', K8S_SIGNER_DEFAULT_TTL_SECONDS: '7200', K8S_SIGNER_MAX_TTL_SECONDS: '3600', K8S_SIGNER_SERVING_REQUESTERS: 'not-an-account', LOG_LEVEL: 'loud' });
    assert.fail('accepted');
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    assert.equal(err.code, 'ERR_CONFIG_INVALID');
    const text = err.problems.join('\n');
    for (const want of [/K8S_SIGNER_NAME \(--signer-name\) "Example.com\/x"/, /unknown controllers \["pcr-typo"\]/, /K8S_SIGNER_OPS_ADDRESS="nope"/, /K8S_SIGNER_DEFAULT_TTL_SECONDS=7200 is above/, /not-an-account/, /LOG_LEVEL: unknown log level "loud"/]) assert.match(text, want);
    assert.equal(err.problems.length, 6, text);
  }
});

test('flags win over env; defaults: csr controller, 24 h leaves, the CA as serving requester, ops on :15018', () => {
  const c = readK8sSignerConfig({ signerName: 'certbroker.io/spiffe', cacertsDir: '/ca' }, { K8S_SIGNER_NAME: 'example.com/other', K8S_SIGNER_CACERTS_DIR: '/env' });
  assert.equal(c.signerName, 'certbroker.io/spiffe');
  assert.equal(c.cacertsDir, '/ca');
  assert.deepEqual(c.controllers, ['csr']);
  assert.equal(c.defaultTtlSeconds, 86_400);
  assert.deepEqual(c.servingRequesters, ['istio-system/certbroker-ca']);
  assert.deepEqual(c.ops, { host: '0.0.0.0', port: 15018 });
  assert.equal(readK8sSignerConfig({ signerName: 'certbroker.io/spiffe', opsAddress: 'off' }, {}).ops, undefined);
});

test('--cacerts-secret namespace/name reads the plug-in CA through the API; another shape is a listed problem', () => {
  assert.deepEqual(readK8sSignerConfig({ signerName: 'certbroker.io/spiffe', cacertsSecret: 'istio-system/cacerts' }, {}).cacertsSecret, { namespace: 'istio-system', name: 'cacerts' });
  assert.equal(readK8sSignerConfig({ signerName: 'certbroker.io/spiffe' }, {}).cacertsSecret, undefined);
  assert.throws(() => readK8sSignerConfig({ signerName: 'certbroker.io/spiffe' }, { K8S_SIGNER_CACERTS_SECRET: 'cacerts' }), (e: unknown) => e instanceof ConfigError && /K8S_SIGNER_CACERTS_SECRET \(--cacerts-secret\) "cacerts" is not namespace\/name/.test(e.problems.join('\n')));
});
