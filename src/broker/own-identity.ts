/**
 * The broker's own SVID, as a part of the broker: `spiffe://<td>/ns/<POD_NAMESPACE>/sa/<SA>`
 * from the CA *without* impersonation, through a certificate manager of its own (one entry,
 * rotated like any workload's), served as the Broker API's certificate by a
 * `SelfCertificateProvider` that trusts the bundle. `onServing(true)` once a valid SVID is
 * served, `onServing(false)` when it expired (new connections are refused until the renewal).
 */
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import type { IstioCaClient } from './adapters/ca-client.js';
import { CertManager } from './cache/cert-manager.js';
import { fetchFailureOf } from './cache/refresh-policy.js';
import type { TrustBundle } from './cache/trust-bundle.js';
import { describeCert } from './cache/workload-cert.js';
import { SelfCertificateProvider } from './fronts/broker-api/broker-api-server.js';
import { ownSvidOf, ownSvidProblem, type OwnSvid } from './own-svid.js';

export interface OwnIdentityOptions {
  readonly identity: string;
  /** A CA client that asks for the caller's own identity (`impersonate: false`). */
  readonly ca: IstioCaClient;
  readonly bundle: TrustBundle;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
  readonly onServing: (serving: boolean) => void;
}

export class OwnIdentity {
  readonly identity: string;
  readonly certs: CertManager;
  /** The Broker API server's certificates: this SVID as identity, the bundle as client CA. */
  readonly certificates: SelfCertificateProvider;
  readonly #o: OwnIdentityOptions;

  constructor(options: OwnIdentityOptions) {
    const { identity, clock, logger, bundle } = options;
    this.#o = options;
    this.identity = identity;
    this.certs = new CertManager({
      ca: options.ca,
      clock,
      rng: options.rng,
      logger,
      maxConcurrentFetches: 1,
      observer: {
        fetchFailed: (id, err, _ms, next) =>
          logger.warn('own SVID fetch failed', { identity: id, err: describeError(err), failure: fetchFailureOf(err), retryInMs: Math.round(next) }),
      },
    });
    bundle.follow(this.certs);
    this.certificates = new SelfCertificateProvider({
      clock,
      onExpired: (cert) => {
        logger.error('own SVID expired; the Broker API refuses new connections until it is renewed', describeCert(cert));
        options.onServing(false);
      },
    });
    this.certificates.setRoots(bundle);
    bundle.onChange(() => this.certificates.setRoots(bundle));
  }

  /** Asks for the SVID at once (realtime) and serves each one obtained. */
  start(): void {
    this.certs.retain(this.identity, 'self', 'realtime');
    this.certs.subscribe(this.identity, (ev) => {
      if (ev.type !== 'updated') return;
      if (!this.certificates.setIdentity(ev.cert)) return; // already expired: the certificate manager refuses those
      this.#o.logger.info('own SVID ready', describeCert(ev.cert));
      this.#o.onServing(true);
    });
  }

  /** A valid SVID is being served. */
  get serving(): boolean {
    return this.certificates.hasIdentity;
  }

  /** ready, expired or missing (readiness and metrics). */
  svid(): OwnSvid {
    return ownSvidOf(this.certs.status(this.identity), this.#o.clock.now());
  }

  /** The readiness answer: undefined while a valid SVID is held. */
  problem(): string | undefined {
    return ownSvidProblem(this.svid());
  }

  stop(): void {
    this.certs.stop();
    this.certificates.close();
    this.#o.ca.close();
  }
}
