import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parsePluginConfig, decodeConfigJson, configVersion } from '../../../src/cni/plugin/config.js';
import { DEFAULT_ENABLEMENT_SELECTORS } from '../../../src/cni/plugin/enablement.js';
import { CniError } from '../../../src/cni/plugin/cni-error.js';
import { INSTALL_CNI_FIXTURES } from '../../support/fixtures.js';

const installCni = INSTALL_CNI_FIXTURES;
const load = (f: string) => decodeConfigJson(readFileSync(join(installCni, f), 'utf8'));

test('the entry install-cni writes (current field names) parses', () => {
  const c = parsePluginConfig(load('istio-cni.conf'), {});
  assert.equal(c.cniVersion, '0.3.1');
  assert.equal(c.name, 'istio-cni');
  assert.equal(c.logLevel, 'debug');
  assert.equal(c.cniAgentRunDir, '/path/to/kubeconfig');
  assert.equal(c.kubeconfigPath, '/path/to/kubeconfig/istio-cni-kubeconfig');
  assert.equal(c.cniEventSocketPath, '/path/to/kubeconfig/pluginevent.sock');
  assert.equal(c.ambientEnabled, false);
  assert.equal(c.podNamespace, 'my-namespace');
  assert.deepEqual(c.excludeNamespaces, []);
  assert.equal(c.enablementSelectors, DEFAULT_ENABLEMENT_SELECTORS);
  assert.equal(c.dryRunFilePath, undefined);
  assert.equal(c.podRetrievalMaxRetries, 30);
  assert.equal(c.podRetrievalIntervalMs, 1000);
});

test('the legacy template (kubernetes.kubeconfig, cni_bin_dir) parses', () => {
  const raw = load('istio-cni-prefixed.conf');
  const c = parsePluginConfig({ ...raw, kubernetes: { ...(raw.kubernetes as object), exclude_namespaces: ['kube-system'] } }, {});
  assert.equal(c.kubeconfigPath, '/path/to/kubeconfig');
  assert.equal(c.cniBinDir, '/path/cni/bin');
  assert.equal(c.cniAgentRunDir, '/var/run/istio-cni');
  assert.deepEqual(c.excludeNamespaces, ['kube-system']);
});

test('DRY_RUN_FILE_PATH in the environment selects dry-run', () => {
  const c = parsePluginConfig({ cniVersion: '1.0.0', name: 'x' }, { DRY_RUN_FILE_PATH: '/tmp/out.txt' });
  assert.equal(c.dryRunFilePath, '/tmp/out.txt');
});

test('every problem is listed at once, with code 7', () => {
  try {
    parsePluginConfig(
      {
        cniVersion: '1.0.0',
        name: 3,
        ambient_enabled: 'yes',
        exclude_namespaces: 'kube-system',
        plugin_log_level: 'chatty',
        pod_retrieval_max_retries: 0,
        enablement_selectors: [{ podSelector: { matchExpressions: [{ key: 'a', operator: 'Near' }] } }],
      },
      {},
    );
    assert.fail('expected an error');
  } catch (err) {
    assert.ok(err instanceof CniError);
    assert.equal(err.code, 'ERR_CNI_INVALID_CONFIG');
    assert.equal(err.wireCode, 7);
    for (const word of ['name', 'ambient_enabled', 'exclude_namespaces', 'plugin_log_level', 'pod_retrieval_max_retries', 'Near']) {
      assert.match(err.message, new RegExp(word));
    }
  }
});

test('stdin decoding: empty is code 6, garbage is code 6, unknown version is code 1, absent version is 0.1.0', () => {
  assert.throws(() => decodeConfigJson(''), (e: unknown) => e instanceof CniError && e.wireCode === 6);
  assert.throws(() => decodeConfigJson('{nope'), (e: unknown) => e instanceof CniError && e.wireCode === 6);
  assert.throws(() => decodeConfigJson('[1]'), (e: unknown) => e instanceof CniError && e.wireCode === 6);
  assert.throws(() => configVersion({ cniVersion: '2.0.0' }), (e: unknown) => e instanceof CniError && e.wireCode === 1);
  assert.equal(configVersion({}), '0.1.0');
});
