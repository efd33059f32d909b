/**
 * The CA client for Istio's `IstioCertificateService/CreateCertificate` (ztunnel's
 * `identity/caclient.rs`): a new P-256 key and CSR per fetch, the broker's bearer token and
 * `clusterid` as call metadata, `ImpersonatedIdentity` in the request metadata when asking for
 * another workload's identity, TLS verified against the mesh root. The returned leaf must carry
 * exactly the requested SPIFFE ID and the key we generated; the roots travel with the result.
 *
 * Reconnection: the certificate manager alone decides when to try the CA again; every try is a
 * real connection attempt (the channel, `src/grpc/istio-ca-channel.ts`, is replaced after
 * UNAVAILABLE or DEADLINE_EXCEEDED), so a CA that answers again is used by the next try, never
 * refused with a stale error.
 */
import { X509Certificate } from 'node:crypto';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { IstioCaChannel, type IstioCaAnswer } from '../../grpc/istio-ca-channel.js';
import { stringStruct } from '../../grpc/struct-value.js';
import { createCsr } from '../../pki/csr.js';
import { exportPkcs8Der, generateKeyPair, keyMatches } from '../../pki/keys.js';
import { chainAnchor } from '../../pki/chain.js';
import { parsePem } from '../../pki/pem.js';
import type { ErrorStatus } from '../../core/errors.js';
import type { Secret } from '../../core/secret.js';
import { IMPERSONATED_IDENTITY_KEY, SERVING_NAMES_KEY, type IstioCertificateRequest } from '../../protocol/istio-ca.js';
import { x509SvidProblems } from '../../spiffe/x509-svid.js';
import { BrokerError } from '../errors.js';
import type { CaClient, WorkloadCert } from '../cache/workload-cert.js';
import { missingServingNames, uriSans } from '../../pki/x509-fields.js';
import { checkForwardedChain, type ForwardedChain } from './forwarded-chain.js';

/** Supplies the broker's current bearer token for the CA. */
export interface TokenProvider {
  token(signal?: AbortSignal): Promise<Secret<string>>;
}

export interface IstioCaClientOptions {
  /** gRPC target of the CA, e.g. `istiod.istio-system.svc:15012` or `127.0.0.1:15012`. */
  readonly address: string;
  /** PEM roots the CA's serving certificate must chain to (the mesh root). */
  readonly caRootsPem: string;
  /** Name to verify in the CA's serving certificate when it differs from the address host. */
  readonly tlsServerName?: string;
  readonly tokens: TokenProvider;
  /** Sent as the `clusterid` header. */
  readonly clusterId: string;
  /** Requested lifetime (validity_duration). */
  readonly certTtlSeconds: number;
  /** true: ask for other workloads' identities (ImpersonatedIdentity); false: the caller's own. */
  readonly impersonate: boolean;
  /**
   * With `impersonate: false`: DNS names / IP literals to have on the own SVID as well
   * (`certbroker.io/serving-names`), for a certificate that also serves TLS on the node (the
   * Istio CA front). A leaf without every one of them is refused (istiod ignores the key).
   */
  readonly servingNames?: readonly string[];
  /** Per-call deadline. Default 10 000. */
  readonly callTimeoutMs?: number;
  /** A TLS handshake with the CA that takes longer is abandoned (and retried). Default 10 000. */
  readonly handshakeTimeoutMs?: number;
}

/**
 * The gRPC codes with which a CA definitely refuses the identity asked for, and the status each
 * keeps in the error model (the certificate manager backs off fully after those). Every other
 * failure — UNAVAILABLE, DEADLINE_EXCEEDED, a transport error, anything unexpected — means the
 * CA was not reached or did not answer: `unavailable`, retried soon while no certificate is held.
 */
const REFUSAL_STATUS: ReadonlyMap<GrpcStatus, ErrorStatus> = new Map<GrpcStatus, ErrorStatus>([
  [GrpcStatus.UNAUTHENTICATED, 'unauthenticated'],
  [GrpcStatus.PERMISSION_DENIED, 'permission-denied'],
  [GrpcStatus.INVALID_ARGUMENT, 'invalid-argument'],
]);

/**
 * A failed CA call; `grpcCode` is the gRPC status name for metrics. Its `status` says whether the
 * CA refused the identity (unauthenticated, permission-denied, invalid-argument) or was not
 * reached (unavailable).
 */
export class CaCallError extends BrokerError {
  readonly grpcCode: string;
  constructor(grpcCode: string, message: string, options: { readonly status?: ErrorStatus; readonly cause?: unknown; readonly retryAfterMs?: number } = {}) {
    super('ERR_CA_CALL_FAILED', message, {
      status: options.status ?? 'unavailable',
      cause: options.cause,
      publicMessage: 'CA call failed',
      ...(options.retryAfterMs !== undefined ? { retryAfterMs: options.retryAfterMs } : {}),
    });
    this.grpcCode = grpcCode;
  }

