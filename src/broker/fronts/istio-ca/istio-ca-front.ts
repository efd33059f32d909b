/**
 * The node-local Istio CA front: `istio.v1.auth.IstioCertificateService/CreateCertificate` as
 * istiod answers it, for released ztunnel (`CA_ADDRESS=https://localhost:15012`), served by the
 * node broker. Per call, in this order:
 *
 * 1. the request is readable (else INVALID_ARGUMENT); `clusterid` is absent or the broker's;
 * 2. the bearer token is authenticated (TokenReview, audience `istio-ca`, cached as the CA does);
 * 3. the caller and `ImpersonatedIdentity` are authorized on the node (`FrontAuthorizer`): a
 *    denial answers here, without a CA call;
 * 4. the caller is within its bounds (`CallerLimits`, else RESOURCE_EXHAUSTED);
 * 5. the CSR is a structurally valid PKCS#10 request, `validity_duration` a whole number of
 *    seconds (else INVALID_ARGUMENT, without a CA call); its signature is the CA's to verify
 *    (a CSR that does not verify is the CA's INVALID_ARGUMENT, relayed);
 * 6. the CSR is forwarded to the CA with the broker's own token, `ImpersonatedIdentity` = the
 *    granted identity and the broker's `clusterid`; the answer's leaf must carry exactly that
 *    identity (the forwarder checks) and the CSR's key (checked here); the CA's `cert_chain` goes
 *    back as it came: leaf, each intermediate, root bundle last.
 *
 * Errors leave through `grpcStatusFor` as istiod's: every authentication or authorization failure
 * is the CA's one generic UNAUTHENTICATED (`publicAuthError`; the precise code in the log and the
 * observer's reason). An unreadable request is the CA transport's `MALFORMED_REQUEST`.
 * The CSR carries ztunnel's key, so nothing here is cached but the token reviews.
 */
import { createPublicKey } from 'node:crypto';
import { abortSignalOf, MALFORMED_REQUEST, publicAuthError, type CallSignal } from '../../../ca/index.js';
import { CertbrokerError } from '../../../core/errors.js';
import type { Logger } from '../../../core/log.js';
import { Secret } from '../../../core/secret.js';
import { structString } from '../../../grpc/struct-value.js';
import { callOutcome, type CallOutcome } from '../../../ops/call-outcome.js';
import { grpcStatusFor, type GrpcStatusAnswer } from '../../../ops/grpc-errors.js';
import { csrPublicKeyInfo } from '../../../pki/csr.js';
import { PkiError } from '../../../pki/errors.js';
import {
  callBearerToken,
  callMetadataString,
  CA_SERVICE,
  CLUSTER_ID_METADATA,
  CREATE_CERTIFICATE_METHOD,
  IMPERSONATED_IDENTITY_KEY,
  type CallMetadata,
  type IstioCertificateRequest,
  type IstioCertificateResponse,
} from '../../../protocol/istio-ca.js';
import { BrokerError } from '../../errors.js';
import type { CallerLimits } from './caller-limits.js';
import type { FrontAuthorizer, FrontCaller } from './front-authorizer.js';

/** Turns a bearer token into the caller (throws an `unauthenticated` CertbrokerError otherwise). */
export interface CallerAuthenticator {
  authenticate(token: Secret<string>): Promise<FrontCaller>;
}

/** What the front needs from the CA (the broker's CA client implements it). */
export interface CsrForwarder {
  /**
   * Asks the CA to sign `csrPem` for `identity` (as ImpersonatedIdentity, with the broker's own
   * token). Returns the CA's `cert_chain` once its leaf carries exactly one URI SAN equal to
   * `identity`, is not a CA and is signed by the next certificate, with the leaf's SPKI (DER).
   * A refusal throws a BrokerError `ERR_CA_CALL_FAILED` whose `grpcCode` names the CA's status.
   */
  forwardCsr(
    request: { readonly csrPem: string; readonly identity: string; readonly ttlSeconds: number },
    signal: AbortSignal,
  ): Promise<{ readonly certChain: readonly string[]; readonly leafSpki: Buffer }>;
}

/** The `outcome` label of the front's metrics (src/ops/call-outcome.ts, the CA's too). */
export type FrontOutcome = CallOutcome;

export interface IstioCaFrontObserver {
  /** One per call: its outcome, the precise reason (an ERR_* code, or `ok`) and how long it took. */
  answered?(outcome: FrontOutcome, reason: string, seconds: number): void;
}

