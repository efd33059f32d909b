/**
 * Worker-thread side of `LeafIssuerPool`: holds a FastLeafIssuer and answers batches of
 * requests. Messages in: {kind:'signer', signer, maxTtlSeconds} | {kind:'batch', items}.
 * Messages out: {kind:'results', results: [{id, leaf} | {id, code, message}]}.
 */
import { parentPort } from 'node:worker_threads';
import { CertbrokerError } from '../core/errors.js';
import { FastLeafIssuer, type IssuedLeaf, type LeafSigner } from './leaf-template.js';
import type { WorkerItem, WorkerMessage, WorkerResult } from './leaf-pool-protocol.js';

const RESULT_CHUNK = 16;

let issuer: FastLeafIssuer | undefined;

function issueOne(item: WorkerItem): WorkerResult {
  if (!issuer) return { id: item.id, code: 'ERR_PKI_POOL_WORKER', message: 'worker has no signer' };
  try {
    const leaf: IssuedLeaf = issuer.issue(item);
    return { id: item.id, leaf };
  } catch (err) {
    if (err instanceof CertbrokerError) return { id: item.id, code: err.code, message: err.message };
    return { id: item.id, code: 'ERR_PKI_SIGN_FAILED', message: 'unexpected failure while issuing' };
  }
}

function post(results: WorkerResult[]): void {
  parentPort!.postMessage({ kind: 'results', results });
}

parentPort?.on('message', (msg: WorkerMessage) => {
  if (msg.kind === 'signer') {
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
    return;
  }
  // Answer in small chunks so the pool can hand out more work while this batch is still
  // running: the worker's queue never runs dry waiting for a whole batch's round trip.
  let results: WorkerResult[] = [];
  for (const item of msg.items) {
    results.push(issueOne(item));
    if (results.length === RESULT_CHUNK) {
      post(results);
      results = [];
    }
  }
  if (results.length > 0) post(results);
});
