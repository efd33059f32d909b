/**
 * `npm start`'s stack, run for a few seconds: every node-1 workload is served to the consumer,
 * node-2 workloads get nothing, and everything stops cleanly.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runLocalStack } from '../../src/cli/start-stack.js';

describe('local stack (npm start)', () => {
  it('serves the node-1 pods to the consumer and stops cleanly', async () => {
    const outputs: string[] = [];
    await runLocalStack({ certTtlSeconds: 300, durationSeconds: 4, intervalMs: 200, print: (t) => outputs.push(t), signal: new AbortController().signal });
    assert.equal(outputs.at(-1), 'stopped: consumer, broker, CA and devcluster are down.');
    const view = outputs.at(-2)!;
    for (const id of ['/ns/shop/sa/cart', '/ns/shop/sa/web', '/ns/bank/sa/ledger']) assert.match(view, new RegExp(`^${id} +ready +[0-9a-f]{8}`, 'm'));
    assert.doesNotMatch(view, /teller/, 'node-2 pods get nothing');
    for (const pod of ['shop/cart-0', 'shop/cart-1', 'shop/web-0', 'bank/ledger-0']) assert.match(view, new RegExp(`^${pod} +[0-9a-f]{8} +\\S+ +[1-9]`, 'm'));
  });
});
