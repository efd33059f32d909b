/**
 * Worker-thread side of `LeafIssuerPool`: holds a FastLeafIssuer and answers batches of
 * requests (see leaf-pool-protocol.ts). Messages are handled strictly in order, so a new
 * signer applies exactly to the batches sent after it.
 */
import { parentPort } from 'node:worker_threads';
import { CertbrokerError } from '../core/errors.js';
import { FastLeafIssuer, type LeafSigner } from './leaf-template.js';
import type { BatchMessage, ResultsMessage, WorkerMessage } from './leaf-pool-protocol.js';

/** Answer in chunks so the pool can hand out more work while a batch is still running. */
const RESULT_CHUNK = 16;

let issuer: FastLeafIssuer | undefined;

/** A ResultsMessage being filled. */
interface Results extends ResultsMessage {
  readonly ids: number[];
  readonly pems: string[];
  readonly serials: string[];
  readonly notBeforeMs: number[];
  readonly notAfterMs: number[];
  readonly failed: { id: number; code: string; message: string }[];
}

function emptyResults(): Results {
  return { kind: 'results', ids: [], pems: [], serials: [], notBeforeMs: [], notAfterMs: [], failed: [] };
}

async function answer(batch: BatchMessage): Promise<void> {
  let out = emptyResults();
  let count = 0;
  for (let i = 0; i < batch.ids.length; i++) {
    const id = batch.ids[i]!;
    const current = issuer;
    if (!current) {
      out.failed.push({ id, code: 'ERR_PKI_POOL_WORKER', message: 'worker has no signer' });
    } else {
      try {
        const leaf = await current.issueAsync({ csr: batch.csrs[i]!, spiffeId: batch.spiffeIds[i]!, ttlSeconds: batch.ttlSeconds[i]! });
        out.ids.push(id);
        out.pems.push(leaf.pem);
        out.serials.push(leaf.serialHex);
        out.notBeforeMs.push(leaf.notBeforeMs);
        out.notAfterMs.push(leaf.notAfterMs);
      } catch (err) {
        if (err instanceof CertbrokerError) out.failed.push({ id, code: err.code, message: err.message });
        else out.failed.push({ id, code: 'ERR_PKI_SIGN_FAILED', message: 'unexpected failure while issuing' });
      }
    }
    if (++count === RESULT_CHUNK) {
      parentPort!.postMessage(out);
      out = emptyResults();
      count = 0;
    }
  }
  if (count > 0) parentPort!.postMessage(out);
}

function installSigner(msg: Extract<WorkerMessage, { kind: 'signer' }>): void {
  const signer: LeafSigner = {
    ...msg.signer,
    subjectDer: Buffer.from(msg.signer.subjectDer),
    subjectKeyId: msg.signer.subjectKeyId ? Buffer.from(msg.signer.subjectKeyId) : undefined,
  };
  try {
    issuer = new FastLeafIssuer({ signer, maxTtlSeconds: msg.maxTtlSeconds });
  } catch {
    // The pool validates signers before sending them; if one still fails here, requests get
    // a coded error instead of the worker dying (and being respawned) in a loop.
    issuer = undefined;
  }
}

let queue: Promise<void> = Promise.resolve();
parentPort?.on('message', (msg: WorkerMessage) => {
  queue = queue.then(() => (msg.kind === 'signer' ? installSigner(msg) : answer(msg)));
});
