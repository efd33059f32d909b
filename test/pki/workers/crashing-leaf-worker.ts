/**
 * The real leaf worker, made to die on demand for the pool's crash tests. It loads
 * src/pki/leaf-worker.js unchanged, then listens to the same port: a batch holding a request for
 * an identity ending in `/sa/crash-exit` makes the thread call process.exit(1), one ending in
 * `/sa/crash-throw` throws an uncaught error. Either happens while the batch is still only queued
 * in the real worker, so nothing of that batch is answered; every other batch is answered for real.
 */
import { parentPort } from 'node:worker_threads';
import '../../../src/pki/leaf-worker.js';
import type { WorkerMessage } from '../../../src/pki/leaf-pool-protocol.js';

parentPort!.on('message', (msg: WorkerMessage) => {
  if (msg.kind !== 'batch') return;
  if (msg.spiffeIds.some((id) => id.endsWith('/sa/crash-exit'))) process.exit(1);
  if (msg.spiffeIds.some((id) => id.endsWith('/sa/crash-throw'))) throw new Error('leaf worker crashed on purpose');
});
