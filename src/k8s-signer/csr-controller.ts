/**
 * The CertificateSigningRequest controller of `certbroker k8s-signer`: watches the requests for
 * its signerName (informer, field selector `spec.signerName`), and for each one that is Approved,
 * not Denied or Failed and not issued yet, judges it (csr-policy.ts), signs it with the plug-in CA
 * and writes `status.certificate` (leaf, then intermediates; the roots are the trust bundle's) via
 * `/status`, guarded by the resourceVersion it read. A request the policy refuses, or whose CSR
 * does not parse or verify, gets a Failed condition with the reason. Transient trouble (CA not
 * ready, API errors, a conflict) retries with backoff; a conflict is also superseded by the watch
 * event of the newer version. Requests are handled up to CSR_WORKERS at a time, each name once
 * (core/work-queue.ts, the work queue the PodCertificateRequest controller shares).
 */
import { describeError, isCertbrokerError } from '../core/errors.js';
import { withDeadline } from '../core/deadline.js';
import { createCsrInformer, csrRequestPem, csrState, CsrClient, type CsrCondition, type CsrObject } from '../kube/index.js';
import { readCsrDetails } from '../pki/index.js';
import { QueuedSignerController, type HandleOutcome, type SignerControllerContext, type SignerControllerFactory } from './controller.js';
import { judgeCsr, type CsrRefusalReason } from './csr-policy.js';
import { SignerMetrics } from './metrics.js';

export const CSR_CONTROLLER = 'csr';
/** Requests signed at the same time. */
export const CSR_WORKERS = 4;
/** Deadline of each API write. */
export const CSR_WRITE_TIMEOUT_MS = 10_000;
/** Retry delays after transient failures: doubling from the first to the last, jittered. */
export const CSR_RETRY_INITIAL_MS = 500;
export const CSR_RETRY_MAX_MS = 30_000;

export class CsrController extends QueuedSignerController<CsrObject> {
  readonly #ctx: SignerControllerContext;
  readonly #client: CsrClient;

  constructor(ctx: SignerControllerContext, metrics: SignerMetrics = new SignerMetrics(ctx.registry)) {
    super(
      ctx,
      {
        name: CSR_CONTROLLER,
        workers: CSR_WORKERS,
        initialRetryMs: CSR_RETRY_INITIAL_MS,
        maxRetryMs: CSR_RETRY_MAX_MS,
        keyOf: (csr) => csr.metadata?.name ?? '',
        createInformer: createCsrInformer,
      },
      metrics,
    );
    this.#ctx = ctx;
    this.#client = new CsrClient(ctx.kubeConfig);
  }

  protected override stopped(): void {
    this.#client.close();
  }

  protected async handle(name: string): Promise<HandleOutcome> {
    const csr = this.informer.get(undefined, name);
    if (!csr || csrState(csr) !== 'approved') return { done: true };
    const started = this.#ctx.clock.now();
    const outcome = await this.#sign(csr);
    if (outcome.done) this.metrics.observeIssue(CSR_CONTROLLER, (this.#ctx.clock.now() - started) / 1000);
    return outcome;
  }

  async #sign(csr: CsrObject): Promise<HandleOutcome> {
    const name = csr.metadata!.name!;
    const pem = csrRequestPem(csr);
    let facts;
    try {
      facts = readCsrDetails(pem);
    } catch (err) {
      return this.#fail(csr, 'InvalidRequest', `spec.request is not a PKCS#10 CSR: ${describeError(err)}`);
    }
    const verdict = judgeCsr({ ...facts, usages: csr.spec.usages ?? [], username: csr.spec.username ?? '' }, { trustDomain: this.#ctx.trustDomain, servingRequesters: this.#ctx.servingRequesters });
    if (verdict.kind === 'refused') return this.#fail(csr, verdict.reason, verdict.message);
    if (!this.#ctx.ca.ready) return { done: false, why: 'ca-not-ready' };
    const asked = csr.spec.expirationSeconds ?? this.#ctx.defaultTtlSeconds;
    const ttlSeconds = Math.max(1, Math.min(asked, this.#ctx.maxTtlSeconds));
    let certificate: string;
    try {
      const signed = await this.#ctx.ca.sign({ csrPem: pem, spiffeId: verdict.spiffeId, ttlSeconds, ...(verdict.names ? { servingNames: verdict.names } : {}) });
      // Leaf and intermediates; the last element is the root bundle, which is not part of the answer.
      certificate = signed.certChain.slice(0, -1).join('');
    } catch (err) {
      if (isCertbrokerError(err) && err.status === 'invalid-argument') return this.#fail(csr, 'InvalidRequest', `the CSR cannot be signed: ${describeError(err)}`);
      if (isCertbrokerError(err) && err.status === 'unavailable') return { done: false, why: 'ca-unavailable' };
      return this.#fail(csr, 'SigningFailed', 'the CA failed to sign the request');
    }
    const written = await this.#write(csr, { ...csr.status, certificate: Buffer.from(certificate).toString('base64') });
    if (!written.done) return written;
    this.metrics.count(CSR_CONTROLLER, 'issued', verdict.kind);
    this.#ctx.logger.info('CSR signed', { csr: name, identity: verdict.spiffeId, requester: csr.spec.username, ttlSeconds });
    return written;
  }

  async #fail(csr: CsrObject, reason: CsrRefusalReason | 'SigningFailed', message: string): Promise<HandleOutcome> {
    const now = new Date(this.#ctx.clock.now()).toISOString();
    const failed: CsrCondition = { type: 'Failed', status: 'True', reason, message, lastUpdateTime: now, lastTransitionTime: now };
    const written = await this.#write(csr, { ...csr.status, conditions: [...(csr.status?.conditions ?? []), failed] });
    if (written.done) {
      this.metrics.count(CSR_CONTROLLER, 'refused', reason);
      this.#ctx.logger.warn('CSR refused', { csr: csr.metadata?.name, requester: csr.spec.username, reason, message });
    }
    return written;
  }

  async #write(csr: CsrObject, status: NonNullable<CsrObject['status']>): Promise<HandleOutcome> {
    try {
      await withDeadline(CSR_WRITE_TIMEOUT_MS, { what: `PUT certificatesigningrequests/${csr.metadata?.name}/status`, parent: this.queue.signal, clock: this.#ctx.clock }, (signal) => this.#client.writeStatus(csr, status, signal));
      return { done: true };
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      // 409: someone changed it since we read it; the watch brings the newer version (and the retry re-reads).
      return { done: false, why: code === 409 ? 'conflict' : `status-write: ${describeError(err)}` };
    }
  }
}

export const csrController: SignerControllerFactory = (ctx) => new CsrController(ctx);
