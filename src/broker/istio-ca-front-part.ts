/**
 * The Istio CA front as a part of the running broker (wiring, like `startBroker`): its serving
 * certificate — the broker's own SVID asked with serving names (`localhost`, `127.0.0.1`, the
 * alt host name) through a certificate manager entry of its own, so it rotates at half-life like
 * the Broker API's SVID and the Broker API keeps serving when a CA does not grant the names —, the
 * caller authenticator (TokenReview, through src/ca), the node-local authorizer over the
 * broker's pods, the per-caller limits, a node:http2 CA client of its own for the forwarded CSRs (`CaForwarder`), the TLS
 * listener, its metrics and its readiness.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import type { KubeConfig } from '@kubernetes/client-node';
import { IstioCaClient, type IstioCaClientOptions, type TokenProvider } from './adapters/ca-client.js';
import { CaForwarder } from './adapters/ca-forwarder.js';
import { tokenReviewCallerAuthenticator } from './adapters/caller-token-review.js';
import { CertManager } from './cache/cert-manager.js';
import type { NodePods } from './cache/node-pods.js';
import type { TrustBundle } from './cache/trust-bundle.js';
import { describeCert } from './cache/workload-cert.js';
import { CallerLimits } from './fronts/istio-ca/caller-limits.js';
import { FrontAuthorizer } from './fronts/istio-ca/front-authorizer.js';
import { IstioCaFrontService, type IstioCaFrontObserver } from './fronts/istio-ca/istio-ca-front.js';
import { startIstioCaFrontServer, type IstioCaFrontServer } from './fronts/istio-ca/istio-ca-front-server.js';
import { FrontServingIdentity } from './fronts/istio-ca/serving-identity.js';
import type { BrokerConfig } from './config.js';
import type { IstioCaFrontConfig } from './istio-ca-front-config.js';
import { caClientBase } from './workload-certs.js';
import type { CaTrust } from './ca-trust.js';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface IstioCaFrontPartOptions {
  readonly front: IstioCaFrontConfig;
  readonly trustDomain: string;
  readonly clusterId: string;
  /** The broker's own SPIFFE ID: the front's certificate carries it (and the serving names). */
  readonly ownIdentity: string;
  /** What every broker CA client shares (address, roots, token, cluster id, TTL: `caClientBase`). */
  readonly caBase: Omit<IstioCaClientOptions, 'impersonate' | 'servingNames'>;
  readonly kubeConfig: KubeConfig;
  readonly pods: NodePods;
  readonly podsSynced: () => boolean;
  readonly bundle: TrustBundle;
  /** The CA clients' TLS trust (configured roots + bundle), which the front's clients follow too. */
  readonly caTrust: CaTrust;
  readonly registry: Registry;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
}

function frontMetrics(registry: Registry, servingNotAfter: () => number | undefined): { observer: IstioCaFrontObserver; tokenReviews: Counter<'result'> } {
  const registers = [registry];
  const requests = new Counter({
    name: 'certbroker_broker_istio_ca_front_requests_total',
    help: 'CreateCertificate calls answered by the Istio CA front, by outcome (issued, denied, invalid, limited, unavailable, error) and precise reason (an ERR_* code, ok).',
    labelNames: ['outcome', 'reason'],
    registers,
  });
  const seconds = new Histogram({
    name: 'certbroker_broker_istio_ca_front_request_duration_seconds',
    help: 'Time to answer a CreateCertificate call on the Istio CA front (the forwarded CA call included), by outcome.',
    labelNames: ['outcome'],
    buckets: LATENCY_BUCKETS,
    registers,
  });
  new Gauge({
    name: 'certbroker_broker_istio_ca_front_serving_cert_expiry_timestamp_seconds',
    help: "notAfter (Unix seconds) of the Istio CA front's serving certificate; 0 while it has none.",
    registers,
    collect() {
      this.set((servingNotAfter() ?? 0) / 1000);
    },
  });
  const tokenReviews = new Counter({
    name: 'certbroker_broker_istio_ca_front_token_reviews_total',
    help: "Caller token lookups of the Istio CA front: hit (cached review), shared (joined one in flight), miss (a TokenReview was sent), refused (refused again from the refusal cache).",
    labelNames: ['result'],
    registers,
  });
  return {
    observer: {
      answered: (outcome, reason, s) => {
        requests.inc({ outcome, reason });
        seconds.observe({ outcome }, s);
      },
    },
    tokenReviews,
  };
}

export class IstioCaFrontPart {
  /** The front's serving certificate (one entry: the broker's own identity, with serving names). */
  readonly certs: CertManager;
  readonly #o: IstioCaFrontPartOptions;
  readonly #identity: FrontServingIdentity;
  readonly #service: IstioCaFrontService;
  readonly #servingCa: IstioCaClient;
  readonly #forwardCa: CaForwarder;
  #server: IstioCaFrontServer | undefined;

