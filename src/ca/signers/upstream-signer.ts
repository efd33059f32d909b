/**
 * `istio-upstream`: the CA as a registration authority. It authenticates and node-authorizes
 * callers as always (certificate-service.ts), then forwards the CSR to an upstream
 * `IstioCertificateService` (istiod, cert-manager istio-csr, another certbroker CA) with its
 * own credential — the token file, read again whenever it changes, as projected tokens rotate —
 * and `ImpersonatedIdentity` = the identity it decided, on one kept TLS channel that verifies
 * the upstream with the root file (src/grpc/istio-ca-channel.ts). The answer is checked before
 * it is returned (upstream-answer.ts: one URI SAN = the identity, the CSR's key, chains to the
 * upstream roots) and returned as it came, the upstream's roots as the last element.
 *
 * Upstream errors keep their meaning: a refusal (UNAUTHENTICATED, PERMISSION_DENIED,
 * INVALID_ARGUMENT) is relayed with that status as ERR_CA_UPSTREAM_REFUSED; an upstream that is
 * down or failing is UNAVAILABLE (ERR_CA_UPSTREAM_UNAVAILABLE); one that does not answer within
 * `timeoutMs` is DEADLINE_EXCEEDED (ERR_CA_UPSTREAM_TIMEOUT).
 */
