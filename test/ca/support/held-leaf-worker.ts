/**
 * A leaf worker the test can hold, for tests that need requests provably in flight in a pool
 * (e.g. while a cacerts reload retires it) without racing the workers.
 *
 * In a worker thread this module loads src/pki/leaf-worker.js unchanged and listens to the same
 * port: a batch holding a request for an identity ending in `/sa/held` makes the thread announce
 * itself on the BroadcastChannel below, with an Int32Array on shared memory, and then block until
 * the test stores 1 there. The real worker has only queued that batch at that point, so neither it
 * nor any later batch of that worker is answered until the release; afterwards all are answered for
 * real. Other batches never block.
 *
 * In the test's thread it exports `HELD_LEAF_WORKER` (the module to give the pool) and
 * `watchHeldWorker()`.
 */
import { BroadcastChannel, isMainThread, parentPort } from 'node:worker_threads';
import type { WorkerMessage } from '../../../src/pki/leaf-pool-protocol.js';
// The real worker; in the test's thread it has no parent port and does nothing.
import '../../../src/pki/leaf-worker.js';

const CHANNEL = 'certbroker-test-held-leaf-worker';

/** An identity whose batch makes the worker hold. */
export const HELD_ID = 'spiffe://cluster.local/ns/default/sa/held';

export const HELD_LEAF_WORKER = new URL(import.meta.url);

export interface HeldWorkerWatch {
  /** Resolves once a worker is blocked on a batch holding HELD_ID. */
  readonly holding: Promise<void>;
  /** Lets the held worker go (no-op before it holds or when already released). */
  release(): void;
  close(): void;
}

/** Listens for a held worker; call it before sending the HELD_ID request. */
export function watchHeldWorker(): HeldWorkerWatch {
  const channel = new BroadcastChannel(CHANNEL);
  let cell: Int32Array | undefined;
  let released = false;
  const release = () => {
    released = true;
    if (cell) {
      Atomics.store(cell, 0, 1);
      Atomics.notify(cell, 0);
    }
  };
  const holding = new Promise<void>((resolve) => {
    channel.onmessage = (event) => {
      cell = (event as { readonly data: { readonly cell: Int32Array } }).data.cell;
      if (released) release();
      resolve();
    };
  });
  return {
    holding,
    release,
    close: () => {
      release();
      channel.close();
    },
  };
}

if (!isMainThread) {
  parentPort!.on('message', (msg: WorkerMessage) => {
    if (msg.kind !== 'batch' || !msg.spiffeIds.includes(HELD_ID)) return;
    const cell = new Int32Array(new SharedArrayBuffer(4));
    const channel = new BroadcastChannel(CHANNEL);
    channel.postMessage({ cell });
    Atomics.wait(cell, 0, 0);
    channel.close();
  });
}
