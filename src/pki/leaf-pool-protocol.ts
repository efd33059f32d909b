/**
 * Messages between LeafIssuerPool and its workers (structured-clone friendly). Requests and
 * results travel as parallel arrays, not one object per certificate: cloning a few flat
 * arrays costs both threads far less than cloning many small objects, and the main thread —
 * which also serves gRPC in the CA — is where every microsecond counts. The certificate DER
 * does not travel at all: the main thread decodes it from the PEM only if someone asks.
 */
import type { LeafSigner } from './leaf-template.js';

export interface BatchMessage {
  readonly kind: 'batch';
  readonly ids: readonly number[];
  readonly csrs: readonly (string | Uint8Array)[];
  readonly spiffeIds: readonly string[];
  readonly ttlSeconds: readonly number[];
}

export type WorkerMessage =
  | { readonly kind: 'signer'; readonly signer: LeafSigner; readonly maxTtlSeconds: number | undefined }
  | BatchMessage;

/** Answers for some of a batch's requests, in any order; `failed` lists the ones that failed. */
export interface ResultsMessage {
  readonly kind: 'results';
  readonly ids: readonly number[];
  readonly pems: readonly string[];
  readonly serials: readonly string[];
  readonly notBeforeMs: readonly number[];
  readonly notAfterMs: readonly number[];
  readonly failed: readonly { readonly id: number; readonly code: string; readonly message: string }[];
}
