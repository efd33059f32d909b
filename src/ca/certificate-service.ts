/**
 * `istio.v1.auth.IstioCertificateService/CreateCertificate`: authenticate the caller (per
 * `clusterid`), decide the identity (own, or impersonated through the node authorizer), apply
 * the TTL rules, sign. Every error leaves through `grpcStatusFor`; authentication and
 * authorization failures all become one generic UNAUTHENTICATED while the precise code goes to
 * the log and the `reason` metric label.
 */
import type { sendUnaryData, ServerUnaryCall, UntypedServiceImplementation } from '@grpc/grpc-js';
import type { Clock } from '../core/clock.js';
import { CertbrokerError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { Secret } from '../core/secret.js';
import { structString } from '../grpc/struct-value.js';
import { callOutcome } from '../ops/call-outcome.js';
import { grpcStatusFor, toServiceError, type GrpcStatusAnswer } from '../ops/grpc-errors.js';
import {
  callBearerToken,
  callMetadataString,
  CLUSTER_ID_METADATA,
  CREATE_CERTIFICATE_METHOD,
  IMPERSONATED_IDENTITY_KEY,
  SERVING_NAMES_KEY,
  type CallMetadata,
  type IstioCertificateRequest,
  type IstioCertificateResponse,
} from '../protocol/istio-ca.js';
import { kubernetesIdentity } from '../spiffe/index.js';
import type { AuthenticatorChain } from './authn/authenticator.js';
import type { Caller } from './caller.js';
import { CaError, authnError, callCancelled, publicAuthError } from './errors.js';
import type { CaMetrics } from './metrics.js';
import type { NodeAuthorizer } from './node-authorizer.js';
import { DEFAULT_GRANTABLE_SERVING_NAMES, parseServingNames, ServingNamesPolicy } from './serving-names.js';
import type { Signer, SignRequest } from './signer.js';
import { abortSignalOf, type CallSignal } from './call-signal.js';
import { resolveTtlSeconds, type TtlPolicy } from './ttl.js';

/**
 * What a transport hands the handler for a request message that is not a parsable
 * IstioCertificateRequest (compared by identity): the call is refused with INVALID_ARGUMENT
 * (ERR_CA_REQUEST_MALFORMED) before any authentication. The gRPC libraries would answer
 * INTERNAL ("error parsing request proto", statuscodes.md), which tells the caller the server
 * failed; the bytes are the caller's, so both CA transports answer INVALID_ARGUMENT instead.
 */
export const MALFORMED_REQUEST: IstioCertificateRequest = Object.freeze({});

/** What the service knows about one cluster it accepts callers from. */
export interface ClusterAuth {
  readonly id: string;
  readonly authn: AuthenticatorChain;
  readonly authorizer: NodeAuthorizer;
}

export interface CertificateServiceOptions {
  readonly trustDomain: string;
  readonly clusters: ReadonlyMap<string, ClusterAuth>;
  readonly defaultClusterId: string;
  readonly signer: () => Signer;
  readonly ttl: TtlPolicy;
  readonly clock: Clock;
  readonly metrics: CaMetrics;
  readonly logger: Logger;
  /** Largest CSR accepted, in bytes. */
  readonly maxCsrBytes: number;
  /** Names a node agent may have on its own SVID (SERVING_NAMES_KEY); default DEFAULT_GRANTABLE_SERVING_NAMES. */
  readonly grantableServingNames?: readonly string[];
}

/** A string entry of the request's metadata Struct; INVALID_ARGUMENT when it is there but not a string. */
function metadataString(request: IstioCertificateRequest, key: string): string | undefined {
  try {
    return structString(request.metadata ?? undefined, key);
  } catch {
    throw new CaError('ERR_CA_METADATA_INVALID', `${key} must be a string`, { status: 'invalid-argument', publicMessage: `${key} must be a string` });
  }
}

export class CertificateService {
  readonly #o: CertificateServiceOptions;
  readonly #servingNames: ServingNamesPolicy;

  constructor(options: CertificateServiceOptions) {
    this.#o = options;
    this.#servingNames = new ServingNamesPolicy(options.grantableServingNames ?? DEFAULT_GRANTABLE_SERVING_NAMES);
  }

  /** The grpc-js implementation object for the service definition. */
  implementation(): UntypedServiceImplementation {
    return {
      [CREATE_CERTIFICATE_METHOD]: (
        call: ServerUnaryCall<IstioCertificateRequest, IstioCertificateResponse>,
        callback: sendUnaryData<IstioCertificateResponse>,
      ) => {
        // grpc-js emits 'cancelled' at the caller's deadline and when it cancels or goes away.
        const cancel = new AbortController();
        call.once('cancelled', () => cancel.abort(callCancelled(CREATE_CERTIFICATE_METHOD)));
        this.createCertificate(call.request, call.metadata, cancel.signal).then(
          (res) => callback(null, res),
          (err: unknown) => callback(toServiceError(this.rejection(err, call.getPeer()))),
        );
      },
    };
  }

  /**
   * Always: the transports pass a signal for a caller that gave up (its deadline passed, it reset
   * the stream, it went away). A call that ended while it waited for its token review (reviews
   * queue behind CA_MAX_CONCURRENT_TOKEN_REVIEWS under a fleet's cold start) is not signed, and a
   * signer that calls elsewhere (`Signer.cancellable`) gives up that call too.
   */
  readonly cancellable = true;

  /** The handler proper, transport-free (also used by the in-process benchmark). `signal`: the caller stopped waiting. */
  async createCertificate(request: IstioCertificateRequest, metadata: CallMetadata, signal?: CallSignal): Promise<IstioCertificateResponse> {
    const o = this.#o;
    if (request === MALFORMED_REQUEST) {
      throw new CaError('ERR_CA_REQUEST_MALFORMED', 'request message is not a parsable IstioCertificateRequest', {
        status: 'invalid-argument',
        publicMessage: 'request message cannot be parsed',
      });
    }
    const clusterId = callMetadataString(metadata, CLUSTER_ID_METADATA) ?? o.defaultClusterId;
    const cluster = o.clusters.get(clusterId);
    if (!cluster) throw authnError('ERR_CA_UNKNOWN_CLUSTER', `unknown clusterid ${JSON.stringify(clusterId.slice(0, 64))}`);
    const token = callBearerToken(metadata);
    if (token === undefined) throw authnError('ERR_CA_NO_TOKEN', 'no bearer token in the authorization metadata');
    const caller = await cluster.authn.authenticate(new Secret(token));

    const impersonated = metadataString(request, IMPERSONATED_IDENTITY_KEY);
    const spiffeId = this.#identityFor(cluster, caller, impersonated);
    const servingNamesValue = metadataString(request, SERVING_NAMES_KEY);
    const servingNames =
      servingNamesValue === undefined
        ? []
        : this.#servingNames.authorize(caller, parseServingNames(servingNamesValue, SERVING_NAMES_KEY), { impersonated, authorizer: cluster.authorizer });

    const ttlSeconds = resolveTtlSeconds(Number(request.validity_duration ?? 0), o.ttl);
    const csrPem = request.csr ?? '';
    if (csrPem === '' || csrPem.length > o.maxCsrBytes) {
      throw new CaError('ERR_CA_CSR_INVALID', `CSR is empty or larger than ${o.maxCsrBytes} bytes`, {
        status: 'invalid-argument',
        publicMessage: 'CSR is empty or too large',
      });
    }
    const signer = o.signer();
    if (!signer.ready) {
      throw new CaError('ERR_CA_SIGNER_NOT_READY', `signer not ready: ${signer.notReadyReason ?? 'unknown'}`, {
        status: 'unavailable',
        publicMessage: 'CA is not ready',
      });
    }
    // Nobody waits for this answer any more: no signature (under overload, work for callers still there).
    if (signal?.aborted) throw callCancelled(CREATE_CERTIFICATE_METHOD);
    // Built without spreads (each spread of a conditional literal is one more object per call).
    const signRequest: { -readonly [K in keyof SignRequest]: SignRequest[K] } = { csrPem, spiffeId, ttlSeconds };
    if (servingNames.length > 0) signRequest.servingNames = servingNames;
    if (signal && signer.cancellable) signRequest.signal = abortSignalOf(signal);
    const start = performance.now();
    const signed = await signer.sign(signRequest);
    o.metrics.signingSeconds.observe((performance.now() - start) / 1000);
    o.metrics.issuedOk.inc();
    if (o.logger.level === 'debug') {
      o.logger.debug('certificate issued', {
        identity: spiffeId,
        caller: `${caller.namespace}/${caller.serviceAccount}`,
        cluster: clusterId,
        serial: signed.serialHex,
        notAfter: new Date(signed.notAfterMs).toISOString(),
        ...(servingNames.length > 0 ? { servingNames } : {}),
      });
    }
    return { cert_chain: signed.certChain };
  }

  #identityFor(cluster: ClusterAuth, caller: Caller, impersonated: string | undefined): string {
    if (impersonated === undefined || impersonated === '') {
      return kubernetesIdentity(this.#o.trustDomain, caller.namespace, caller.serviceAccount);
    }
    return cluster.authorizer.authorize(caller, impersonated).id;
  }

  /**
   * Counts and logs a failed call and returns the status to send (generic UNAUTHENTICATED for
   * every authn/authz failure), as plain data each transport writes its own way.
   */
  rejection(err: unknown, peer: string): GrpcStatusAnswer {
    const o = this.#o;
    const outcome = callOutcome(err);
    const reason = err instanceof CertbrokerError ? err.code : 'unexpected';
    o.metrics.requests.inc({ outcome, reason });
    // The caller's own authn/authz failures all look alike; an upstream CA's refusal of this CA
    // (istio-upstream signer) is not about the caller's credentials and keeps its code.
    if (err instanceof CertbrokerError && err.status === 'unauthenticated' && err.code !== 'ERR_CA_UPSTREAM_REFUSED') {
      o.logger.warn('CreateCertificate denied', { reason, detail: err.message, peer });
      return grpcStatusFor(publicAuthError(), o.logger);
    }
    if (err instanceof CertbrokerError && err.code === 'ERR_CA_AUTHN_BACKEND') {
      // An outage, not the caller's fault: UNAVAILABLE (retryable); the backend's own error is logged.
      o.logger.warn('CreateCertificate failed', { reason, detail: err.message, ...(err.cause !== undefined ? { cause: err.cause } : {}), peer });
    } else if (err instanceof CertbrokerError) {
      o.logger.info('CreateCertificate failed', { reason, detail: err.message, peer });
    }
    return grpcStatusFor(err, o.logger, { rpc: CREATE_CERTIFICATE_METHOD, peer });
  }
}
