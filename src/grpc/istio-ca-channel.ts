/**
 * A kept channel to one `IstioCertificateService` (istiod, istio-csr, a certbroker CA): TLS
 * verified against the given roots, `CreateCertificate` calls with a bearer token and
 * `clusterid`, a per-call deadline, cancelled by an AbortSignal. Used by the node broker's CA
 * client and by the CA's `istio-upstream` signer (a registration authority), which each turn a
 * failed call into their own error through `failure` (the gRPC code says whether the CA refused
 * or was not reached).
 *
 * Reconnection: after UNAVAILABLE or DEADLINE_EXCEEDED the channel is closed and the next call
 * builds a new one, which dials at once. Kept, a grpc-js channel whose connection attempt failed
 * sits in TRANSIENT_FAILURE for its own exponential reconnect backoff (1 s growing to 120 s) and
 * fails every call in that window immediately with the old error (a stale ECONNREFUSED): stacked
 * on the caller's own backoff, that kept a CA that was back unused for minutes. Tuning
 * `grpc.initial/max_reconnect_backoff_ms` would only shorten the stale window, and `waitForReady`
 * would park every call until the channel's own next attempt (or the deadline). A connection
 * that died silently (the CA's host gone without a RST) shows as DEADLINE_EXCEEDED on a channel
 * that still looks READY: it is replaced the same way. Calls already running on the old channel
 * finish on it (grpc-js closes its HTTP/2 session gracefully).
 *
 * Several CA replicas (ca-target.ts: a DNS name with several addresses, e.g. a headless Service,
 * or a list of IPs): calls go round robin over every connected replica, a call that failed
 * UNAVAILABLE is tried again on another (caServiceConfig), and grpc-js resolves the name again
 * when a replica's connection fails (at most every CA_DNS_MIN_RERESOLVE_MS).
 */
import { ChannelCredentials, Client, Metadata, status as GrpcStatus, type MethodDefinition } from '@grpc/grpc-js';
import {
  AUTHORIZATION_METADATA,
  bearerAuthorization,
  CA_PROTO,
  CA_SERVICE,
  CLUSTER_ID_METADATA,
  CREATE_CERTIFICATE_METHOD,
  type IstioCertificateRequest,
  type IstioCertificateResponse,
} from '../protocol/istio-ca.js';
import { BoundedChannelCredentials } from './bounded-credentials.js';
import { CA_DNS_MIN_RERESOLVE_MS, caServiceConfig, parseCaTarget } from './ca-target.js';
import { retryPushbackOf } from './retry-pushback.js';
import { serviceDefinitionOf, typedMethod } from './typed-methods.js';

export const DEFAULT_CA_CALL_TIMEOUT_MS = 10_000;

export interface IstioCaChannelOptions {
  /** gRPC target or CA address list (ca-target.ts), e.g. `istiod.istio-system.svc:15012`, `127.0.0.1:15012`, `10.0.0.1:15012,10.0.0.2:15012`. */
  readonly address: string;
  /** PEM roots the CA's serving certificate must chain to. */
  readonly rootsPem: string;
  /** Name to verify in the CA's serving certificate when it differs from the address host. */
  readonly tlsServerName?: string;
  /** Per-call deadline. Default DEFAULT_CA_CALL_TIMEOUT_MS. */
  readonly callTimeoutMs?: number;
  /** A TLS handshake that takes longer is abandoned (and retried). Default 10 000. */
  readonly handshakeTimeoutMs?: number;
  /**
   * The error a failed call rejects with (gRPC status code and details; the grpc-js error as
   * cause; the server's retry pushback in ms when its trailers carried one: retry-pushback.ts).
   */
  readonly failure: (code: GrpcStatus, details: string, cause: unknown, retryAfterMs: number | undefined) => Error;
}

/** A CA answer as read off the wire (a missing chain is the caller's to refuse, not a crash). */
export type IstioCaAnswer = Partial<IstioCertificateResponse>;

/** The bearer token and `clusterid` of one call. */
export interface IstioCaCallAuth {
  readonly token: string;
  readonly clusterId: string;
}

let createCertificate: MethodDefinition<IstioCertificateRequest, IstioCertificateResponse> | undefined;

function createCertificateMethod(): MethodDefinition<IstioCertificateRequest, IstioCertificateResponse> {
  createCertificate ??= typedMethod(serviceDefinitionOf([CA_PROTO], CA_SERVICE), CREATE_CERTIFICATE_METHOD);
  return createCertificate;
}

