/**
 * `certbroker start --signer kubernetes-csr`: the whole stack with the CA on the Kubernetes CSR
 * API and `certbroker k8s-signer` signing (in process, for a few seconds): the node-1 identities
 * become ready and the consumer receives them, the CA's TLS certificate came the same way, and
 * everything stops.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runLocalStack } from '../../src/cli/start-stack.js';

test('start --signer kubernetes-csr: identities issued through CSRs reach the consumer; the stack stops cleanly', async () => {
  const frames: string[] = [];
  await runLocalStack({ certTtlSeconds: 600, durationSeconds: 3, intervalMs: 500, signer: 'kubernetes-csr', print: (t) => frames.push(t) });
  const last = frames.filter((f) => f.includes('node broker for node-1')).at(-1) ?? '';
  assert.match(last, /signer kubernetes-csr:certbroker\.io\/spiffe signed by certbroker k8s-signer/);
  for (const identity of ['/ns/bank/sa/ledger', '/ns/shop/sa/cart', '/ns/shop/sa/web']) assert.match(last, new RegExp(`${identity}\\s+ready\\s+[0-9a-f]{8}`), last);
  assert.match(last, /Broker API client[\s\S]*shop\/cart-0\s+[0-9a-f]{8}/, 'the consumer got it');
  assert.match(last, /Istio CA front .*serving cert [0-9a-f]{8}/, "the broker's own SVID with serving names came through a CSR too");
  assert.equal(frames.at(-1), 'stopped: consumer, broker, CA and devcluster are down.');
});
