/**
 * The SPIFFE Broker API service (`spiffe.broker.API`) over the node's pods and certificates.
 *
 * Every call: the caller's certificate (from the mTLS handshake) must be a valid X509-SVID leaf
 * (exactly one URI SAN that is a SPIFFE ID, CA:FALSE, keyUsage with digitalSignature and without
 * keyCertSign/cRLSign: UNAUTHENTICATED otherwise) whose SPIFFE ID is on the allow-list
 * (PERMISSION_DENIED otherwise); the `broker.spiffe.io: true` header is required
 * (INVALID_ARGUMENT); the request must decode (INVALID_ARGUMENT) and its reference must be a
 * KubernetesObjectReference to a pod or a WorkloadPIDReference to a process in a pod, with the
 * type URL of either package (INVALID_ARGUMENT; workload-resolver.ts), of a kind this caller may
 * use (PERMISSION_DENIED), on this node (NOT_FOUND) that gets an identity (PERMISSION_DENIED). Streams send the full state at once, then again after every
 * rotation or bundle change, each stream delayed by a random share of `updateJitterMs` so a
 * bundle change does not hit every consumer in the same instant. A stream ends when its pod
 * leaves the node or is replaced (NOT_FOUND) or stops being entitled (PERMISSION_DENIED). JWT
 * RPCs are UNIMPLEMENTED.
 *
 * Errors go through `toGrpcError` (src/ops/grpc-errors.ts) only; every refusal carries a
 * google.rpc.Status with an ErrorInfo in `grpc-status-details-bin` (broker-api-errors.ts).
 */
import type {
  ServerUnaryCall,
  ServerWritableStream,
  sendUnaryData,
  UntypedServiceImplementation,
} from '@grpc/grpc-js';
import type { Clock } from '../../../core/clock.js';

/** What every server call offers (grpc-js does not export this type from its index). */
type ServerSurfaceCall = ServerUnaryCall<unknown, unknown>;
import type { Logger } from '../../../core/log.js';
import type { Rng } from '../../../core/rng.js';
import { isUnreadableRequest } from '../../../grpc/request-guard.js';
import { toGrpcError } from '../../../ops/grpc-errors.js';
import {
  BROKER_HEADER,
  BROKER_HEADER_VALUE,
  BROKER_METHOD,
  type FetchJWTSVIDRequest,
  type FetchJWTSVIDResponse,
  type SubscribeToJWTBundlesResponse,
  type SubscribeToX509BundlesResponse,
  type ReferenceKind,
  type SubscribeToX509SVIDResponse,
  type WorkloadRequest,
} from '../../../protocol/spiffe-broker.js';
import { SpiffeError } from '../../../spiffe/errors.js';
import { x509SvidProblems } from '../../../spiffe/x509-svid.js';
import { brokerApiErrorInfo } from './broker-api-errors.js';
import type { CertManager } from '../../cache/cert-manager.js';
import { firstCertificate, heldSends, pacedUpdates, sendableCert } from '../../cache/stream-feed.js';
import { BrokerError, jwtProfileDisabled, shuttingDown } from '../../errors.js';
import type { NodePods, PodGoneReason, TrackedPod } from '../../cache/node-pods.js';
import type { TrustBundle } from '../../cache/trust-bundle.js';
import { notEntitled, WorkloadResolver, type PidResolver } from './workload-resolver.js';
import { svidMaterial, type WorkloadCert } from '../../cache/workload-cert.js';
import { x509BundlesResponse as bundlesMessage, x509SvidResponse as svidMessage } from '../../../protocol/spiffe-x509.js';

export interface BrokerApiObserver {
  streamOpened?(rpc: 'x509svid' | 'x509bundles'): void;
  streamClosed?(rpc: 'x509svid' | 'x509bundles'): void;
  /** Time from the request to the first message (ms). */
  firstMessage?(rpc: 'x509svid' | 'x509bundles', ms: number): void;
  rejected?(rpc: string, code: string): void;
}