export interface IstioCaFrontOptions {
  /** The broker's cluster id: `clusterid` must be absent or this. */
  readonly clusterId: string;
  readonly authenticator: CallerAuthenticator;
  readonly authorizer: FrontAuthorizer;
  readonly limits: CallerLimits;
  readonly forwarder: CsrForwarder;
  readonly logger: Logger;
  readonly observer?: IstioCaFrontObserver;
  /** Largest CSR accepted, in bytes (default 64 KiB, as the CA). */
  readonly maxCsrBytes?: number;
}

/** The call metadata the handler reads (grpc-js `Metadata` satisfies it): the CA's `CallMetadata`. */
export type FrontCallMetadata = CallMetadata;

/** The signal of a call nobody cancels. */
const NEVER = new AbortController().signal;

function invalid(code: 'ERR_REQUEST_MALFORMED' | 'ERR_FRONT_TTL_INVALID', message: string): BrokerError {
  return new BrokerError(code, message, { status: 'invalid-argument', publicMessage: message });
}

/** Two SPKIs of one key: byte-equal (the CA copied the CSR's), or equal once re-encoded by OpenSSL. */
function sameKey(a: Buffer, b: Buffer): boolean {
  if (a.equals(b)) return true;
  try {
    const der = (spki: Buffer) => createPublicKey({ key: spki, format: 'der', type: 'spki' }).export({ type: 'spki', format: 'der' });
    return der(a).equals(der(b));
  } catch {
    return false;
  }
}

/**
 * A CA refusal as the front answers it: the CA's INVALID_ARGUMENT (a TTL over its maximum) is
 * the caller's too, with the CA's public message; its UNAUTHENTICATED (it denied the broker,
 * e.g. its pod index has not seen the pod yet) is a denial; its RESOURCE_EXHAUSTED (it shed the
 * call) is the caller's too, with the CA's retry pushback (gRFC A6) when it sent one; anything
 * else stays UNAVAILABLE.
 */
function relayed(err: unknown): unknown {
  if (!(err instanceof BrokerError) || err.code !== 'ERR_CA_CALL_FAILED' || !('grpcCode' in err)) return err;
  const cause: unknown = err.cause;
  const detail = typeof cause === 'object' && cause !== null && 'details' in cause && typeof cause.details === 'string' ? cause.details : err.message;
  if (err.grpcCode === 'INVALID_ARGUMENT') return new BrokerError('ERR_FRONT_CA_DENIED', `CA: ${detail}`, { status: 'invalid-argument', publicMessage: detail, cause: err });
  if (err.grpcCode === 'UNAUTHENTICATED') return new BrokerError('ERR_FRONT_CA_DENIED', `the CA refused the broker's request: ${detail}`, { status: 'unauthenticated', cause: err });
  if (err.grpcCode === 'RESOURCE_EXHAUSTED') {
    return new BrokerError('ERR_FRONT_CA_BUSY', `the CA shed the request: ${detail}`, { status: 'resource-exhausted', publicMessage: 'the CA is busy; retry later', cause: err, retryAfterMs: err.retryAfterMs });
  }
  return err;
}

export class IstioCaFrontService {
  readonly #o: IstioCaFrontOptions;

  constructor(options: IstioCaFrontOptions) {
    this.#o = options;
  }

  /** The transport passes a signal that aborts when the caller goes away (the forwarded call is cancelled). */
  readonly cancellable = true;

  /**
   * One call, transport-free (the CA's http2 transport calls it; so can tests): answered, or
   * rejected with the error `rejection` maps. Each call is observed once, with its outcome.
   */
  async createCertificate(request: IstioCertificateRequest, metadata: FrontCallMetadata, callSignal: CallSignal = NEVER): Promise<IstioCertificateResponse> {
    const started = performance.now();
    // Every call is forwarded: its AbortSignal cancels the forward.
    const signal = abortSignalOf(callSignal);
    try {
      const res = await this.#issue(request, metadata, signal);
      this.#o.observer?.answered?.('issued', 'ok', (performance.now() - started) / 1000);
      return res;
    } catch (thrown) {
      // The transport aborts `signal` when the caller resets the stream or its deadline passes;
      // whatever the abandoned work then throws (the signal's own AbortError) is that, not a bug.
      const err = signal.aborted && !(thrown instanceof CertbrokerError)
        ? new BrokerError('ERR_FRONT_CALL_CANCELLED', 'the caller cancelled the call or its deadline passed', { status: 'cancelled', cause: thrown })
        : thrown;
      this.#o.observer?.answered?.(callOutcome(err), err instanceof CertbrokerError ? err.code : 'unexpected', (performance.now() - started) / 1000);
      throw err;
    }
  }

