/**
 * `npm start`'s stack: every node-1 workload is served to the consumer, node-2 workloads get
 * nothing, and everything stops cleanly when the signal aborts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runLocalStack } from '../../src/cli/start-stack.js';

const served = (view: string): boolean =>
  ['/ns/shop/sa/cart', '/ns/shop/sa/web', '/ns/bank/sa/ledger'].every((id) => new RegExp(`^${id} +ready +[0-9a-f]{8}`, 'm').test(view)) &&
  ['shop/cart-0', 'shop/cart-1', 'shop/web-0', 'bank/ledger-0'].every((pod) => new RegExp(`^ *${pod} +[0-9a-f]{8} +\\S+ +(-|\\S+ ago) +[1-9]`, 'm').test(view));

describe('local stack (npm start)', () => {
  it('serves the node-1 pods to the consumer and stops cleanly', async () => {
    const outputs: string[] = [];
    const controller = new AbortController();
    const run = runLocalStack({ certTtlSeconds: 300, durationSeconds: 0, intervalMs: 100, print: (t) => outputs.push(t), signal: controller.signal });
    let view: string | undefined;
    for (let i = 0; i < 1200 && view === undefined; i++) {
      view = outputs.find(served);
      if (view === undefined) await new Promise((r) => setTimeout(r, 50));
    }
    controller.abort();
    await run;
    assert.ok(view, `no view showed every node-1 pod served; last:\n${outputs.at(-2) ?? ''}`);
    assert.doesNotMatch(view, /teller|web-1/, 'node-2 pods get nothing');
    assert.equal(outputs.at(-1), 'stopped: consumer, broker, CA and devcluster are down.');
  });
});
