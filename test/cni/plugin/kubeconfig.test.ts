import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { loadKubeconfig } from '../../../src/cni/plugin/kubeconfig.js';
import { CniError } from '../../../src/cni/plugin/cni-error.js';
import { INSTALL_CNI_FIXTURES } from '../../support/fixtures.js';
import { tempDirSync } from '../../support/scratch.js';
import { renderKubeconfig } from '../../../src/cni/install/kubeconfig.js';
import { readRenderedKubeconfigFile } from '../../../src/core/kubeconfig-file.js';
import { Secret } from '../../../src/core/secret.js';

const installCni = INSTALL_CNI_FIXTURES;
let dir = '';
before(() => {
  dir = tempDirSync('cni-kubeconfig-');
});
after(() => rmSync(dir, { recursive: true, force: true }));

test("reads Istio's TLS kubeconfig: server, inlined CA, token kept secret", async () => {
  const k = await loadKubeconfig(join(installCni, 'kubeconfig-tls'));
  assert.equal(k.server.href, 'https://10.96.0.1/');
  assert.equal(k.caPem, readFileSync(join(installCni, 'kube-ca.crt'), 'utf8'));
  assert.equal(k.insecureSkipTlsVerify, false);
  assert.equal(k.token?.reveal(), 'service_account_token_string');
  assert.doesNotMatch(inspect(k) + JSON.stringify(k), /service_account_token_string/);
});

test("reads Istio's skip-TLS kubeconfig", async () => {
  const k = await loadKubeconfig(join(installCni, 'kubeconfig-skip-tls'));
  assert.equal(k.insecureSkipTlsVerify, true);
  assert.equal(k.caPem, undefined);
});

test('tokenFile and certificate-authority files are read; JSON kubeconfigs work too', async () => {
  writeFileSync(join(dir, 'token'), 'tok-from-file\n');
  writeFileSync(join(dir, 'ca.crt'), 'PEM');
  const path = join(dir, 'kc.json');
  writeFileSync(
    path,
    JSON.stringify({
      'current-context': 'c',
      contexts: [{ name: 'c', context: { cluster: 'k', user: 'u' } }],
      clusters: [{ name: 'k', cluster: { server: 'https://api.local:6443', 'certificate-authority': join(dir, 'ca.crt') } }],
      users: [{ name: 'u', user: { tokenFile: join(dir, 'token') } }],
    }),
  );
  const k = await loadKubeconfig(path);
  assert.equal(k.token?.reveal(), 'tok-from-file');
  assert.equal(k.caPem, 'PEM');
  assert.equal(k.server.port, '6443');
});

test('a missing kubeconfig is "try again later" (11); a broken one is an invalid config (7)', async () => {
  await assert.rejects(loadKubeconfig(join(dir, 'absent')), (e: unknown) => e instanceof CniError && e.wireCode === 11);
  const cases: Record<string, string> = {
    'no-context': 'apiVersion: v1\nclusters: []\n',
    'bad-yaml': 'clusters: [\n  - {',
    'unknown-context': "current-context: x\ncontexts: []\n",
    'bad-server': "current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters: [{name: k, cluster: {server: 'ftp://x'}}]\n",
    'exec-user':
      "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: 'https://x'}}]\nusers: [{name: u, user: {exec: {command: aws}}}]\n",
    'cert-without-key':
      "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: 'https://x'}}]\nusers: [{name: u, user: {client-certificate-data: UEVN}}]\n",
    'unreadable-client-key':
      "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: 'https://x'}}]\nusers: [{name: u, user: {client-certificate-data: UEVN, client-key: /nonexistent/key.pem}}]\n",
  };
  for (const [name, text] of Object.entries(cases)) {
    const p = join(dir, name);
    writeFileSync(p, text);
    await assert.rejects(loadKubeconfig(p), (e: unknown) => e instanceof CniError && e.wireCode === 7, name);
  }
});

test('client-certificate users: inlined or file certificate and key; the key kept secret', async () => {
  writeFileSync(join(dir, 'client.key'), 'KEY-PEM-SECRET');
  const path = join(dir, 'kc-client.yaml');
  const certB64 = Buffer.from('CERT-PEM').toString('base64');
  writeFileSync(
    path,
    `current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: 'https://x'}}]\nusers: [{name: u, user: {client-certificate-data: ${certB64}, client-key: ${join(dir, 'client.key')}}}]\n`,
  );
  const k = await loadKubeconfig(path);
  assert.equal(k.token, undefined);
  assert.equal(k.clientCert?.certPem, 'CERT-PEM');
  assert.equal(k.clientCert?.keyPem.reveal(), 'KEY-PEM-SECRET');
  assert.doesNotMatch(inspect(k) + JSON.stringify(k), /KEY-PEM-SECRET/);
});

test("install-cni's own file (fast reader) and the same file in another layout (YAML parser) give the same access", async () => {
  const caPem = readFileSync(join(installCni, 'kube-ca.crt'), 'utf8');
  for (const skipTlsVerify of [false, true]) {
    const text = renderKubeconfig({ serviceHost: 'fd00::1', servicePort: '443', serviceProtocol: 'https', caPem, skipTlsVerify, token: new Secret('tok.en-1') });
    assert.ok(readRenderedKubeconfigFile(text), 'the fast path is taken for the rendered file');
    const fast = join(dir, `fast-${skipTlsVerify}`);
    const slow = join(dir, `slow-${skipTlsVerify}`);
    writeFileSync(fast, text);
    writeFileSync(slow, `# any other layout goes to the YAML parser\n${text}`);
    const [a, b] = await Promise.all([loadKubeconfig(fast), loadKubeconfig(slow)]);
    const plain = (k: typeof a): unknown => ({ ...k, server: k.server.href, token: k.token?.reveal() });
    assert.deepEqual(plain(a), plain(b));
    assert.equal(a.server.href, 'https://[fd00::1]/');
    assert.equal(a.caPem, skipTlsVerify ? undefined : caPem);
  }
});
