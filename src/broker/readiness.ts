/**
 * When the broker is ready: its own token held, the node's pod list trusted (listed, watch not
 * stale), a valid own SVID served and, with the Istio CA front on, its serving certificate held. The checks `/readyz` answers with, and `whenReady`.
 */
import type { Check } from '../ops/ops-server.js';

/** Something that can say why it is not ready (undefined: it is). */
export interface ReadinessSource {
  problem(): string | undefined;
}

export class BrokerReadiness {
  readonly checks: readonly Check[];

  constructor(parts: {
    readonly token: ReadinessSource;
    readonly podWatch: ReadinessSource;
    readonly ownSvid: ReadinessSource;
    /** The Istio CA front, when it is on: ready once it holds its serving certificate. */
    readonly istioCaFront?: ReadinessSource;
  }) {
    const front = parts.istioCaFront;
    this.checks = [
      { name: 'token', check: () => parts.token.problem() },
      { name: 'pod-watch', check: () => parts.podWatch.problem() },
      { name: 'own-svid', check: () => parts.ownSvid.problem() },
      ...(front ? [{ name: 'istio-ca-front', check: () => front.problem() }] : []),
    ];
  }

  get ready(): boolean {
    return this.checks.every((c) => c.check() === undefined);
  }

  /** Resolves once ready (polled every 50 ms), or rejects with the signal's reason when it aborts first. */
  async whenReady(signal?: AbortSignal): Promise<void> {
    while (!this.ready) {
      if (signal?.aborted) throw signal.reason;
      await new Promise((r) => setTimeout(r, 50).unref());
    }
  }
}
