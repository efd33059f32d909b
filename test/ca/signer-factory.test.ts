/**
 * The signer factory: each configured kind becomes its signer (cacerts loads its directory when
 * started; a custom signer is used as given), and a self-signed signer without a cluster to keep
 * its Secret in is refused before anything starts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeConfig } from '@kubernetes/client-node';
import { CacertsSigner, createSigner, SelfSignedSigner, type SignerContext } from '../../src/ca/index.js';
import { silentLogger } from '../../src/core/log.js';
import { FakeClock } from '../support/fake-clock.js';
import { InstalledSigner } from './support/installed-signer.js';
import { makePluginCa, tempDir, writeCacerts } from './support/pki-fixtures.js';

const context = (over: Partial<SignerContext> = {}): SignerContext => ({
  clock: new FakeClock(Date.now()),
  logger: silentLogger,
  trustDomain: 'cluster.local',
  maxTtlSeconds: 86400,
  signingWorkers: 0,
  defaultCluster: undefined,
  ...over,
});

test('signer factory: cacerts, self-signed and custom kinds', async (t) => {
  const dir = await tempDir();
  t.after(() => dir.remove());
  await writeCacerts(dir.path, await makePluginCa('Factory'));
  const cacerts = createSigner({ kind: 'cacerts', dir: dir.path }, context());
  t.after(() => cacerts.signer.close());
  assert.ok(cacerts.signer instanceof CacertsSigner);
  assert.equal(cacerts.signer.ready, false, 'nothing loaded before start');
  await cacerts.start();
  assert.equal(cacerts.signer.ready, true, cacerts.signer.notReadyReason);
  assert.equal(cacerts.signer.description, `cacerts:${dir.path}`);

  const custom = new InstalledSigner({ clock: new FakeClock(), logger: silentLogger, maxTtlSeconds: 86400 });
  const given = createSigner({ kind: 'custom', signer: custom }, context());
  assert.equal(given.signer, custom, 'used as given');
  await given.start();

  // Never contacted: the signer is only built here, not started.
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({ clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }], users: [{ name: 'u' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });
  const selfSigned = createSigner(
    { kind: 'self-signed', namespace: 'istio-system', secretName: 'istio-ca-secret', keyType: 'ec', rootTtlSeconds: 3600 },
    context({ defaultCluster: { id: 'Kubernetes', kubeConfig, audiences: ['istio-ca'], tokenReview: true } }),
  );
  assert.ok(selfSigned.signer instanceof SelfSignedSigner);
  assert.equal(selfSigned.signer.description, 'self-signed (secret istio-system/istio-ca-secret)');
  await selfSigned.signer.close();
});

test('signer factory: self-signed without a cluster is refused', () => {
  assert.throws(
    () => createSigner({ kind: 'self-signed', namespace: 'istio-system', secretName: 'istio-ca-secret', keyType: 'ec', rootTtlSeconds: 3600 }, context()),
    /the self-signed signer needs a cluster to keep its Secret in/,
  );
});
