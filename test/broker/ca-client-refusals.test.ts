/**
 * The CA client tells a refusing CA from an unreachable one through the error model (issue 11),
 * against the real CA over TLS: a token it does not accept and an identity the caller may not
 * have come back UNAUTHENTICATED (the CA answers every authn/authz failure so, as istiod does),
 * a lifetime over the CA's maximum INVALID_ARGUMENT — all `refused`; a port nobody listens on is
 * UNAVAILABLE — `unreachable`.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Secret } from '../../src/core/secret.js';
import { CaCallError, fetchFailureOf, IstioCaClient, type IstioCaClientOptions } from '../../src/broker/index.js';
import { BROKER_NS, CONSUMER_SA, Stack, TD, tokenFor } from './support/stack.js';

describe('IstioCaClient: refused vs unreachable, against the real CA', () => {
  let stack: Stack;
  let base: IstioCaClientOptions;
  const own = `spiffe://${TD}/ns/${BROKER_NS}/sa/${CONSUMER_SA}`;

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'ca-client-refusals-', namespaces: ['elsewhere'], serviceAccounts: ['elsewhere/app'] });
    const token = await tokenFor(stack.core, BROKER_NS, CONSUMER_SA, { audience: 'istio-ca', expirationSeconds: 3600 });
    base = stack.caClientOptions(token);
  });

  after(async () => {
    await stack?.close();
  });

  async function failure(options: Partial<IstioCaClientOptions>, identity = own): Promise<CaCallError> {
    const client = new IstioCaClient({ ...base, ...options });
    try {
      await client.fetchCertificate(identity, new AbortController().signal);
    } catch (err) {
      assert.ok(err instanceof CaCallError, String(err));
      return err;
    } finally {
      client.close();
    }
    assert.fail('the CA issued');
  }

  it('the CA issues with the right token (the baseline the refusals differ from)', async () => {
    const client = new IstioCaClient(base);
    try {
      assert.equal((await client.fetchCertificate(own, new AbortController().signal)).identity, own);
    } finally {
      client.close();
    }
  });

  it('a token the CA does not accept: UNAUTHENTICATED, refused', async () => {
    const err = await failure({ tokens: { token: async () => new Secret('not-a-token') } });
    assert.deepEqual([err.grpcCode, err.status, fetchFailureOf(err)], ['UNAUTHENTICATED', 'unauthenticated', 'refused']);
  });

  it('impersonating an identity with no pod on the caller\'s node: UNAUTHENTICATED, refused', async () => {
    const err = await failure({ impersonate: true }, `spiffe://${TD}/ns/elsewhere/sa/app`);
    assert.deepEqual([err.grpcCode, err.status, fetchFailureOf(err)], ['UNAUTHENTICATED', 'unauthenticated', 'refused']);
  });

  it('a lifetime over the CA maximum: INVALID_ARGUMENT, refused', async () => {
    const err = await failure({ certTtlSeconds: 10 * 365 * 86_400 });
    assert.deepEqual([err.grpcCode, err.status, fetchFailureOf(err)], ['INVALID_ARGUMENT', 'invalid-argument', 'refused']);
  });

  it('nobody listening: UNAVAILABLE, unreachable', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as { port: number };
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const err = await failure({ address: `127.0.0.1:${port}` });
    assert.deepEqual([err.grpcCode, err.status, fetchFailureOf(err)], ['UNAVAILABLE', 'unavailable', 'unreachable']);
  });
});
