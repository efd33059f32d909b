/**
 * The CA's own TLS serving certificate, kept current. Issued by the signer (SANs from the
 * configuration, chained to the mesh root; see serving-cert.ts), renewed at half of its lifetime
 * on the injected Clock, re-issued whenever the signer's material changes, one issuance at a time
 * (a request while one runs runs once more after it, so the certificate always ends up from the
 * current material). A failed issuance is retried with backoff.
 *
 * A certificate is never presented past its notAfter: when it could not be renewed in time (the
 * signer cannot issue), it is withdrawn at notAfter, TLS handshakes fail, and `problem()` says
 * why until a new one is issued.
 */
import type { Clock } from '../core/clock.js';
import { CoalescedRun } from '../core/coalesced-run.js';
import { describeError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { RotatingServerIdentity } from '../grpc/rotating-credentials.js';
import type { Signer } from './signer.js';

/** Serving certificate lifetime asked for (the signer clamps it to its own notAfter). */
export const SERVING_CERT_TTL_SECONDS = 30 * 24 * 3600;
/** Shortest delay before a renewal: a certificate clamped to a signer about to expire would otherwise renew in a loop. */
export const MIN_RENEW_DELAY_MS = 1000;
/** Retry delays after a failed issuance (or a signer not ready): doubling from the first to the last. */
export const SERVING_RETRY_INITIAL_MS = 1000;
export const SERVING_RETRY_MAX_MS = 60_000;

export interface ServingIdentityOptions {
  readonly signer: Signer;
  /** DNS names (and IP addresses) the certificate is for. */
  readonly dnsNames: readonly string[];
  readonly clock: Clock;
  readonly logger: Logger;
  /** Lifetime asked for; default SERVING_CERT_TTL_SECONDS. */
  readonly ttlSeconds?: number;
}

/** What happened to the presented certificate. */
export type ServingEvent = 'issued' | 'withdrawn';

type TimerKind = 'renewal' | 'expiry';

export class ServingIdentity {
  /** What the TLS servers present (grpc-js credentials, or the http2 transport's secure context). */
  readonly identity = new RotatingServerIdentity();
  readonly #o: ServingIdentityOptions;
  readonly #timers: Partial<Record<TimerKind, AbortController>> = {};
  readonly #listeners = new Set<(event: ServingEvent) => void>();
  #notAfterMs: number | undefined;
  #lastError: string | undefined;
  #failures = 0;
  readonly #issuing = new CoalescedRun(() => this.#issueOnce(), () => this.#stopped);
  #started = false;
  #stopped = false;
  #unsubscribe: (() => void) | undefined;

  constructor(options: ServingIdentityOptions) {
    this.#o = options;
  }

  /** notAfter of the certificate presented now, undefined when none is. */
  get notAfterMs(): number | undefined {
    return this.identity.hasIdentity ? this.#notAfterMs : undefined;
  }

  /** Undefined while a certificate is presented; otherwise why none is (readiness). */
  problem(): string | undefined {
    if (this.identity.hasIdentity) return undefined;
    const why = this.#lastError ?? (this.#o.signer.ready ? 'not issued yet' : `signer not ready: ${this.#o.signer.notReadyReason ?? 'unknown'}`);
    if (this.#notAfterMs === undefined) return `no serving certificate yet (${why})`;
    return `serving certificate expired at ${new Date(this.#notAfterMs).toISOString()} and was withdrawn (${why})`;
  }

  /** Calls `listener` when a certificate is issued or withdrawn; returns an unsubscribe function. */
  onChange(listener: (event: ServingEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Follows the signer from now on and issues the first certificate. Resolves once that first
   * attempt is over: issued, or failed or skipped (signer not ready) and retried in the
   * background. Aborting `signal` stops it as `stop()` does.
   */
  async start(signal?: AbortSignal): Promise<void> {
    if (this.#started || this.#stopped) return;
    this.#started = true;
    if (signal?.aborted) return this.stop(0);
    signal?.addEventListener('abort', () => void this.stop(0), { once: true });
    this.#unsubscribe = this.#o.signer.onChange(() => void this.renew());
    await this.renew();
  }

  /** Issues a certificate now (joining one in progress, which then runs once more). Never rejects. */
  renew(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return this.#issuing.run();
  }

  /** Stops renewing and following the signer; waits at most `deadlineMs` for an issuance in progress. */
  async stop(deadlineMs = 5000): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe?.();
    for (const kind of ['renewal', 'expiry'] as const) this.#cancel(kind);
    const issuing = this.#issuing.running;
    if (!issuing) return;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, Math.max(0, deadlineMs));
      timer.unref();
    });
    await Promise.race([issuing, deadline]);
    clearTimeout(timer);
  }

  async #issueOnce(): Promise<void> {
    const { signer, clock, logger } = this.#o;
    if (!signer.ready) {
      // The signer's next change issues; the retry covers a signer that recovers without one.
      this.#retryLater();
      return;
    }
    try {
      const cert = await signer.issueServingCertificate({ dnsNames: this.#o.dnsNames, ttlSeconds: this.#o.ttlSeconds ?? SERVING_CERT_TTL_SECONDS });
      if (this.#stopped) return;
      const now = clock.now();
      if (cert.notAfterMs <= now) throw new Error(`the signer issued a serving certificate that is already expired (notAfter ${new Date(cert.notAfterMs).toISOString()})`);
      this.identity.update(cert.certChainPem, cert.privateKeyPem);
      this.#notAfterMs = cert.notAfterMs;
      this.#lastError = undefined;
      this.#failures = 0;
      logger.info('serving certificate issued', { dnsNames: this.#o.dnsNames, notAfter: new Date(cert.notAfterMs).toISOString() });
      this.#arm('renewal', Math.max(MIN_RENEW_DELAY_MS, (cert.notAfterMs - now) / 2), () => void this.renew());
      this.#arm('expiry', cert.notAfterMs - now, () => this.#expire());
      this.#emit('issued');
    } catch (err) {
      if (this.#stopped) return;
      this.#lastError = describeError(err);
      const delayMs = this.#retryLater();
      logger.error('serving certificate rotation failed', { err: this.#lastError, retryInMs: delayMs });
    }
  }

  /** Arms the next attempt after a failure or a skipped one (doubling, capped); returns its delay. */
  #retryLater(): number {
    this.#failures++;
    const delayMs = Math.min(SERVING_RETRY_INITIAL_MS * 2 ** (this.#failures - 1), SERVING_RETRY_MAX_MS);
    this.#arm('renewal', delayMs, () => void this.renew());
    return delayMs;
  }

  /** At notAfter: the certificate was not replaced in time, so it stops being presented. */
  #expire(): void {
    if (this.#notAfterMs === undefined || !this.identity.hasIdentity) return;
    const left = this.#notAfterMs - this.#o.clock.now();
    if (left > 0) {
      // A clock whose sleep ended early: wait for the rest.
      this.#arm('expiry', left, () => this.#expire());
      return;
    }
    this.identity.withdraw();
    this.#o.logger.error('serving certificate expired before it could be renewed; withdrawn, TLS handshakes fail until a new one is issued', {
      notAfter: new Date(this.#notAfterMs).toISOString(),
      ...(this.#lastError !== undefined ? { lastError: this.#lastError } : {}),
      signerReady: this.#o.signer.ready,
    });
    this.#emit('withdrawn');
  }

  /** One timer per kind on the injected clock; arming replaces the previous one. */
  #arm(kind: TimerKind, delayMs: number, fire: () => void): void {
    this.#cancel(kind);
    if (this.#stopped) return;
    const c = new AbortController();
    this.#timers[kind] = c;
    this.#o.clock.sleep(Math.max(0, delayMs), c.signal).then(
      () => {
        if (this.#timers[kind] !== c) return;
        delete this.#timers[kind];
        fire();
      },
      () => undefined,
    );
  }

  #cancel(kind: TimerKind): void {
    this.#timers[kind]?.abort();
    delete this.#timers[kind];
  }

  #emit(event: ServingEvent): void {
    for (const l of this.#listeners) {
      try {
        l(event);
      } catch (err) {
        this.#o.logger.error('serving identity listener threw', { err: describeError(err) });
      }
    }
  }
}