export interface BrokerApiOptions {
  readonly pods: NodePods;
  readonly certs: CertManager;
  readonly bundle: TrustBundle;
  /** SPIFFE IDs allowed to call (exact match). */
  readonly allowedCallers: readonly string[];
  /** SPIFFE IDs allowed to use each reference kind (default: `allowedCallers` for both). */
  readonly referenceCallers?: Partial<Readonly<Record<ReferenceKind, readonly string[]>>>;
  /** Resolves `WorkloadPIDReference`s (the attestation room); without it they are NOT_FOUND. */
  readonly pids?: PidResolver;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
  /** Update pacing window (ms): each stream's update waits a random share of it (BrokerConfig.updateJitterMs). */
  readonly updateJitterMs: number;
  readonly observer?: BrokerApiObserver;
}

type StreamResponse = SubscribeToX509SVIDResponse | SubscribeToX509BundlesResponse;

/** The Broker API message for `cert` (chain leaf first, key PKCS#8, roots of the trust domain). */
export function x509SvidResponse(cert: WorkloadCert, bundle: TrustBundle): SubscribeToX509SVIDResponse {
  return svidMessage(svidMaterial(cert, bundle));
}

function x509BundlesResponse(bundle: TrustBundle): SubscribeToX509BundlesResponse {
  return bundlesMessage(bundle.trustDomain, bundle.concatenatedDer);
}

/**
 * The SPIFFE ID of the peer's leaf certificate (DER) when it is a valid X509-SVID leaf; otherwise
 * the rules it breaks (their `ERR_SVID_*` codes), for the refusal's log line.
 */
export function peerSvid(raw: Buffer | undefined): PeerSvid {
  if (!raw) return { problems: ['no client certificate'] };
  // The verdict is a pure function of the DER (validity dates are the TLS handshake's job), and
  // parsing a certificate costs more than the rest of a call: remember the few peers a node has.
  const key = raw.toString('latin1');
  const known = peerVerdicts.get(key);
  if (known) return known;
  const verdict = checkPeerSvid(raw);
  if (peerVerdicts.size >= PEER_VERDICTS_MAX) peerVerdicts.delete(peerVerdicts.keys().next().value!);
  peerVerdicts.set(key, verdict);
  return verdict;
}

type PeerSvid = { id: string } | { problems: string[] };
/** Peer certificates whose verdict is remembered (a node has a handful of Broker API callers). */
const PEER_VERDICTS_MAX = 64;
const peerVerdicts = new Map<string, PeerSvid>();

function checkPeerSvid(raw: Buffer): PeerSvid {
  try {
    const { spiffeId, problems } = x509SvidProblems(raw, { role: 'leaf' });
    if (problems.length > 0 || !spiffeId) return { problems: problems.map((p) => p.code) };
    return { id: spiffeId.id };
  } catch (err) {
    return { problems: [err instanceof SpiffeError ? err.code : 'ERR_SVID_CERT_UNPARSEABLE'] };
  }
}

export class BrokerApiService {
  readonly #o: BrokerApiOptions;
  readonly #allowed: ReadonlySet<string>;
  readonly #resolver: WorkloadResolver;
  readonly #open = new Set<() => void>();

