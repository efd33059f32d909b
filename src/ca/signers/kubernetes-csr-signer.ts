/**
 * The kubernetes-csr signer (istiod's `EXTERNAL_CA=ISTIOD_RA_KUBERNETES_API` role): the CA is a
 * registration authority and the Kubernetes CSR API its signer. Per request, after the CA has
 * authenticated and authorized the caller: check that the CSR asks for exactly that identity
 * (the Kubernetes signer signs what the CSR says), create a `certificates.k8s.io/v1`
 * CertificateSigningRequest for `signerName` (usages digital signature, key encipherment,
 * server auth, client auth; `expirationSeconds` from the TTL, at least the API's 600), approve
 * it when `autoApprove` (needs `approve` on `signers/<name>`), wait for the outcome through one
 * shared informer over the CA's own CSRs (label `app.kubernetes.io/managed-by=certbroker-ca`)
 * with a deadline, verify the certificate (csr-answer.ts), and delete the CSR — whatever the
 * outcome. Denied, Failed, a timeout and API refusals are distinct CaError codes.
 *
 * Serving names (a node broker's own SVID for its Istio CA front) must be in the CSR as well,
 * exactly those the CA granted. The CA's own TLS serving certificate comes the same way: a CSR
 * with the DNS/IP names only (the k8s-signer signs names for its configured serving requesters,
 * the CA's account, adding its SPIFFE ID to a names-only request).
 */
import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../../core/clock.js';
import { deadline } from '../../core/deadline.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { Listeners } from '../../core/listeners.js';
import {
  createCsrInformer,
  csrCertificatePem,
  csrState,
  CsrClient,
  CSR_MIN_EXPIRATION_SECONDS,
  trueCondition,
  USAGE_CLIENT_AUTH,
  USAGE_DIGITAL_SIGNATURE,
  USAGE_KEY_ENCIPHERMENT,
  USAGE_SERVER_AUTH,
  type CsrObject,
  type Informer,
  type InformerSettings,
} from '../../kube/index.js';
import { canonicalServingName, certificateToPem, createCsr, csrPublicKeyInfo, exportPkcs8Pem, generateKeyPair, parseCertificates, readCsrDetails, x509 } from '../../pki/index.js';
import { CaError, callCancelled } from '../errors.js';
import type { ServingCertificate, SignedChain, Signer, SignRequest } from '../signer.js';
import { chainFromCsrAnswer } from './csr-answer.js';
import { RootsFile } from './roots-file.js';

export const CSR_MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const CSR_MANAGED_BY = 'certbroker-ca';
/** How long the CA waits for a certificate by default. */
export const DEFAULT_CSR_TIMEOUT_MS = 30_000;
/** Deadline of each API call (create, approve, delete). */
export const CSR_CALL_TIMEOUT_MS = 10_000;
export const WORKLOAD_USAGES = [USAGE_DIGITAL_SIGNATURE, USAGE_KEY_ENCIPHERMENT, USAGE_SERVER_AUTH, USAGE_CLIENT_AUTH];
export const SERVING_USAGES = [USAGE_DIGITAL_SIGNATURE, USAGE_KEY_ENCIPHERMENT, USAGE_SERVER_AUTH];

export interface KubernetesCsrSignerOptions {
  readonly kubeConfig: KubeConfig;
  readonly signerName: string;
  /** Approve each CSR it creates (the CA has authorized the caller already). */
  readonly autoApprove: boolean;
  /** PEM roots the issued chains must reach (the Kubernetes signer's roots). */
  readonly rootsPem: string;
  /**
   * The file `rootsPem` was read from: re-read every `rootsPollIntervalMs` (roots-file.ts) so a
   * root rotation (both roots for the overlap, then the new one) reaches the answers without a restart.
   */
  readonly rootsFile?: string;
  readonly rootsPollIntervalMs?: number;
  readonly timeoutMs?: number;
  readonly informer?: InformerSettings;
  readonly clock: Clock;
  readonly logger: Logger;
}

interface Waiter {
  readonly resolve: (csr: CsrObject) => void;
}

export class KubernetesCsrSigner implements Signer {
  readonly description: string;
  /** Its sign() stops waiting for (and deletes) the CSR when the caller stops waiting. */
  readonly cancellable = true;
  readonly #o: KubernetesCsrSignerOptions;
  readonly #client: CsrClient;
  readonly #informer: Informer<CsrObject>;
  readonly #waiters = new Map<string, Waiter>();
  readonly #listeners = new Listeners<void>();
  #roots: readonly x509.X509Certificate[];
  #rootsPem: string;
  #rootsFile: RootsFile | undefined;
  #closed = false;

