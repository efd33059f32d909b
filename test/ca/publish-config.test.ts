import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configMapUpdate, readCaConfig, rootBundlePem, trustBundleInstallation, trustBundleName, trustBundleUpdate } from '../../src/ca/index.js';

test('publication is on by default for certbroker ca, with istiod\'s skip list, signer and client-go timings', () => {
  const c = readCaConfig({}, { POD_NAME: 'ca-0' });
  assert.ok(c.publish);
  assert.deepEqual(c.publish.skipNamespaces, ['kube-public', 'kube-node-lease', 'local-path-storage']);
  assert.equal(c.publish.clusterTrustBundleSignerName, 'istio.io/istiod-ca');
  assert.equal(c.publish.leaseNamespace, 'istio-system');
  assert.equal(c.publish.leaseName, 'certbroker-ca-publisher');
  assert.match(c.publish.identity, /^ca-0_[0-9a-f-]{36}$/);
  assert.deepEqual(c.publish.election, { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 });
  assert.equal(readCaConfig({ publishTrustBundle: 'false' }, {}).publish, undefined);
  assert.equal(readCaConfig({}, { CA_PUBLISH_CLUSTER_TRUST_BUNDLE: 'false' }).publish?.clusterTrustBundleSignerName, undefined);
  assert.equal(readCaConfig({ trustBundleSignerName: 'example.com/mesh' }, {}).publish?.clusterTrustBundleSignerName, 'example.com/mesh');
});

test('bad publication settings are listed with the rest', () => {
  assert.throws(
    () => readCaConfig({ trustBundleSignerName: 'no-slash' }, {
      CA_PUBLISH_SKIP_NAMESPACES: 'ok,Not_A_Namespace',
      CA_LEADER_ELECTION_LEASE: 'Bad Name',
      CA_LEADER_LEASE_DURATION_SECONDS: '5',
      CA_LEADER_RENEW_DEADLINE_SECONDS: '10',
      CA_LEADER_RETRY_PERIOD_SECONDS: 'x',
    }),
    (err: { code?: string; problems?: string[] }) => {
      const p = (err.problems ?? []).join('\n');
      assert.equal(err.code, 'ERR_CONFIG_INVALID');
      for (const want of ['CA_TRUST_BUNDLE_SIGNER_NAME', 'Not_A_Namespace', 'CA_LEADER_ELECTION_LEASE', 'CA_LEADER_RETRY_PERIOD_SECONDS', 'must be greater than CA_LEADER_RENEW_DEADLINE_SECONDS']) assert.ok(p.includes(want), `${want} in\n${p}`);
      return true;
    },
  );
});

const A = '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----';
const B = '-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n';

test('the bundle holds each root once, in order, newline-terminated; stored objects are rewritten only when they differ', () => {
  assert.equal(rootBundlePem([A, B, `${A}\n`]), `${A}\n${B}`);
  assert.equal(rootBundlePem([]), '');
  assert.equal(trustBundleName('istio.io/istiod-ca'), 'istio.io:istiod-ca:root-cert');
  const bundle = rootBundlePem([A, B]);
  const good = { metadata: { name: 'istio-ca-root-cert', namespace: 'app', resourceVersion: '7', labels: { 'istio.io/config': 'true' } }, data: { 'root-cert.pem': bundle } };
  assert.equal(configMapUpdate(good, bundle), undefined);
  // The same certificates laid out otherwise (istiod writing the same cacerts root) are left alone.
  const relaid = bundle.replace('AAAA', 'AA\nAA').replace(/\n$/, '') + '\n\n';
  assert.equal(configMapUpdate({ ...good, data: { 'root-cert.pem': relaid } }, bundle), undefined);
  assert.ok(configMapUpdate({ ...good, data: { 'root-cert.pem': rootBundlePem([B, A]) } }, bundle), 'another order is another bundle');
  const edited = configMapUpdate({ ...good, metadata: { ...good.metadata, labels: { team: 'x' } }, data: { 'root-cert.pem': 'x', other: 'kept' } }, bundle);
  assert.deepEqual(edited, { metadata: { name: 'istio-ca-root-cert', namespace: 'app', resourceVersion: '7', labels: { team: 'x', 'istio.io/config': 'true' } }, data: { 'root-cert.pem': bundle, other: 'kept' } });
  const mine = trustBundleInstallation('istio-system', 'certbroker-ca-publisher');
  assert.equal(mine, 'istio-system.certbroker-ca-publisher');
  const ctb = { metadata: { name: 'istio.io:istiod-ca:root-cert', labels: { 'app.kubernetes.io/managed-by': 'certbroker-ca', 'certbroker.io/ca-installation': mine } }, spec: { signerName: 'istio.io/istiod-ca', trustBundle: bundle } };
  assert.equal(trustBundleUpdate(ctb, 'istio.io/istiod-ca', bundle, mine), undefined);
  assert.equal(trustBundleUpdate(ctb, 'istio.io/istiod-ca', rootBundlePem([A]), mine)?.spec?.trustBundle, `${A}\n`);
  // A bundle of an older CA (without the installation label) gets it on the next write.
  const legacy = { ...ctb, metadata: { ...ctb.metadata, labels: { 'app.kubernetes.io/managed-by': 'certbroker-ca' } } };
  assert.equal(trustBundleUpdate(legacy, 'istio.io/istiod-ca', bundle, mine)?.metadata?.labels?.['certbroker.io/ca-installation'], mine);
});

test('the installation label names the publisher Lease, hashed when it would not be a label value', () => {
  assert.equal(trustBundleInstallation('ca-b', 'publisher.v2'), 'ca-b.publisher.v2');
  assert.notEqual(trustBundleInstallation('ca-a', 'certbroker-ca-publisher'), trustBundleInstallation('ca-b', 'certbroker-ca-publisher'));
  const long = trustBundleInstallation('istio-system', `${'x'.repeat(60)}.lease`);
  assert.match(long, /^h-[0-9a-f]{40}$/);
  assert.notEqual(long, trustBundleInstallation('istio-system', `${'x'.repeat(60)}.lease2`));
});
