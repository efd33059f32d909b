/** Leaf issuance on pki's worker-thread pool (every core signs while the main thread serves gRPC). */
import { LeafIssuerPool } from '../../pki/index.js';
import type { LeafIssuerFactory } from './material-signer.js';

export function poolIssuerFactory(size: number): LeafIssuerFactory {
  return (material, options) => {
    const pool = new LeafIssuerPool({ signer: material.leafSigner, size, maxTtlSeconds: options.maxTtlSeconds });
    return {
      issue: (r) => pool.issue({ csr: r.csrPem, spiffeId: r.spiffeId, ttlSeconds: r.ttlSeconds }),
      close: (drainMs) => pool.close({ drainMs: drainMs ?? 0 }),
    };
  };
}
