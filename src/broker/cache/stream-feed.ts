/**
 * How a consumer's stream is fed from the cache, for both streaming fronts (the Broker API, the
 * Workload API): its first certificate, waited for across CA failures, and paced updates after a
 * change. Plain TypeScript; time and randomness injected.
 */
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { Rng } from '../../core/rng.js';
import { BrokerError, isAbortError } from '../errors.js';
import type { CertManager } from './cert-manager.js';
import type { TrustBundle } from './trust-bundle.js';
import type { WorkloadCert } from './workload-cert.js';

/**
 * Waits for the identity's certificate and hands it to `send`. A failed fetch does not end the
 * stream: the consumer asked, the manager keeps retrying with backoff, and the first success is
 * sent. Ends quietly when `signal` aborts; any other error goes to `fail`.
 */
export async function firstCertificate(
  certs: CertManager,
  identity: string,
  stream: { readonly signal: AbortSignal; readonly log: Logger; send(cert: WorkloadCert): void; fail(err: unknown): void },
): Promise<void> {
  for (;;) {
    try {
      stream.send(await certs.waitForCert(identity, stream.signal));
      return;
    } catch (err) {
      if (isAbortError(err) || stream.signal.aborted) return;
      if (err instanceof BrokerError && err.code === 'ERR_CERT_UNAVAILABLE') {
        stream.log.info('certificate not available yet; stream keeps waiting', { err: describeError(err) });
        continue;
      }
      stream.fail(err);
      return;
    }
  }
}

/**
 * Paced updates for one stream: the returned `schedule()` arms at most one pending send, after a
 * random share of `windowMs`, and `send` then sends whatever is current (so a burst of changes
 * is one message, and one change does not reach every consumer in the same instant).
 */
export function pacedUpdates(
  pacing: { readonly clock: Clock; readonly rng: Rng; readonly windowMs: number; readonly signal: AbortSignal },
  send: () => void,
): () => void {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    pacing.clock.sleep(pacing.rng() * pacing.windowMs, pacing.signal).then(
      () => {
        pending = false;
        send();
      },
      () => undefined,
    );
  };
}

/**
 * What a stream may send for `identity` now under `bundle`: the held certificate when the bundle
 * verifies it and the root it chains to has reached the node's other streams; `{ holdMs }` while
 * that root is newer than the bundle's settle window (send again after it); undefined when there
 * is no usable certificate or the bundle does not verify it (withheld until the next change).
 */
export function sendableCert(
  certs: Pick<CertManager, 'current'>,
  bundle: Pick<TrustBundle, 'servable' | 'holdUntil'>,
  identity: string,
  now: number,
): { readonly cert: WorkloadCert } | { readonly holdMs: number } | undefined {
  const cert = certs.current(identity);
  if (!cert || !bundle.servable(cert)) return undefined;
  const holdMs = bundle.holdUntil(cert) - now;
  return holdMs > 0 ? { holdMs } : { cert };
}

/**
 * One pending re-try of a held send: `hold(ms)` arms it (a later arming while one is pending is
 * ignored: the pending one sends whatever is current), `retry` runs when it fires.
 */
export function heldSends(clock: Clock, signal: AbortSignal, retry: () => void): (ms: number) => void {
  let pending = false;
  return (ms) => {
    if (pending) return;
    pending = true;
    clock.sleep(ms, signal).then(
      () => {
        pending = false;
        retry();
      },
      () => undefined,
    );
  };
}