  async #issue(request: IstioCertificateRequest, metadata: FrontCallMetadata, signal: AbortSignal): Promise<IstioCertificateResponse> {
    const o = this.#o;
    if (request === MALFORMED_REQUEST) throw invalid('ERR_REQUEST_MALFORMED', 'request message cannot be parsed');
    const clusterId = callMetadataString(metadata, CLUSTER_ID_METADATA);
    if (clusterId !== undefined && clusterId !== o.clusterId) {
      throw new BrokerError('ERR_FRONT_UNKNOWN_CLUSTER', `clusterid ${JSON.stringify(clusterId.slice(0, 64))} is not this broker's (${o.clusterId})`, { status: 'unauthenticated' });
    }
    const token = this.#bearer(metadata);
    const caller = await o.authenticator.authenticate(token);
    let impersonated: string | undefined;
    try {
      impersonated = structString(request.metadata ?? undefined, IMPERSONATED_IDENTITY_KEY);
    } catch {
      throw invalid('ERR_REQUEST_MALFORMED', `${IMPERSONATED_IDENTITY_KEY} must be a string`);
    }
    const grant = o.authorizer.authorize(caller, impersonated);
    const release = o.limits.acquire(grant.callerPodUid);
    try {
      const csrPem = request.csr ?? '';
      if (csrPem === '' || csrPem.length > (o.maxCsrBytes ?? 64 * 1024)) throw new PkiError('ERR_PKI_CSR_MALFORMED', 'CSR is empty or too large');
      // Structure only: the CA verifies the signature (its INVALID_ARGUMENT is relayed) and
      // checks the key; the leaf must then hold this SPKI.
      const csrSpki = csrPublicKeyInfo(csrPem);
      const ttlSeconds = Number(request.validity_duration ?? 0);
      if (!Number.isSafeInteger(ttlSeconds) || ttlSeconds < 0) throw invalid('ERR_FRONT_TTL_INVALID', 'validity_duration must be a whole, non-negative number of seconds');
      let answer: { readonly certChain: readonly string[]; readonly leafSpki: Buffer };
      try {
        answer = await o.forwarder.forwardCsr({ csrPem, identity: grant.identity, ttlSeconds }, signal);
      } catch (err) {
        throw relayed(err);
      }
      if (!sameKey(answer.leafSpki, csrSpki)) {
        throw new BrokerError('ERR_CA_BAD_RESPONSE', `CA returned a leaf for ${grant.identity} that does not hold the CSR's key`, { status: 'unavailable', publicMessage: 'CA returned an unusable certificate' });
      }
      if (o.logger.level === 'debug') o.logger.debug('certificate issued through the Istio CA front', { identity: grant.identity, caller: grant.callerAccount });
      return { cert_chain: [...answer.certChain] };
    } finally {
      release();
    }
  }

  #bearer(metadata: FrontCallMetadata): Secret<string> {
    const token = callBearerToken(metadata);
    if (token === undefined) throw new BrokerError('ERR_FRONT_NO_TOKEN', 'no bearer token in the authorization metadata', { status: 'unauthenticated' });
    return new Secret(token);
  }

  /** Logs a failed call (already observed); returns the status to send (the generic UNAUTHENTICATED for authn/authz). */
  rejection(err: unknown, peer: string): GrpcStatusAnswer {
    const o = this.#o;
    const reason = err instanceof CertbrokerError ? err.code : 'unexpected';
    if (err instanceof CertbrokerError && err.status === 'unauthenticated') {
      o.logger.warn('CreateCertificate denied', { front: CA_SERVICE, reason, detail: err.message, peer });
      return grpcStatusFor(publicAuthError(), o.logger);
    }
    if (err instanceof CertbrokerError) o.logger.info('CreateCertificate failed', { front: CA_SERVICE, reason, detail: err.message, peer });
    return grpcStatusFor(err, o.logger, { rpc: CREATE_CERTIFICATE_METHOD, peer });
  }
}