  /**
   * The error for a call that ended with gRPC status `code`; `retryAfterMs` is the CA's retry
   * pushback (a CA shedding load answers RESOURCE_EXHAUSTED with one), which the certificate
   * manager's retry honours (refresh-policy.ts).
   */
  static fromStatus(code: GrpcStatus, details: string, cause?: unknown, retryAfterMs?: number): CaCallError {
    return new CaCallError(GrpcStatus[code] ?? 'UNKNOWN', `CA call failed: ${details}`, {
      status: REFUSAL_STATUS.get(code) ?? 'unavailable',
      cause,
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    });
  }
}

/** A CA answer as the client reads it (a missing chain is a bad response, not a crash). */
type CaResponse = IstioCaAnswer;

export class IstioCaClient implements CaClient {
  readonly #o: IstioCaClientOptions;
  readonly #channel: IstioCaChannel;

  constructor(options: IstioCaClientOptions) {
    this.#o = options;
    this.#channel = new IstioCaChannel({
      address: options.address,
      rootsPem: options.caRootsPem,
      ...(options.tlsServerName ? { tlsServerName: options.tlsServerName } : {}),
      ...(options.callTimeoutMs !== undefined ? { callTimeoutMs: options.callTimeoutMs } : {}),
      ...(options.handshakeTimeoutMs !== undefined ? { handshakeTimeoutMs: options.handshakeTimeoutMs } : {}),
      failure: (code, details, cause, retryAfterMs) => CaCallError.fromStatus(code, details, cause, retryAfterMs),
    });
  }

  /**
   * Verifies the CA's serving certificate against `rootsPem` from the next call on (a root
   * rotation: the CA's serving certificate moves to the new root, which the broker learnt from
   * the CA's answers). Calls running finish on the channel they started on.
   */
  trustRoots(rootsPem: string): void {
    this.#channel.trustRoots(rootsPem);
  }

  async fetchCertificate(identity: string, signal: AbortSignal): Promise<WorkloadCert> {
    const { privateKey } = await generateKeyPair();
    // The serving names go into the CSR too: a CA whose signer signs what the CSR says (the
    // Kubernetes CSR API) needs them there; the others take them from the metadata alone.
    const named = !this.#o.impersonate && this.#o.servingNames && this.#o.servingNames.length > 0 ? { servingNames: this.#o.servingNames } : {};
    const csr = createCsr({ privateKey, uri: identity, ...named });
    const token = await this.#o.tokens.token(signal);
    const fields: Record<string, string> = {};
    if (this.#o.impersonate) fields[IMPERSONATED_IDENTITY_KEY] = identity;
    else if (this.#o.servingNames && this.#o.servingNames.length > 0) fields[SERVING_NAMES_KEY] = this.#o.servingNames.join(',');
    const request: IstioCertificateRequest = {
      csr: csr.pem,
      validity_duration: this.#o.certTtlSeconds,
      ...(Object.keys(fields).length > 0 ? { metadata: stringStruct(fields) } : {}),
    };
    const response = await this.#call(request, token, signal);
    const cert = parseCaResponse(response, identity);
    if (!this.#o.impersonate && this.#o.servingNames) requireServingNames(cert.leaf, identity, this.#o.servingNames);
    if (!keyMatches(privateKey, cert.leaf.publicKey.export({ type: 'spki', format: 'der' }))) {
      throw new BrokerError('ERR_CA_BAD_RESPONSE', `CA returned a leaf for ${identity} that does not hold the requested key`, {
        status: 'unavailable',
      });
    }
    return {
      identity,
      chainDer: cert.chainDer,
      rootsDer: cert.rootsDer,
      privateKey: exportPkcs8Der(privateKey),
      serial: cert.leaf.serialNumber.toLowerCase(),
      notBefore: Date.parse(cert.leaf.validFrom),
      notAfter: Date.parse(cert.leaf.validTo),
    };
  }

  /**
   * Forwards a CSR the broker did not make (the Istio CA front: ztunnel's key) for `identity`,
   * always as ImpersonatedIdentity, with the broker's token and `clusterid`, and `ttlSeconds` as
   * asked (0 = the CA's default). Returns the CA's `cert_chain` as it came once
   * `checkForwardedChain` accepts it (one URI SAN = `identity`, not a CA, signed by the next
   * certificate), with the leaf's SPKI for the caller to compare with the CSR's. A refusal is a
   * `CaCallError` (its `grpcCode`).
   */
  async forwardCsr(request: { readonly csrPem: string; readonly identity: string; readonly ttlSeconds: number }, signal: AbortSignal): Promise<ForwardedChain> {
    const token = await this.#o.tokens.token(signal);
    const response = await this.#call(
      { csr: request.csrPem, validity_duration: request.ttlSeconds, metadata: stringStruct({ [IMPERSONATED_IDENTITY_KEY]: request.identity }) },
      token,
      signal,
    );
    return checkForwardedChain(response, request.identity);
  }

  /** Closes the channel and destroys its connections (a CA that never answers keeps none alive). */
  close(): void {
    this.#channel.close();
  }

  #call(request: IstioCertificateRequest, token: Secret<string>, signal: AbortSignal): Promise<CaResponse> {
    return this.#channel.createCertificate(request, { token: token.reveal(), clusterId: this.#o.clusterId }, signal);
  }
}