  constructor(options: IstioCaFrontPartOptions) {
    this.#o = options;
    const { front, logger } = options;
    this.#identity = new FrontServingIdentity({
      clock: options.clock,
      onExpired: (cert) => {
        logger.error('Istio CA front certificate expired; new connections are refused until it is renewed', describeCert(cert));
        this.#server?.setServing(false);
      },
    });
    const metrics = frontMetrics(options.registry, () => this.#identity.servingNotAfter);
    this.#servingCa = new IstioCaClient({ ...options.caBase, impersonate: false, servingNames: front.servingNames });
    this.#forwardCa = new CaForwarder(options.caBase);
    this.certs = new CertManager({
      ca: this.#servingCa,
      clock: options.clock,
      rng: options.rng,
      logger,
      maxConcurrentFetches: 1,
      observer: {
        fetchFailed: (identity, err, _ms, next) =>
          logger.warn('Istio CA front certificate fetch failed', { identity, servingNames: front.servingNames, err: describeError(err), retryInMs: Math.round(next) }),
      },
    });
    options.bundle.follow(this.certs);
    options.caTrust.add(this.#servingCa, this.#forwardCa);
    this.#service = new IstioCaFrontService({
      clusterId: options.clusterId,
      authenticator: tokenReviewCallerAuthenticator({
        kubeConfig: options.kubeConfig,
        clusterId: options.clusterId,
        audiences: front.audiences,
        cacheSeconds: front.tokenCacheSeconds,
        clock: options.clock,
        logger,
        onLookup: (result) => metrics.tokenReviews.inc({ result }),
      }),
      authorizer: new FrontAuthorizer({ trustDomain: options.trustDomain, allowedAccounts: front.allowedAccounts, pods: options.pods, podsSynced: options.podsSynced }),
      limits: new CallerLimits({ clock: options.clock, ratePerSecond: front.ratePerSecond, burst: front.burst, maxInFlight: front.maxInFlight }),
      forwarder: this.#forwardCa,
      logger,
      observer: metrics.observer,
    });
    this.certs.retain(options.ownIdentity, 'istio-ca-front', 'realtime');
    this.certs.subscribe(options.ownIdentity, (ev) => {
      if (ev.type !== 'updated' || !this.#identity.set(ev.cert)) return;
      logger.info('Istio CA front certificate ready', { ...describeCert(ev.cert), servingNames: front.servingNames });
      this.#server?.setServing(true);
    });
  }

  /** Binds the listener; resolves with how to stop it (drain within a deadline: the shutdown's intake stage). */
  async serve(): Promise<(deadlineMs: number) => Promise<void>> {
    const { front, logger } = this.#o;
    const server = await startIstioCaFrontServer({ host: front.host, port: front.port, service: this.#service, identity: this.#identity, logger, clock: this.#o.clock, transport: front.transport });
    this.#server = server;
    server.setServing(this.#identity.hasIdentity);
    return (deadlineMs) => server.stop(deadlineMs);
  }

  /** The bound port once serving. */
  get port(): number | undefined {
    return this.#server?.port;
  }

  /** `host:port` once serving (logs). */
  get address(): string | undefined {
    return this.#server ? `${this.#o.front.host}:${this.#server.port}` : undefined;
  }

  /** Why the front cannot serve (readiness), undefined when it can. */
  problem(): string | undefined {
    if (this.#identity.hasIdentity) return undefined;
    const status = this.certs.status(this.#o.ownIdentity);
    return `Istio CA front has no serving certificate${status?.lastError ? `: ${status.lastError}` : ' yet'}`;
  }

  /** Stops the certificate manager and closes the CA clients (the shutdown's work stage). */
  close(): void {
    this.certs.stop();
    this.#identity.close();
    this.#servingCa.close();
    this.#forwardCa.close();
  }
}

/**
 * The front for `config`, or undefined when it is off; its certificate manager and CA clients
 * are registered to stop in the shutdown's work stage (`serve()` returns the listener's stopper).
 */
export function istioCaFrontOf(
  config: BrokerConfig,
  deps: Omit<IstioCaFrontPartOptions, 'front' | 'trustDomain' | 'clusterId' | 'caBase' | 'kubeConfig'> & { readonly tokens: TokenProvider },
): IstioCaFrontPart | undefined {
  if (!config.istioCaFront) return undefined;
  const { tokens, ...rest } = deps;
  return new IstioCaFrontPart({
    ...rest,
    front: config.istioCaFront,
    trustDomain: config.trustDomain,
    clusterId: config.ca.clusterId,
    caBase: caClientBase(config, tokens),
    kubeConfig: config.kubeConfig,
  });
}
