/**
 * The one kubeconfig writer (src/core/kubeconfig-file.ts): what it writes reads back as the same
 * values in every reader the project meets — `yaml` in YAML 1.2 and 1.1 mode (the CNI plugin,
 * the devcluster), client-node (CA, broker) and kubectl (Go's YAML 1.1 parser) — even for values
 * that would read as another type or break the layout when written plain. Istio's layout itself
 * is pinned by the install-cni goldens (test/cni/install/conformance.test.ts). That no other file
 * under src/ writes a kubeconfig is checked in test/habits/source-habits.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { KubeConfig } from '@kubernetes/client-node';
import { readRenderedKubeconfigFile, renderKubeconfigFile, yamlString, type KubeconfigFile } from '../../src/core/kubeconfig-file.js';
import { Secret } from '../../src/core/secret.js';
import { kubeconfigYaml } from '../../src/devcluster/kubeconfig.js';
import { Scratch } from '../support/scratch.js';
import { kubectlMissing } from '../support/tools.js';

/** Strings a plain YAML scalar would turn into something else (or into invalid YAML). */
const TRICKY = [
  'true', 'False', 'yes', 'No', 'on', 'OFF', 'y', 'n', 'null', '~', '',
  '123', '0x1f', '0o17', '1e3', '.inf', '-.Inf', '.nan', '12:30:45', '1_000', '+1', '-1', '2024-01-02',
  'a: b', 'a:', ' lead', 'trail ', '#comment', 'x #y', '- item', '-', '?', ':', '[x]', '{x}', '*ref', '&anchor', '!tag',
  '|', '>', "'q'", '"dq"', '%dir', '@at', '`tick', 'a,b', 'back\\slash', 'two\nlines', 'tab\tin', 'crlf\r\n',
  'del\u007f', 'ünïcödé', 'emoji \u{1f600}', 'nbsp\u00a0', 'line\u2028sep',
];

/** Values the writer meets in practice; written plain (what Istio's goldens and kubectl show). */
const PLAIN = ['local', 'istio-cni-context', 'system:serviceaccount:istio-system:ztunnel', 'https://[fd00::1]:443', 'https://10.96.0.1:443', '/abs/path', 'a.b_c-d', 'tok/en+base64=='];

function file(overrides: Partial<KubeconfigFile> = {}): KubeconfigFile {
  return {
    server: 'https://127.0.0.1:6443',
    caPem: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
    token: new Secret('header.payload.signature'),
    clusterName: 'c',
    userName: 'u',
    contextName: 'ctx',
    namespace: 'ns',
    ...overrides,
  };
}

interface Parsed {
  clusters: Array<{ name: string; cluster: { server: string; 'certificate-authority-data'?: string; 'insecure-skip-tls-verify'?: boolean } }>;
  contexts: Array<{ name: string; context: { cluster: string; user: string; namespace?: string } }>;
  users: Array<{ name: string; user: { token: string } }>;
  'current-context': string;
}

function assertValues(doc: Parsed, f: KubeconfigFile, what: string): void {
  assert.equal(doc.clusters[0]?.name, f.clusterName, `${what}: cluster name`);
  assert.equal(doc.clusters[0]?.cluster.server, f.server, `${what}: server`);
  assert.equal(doc.contexts[0]?.name, f.contextName, `${what}: context name`);
  assert.equal(doc['current-context'], f.contextName, `${what}: current-context`);
  assert.equal(doc.contexts[0]?.context.cluster, f.clusterName, `${what}: context cluster`);
  assert.equal(doc.contexts[0]?.context.user, f.userName, `${what}: context user`);
  assert.equal(doc.contexts[0]?.context.namespace, f.namespace, `${what}: namespace`);
  assert.equal(doc.users[0]?.name, f.userName, `${what}: user name`);
  assert.equal(doc.users[0]?.user.token, f.token.reveal(), `${what}: token`);
}

test('every string field reads back unchanged in YAML 1.2 and 1.1, tricky or plain', () => {
  for (const value of [...TRICKY, ...PLAIN]) {
    const f = file({ server: value, clusterName: value, userName: value, contextName: value, namespace: value, token: new Secret(value) });
    const text = renderKubeconfigFile(f);
    for (const version of ['1.2', '1.1'] as const) {
      assertValues(parse(text, { version }) as Parsed, f, `${JSON.stringify(value)} (YAML ${version})`);
    }
  }
});

test('plain-safe values are written plain, the rest quoted', () => {
  for (const value of PLAIN) assert.equal(yamlString(value), value);
  for (const value of TRICKY) assert.match(yamlString(value), /^".*"$/su, JSON.stringify(value));
  assert.equal(yamlString('emoji \u{1f600}'), '"emoji \\U0001f600"');
});