/** Throws ERR_CA_BAD_RESPONSE unless `leaf` carries every one of `names` as a DNS or IP SAN. */
function requireServingNames(leaf: X509Certificate, identity: string, names: readonly string[]): void {
  const missing = missingServingNames(leaf, names);
  if (missing.length > 0) {
    throw new BrokerError(
      'ERR_CA_BAD_RESPONSE',
      `CA returned the SVID ${identity} without the serving names ${JSON.stringify(missing)} (istiod ignores ${SERVING_NAMES_KEY}; certbroker's CA grants only names on CA_GRANTABLE_SERVING_NAMES)`,
      { status: 'unavailable' },
    );
  }
}

export interface ParsedCaResponse {
  readonly leaf: X509Certificate;
  readonly chainDer: Buffer[];
  readonly rootsDer: Buffer[];
}

/**
 * Splits an Istio `cert_chain` (leaf, intermediates one per element, root bundle last) into the
 * chain and the roots, and checks the leaf carries exactly one URI SAN equal to `identity`, obeys
 * the X509-SVID leaf rules (CA:FALSE, keyUsage critical with digitalSignature and without
 * keyCertSign/cRLSign, EKU serverAuth+clientAuth when present), is signed by the next
 * certificate and chains up to one of the roots in the last element. Throws ERR_CA_BAD_RESPONSE, ERR_CA_SAN_MISMATCH or ERR_CA_LEAF_NOT_SVID; such an
 * answer is a failed fetch (a still-valid certificate keeps being served).
 */
export function parseCaResponse(response: CaResponse, identity: string): ParsedCaResponse {
  const elements = response.cert_chain ?? [];
  const bad = (why: string, cause?: unknown) =>
    new BrokerError('ERR_CA_BAD_RESPONSE', `CA response for ${identity}: ${why}`, { status: 'unavailable', cause });
  if (elements.length < 2) throw bad(`cert_chain has ${elements.length} element(s), want leaf ... root`);
  const derOf = (pem: string): Buffer[] => {
    try {
      return parsePem(pem)
        .filter((b) => b.type === 'CERTIFICATE')
        .map((b) => Buffer.from(b.der));
    } catch (err) {
      throw bad('a cert_chain element is not PEM', err);
    }
  };
  const chainDer = elements.slice(0, -1).flatMap(derOf);
  const rootsDer = derOf(elements.at(-1)!);
  if (chainDer.length === 0 || rootsDer.length === 0) throw bad('no certificate in the chain or in the root bundle');
  let certs: X509Certificate[];
  try {
    certs = chainDer.map((d) => new X509Certificate(d));
  } catch (err) {
    throw bad('a certificate does not parse', err);
  }
  const leaf = certs[0]!;
  const uris = uriSans(leaf);
  if (uris.length !== 1 || uris[0] !== identity) {
    throw new BrokerError(
      'ERR_CA_SAN_MISMATCH',
      `CA returned a leaf with URI SANs ${JSON.stringify(uris)} for requested identity ${identity}`,
      { status: 'unavailable' },
    );
  }
  const { problems } = x509SvidProblems(chainDer[0]!, { role: 'leaf' });
  if (problems.length > 0) {
    throw new BrokerError(
      'ERR_CA_LEAF_NOT_SVID',
      `CA returned a leaf for ${identity} that is not a valid X509-SVID: ${problems.map((p) => p.code).join(', ')}`,
      { status: 'unavailable' },
    );
  }
  const issuer = certs[1] ?? new X509Certificate(rootsDer[0]!);
  const signedBy = certs[1] ? [issuer] : rootsDer.map((d) => new X509Certificate(d));
  if (!signedBy.some((c) => leaf.verify(c.publicKey))) throw bad('the leaf is not signed by the next certificate');
  // The whole chain, up to one of the roots that came with it: the bundle follows those roots,
  // so a leaf that does not reach them would be served with a bundle that cannot verify it.
  if (chainAnchor(chainDer, rootsDer) < 0) throw bad('the chain does not verify up to a root of the bundle sent with it');
  return { leaf, chainDer, rootsDer };
}