  constructor(options: KubernetesCsrSignerOptions) {
    this.#o = options;
    this.description = `kubernetes-csr:${options.signerName}`;
    this.#client = new CsrClient(options.kubeConfig);
    this.#roots = parseCertificates(options.rootsPem, 'kubernetes-csr roots');
    this.#rootsPem = this.#roots.map((r) => certificateToPem(new Uint8Array(r.rawData))).join('');
    const settle = (csr: CsrObject) => {
      const waiter = this.#waiters.get(csr.metadata?.name ?? '');
      if (waiter && csrState(csr) !== 'pending' && csrState(csr) !== 'approved') waiter.resolve(csr);
    };
    this.#informer = createCsrInformer({
      kubeConfig: options.kubeConfig,
      signerName: options.signerName,
      labelSelector: `${CSR_MANAGED_BY_LABEL}=${CSR_MANAGED_BY}`,
      ...(options.informer ?? {}),
      clock: options.clock,
      logger: options.logger,
      onAdd: settle,
      onUpdate: settle,
    });
    this.#informer.onHealthChange(() => this.#changed());
  }

  get ready(): boolean {
    return this.notReadyReason === undefined;
  }

  get notReadyReason(): string | undefined {
    if (this.#closed) return 'signer closed';
    const p = this.#informer.problem();
    return p === undefined ? undefined : `CSR watch: ${p}`;
  }

  roots(): readonly string[] {
    return [this.#rootsPem];
  }

  /** Starts the CSR watch; resolves once it has listed. */
  async start(): Promise<void> {
    await this.#informer.start();
    await this.#informer.waitForSync();
    const o = this.#o;
    if (o.rootsFile === undefined || this.#rootsFile) return;
    this.#rootsFile = new RootsFile({ path: o.rootsFile, clock: o.clock, logger: o.logger, ...(o.rootsPollIntervalMs !== undefined ? { pollIntervalMs: o.rootsPollIntervalMs } : {}) }, o.rootsPem);
    this.#rootsFile.watch((roots) => {
      this.#roots = roots.certs;
      this.#rootsPem = roots.pem;
      this.#changed();
    });
  }

  onChange(listener: () => void): () => void {
    return this.#listeners.add(listener);
  }

  /** Readiness changed: tell the listeners (a throwing one is logged, the others still run). */
  #changed(): void {
    this.#listeners.emit(undefined, (err) => this.#o.logger.error('signer change listener threw', { err: describeError(err) }));
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#rootsFile?.close();
    await this.#informer.stop();
    this.#client.close();
    this.#changed();
  }

  async sign(request: SignRequest): Promise<SignedChain> {
    // The Kubernetes signer signs what the CSR says: it must say exactly what the CA authorized.
    const details = readCsrDetails(request.csrPem);
    const asked = new Set((request.servingNames ?? []).map(canonicalServingName));
    const named = [...details.dnsNames, ...details.ipAddresses].map(canonicalServingName);
    const namesMatch = named.length === asked.size && named.every((n) => asked.has(n));
    if (details.uris.length !== 1 || details.uris[0] !== request.spiffeId || details.emails.length + details.otherSans > 0 || !namesMatch) {
      throw new CaError('ERR_CA_CSR_IDENTITY_MISMATCH', `CSR asks for URIs ${JSON.stringify(details.uris)}, ${named.length} DNS/IP names and ${details.emails.length + details.otherSans} other SANs; the caller is authorized for ${request.spiffeId}${asked.size > 0 ? ` with ${[...(request.servingNames ?? [])].join(', ')}` : ' only'}`, {
        status: 'invalid-argument',
        publicMessage: `the CSR must carry exactly the URI SAN ${request.spiffeId}${asked.size > 0 ? ' and the granted serving names' : ''}`,
      });
    }
    const issued = await this.#roundTrip(request.csrPem, WORKLOAD_USAGES, request.ttlSeconds, request.spiffeId, request.signal);
    return chainFromCsrAnswer({ ...this.#answerBase(issued, request.csrPem), expect: { spiffeId: request.spiffeId, ...(asked.size > 0 ? { servingNames: request.servingNames } : {}) } });
  }

  async issueServingCertificate(request: { readonly dnsNames: readonly string[]; readonly ttlSeconds: number }): Promise<ServingCertificate> {
    const { privateKey } = await generateKeyPair();
    const csrPem = createCsr({ privateKey, servingNames: request.dnsNames }).pem;
    const issued = await this.#roundTrip(csrPem, SERVING_USAGES, request.ttlSeconds, `serving certificate for ${request.dnsNames.join(', ')}`);
    const chain = chainFromCsrAnswer({ ...this.#answerBase(issued, csrPem), expect: { servingNames: request.dnsNames } });
    return { certChainPem: chain.certChain.slice(0, -1).join(''), privateKeyPem: exportPkcs8Pem(privateKey), notAfterMs: chain.notAfterMs };
  }

  #answerBase(issued: { readonly name: string; readonly certificatePem: string }, csrPem: string) {
    return { certificatePem: issued.certificatePem, roots: this.#roots, rootsPem: this.#rootsPem, csrSpki: csrPublicKeyInfo(csrPem), nowMs: this.#o.clock.now(), csrName: issued.name };
  }

  /** Create (+ approve), wait, delete. Resolves with the issued PEM; throws the outcome's CaError otherwise. */
  async #roundTrip(csrPem: string, usages: readonly string[], ttlSeconds: number, what: string, caller?: AbortSignal): Promise<{ name: string; certificatePem: string }> {
    if (!this.ready) throw new CaError('ERR_CA_SIGNER_NOT_READY', `signer not ready: ${this.notReadyReason}`, { status: 'unavailable', publicMessage: 'CA is not ready' });
    const name = `certbroker-${randomBytes(12).toString('hex')}`;
    const timeoutMs = this.#o.timeoutMs ?? DEFAULT_CSR_TIMEOUT_MS;
    // Ends at the timeout or when the caller stops waiting; the CSR is deleted either way.
    const wait = deadline(timeoutMs, { what: `certificate for CSR ${name}`, clock: this.#o.clock, caller });
    let settled: (csr: CsrObject) => void = () => undefined;
    const outcome = new Promise<CsrObject | undefined>((resolve) => {
      settled = resolve;
      wait.signal.addEventListener('abort', () => resolve(undefined), { once: true });
    });
    this.#waiters.set(name, { resolve: settled });
    let created = false;
    try {
      const body: CsrObject = {
        metadata: { name, labels: { [CSR_MANAGED_BY_LABEL]: CSR_MANAGED_BY } },
        spec: { request: Buffer.from(csrPem).toString('base64'), signerName: this.#o.signerName, usages: [...usages], expirationSeconds: Math.max(CSR_MIN_EXPIRATION_SECONDS, ttlSeconds) },
      };
      const csr = await this.#call('create', (signal) => this.#client.create(body, signal), caller);
      created = true;
      if (this.#o.autoApprove) {
        await this.#call('approve', (signal) =>
          this.#client.addApprovalCondition(csr, { type: 'Approved', status: 'True', reason: 'AutoApproved', message: `approved by certbroker-ca for an authorized caller (${what})`, lastUpdateTime: new Date(this.#o.clock.now()).toISOString() }, signal),
          caller,
        );
      }
      const cached = this.#informer.get(undefined, name);
      if (cached && csrState(cached) !== 'pending' && csrState(cached) !== 'approved') settled(cached);
      const final = await outcome;
      if (final === undefined && caller?.aborted) throw callCancelled(`CSR ${name} (${what})`);
      if (final === undefined) {
        throw new CaError('ERR_CA_CSR_TIMEOUT', `no certificate for CSR ${name} (${what}) from signer ${this.#o.signerName} within ${timeoutMs} ms${this.#o.autoApprove ? '' : ' (approved by no one?)'}`, {
          status: 'deadline-exceeded',
          publicMessage: 'the signer did not issue a certificate in time',
        });
      }
      return { name, certificatePem: this.#outcome(final, what) };
    } finally {
      wait.dispose();
      this.#waiters.delete(name);
      if (created) void this.#delete(name);
    }
  }

  /** The issued PEM, or the CaError of a Denied or Failed request. */
  #outcome(csr: CsrObject, what: string): string {
    const name = csr.metadata?.name ?? '';
    const pem = csrCertificatePem(csr);
    if (pem !== undefined) return pem;
    const denied = trueCondition(csr, 'Denied');
    if (denied) {
      throw new CaError('ERR_CA_CSR_DENIED', `CSR ${name} (${what}) denied: ${denied.reason ?? ''} ${denied.message ?? ''}`.trim(), {
        status: 'permission-denied',
        publicMessage: `the certificate request was denied${denied.reason ? ` (${denied.reason})` : ''}`,
      });
    }
    const failed = trueCondition(csr, 'Failed');
    throw new CaError('ERR_CA_CSR_FAILED', `CSR ${name} (${what}) failed: ${failed?.reason ?? ''} ${failed?.message ?? ''}`.trim(), {
      status: 'failed-precondition',
      publicMessage: `the signer refused the certificate request${failed?.reason ? ` (${failed.reason}: ${failed.message ?? ''})` : ''}`,
    });
  }

  async #call<T>(what: 'create' | 'approve', run: (signal: AbortSignal) => Promise<T>, caller?: AbortSignal): Promise<T> {
    const d = deadline(CSR_CALL_TIMEOUT_MS, { what: `CSR ${what}`, clock: this.#o.clock, caller });
    try {
      return await run(d.signal);
    } catch (err) {
      if (caller?.aborted) throw callCancelled(`CSR ${what}`, err);
      const httpStatus = (err as { code?: unknown }).code;
      throw new CaError('ERR_CA_CSR_API', `CSR ${what} for signer ${this.#o.signerName} failed: ${typeof httpStatus === 'number' ? `HTTP ${httpStatus}: ` : ''}${describeError(err).slice(0, 300)}`, {
        status: 'unavailable',
        publicMessage: 'the CA could not submit the certificate request',
        cause: err,
      });
    } finally {
      d.dispose();
    }
  }

  async #delete(name: string): Promise<void> {
    const d = deadline(CSR_CALL_TIMEOUT_MS, { what: `CSR delete ${name}`, clock: this.#o.clock });
    try {
      await this.#client.delete(name, d.signal);
    } catch (err) {
      this.#o.logger.warn('could not delete a finished CSR', { csr: name, err: describeError(err).slice(0, 300) });
    } finally {
      d.dispose();
    }
  }
}
