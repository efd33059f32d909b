/**
 * The SPIFFE Workload API (`SpiffeWorkloadAPI`) over the node's pods and certificates, for
 * callers attested from the kernel (attested-connections.ts), as the SPIFFE Workload Endpoint and
 * Workload API standards say:
 *
 * - every call must carry `workload.spiffe.io: true` (INVALID_ARGUMENT otherwise, before anything else);
 * - `FetchX509SVID` streams the caller's pod's identity — the service account's SVID from the
 *   shared cache, one certificate and key for all pods of that service account — with the trust
 *   domain's bundle; `FetchX509Bundles` streams the bundle; both send the full state at once and
 *   again after every change, and answer PERMISSION_DENIED to a caller with no identity;
 * - the JWT-SVID profile is administratively disabled (the standard allows it): its three RPCs
 *   answer UNIMPLEMENTED, which clients must not retry;
 * - the WIT-SVID profile's RPCs are not in our proto, so grpc-js answers UNIMPLEMENTED, as the
 *   standard requires of a server without that profile.
 *
 * Errors go through `toGrpcError` (src/ops/grpc-errors.ts) only.
 */
import type { ServerUnaryCall, ServerWritableStream, sendUnaryData, UntypedServiceImplementation } from '@grpc/grpc-js';
import type { Clock } from '../../../core/clock.js';
import type { Logger } from '../../../core/log.js';
import type { Rng } from '../../../core/rng.js';
import { isUnreadableRequest } from '../../../grpc/request-guard.js';
import { toGrpcError } from '../../../ops/grpc-errors.js';
import { CERTBROKER_ERROR_DOMAIN, type ErrorInfo } from '../../../protocol/grpc-status.js';
import { WORKLOAD_API_METHOD, WORKLOAD_HEADER, WORKLOAD_HEADER_VALUE } from '../../../protocol/workload-api.js';
import type { CertbrokerError } from '../../../core/errors.js';
import type { CertManager, NodePods, TrustBundle } from '../../cache/index.js';
import { BrokerError, jwtProfileDisabled } from '../../errors.js';
import type { CallerLookup } from './attested-connections.js';
import { podCallerKey, type ConnectionLimits } from './connection-limits.js';
import { resolveCaller } from './workload-caller.js';
import { WorkloadStream, type WorkloadResponse, type WorkloadRpc } from './workload-stream.js';

type SurfaceCall = ServerUnaryCall<unknown, unknown>;

export interface WorkloadApiObserver {
  streamOpened?(rpc: WorkloadRpc): void;
  streamClosed?(rpc: WorkloadRpc): void;
  /** Time from the request to its first message (ms). */
  firstMessage?(rpc: WorkloadRpc, ms: number): void;
  rejected?(rpc: string, code: string): void;
}

export interface WorkloadApiOptions {
  readonly pods: NodePods;
  readonly certs: CertManager;
  readonly bundle: TrustBundle;
  readonly callers: CallerLookup;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
  /** Update pacing window (ms), as the Broker API's (BrokerConfig.updateJitterMs). */
  readonly updateJitterMs: number;
  /** Stream bounds (per caller and in total); unbounded when absent. */
  readonly limits?: ConnectionLimits;
  readonly observer?: WorkloadApiObserver;
}

/** Refusals carry an ErrorInfo in certbroker's domain, reason named after the code (the Workload API defines none). */
export function workloadApiErrorInfo(err: CertbrokerError | undefined): ErrorInfo {
  const code = err?.code ?? 'INTERNAL';
  return { reason: code.replace(/^ERR_/, ''), domain: CERTBROKER_ERROR_DOMAIN, metadata: { code } };
}

export class WorkloadApiService {
  readonly #o: WorkloadApiOptions;
  readonly #open = new Set<WorkloadStream>();

  constructor(options: WorkloadApiOptions) {
    this.#o = options;
  }

  get openStreams(): number {
    return this.#open.size;
  }

