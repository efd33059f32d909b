/**
 * Istio's install-cni test data (test/fixtures/istio/install-cni) reproduced by the pure
 * conflist editor and kubeconfig writer. Configs compare as JSON values, kubeconfigs as YAML
 * values: key order in the goldens is an artifact of Go's encoders.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { Secret } from '../../../src/core/secret.js';
import {
  buildPluginEntry,
  chainPlugin,
  chainState,
  parseNetworkConfig,
  renderKubeconfig,
  unchainPlugin,
  InstallError,
  type PluginEntryOptions,
} from '../../../src/cni/install/index.js';
import { INSTALL_CNI_FIXTURES } from '../../support/fixtures.js';

const DIR = INSTALL_CNI_FIXTURES + '/';
const read = (name: string): string => readFileSync(DIR + name, 'utf8');
const json = (name: string): unknown => JSON.parse(read(name));

/** The options that produce Istio's istio-cni.conf fixture. */
const FIXTURE_ENTRY: PluginEntryOptions = {
  cniAgentRunDir: '/path/to/kubeconfig',
  logLevel: 'debug',
  podNamespace: 'my-namespace',
  ambientEnabled: false,
  excludeNamespaces: [],
  nativeNftables: false,
  enableAmbientDetectionRetry: false,
};

test('the plugin entry equals istio-cni.conf', () => {
  assert.deepStrictEqual(buildPluginEntry(FIXTURE_ENTRY), json('istio-cni.conf'));
});

const CHAIN_CASES: ReadonlyArray<{ input: string; golden: string; ambient: boolean }> = [
  { input: 'list.conflist', golden: 'list.conflist.golden', ambient: false },
  { input: 'list-no-istio.conflist', golden: 'list.conflist.golden', ambient: false },
  { input: 'list-with-istio.conflist', golden: 'list-with-istio.conflist.golden', ambient: false },
  { input: 'bridge.conf', golden: 'bridge.conf.golden', ambient: false },
  { input: 'list.conflist', golden: 'istio-owned.conflist.golden', ambient: true },
  { input: 'bridge.conf', golden: 'istio-owned-bridge.conflist.golden', ambient: true },
];

for (const c of CHAIN_CASES) {
  test(`chain ${c.input} (ambient=${c.ambient}) -> ${c.golden}`, () => {
    const entry = buildPluginEntry({ ...FIXTURE_ENTRY, ambientEnabled: c.ambient });
    const out = chainPlugin(json(c.input), entry, c.input);
    assert.deepStrictEqual(out, json(c.golden));
    assert.equal(chainState(out, entry), 'installed');
    // Chaining again is a no-op: the entry is replaced, never duplicated.
    assert.deepStrictEqual(chainPlugin(out, entry), out);
  });
}

test('the standalone istio-cni.conf chained into the list also gives the golden', () => {
  const entry = json('istio-cni.conf') as ReturnType<typeof buildPluginEntry>;
  assert.deepStrictEqual(chainPlugin(json('list-with-istio.conflist'), entry), json('list-with-istio.conflist.golden'));
});

test('an outdated istio-cni entry is reported and replaced in place of the last slot', () => {
  const entry = buildPluginEntry(FIXTURE_ENTRY);
  const stale = json('list-with-istio.conflist');
  assert.equal(chainState(stale, entry), 'outdated');
  assert.equal(chainState(json('list.conflist'), entry), 'missing');
  // Ambient toggled: the installed entry no longer matches the wanted one.
  const ambientEntry = buildPluginEntry({ ...FIXTURE_ENTRY, ambientEnabled: true });
  assert.equal(chainState(json('list.conflist.golden'), ambientEntry), 'outdated');
});

test('an istio-cni entry that is not last (someone appended after it) is moved to the end', () => {
  const entry = buildPluginEntry(FIXTURE_ENTRY);
  const golden = json('list.conflist.golden') as { plugins: unknown[] };
  const shuffled = { ...golden, plugins: [golden.plugins[0], golden.plugins[2], golden.plugins[1]] };
  assert.equal(chainState(shuffled, entry), 'outdated');
  assert.deepStrictEqual(chainPlugin(shuffled, entry), golden);
});

test('duplicated istio-cni entries collapse to one', () => {
  const entry = buildPluginEntry(FIXTURE_ENTRY);
  const golden = json('list.conflist.golden') as { plugins: unknown[] };
  const doubled = { ...golden, plugins: [golden.plugins[2], ...golden.plugins] };
  assert.equal(chainState(doubled, entry), 'outdated');
  assert.deepStrictEqual(chainPlugin(doubled, entry), golden);
});

test('a plugin whose type only contains istio-cni is not ours (istio-cni-prefixed.conf)', () => {
  const entry = buildPluginEntry(FIXTURE_ENTRY);
  const prefixed = json('istio-cni-prefixed.conf') as Record<string, unknown>;
  const out = chainPlugin(prefixed, entry) as { plugins: Array<Record<string, unknown>> };
  assert.equal(out.plugins.length, 2);
  assert.equal(out.plugins[0]?.type, 'prefix-istio-cni');
  assert.equal(out.plugins[1]?.type, 'istio-cni');
  assert.deepStrictEqual(unchainPlugin(prefixed), { kind: 'untouched' });
});

