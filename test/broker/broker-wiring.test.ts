/**
 * `startBroker` as wiring (issue 11): the staged shutdown every part registers with, and the
 * process metrics the broker now collects like the CA (src/ops/process-metrics.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLogger } from '../../src/core/log.js';
import { startBroker, Shutdown, type Broker } from '../../src/broker/index.js';
import { Stack } from './support/stack.js';

describe('Shutdown: stage by stage, every part even when one fails', () => {
  it('runs intake, then work, then ops; a part that throws or rejects is logged and the rest still stop; once', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const shutdown = new Shutdown(createLogger({ level: 'warn', sink: (l) => lines.push(JSON.parse(l) as Record<string, unknown>) }));
    const order: string[] = [];
    let release: () => void = () => undefined;
    const slow = new Promise<void>((resolve) => (release = resolve));
    shutdown.add('ops', 'ops endpoint', () => void order.push('ops'));
    shutdown.add('work', 'certificates', () => void order.push('work'));
    shutdown.add('intake', 'api', async (deadlineMs) => {
      order.push(`api ${deadlineMs}`);
      await slow;
      order.push('api drained');
    });
    shutdown.add('intake', 'broken', () => {
      throw new Error('close failed');
    });
    shutdown.add('intake', 'rejecting', async () => Promise.reject(new Error('stop rejected')));
    const first = shutdown.run(1500);
    assert.equal(shutdown.run(0), first, 'one shutdown');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, ['api 1500'], 'work waits until the whole intake stage stopped');
    release();
    await first;
    assert.deepEqual(order, ['api 1500', 'api drained', 'work', 'ops']);
    assert.deepEqual(
      lines.map((l) => [l['msg'], l['stage'], l['part'], l['err']]),
      [
        ['a part failed to stop', 'intake', 'broken', 'close failed'],
        ['a part failed to stop', 'intake', 'rejecting', 'stop rejected'],
      ],
    );
  });
});

describe('the broker wired: process metrics on its /metrics, like the CA', () => {
  let stack: Stack;
  let broker: Broker;

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'broker-wiring-', namespaces: [], serviceAccounts: [] });
    broker = await startBroker(stack.brokerConfig({}));
    await broker.whenReady(AbortSignal.timeout(30_000));
  });

  after(async () => {
    await broker?.stop();
    await stack?.close();
  });

  it('serves the process collector (CPU, memory, event-loop lag, handles) next to its own metrics', async () => {
    const text = await (await fetch(`http://127.0.0.1:${broker.opsPort}/metrics`)).text();
    for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_active_handles_total']) {
      assert.match(text, new RegExp(`^${name}(\\{[^}]*\\})? [0-9.e+-]+$`, 'mu'), name);
    }
    assert.match(text, /^certbroker_broker_own_svid_state\{state="ready"\} 1$/mu);
  });
});
