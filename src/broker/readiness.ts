/**
 * When the broker is ready: its own token held, the node's pod list trusted (listed, watch not
 * stale) and a valid own SVID served. The checks `/readyz` answers with, and `whenReady`.
 */
import type { Check } from '../ops/ops-server.js';

/** Something that can say why it is not ready (undefined: it is). */
export interface ReadinessSource {
  problem(): string | undefined;
}

export class BrokerReadiness {
  readonly checks: readonly Check[];

  constructor(parts: { readonly token: ReadinessSource; readonly podWatch: ReadinessSource; readonly ownSvid: ReadinessSource }) {
    this.checks = [
      { name: 'token', check: () => parts.token.problem() },
      { name: 'pod-watch', check: () => parts.podWatch.problem() },
      { name: 'own-svid', check: () => parts.ownSvid.problem() },
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