for (const bad of ['invalid-arr.conflist', 'invalid-map.conflist']) {
  test(`${bad} is refused with ERR_CNI_CONFIG_INVALID`, () => {
    const entry = buildPluginEntry(FIXTURE_ENTRY);
    assert.throws(() => chainPlugin(json(bad), entry, bad), (err: unknown) => {
      assert.ok(err instanceof InstallError);
      assert.equal(err.code, 'ERR_CNI_CONFIG_INVALID');
      assert.match(err.message, new RegExp(bad.replace('.', '\\.')));
      return true;
    });
    assert.throws(() => parseNetworkConfig(read(bad), { source: bad }), { code: 'ERR_CNI_CONFIG_INVALID' });
  });
}

test('other malformed configs are refused with ERR_CNI_CONFIG_INVALID', () => {
  const entry = buildPluginEntry(FIXTURE_ENTRY);
  for (const text of ['{"plugins": {}}', '{"plugins": []}', '{"plugins": [42]}', '{"plugins": [{"name":"x"}]}', '"x"', 'null', '{"type": ""}']) {
    assert.throws(() => chainPlugin(JSON.parse(text), entry), { code: 'ERR_CNI_CONFIG_INVALID' }, text);
  }
  assert.throws(() => parseNetworkConfig('{ not json'), { code: 'ERR_CNI_CONFIG_INVALID' });
  assert.throws(() => chainPlugin(json('list.conflist'), { type: 'bridge' }), { code: 'ERR_CNI_PLUGIN_ENTRY_INVALID' });
  assert.throws(() => buildPluginEntry({ ...FIXTURE_ENTRY, cniAgentRunDir: 'relative' }), { code: 'ERR_CNI_PLUGIN_ENTRY_INVALID' });
});

test('unchaining restores the primary list', () => {
  assert.deepStrictEqual(unchainPlugin(json('list.conflist.golden')), { kind: 'updated', config: json('list-no-istio.conflist') });
  assert.deepStrictEqual(unchainPlugin(json('list-no-istio.conflist')), { kind: 'untouched' });
  const onlyOurs = { cniVersion: '0.3.1', name: 'x', plugins: [{ type: 'istio-cni' }] };
  assert.deepStrictEqual(unchainPlugin(onlyOurs), { kind: 'empty' });
  // A wrapped .conf comes back as a one-plugin list (equivalent for the runtime).
  const result = unchainPlugin(json('bridge.conf.golden'));
  assert.equal(result.kind, 'updated');
  const unwrapped = (result as unknown as { config: { plugins: unknown[] } }).config;
  assert.equal(unwrapped.plugins.length, 1);
  const { cniVersion: _dropped, ...bridge } = json('bridge.conf') as Record<string, unknown>;
  assert.deepStrictEqual(unwrapped.plugins[0], bridge);
});

const CA = read('kube-ca.crt');
const TOKEN = new Secret('service_account_token_string');

test('kubeconfig with TLS equals kubeconfig-tls', () => {
  const text = renderKubeconfig({
    serviceHost: '10.96.0.1', servicePort: '443', serviceProtocol: 'https', caPem: CA, skipTlsVerify: false, token: TOKEN,
  });
  assert.deepStrictEqual(parseYaml(text), parseYaml(read('kubeconfig-tls')));
});

test('kubeconfig with SKIP_TLS_VERIFY equals kubeconfig-skip-tls', () => {
  const text = renderKubeconfig({
    serviceHost: '10.96.0.1', servicePort: '443', serviceProtocol: '', caPem: CA, skipTlsVerify: true, token: TOKEN,
  });
  assert.deepStrictEqual(parseYaml(text), parseYaml(read('kubeconfig-skip-tls')));
});

test('kubeconfig for a new service host equals kubeconfig-newhost', () => {
  const text = renderKubeconfig({
    serviceHost: '50.76.2.1', servicePort: '443', serviceProtocol: 'https', caPem: CA, skipTlsVerify: false, token: TOKEN,
  });
  assert.deepStrictEqual(parseYaml(text), parseYaml(read('kubeconfig-newhost')));
});

test('kubeconfig token comes from the token file contents (token-foo / token-bar)', () => {
  for (const name of ['token-foo', 'token-bar']) {
    const text = renderKubeconfig({
      serviceHost: 'fd00::1', servicePort: '6443', serviceProtocol: 'https', caPem: CA, skipTlsVerify: false,
      token: new Secret(read(name)),
    });
    const doc = parseYaml(text) as { users: Array<{ user: { token: string } }>; clusters: Array<{ cluster: { server: string } }> };
    assert.equal(doc.users[0]?.user.token, read(name).trim());
    assert.equal(doc.clusters[0]?.cluster.server, 'https://[fd00::1]:6443');
  }
});

test('bad kubeconfig inputs are refused with ERR_KUBECONFIG_INPUT_INVALID', () => {
  const base = { serviceHost: '10.96.0.1', servicePort: '443', serviceProtocol: 'https', caPem: CA, skipTlsVerify: false, token: TOKEN };
  for (const bad of [
    { ...base, serviceHost: '' },
    { ...base, servicePort: 'https' },
    { ...base, servicePort: '70000' },
    { ...base, serviceProtocol: 'ftp' },
    { ...base, caPem: undefined },
    { ...base, caPem: 'not a cert' },
    { ...base, token: new Secret('  ') },
  ]) {
    assert.throws(() => renderKubeconfig(bad), { code: 'ERR_KUBECONFIG_INPUT_INVALID' });
  }
  // The token never appears in an error message.
  try {
    renderKubeconfig({ ...base, caPem: undefined });
  } catch (err) {
    assert.ok(!String((err as Error).message).includes('service_account_token_string'));
  }
});
