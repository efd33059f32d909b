/** Leaf issuance on pki's worker-thread pool (every core signs while the main thread serves gRPC). */
import { LeafIssuerPool } from '../../pki/index.js';
import type { LeafIssuerFactory } from './material-signer.js';

/** `workerModule` replaces pki's leaf worker (tests give one that really dies; see LeafIssuerPool). */
export function poolIssuerFactory(size: number, o: { readonly workerModule?: URL } = {}): LeafIssuerFactory {
  return (material, options) => {
    const pool = new LeafIssuerPool({
      signer: material.leafSigner,
      size,
      maxTtlSeconds: options.maxTtlSeconds,
      logger: options.logger.child({ component: 'leaf-pool' }),
      ...(o.workerModule ? { workerModule: o.workerModule } : {}),
      ...(options.onBroken ? { onSlotGivenUp: () => pool.liveWorkers === 0 && options.onBroken?.() } : {}),
    });
    return {
      issue: (r) => pool.issue({ csr: r.csrPem, spiffeId: r.spiffeId, ttlSeconds: r.ttlSeconds }),
      close: (drainMs) => pool.close({ drainMs: drainMs ?? 0 }),
      // The pool refills a dead worker's slot, but gives a slot up after repeated deaths without
      // an answer; with none left this process cannot sign again.
      broken: () => (pool.liveWorkers === 0 ? 'every signing worker died' : undefined),
    };
  };
}