  /** Ends every open stream with UNAVAILABLE (shutdown). */
  closeAll(): void {
    for (const s of [...this.#open]) s.close();
  }

  implementation(): UntypedServiceImplementation {
    const unaryJwt = (method: string) => (call: SurfaceCall, callback: sendUnaryData<unknown>) => {
      try {
        this.#admit(call);
        throw jwtProfileDisabled();
      } catch (err) {
        callback(this.#reject(method, err, call));
      }
    };
    return {
      [WORKLOAD_API_METHOD.fetchX509Svid]: (call: ServerWritableStream<unknown, WorkloadResponse>) => this.#stream('x509svid', call),
      [WORKLOAD_API_METHOD.fetchX509Bundles]: (call: ServerWritableStream<unknown, WorkloadResponse>) => this.#stream('x509bundles', call),
      [WORKLOAD_API_METHOD.fetchJwtSvid]: unaryJwt(WORKLOAD_API_METHOD.fetchJwtSvid),
      [WORKLOAD_API_METHOD.validateJwtSvid]: unaryJwt(WORKLOAD_API_METHOD.validateJwtSvid),
      [WORKLOAD_API_METHOD.fetchJwtBundles]: (call: ServerWritableStream<unknown, unknown>) => {
        try {
          this.#admit(call);
          throw jwtProfileDisabled();
        } catch (err) {
          call.emit('error', this.#reject(WORKLOAD_API_METHOD.fetchJwtBundles, err, call));
        }
      },
    };
  }

  /** The security header is present and the request readable. */
  #admit(call: SurfaceCall & { readonly request?: unknown }): void {
    const header = call.metadata.get(WORKLOAD_HEADER);
    if (header.length !== 1 || String(header[0]) !== WORKLOAD_HEADER_VALUE) {
      throw new BrokerError('ERR_MISSING_WORKLOAD_HEADER', `security header ${WORKLOAD_HEADER}: ${WORKLOAD_HEADER_VALUE} is missing`, {
        status: 'invalid-argument',
        publicMessage: `missing security header ${WORKLOAD_HEADER}: ${WORKLOAD_HEADER_VALUE}`,
      });
    }
    if (isUnreadableRequest(call.request)) {
      throw new BrokerError('ERR_REQUEST_MALFORMED', `request cannot be read: ${call.request.reason}`, {
        status: 'invalid-argument',
        publicMessage: `request cannot be read: ${call.request.reason}`,
      });
    }
  }

  #stream(rpc: WorkloadRpc, call: ServerWritableStream<unknown, WorkloadResponse>): void {
    const { clock, observer, callers, pods } = this.#o;
    const started = clock.now();
    const method = rpc === 'x509svid' ? WORKLOAD_API_METHOD.fetchX509Svid : WORKLOAD_API_METHOD.fetchX509Bundles;
    const reject = (err: unknown) => call.emit('error', this.#reject(method, err, call));
    try {
      this.#admit(call);
    } catch (err) {
      reject(err);
      return;
    }
    const peer = call.getPeer();
    const begin = (attestation: Awaited<ReturnType<CallerLookup['attestationOf']>>) => {
      if (call.cancelled) return;
      let stream: WorkloadStream;
      let release: (() => void) | undefined;
      try {
        const limited = callers.limitOf?.(peer);
        if (limited) throw limited;
        const caller = resolveCaller(attestation, pods);
        release = this.#o.limits?.stream(podCallerKey(caller.pod.uid));
        stream = new WorkloadStream(rpc, call, caller, {
          ...this.#o,
          reject,
          sent: (first) => {
            if (first) observer?.firstMessage?.(rpc, clock.now() - started);
          },
          closed: () => {
            release?.();
            this.#open.delete(stream);
            observer?.streamClosed?.(rpc);
          },
        });
      } catch (err) {
        release?.();
        reject(err);
        return;
      }
      this.#open.add(stream);
      observer?.streamOpened?.(rpc);
      stream.start();
    };
    const pending = callers.attestationOf(peer);
    if (pending) void pending.then(begin);
    else begin(undefined);
  }

  #reject(rpc: string, err: unknown, call: SurfaceCall): ReturnType<typeof toGrpcError> {
    const code = err instanceof BrokerError ? err.code : 'unexpected';
    this.#o.observer?.rejected?.(rpc, code);
    if (err instanceof BrokerError && (err.status === 'permission-denied' || err.code === 'ERR_REQUEST_MALFORMED' || err.code === 'ERR_WORKLOAD_API_LIMIT')) {
      this.#o.logger.warn('Workload API call refused', { rpc, code, detail: err.message, peer: call.getPeer() });
    }
    return toGrpcError(err, this.#o.logger, { rpc }, { errorInfo: workloadApiErrorInfo });
  }
}