test('the CA is inlined as base64, skip-tls-verify and no-CA clusters are written as asked', () => {
  const withCa = parse(renderKubeconfigFile(file())) as Parsed;
  assert.equal(Buffer.from(withCa.clusters[0]!.cluster['certificate-authority-data']!, 'base64').toString(), file().caPem);
  const insecure = parse(renderKubeconfigFile(file({ caPem: undefined, insecureSkipTlsVerify: true }))) as Parsed;
  assert.deepEqual(insecure.clusters[0]!.cluster, { 'insecure-skip-tls-verify': true, server: 'https://127.0.0.1:6443' });
  const bare = renderKubeconfigFile(file({ caPem: undefined, namespace: undefined }));
  assert.deepEqual((parse(bare) as Parsed).clusters[0]!.cluster, { server: 'https://127.0.0.1:6443' });
  assert.ok(!bare.includes('namespace'), bare);
});

test('client-node loads it: cluster, user and namespace of the current context', () => {
  for (const value of ['system:serviceaccount:ns:sa', 'true', '123', 'a: b']) {
    const kc = new KubeConfig();
    kc.loadFromString(renderKubeconfigFile(file({ userName: value, namespace: value, token: new Secret(value) })));
    assert.equal(kc.getCurrentCluster()?.server, 'https://127.0.0.1:6443');
    assert.equal(kc.getCurrentCluster()?.caData, Buffer.from(file().caPem!).toString('base64'));
    assert.equal(kc.getCurrentUser()?.name, value);
    assert.equal(kc.getCurrentUser()?.token, value);
    assert.equal(kc.getContextObject(kc.getCurrentContext())?.namespace, value);
  }
});

test('kubectl (Go YAML 1.1) reads the same values back', { skip: kubectlMissing() }, (t) => {
  const dir = Scratch.forTest(t, 'kubeconfig-file-').dir;
  TRICKY.filter((v) => v !== '' && !/[\r\u007f]/u.test(v)).forEach((value, i) => {
    const f = file({ clusterName: value, userName: `${value}-user`, contextName: `${value}-ctx`, namespace: value, token: new Secret(value) });
    const path = join(dir, `kubeconfig-${i}`);
    writeFileSync(path, renderKubeconfigFile(f), { mode: 0o600 });
    const json = execFileSync('kubectl', ['config', 'view', '--raw', '-o', 'json', '--kubeconfig', path], { encoding: 'utf8', timeout: 30_000 });
    assertValues(JSON.parse(json) as Parsed, f, `kubectl ${JSON.stringify(value)}`);
  });
});

test("the devcluster's kubeconfig is the shared writer's text", () => {
  const caCertPem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
  assert.equal(
    kubeconfigYaml({ server: 'https://127.0.0.1:1', caCertPem, token: 't', userName: 'admin', namespace: 'shop' }),
    renderKubeconfigFile({ server: 'https://127.0.0.1:1', caPem: caCertPem, token: new Secret('t'), clusterName: 'devcluster', userName: 'admin', contextName: 'devcluster', namespace: 'shop' }),
  );
});

/** The fields of `f` as plain data (the token revealed), for deep comparison. */
function plainFields(f: KubeconfigFile): Record<string, unknown> {
  return Object.fromEntries(Object.entries({ ...f, token: f.token.reveal() }).filter(([, v]) => v !== undefined));
}

test('the fast reader reads every rendered variant as the YAML parser does, tricky values included', () => {
  const variants: Array<Partial<KubeconfigFile>> = [{}, { namespace: undefined }, { caPem: undefined }, { caPem: undefined, insecureSkipTlsVerify: true }];
  for (const value of [...TRICKY, ...PLAIN]) {
    for (const variant of variants) {
      const f = file({ server: value, clusterName: value, userName: value, contextName: value, namespace: value, token: new Secret(value), ...variant });
      const text = renderKubeconfigFile(f);
      const read = readRenderedKubeconfigFile(text);
      assert.ok(read, `fast reader refused its own writer's text for ${JSON.stringify(value)}`);
      assert.deepEqual(plainFields(read), plainFields(f), JSON.stringify(value));
      assertValues(parse(text) as Parsed, read, `fast vs yaml ${JSON.stringify(value)}`);
    }
  }
});

test('the fast reader refuses every other layout (the caller then parses YAML)', () => {
  const text = renderKubeconfigFile(file());
  const others: Record<string, string> = {
    'a comment': `# written by hand\n${text}`,
    'CRLF line ends': text.replace(/\n/gu, '\r\n'),
    'no final newline': text.slice(0, -1),
    'trailing content': `${text}preferences: {}\n`,
    'a second cluster': text.replace('contexts:', '- cluster:\n    server: https://evil:1\n  name: c2\ncontexts:'),
    'context naming another cluster': text.replace('    cluster: c\n', '    cluster: other\n'),
    'context naming another user': text.replace('    user: u\n', '    user: other\n'),
    'current-context naming another context': text.replace('current-context: ctx', 'current-context: other'),
    'insecure set to false': text.replace('    server:', '    insecure-skip-tls-verify: false\n    server:'),
    'a single-quoted value': text.replace('    token: header.payload.signature', "    token: 'header.payload.signature'"),
    'a flow mapping': text.replace('- cluster:\n', '- cluster: {}\n'),
    'a client certificate user': text.replace('    token: header.payload.signature\n', '    client-certificate-data: QQ==\n    client-key-data: QQ==\n'),
    'JSON': JSON.stringify(parse(text)),
  };
  for (const [name, other] of Object.entries(others)) assert.equal(readRenderedKubeconfigFile(other), undefined, name);
});
