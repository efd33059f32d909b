/**
 * The broker follows its CA root file for the CA's TLS trust (ca-trust.ts): started with a root
 * file that does not hold the root of the CA's serving certificate (as a broker that has not yet
 * learnt the new root when the CA's serving certificate moves to it during a rotation), it cannot
 * reach the CA; once the file holds that root too (the operator, or a publisher of the mesh root
 * ConfigMap, updated it), its next look at the file and its next retry reach the CA and the broker
 * becomes ready — no restart. Real broker, real CA over TLS, devcluster; SkipClock.
 */
import assert from 'node:assert/strict';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startBroker, type Broker } from '../../src/broker/index.js';
import { createRootCa } from '../../src/pki/index.js';
import { SkipClock } from '../support/skip-clock.js';
import { eventually } from './support/eventually.js';
import { Stack } from './support/stack.js';

const POLL_MS = 1000;

describe('the CA root file, followed for the CA connection', () => {
  let stack: Stack;
  let broker: Broker | undefined;

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'ca-root-file-', namespaces: [], serviceAccounts: [] });
  });

  after(async () => {
    await broker?.stop(500);
    await stack?.close();
  });

  it('a broker that cannot verify the CA becomes ready once its root file holds the CA root', async () => {
    const other = (await createRootCa({ subject: 'CN=not the CA root', ttlSeconds: 86400 })).pem;
    const rootFile = join(stack.dir, 'mesh-root.pem');
    await writeFile(rootFile, other);
    const clock = new SkipClock();
    const base = stack.brokerConfig({ clock });
    broker = await startBroker({ ...base, ca: { ...base.ca, rootsPem: other, rootFile, rootFilePollMs: POLL_MS } });
    const own = () => broker!.ownCerts.status(broker!.ownIdentity);
    await eventually('a failed own-SVID fetch (TLS refused)', () => (own()?.consecutiveFailures ?? 0) >= 1);
    assert.equal(broker.ready, false);

    // Both roots in the file (written as a mounted ConfigMap changes: a rename).
    await writeFile(`${rootFile}.new`, other + stack.ca.rootsPem());
    await rename(`${rootFile}.new`, rootFile);
    await eventually('ready without a restart', () => {
      clock.skip(POLL_MS); // the next look at the file, then the next retry (backoff at most 5 s)
      return broker!.ready;
    });
    assert.equal(own()?.state, 'ready');
  });
});