import { setMaxListeners } from 'node:events';
import { status as GrpcStatus } from '@grpc/grpc-js';
import type { Clock } from '../../core/clock.js';
import { eitherSignal } from '../../core/deadline.js';
import { CertbrokerError, describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { Secret } from '../../core/secret.js';
import { Listeners } from '../../core/listeners.js';
import { IstioCaChannel } from '../../grpc/istio-ca-channel.js';
import { stringStruct } from '../../grpc/struct-value.js';
import { RereadFile } from '../../ops/reread-file.js';
import { AnchoredTails } from '../../pki/anchored-tails.js';
import { createCsr, parseCsrAsync } from '../../pki/csr.js';
import { exportPkcs8Pem, generateKeyPair } from '../../pki/keys.js';
import { parsePem, pemEncode } from '../../pki/pem.js';
import { IMPERSONATED_IDENTITY_KEY, SERVING_NAMES_KEY, type IstioCertificateRequest } from '../../protocol/istio-ca.js';
import { CaError, callCancelled } from '../errors.js';
import type { ServingCertificate, SignedChain, Signer, SignRequest } from '../signer.js';
import { checkServingAnswer, checkWorkloadAnswer } from './upstream-answer.js';

/** What `--signer istio-upstream` is configured with. */
export interface UpstreamSignerSettings {
  /** host:port of the upstream IstioCertificateService. */
  readonly address: string;
  /** PEM roots: the upstream's serving certificate and every answer must chain to them. Read again when it changes. */
  readonly rootCertFile: string;
  /** The RA's own bearer token for the upstream (a projected token with the upstream's audience). Read again when it changes. */
  readonly tokenFile: string;
  /** `clusterid` sent upstream (the upstream's id for the cluster the token comes from). */
  readonly clusterId: string;
  /** Name to verify in the upstream's serving certificate when it differs from the address host. */
  readonly tlsServerName?: string;
  /** Deadline of one upstream call. */
  readonly timeoutMs: number;
}

export interface UpstreamSignerOptions extends UpstreamSignerSettings {
  readonly clock: Clock;
  readonly logger: Logger;
}

/** The CaError for an upstream call that ended with gRPC status `code`. */
export function upstreamFailure(code: GrpcStatus, details: string, cause?: unknown): CaError {
  const name = GrpcStatus[code] ?? 'UNKNOWN';
  const refusal = code === GrpcStatus.UNAUTHENTICATED ? 'unauthenticated' : code === GrpcStatus.PERMISSION_DENIED ? 'permission-denied' : code === GrpcStatus.INVALID_ARGUMENT ? 'invalid-argument' : undefined;
  if (refusal) {
    return new CaError('ERR_CA_UPSTREAM_REFUSED', `upstream CA refused: ${name}: ${details}`, { status: refusal, cause, publicMessage: `upstream CA refused the request (${name})` });
  }
  if (code === GrpcStatus.DEADLINE_EXCEEDED) {
    return new CaError('ERR_CA_UPSTREAM_TIMEOUT', `upstream CA did not answer in time: ${details}`, { status: 'deadline-exceeded', cause, publicMessage: 'upstream CA did not answer in time' });
  }
  return new CaError('ERR_CA_UPSTREAM_UNAVAILABLE', `upstream CA call failed: ${name}: ${details}`, { status: 'unavailable', cause, publicMessage: 'upstream CA unavailable' });
}

export class IstioUpstreamSigner implements Signer {
  readonly description: string;
  /** Its sign() gives up the upstream call when the caller stops waiting. */
  readonly cancellable = true;
  readonly #o: UpstreamSignerOptions;
  readonly #rootFile: RereadFile;
  readonly #tokenFile: RereadFile;
  readonly #listeners = new Listeners<void>();
  readonly #closing = new AbortController();
  #roots: { readonly pems: readonly string[]; readonly tails: AnchoredTails } | undefined;
  #channel: IstioCaChannel | undefined;
  #token: Secret<string> | undefined;
  #problem: string | undefined = 'not started';

  constructor(options: UpstreamSignerOptions) {
    this.#o = options;
    // Every call in flight listens to it: no leak warning past ten.
    setMaxListeners(0, this.#closing.signal);
    this.description = `istio-upstream:${options.address}`;
    this.#rootFile = new RereadFile(options.rootCertFile);
    this.#tokenFile = new RereadFile(options.tokenFile);
  }

  /** Reads the root and token files; rejects (a start-up error) when either is unusable. */
  async start(): Promise<void> {
    await this.#refresh(true);
  }

  get ready(): boolean {
    return this.notReadyReason === undefined;
  }

  get notReadyReason(): string | undefined {
    if (this.#closing.signal.aborted) return 'signer closed';
    return this.#problem;
  }

  roots(): readonly string[] {
    return this.#roots?.pems ?? [];
  }

  async sign(request: SignRequest): Promise<SignedChain> {
    if (request.servingNames && request.servingNames.length > 0) {
      // The upstream grants serving names only on the caller's own SVID, never with ImpersonatedIdentity.
      throw new CaError('ERR_CA_SERVING_NAMES_UNSUPPORTED', 'the istio-upstream signer cannot add serving names to an impersonated SVID', {
        status: 'failed-precondition',
        publicMessage: 'serving names are not available from this CA (registration authority)',
      });
    }
    const csr = await parseCsrAsync(request.csrPem);
    const { channel, token, tails } = await this.#usable();
    const stop = eitherSignal(this.#closing.signal, request.signal);
    let answer;
    try {
      answer = await channel.createCertificate(
        { csr: request.csrPem, validity_duration: request.ttlSeconds, metadata: stringStruct({ [IMPERSONATED_IDENTITY_KEY]: request.spiffeId }) },
        { token: token.reveal(), clusterId: this.#o.clusterId },
        stop.signal,
      );
    } catch (err) {
      if (request.signal?.aborted && !this.#closing.signal.aborted) throw callCancelled(`upstream CreateCertificate at ${this.#o.address}`, err);
      throw err;
    } finally {
      stop.dispose();
    }
    const leaf = checkWorkloadAnswer(answer, { identity: request.spiffeId, spki: csr.spki, tails, nowMs: this.#o.clock.now() });
    return { certChain: answer.cert_chain ?? [], serialHex: leaf.serialHex, notAfterMs: leaf.notAfterMs };
  }

  /**
   * The CA's own TLS certificate from the upstream: the RA's own SVID with `dnsNames` as serving
   * names (`certbroker.io/serving-names`). A certbroker upstream grants them when the RA's
   * account is a trusted node account and the names are on its CA_GRANTABLE_SERVING_NAMES;
   * istiod ignores the key, and a leaf without the names is refused here.
   */
  async issueServingCertificate(request: { readonly dnsNames: readonly string[]; readonly ttlSeconds: number }): Promise<ServingCertificate> {
    const { channel, token, tails } = await this.#usable();
    const { privateKey } = await generateKeyPair();
    // The URI in the CSR is ignored by the upstream (the identity comes from the token).
    const csr = createCsr({ privateKey, uri: 'spiffe://certbroker.invalid/serving' });
    // validity_duration 0: the upstream's default lifetime (the 30 days the CA asks of its own
    // signers are over istiod's and certbroker's usual maximum); renewed at half of what it gives.
    const req: IstioCertificateRequest = { csr: csr.pem, validity_duration: 0, metadata: stringStruct({ [SERVING_NAMES_KEY]: request.dnsNames.join(',') }) };
    const answer = await channel.createCertificate(req, { token: token.reveal(), clusterId: this.#o.clusterId }, this.#closing.signal);
    const { certChain, notAfterMs } = checkServingAnswer(answer, { privateKey, dnsNames: request.dnsNames, tails, nowMs: this.#o.clock.now() });
    return { certChainPem: certChain.join(''), privateKeyPem: exportPkcs8Pem(privateKey), notAfterMs };
  }

  onChange(listener: () => void): () => void {
    return this.#listeners.add(listener);
  }

  async close(): Promise<void> {
    if (this.#closing.signal.aborted) return;
    this.#closing.abort(new CaError('ERR_CA_SIGNER_NOT_READY', 'signer closed', { status: 'unavailable', publicMessage: 'CA is shutting down' }));
    this.#channel?.close();
    this.#channel = undefined;
    this.#emit();
    this.#listeners.clear();
  }

  async #usable(): Promise<{ channel: IstioCaChannel; token: Secret<string>; tails: AnchoredTails }> {
    if (this.#closing.signal.aborted) throw this.#closing.signal.reason;
    await this.#refresh(false);
    if (!this.#channel || !this.#token || !this.#roots) {
      throw new CaError('ERR_CA_SIGNER_NOT_READY', `signer not ready: ${this.#problem ?? 'unknown'}`, { status: 'unavailable', publicMessage: 'CA is not ready' });
    }
    return { channel: this.#channel, token: this.#token, tails: this.#roots.tails };
  }

  /**
   * Reads both files again if they changed. A changed root file replaces the trusted roots and
   * the channel (new TLS trust); a root file or token that turns unreadable later keeps the last
   * good one (logged). At start (`strict`) an unusable file rejects.
   */
  async #refresh(strict: boolean): Promise<void> {
    const wasReady = this.ready;
    try {
      const roots = await this.#rootFile.read().catch((err: unknown) => {
        throw new CaError('ERR_CA_SIGNER_MATERIAL_INVALID', `upstream root file ${this.#o.rootCertFile} cannot be read: ${describeError(err)}`, { status: 'unavailable', cause: err });
      });
      if (roots.changed) this.#installRoots(roots.text);
      const token = await this.#tokenFile.read().catch((err: unknown) => {
        throw new CaError('ERR_CA_UPSTREAM_CREDENTIALS', `upstream token file ${this.#o.tokenFile} cannot be read: ${describeError(err)}`, { status: 'unavailable', cause: err });
      });
      if (token.changed) {
        const text = token.text.trim();
        if (text === '') throw new CaError('ERR_CA_UPSTREAM_CREDENTIALS', `upstream token file ${this.#o.tokenFile} is empty`, { status: 'unavailable' });
        this.#token = new Secret(text);
      }
      this.#problem = undefined;
    } catch (err) {
      if (strict || !this.#token || !this.#roots) {
        this.#problem = describeError(err);
        if (strict) throw err;
      } else {
        this.#o.logger.warn('istio-upstream: keeping the last good root file and token', { err: describeError(err) });
      }
    }
    if (wasReady !== this.ready) this.#emit();
  }

  #installRoots(text: string): void {
    let tails: AnchoredTails;
    try {
      tails = new AnchoredTails(text);
    } catch (err) {
      throw new CaError('ERR_CA_SIGNER_MATERIAL_INVALID', `upstream root file ${this.#o.rootCertFile}: ${describeError(err)}`, { status: 'unavailable', cause: err });
    }
    const pems = parsePem(text)
      .filter((b) => b.type === 'CERTIFICATE')
      .map((b) => pemEncode('CERTIFICATE', b.der));
    // The TLS trust follows the file: the next call verifies the upstream against the new roots.
    if (this.#channel) this.#channel.trustRoots(text);
    else {
      this.#channel = new IstioCaChannel({
        address: this.#o.address,
        rootsPem: text,
        callTimeoutMs: this.#o.timeoutMs,
        ...(this.#o.tlsServerName ? { tlsServerName: this.#o.tlsServerName } : {}),
        failure: (code, details, cause) => upstreamFailure(code, details, cause),
      });
    }
    const first = this.#roots === undefined;
    this.#roots = { pems, tails };
    if (!first) {
      this.#o.logger.info('istio-upstream: root file changed; answers and the upstream TLS certificate are checked against the new roots', { roots: pems.length });
      this.#emit();
    }
  }

  #emit(): void {
    this.#listeners.emit(undefined, (err) => this.#o.logger.warn('signer change listener threw; ignored', { err: err instanceof CertbrokerError ? err.code : describeError(err) }));
  }
}