export class IstioCaChannel {
  readonly #o: IstioCaChannelOptions;
  #client: Client | undefined;
  #credentials: BoundedChannelCredentials | undefined;
  /** Credentials of channels replaced by `trustRoots`, destroyed by `close()`. */
  readonly #retired: BoundedChannelCredentials[] = [];
  #rootsPem: string;

  constructor(options: IstioCaChannelOptions) {
    this.#o = options;
    this.#rootsPem = options.rootsPem;
  }

  /**
   * Verifies the CA's serving certificate against `rootsPem` from the next call on (a root
   * rotation: the CA's serving certificate moves to the new root). Calls running finish on the
   * channel they started on.
   */
  trustRoots(rootsPem: string): void {
    if (rootsPem === this.#rootsPem) return;
    this.#rootsPem = rootsPem;
    this.#client?.close();
    this.#client = undefined;
    if (this.#credentials) this.#retired.push(this.#credentials);
    this.#credentials = undefined;
  }

  /** One CreateCertificate call; rejects with `failure(...)`, or the signal's reason once aborted. */
  createCertificate(request: IstioCertificateRequest, auth: IstioCaCallAuth, signal: AbortSignal): Promise<IstioCaAnswer> {
    const metadata = new Metadata();
    metadata.set(AUTHORIZATION_METADATA, bearerAuthorization(auth.token));
    metadata.set(CLUSTER_ID_METADATA, auth.clusterId);
    const client = this.#getClient();
    const { path, requestSerialize, responseDeserialize } = createCertificateMethod();
    return new Promise<IstioCaAnswer>((resolve, reject) => {
      if (signal.aborted) {
        reject(signal.reason);
        return;
      }
      const deadline = new Date(Date.now() + (this.#o.callTimeoutMs ?? DEFAULT_CA_CALL_TIMEOUT_MS));
      const onAbort = () => call.cancel();
      const call = client.makeUnaryRequest(path, requestSerialize, responseDeserialize, request, metadata, { deadline }, (err, response) => {
        signal.removeEventListener('abort', onAbort);
        if (err) this.#dropChannelAfter(client, err.code);
        if (signal.aborted) reject(signal.reason);
        else if (err) reject(this.#o.failure(err.code, err.details || err.message, err, retryPushbackOf(err.metadata)));
        else resolve(response ?? {});
      });
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Closes the channel and destroys its connections (a CA that never answers keeps none alive). */
  close(): void {
    this.#client?.close();
    this.#credentials?.destroyAll();
    for (const c of this.#retired.splice(0)) c.destroyAll();
    this.#client = undefined;
    this.#credentials = undefined;
  }

  #dropChannelAfter(client: Client, code: GrpcStatus): void {
    if (code !== GrpcStatus.UNAVAILABLE && code !== GrpcStatus.DEADLINE_EXCEEDED) return;
    if (this.#client !== client) return; // already replaced by a concurrent failure
    this.#client = undefined;
    client.close();
  }

  #getClient(): Client {
    if (this.#client) return this.#client;
    // One set of credentials for every channel this makes (a dropped channel's too), so close()
    // destroys whatever connection any of them still holds.
    const credentials = (this.#credentials ??= new BoundedChannelCredentials(ChannelCredentials.createSsl(Buffer.from(this.#rootsPem)), {
      ...(this.#o.handshakeTimeoutMs !== undefined ? { handshakeTimeoutMs: this.#o.handshakeTimeoutMs } : {}),
    }));
    // A pool of its own: from grpc-js's global pool a new channel to the same address would get
    // the old, backing-off subchannel back (the broker's two CA clients share address,
    // credentials and options, so closing one channel does not release it).
    const parsed = parseCaTarget(this.#o.address);
    const target = 'problem' in parsed ? undefined : parsed;
    const options: Record<string, string | number> = {
      'grpc.use_local_subchannel_pool': 1,
      'grpc.service_config': caServiceConfig(target),
      'grpc.dns_min_time_between_resolutions_ms': CA_DNS_MIN_RERESOLVE_MS,
    };
    if (this.#o.tlsServerName) {
      options['grpc.ssl_target_name_override'] = this.#o.tlsServerName;
      options['grpc.default_authority'] = this.#o.tlsServerName;
    }
    this.#client = new Client(target?.target ?? this.#o.address, credentials, options);
    return this.#client;
  }
}
