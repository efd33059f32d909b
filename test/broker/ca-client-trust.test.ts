/**
 * The CA client's TLS trust follows the roots it is given while it runs (`trustRoots`, what
 * `CaTrust` calls on every trust bundle or root file change): against the real CA over TLS, a
 * client that trusts another root is refused at the handshake; given the CA's root next to it,
 * its next call reaches the CA on a new channel; given the other root alone again, the next call
 * is refused again (the channel was replaced, not kept). This is what keeps a broker reaching its
 * CA once the CA's serving certificate moves to a new root during a rotation.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CaCallError, IstioCaClient } from '../../src/broker/index.js';
import { createRootCa } from '../../src/pki/index.js';
import { BROKER_NS, CONSUMER_SA, Stack, TD, tokenFor } from './support/stack.js';

describe('IstioCaClient.trustRoots (real CA over TLS)', () => {
  let stack: Stack;
  let client: IstioCaClient;
  let otherRootPem: string;
  const identity = `spiffe://${TD}/ns/${BROKER_NS}/sa/${CONSUMER_SA}`;

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'ca-client-trust-', namespaces: [], serviceAccounts: [] });
    otherRootPem = (await createRootCa({ subject: 'CN=some other root', ttlSeconds: 86400 })).pem;
    const token = await tokenFor(stack.core, BROKER_NS, CONSUMER_SA, { audience: 'istio-ca', expirationSeconds: 3600 });
    client = new IstioCaClient({ ...stack.caClientOptions(token), caRootsPem: otherRootPem });
  });

  after(async () => {
    client?.close();
    await stack?.close();
  });

  it('refused under roots the CA does not chain to, served once they include its root, refused again when they do not', async () => {
    const signal = new AbortController().signal;
    const refused = (err: unknown) => {
      assert.ok(err instanceof CaCallError, String(err));
      assert.equal(err.grpcCode, 'UNAVAILABLE');
      return true;
    };
    await assert.rejects(client.fetchCertificate(identity, signal), refused);
    client.trustRoots(otherRootPem + stack.ca.rootsPem());
    assert.equal((await client.fetchCertificate(identity, signal)).identity, identity);
    client.trustRoots(otherRootPem);
    await assert.rejects(client.fetchCertificate(identity, signal), refused);
  });
});
