/** Messages between LeafIssuerPool and its workers (structured-clone friendly). */
import type { IssuedLeaf, LeafRequest, LeafSigner } from './leaf-template.js';

export interface WorkerItem extends LeafRequest {
  readonly id: number;
}

export type WorkerMessage =
  | { readonly kind: 'signer'; readonly signer: LeafSigner; readonly maxTtlSeconds: number | undefined }
  | { readonly kind: 'batch'; readonly items: readonly WorkerItem[] };

export type WorkerResult =
  | { readonly id: number; readonly leaf: IssuedLeaf }
  | { readonly id: number; readonly code: string; readonly message: string };

export interface ResultsMessage {
  readonly kind: 'results';
  readonly results: readonly WorkerResult[];
}