  constructor(options: BrokerApiOptions) {
    this.#o = options;
    this.#allowed = new Set(options.allowedCallers);
    this.#resolver = new WorkloadResolver({
      pods: options.pods,
      ...(options.pids ? { pids: options.pids } : {}),
      callers: { kubernetes: options.referenceCallers?.kubernetes ?? options.allowedCallers, pid: options.referenceCallers?.pid ?? options.allowedCallers },
    });
  }

  /** Streams currently open. */
  get openStreams(): number {
    return this.#open.size;
  }

  /** Ends every open stream (shutdown). */
  closeAll(): void {
    for (const close of [...this.#open]) close();
  }

  implementation(): UntypedServiceImplementation {
    return {
      [BROKER_METHOD.subscribeToX509Svid]: (call: ServerWritableStream<WorkloadRequest, SubscribeToX509SVIDResponse>) => this.#stream('x509svid', call),
      [BROKER_METHOD.subscribeToX509Bundles]: (call: ServerWritableStream<WorkloadRequest, SubscribeToX509BundlesResponse>) =>
        this.#stream('x509bundles', call),
      [BROKER_METHOD.fetchJwtSvid]: (call: ServerUnaryCall<FetchJWTSVIDRequest, FetchJWTSVIDResponse>, callback: sendUnaryData<FetchJWTSVIDResponse>) => {
        try {
          this.#admit(call);
          throw jwtProfileDisabled();
        } catch (err) {
          callback(this.#reject(BROKER_METHOD.fetchJwtSvid, err, call));
        }
      },
      [BROKER_METHOD.subscribeToJwtBundles]: (call: ServerWritableStream<WorkloadRequest, SubscribeToJWTBundlesResponse>) => {
        try {
          this.#admit(call);
          throw jwtProfileDisabled();
        } catch (err) {
          call.emit('error', this.#reject(BROKER_METHOD.subscribeToJwtBundles, err, call));
        }
      },
    };
  }

  /**
   * Caller holds a valid X509-SVID on the allow-list, broker header present, request readable;
   * returns the caller's SPIFFE ID.
   */
  #admit(call: ServerSurfaceCall & { readonly request?: unknown }): string {
    const peer = peerSvid(call.getAuthContext()?.sslPeerCertificate?.raw);
    if ('problems' in peer) {
      throw new BrokerError('ERR_CALLER_UNAUTHENTICATED', `caller certificate is not a valid X509-SVID: ${peer.problems.join(', ')}`, {
        status: 'unauthenticated',
        publicMessage: 'caller certificate is not a valid X509-SVID',
      });
    }
    const caller = peer.id;
    if (!this.#allowed.has(caller)) {
      throw new BrokerError('ERR_CALLER_NOT_AUTHORIZED', `caller ${caller} is not on the Broker API allow-list`, {
        status: 'permission-denied',
        publicMessage: 'caller is not authorized for the Broker API',
      });
    }
    const header = call.metadata.get(BROKER_HEADER);
    if (header.length !== 1 || String(header[0]) !== BROKER_HEADER_VALUE) {
      throw new BrokerError('ERR_MISSING_BROKER_HEADER', `security header ${BROKER_HEADER}: ${BROKER_HEADER_VALUE} is missing`, {
        status: 'invalid-argument',
        publicMessage: `missing security header ${BROKER_HEADER}: ${BROKER_HEADER_VALUE}`,
      });
    }
    if (isUnreadableRequest(call.request)) {
      throw new BrokerError('ERR_REQUEST_MALFORMED', `request from ${caller} cannot be read: ${call.request.reason}`, {
        status: 'invalid-argument',
        publicMessage: `request cannot be read: ${call.request.reason}`,
      });
    }
    return caller;
  }

  #stream(rpc: 'x509svid' | 'x509bundles', call: ServerWritableStream<WorkloadRequest, StreamResponse>): void {
    const { clock, logger, certs, bundle, pods, rng, observer } = this.#o;
    const started = clock.now();
    let pod: TrackedPod;
    let caller: string;
    try {
      caller = this.#admit(call);
      ({ pod } = this.#resolver.resolve(call.request, caller));
    } catch (err) {
      call.emit('error', this.#reject(rpc, err, call));
      return;
    }
    const log = logger.child({ rpc, caller, pod: `${pod.namespace}/${pod.name}`, uid: pod.uid });
    const ac = new AbortController();
    const cleanups: Array<() => void> = [];
    let finished = false;
    /** Releases the stream's resources once; false when it was already released. */
    const teardown = (): boolean => {
      if (finished) return false;
      finished = true;
      ac.abort();
      for (const c of cleanups) c();
      this.#open.delete(closeFromServer);
      observer?.streamClosed?.(rpc);
      return true;
    };
    const finish = (err?: unknown) => {
      if (!teardown()) return;
      if (err === undefined) call.end();
      else call.emit('error', this.#reject(rpc, err, call));
    };
    const closeFromServer = () => finish(shuttingDown());
    this.#open.add(closeFromServer);
    observer?.streamOpened?.(rpc);
    call.on('cancelled', teardown);

    cleanups.push(
      pods.onGone(pod.uid, (reason: PodGoneReason) => {
        log.info('workload left; ending stream', { reason });
        finish(podGone(pod, reason));
      }),
    );

    const current = (): StreamResponse | undefined => {
      if (rpc === 'x509bundles') return x509BundlesResponse(bundle);
      // Never a leaf whose chain the bundle sent with it does not verify (withheld until the next
      // change), nor one under a root the node's other streams may not have yet (held).
      const sendable = sendableCert(certs, bundle, pod.identity, clock.now());
      if (sendable && 'holdMs' in sendable) {
        firstWithheld ||= !firstSent;
        hold(sendable.holdMs);
      }
      return sendable && 'cert' in sendable ? x509SvidResponse(sendable.cert, bundle) : undefined;
    };
    let firstSent = false;
    let firstWithheld = false;
    const paced = pacedUpdates({ clock, rng, windowMs: this.#o.updateJitterMs, signal: ac.signal }, () => {
      const msg = current();
      if (finished || msg === undefined) return;
      if (firstSent) call.write(msg);
      else sendFirst(msg);
    });
    const scheduleUpdate = () => {
      if (!finished && (firstSent || firstWithheld)) paced();
    };
    const hold = heldSends(clock, ac.signal, scheduleUpdate);
    cleanups.push(bundle.onChange(scheduleUpdate));
    if (rpc === 'x509svid') {
      cleanups.push(
        certs.subscribe(pod.identity, (ev) => {
          if (ev.type === 'updated') scheduleUpdate();
          else
            finish(
              new BrokerError('ERR_WORKLOAD_GONE', `identity ${pod.identity} is no longer tracked`, {
                status: 'not-found',
                publicMessage: 'workload no longer on this node',
              }),
            );
        }),
      );
    }

    const sendFirst = (msg: StreamResponse) => {
      if (finished || firstSent) return;
      call.write(msg);
      firstSent = true;
      observer?.firstMessage?.(rpc, clock.now() - started);
      log.debug('stream opened');
    };
    if (rpc === 'x509bundles') {
      sendFirst(x509BundlesResponse(bundle));
      return;
    }
    const first = () => {
      const msg = current();
      if (msg === undefined) firstWithheld = true;
      else sendFirst(msg);
    };
    void firstCertificate(certs, pod.identity, { signal: ac.signal, log, send: first, fail: finish });
  }

  #reject(rpc: string, err: unknown, call: ServerSurfaceCall): ReturnType<typeof toGrpcError> {
    const code = err instanceof BrokerError ? err.code : 'unexpected';
    this.#o.observer?.rejected?.(rpc, code);
    if (err instanceof BrokerError && (err.status === 'permission-denied' || err.status === 'unauthenticated' || err.code === 'ERR_REQUEST_MALFORMED')) {
      this.#o.logger.warn('Broker API call refused', { rpc, code, detail: err.message, peer: call.getPeer() });
    }
    return toGrpcError(err, this.#o.logger, { rpc }, { errorInfo: brokerApiErrorInfo });
  }
}

/**
 * Why a stream ends when its pod leaves: the same answer a new subscription would get now — a
 * pod still there but terminating or finished is not entitled any more; a deleted or replaced
 * one is not found.
 */
function podGone(pod: TrackedPod, reason: PodGoneReason): BrokerError {
  if (reason === 'terminating' || reason === 'finished') return notEntitled(`pod ${pod.namespace}/${pod.name}`, reason);
  return new BrokerError('ERR_WORKLOAD_GONE', `pod ${pod.namespace}/${pod.name} ${reason}`, {
    status: 'not-found',
    publicMessage: `workload no longer on this node (${reason})`,
  });
}
