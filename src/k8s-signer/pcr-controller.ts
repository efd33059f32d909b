/**
 * The PodCertificateRequest controller of `certbroker k8s-signer` (KEP-4317, certificates.k8s.io
 * v1beta1 as in Kubernetes 1.35, plus 1.36's stubPKCS10Request): watches the requests for its
 * signerName in every namespace (informer, field selector `spec.signerName`); each pending one
 * is judged (pcr-policy.ts) and either Denied with the reason, or signed by the plug-in CA for
 * the pod's service account and issued through `/status` with certificateChain (leaf, then
 * intermediates), notBefore, beginRefreshAt and notAfter set together with an Issued condition,
 * guarded by the resourceVersion it read. A signing error is a Failed condition; the CA not
 * ready, API errors and conflicts are retried (core/work-queue.ts).
 */
import { X509Certificate } from 'node:crypto';
import { describeError, isCertbrokerError } from '../core/errors.js';
import { withDeadline } from '../core/deadline.js';
import { createPcrInformer, pcrState, PcrClient, type PcrCondition, type PcrObject } from '../kube/index.js';
import { pemEncode } from '../pki/index.js';
import type { SignedChain } from '../ca/index.js';
import { QueuedSignerController, type HandleOutcome, type SignerControllerContext, type SignerControllerFactory } from './controller.js';
import { beginRefreshAtMs, judgePcr, MIN_PCR_LIFETIME_MS, type PcrRefusalReason } from './pcr-policy.js';
import { SignerMetrics } from './metrics.js';

export const PCR_CONTROLLER = 'pcr';
export const PCR_WORKERS = 4;
export const PCR_WRITE_TIMEOUT_MS = 10_000;
export const PCR_RETRY_INITIAL_MS = 500;
export const PCR_RETRY_MAX_MS = 30_000;

/** metav1.Time: RFC 3339, whole seconds. */
function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/u, 'Z');
}

const keyOf = (pcr: PcrObject): string => `${pcr.metadata?.namespace ?? ''}/${pcr.metadata?.name ?? ''}`;

export class PcrController extends QueuedSignerController<PcrObject> {
  readonly #ctx: SignerControllerContext;
  readonly #client: PcrClient;

  constructor(ctx: SignerControllerContext, metrics: SignerMetrics = new SignerMetrics(ctx.registry)) {
    super(
      ctx,
      {
        name: PCR_CONTROLLER,
        workers: PCR_WORKERS,
        initialRetryMs: PCR_RETRY_INITIAL_MS,
        maxRetryMs: PCR_RETRY_MAX_MS,
        keyOf,
        createInformer: createPcrInformer,
      },
      metrics,
    );
    this.#ctx = ctx;
    this.#client = new PcrClient(ctx.kubeConfig, () => ctx.clock.now());
  }

  protected async handle(key: string): Promise<HandleOutcome> {
    const slash = key.indexOf('/');
    const pcr = this.informer.get(key.slice(0, slash), key.slice(slash + 1));
    if (!pcr || pcr.spec.signerName !== this.#ctx.signerName || pcrState(pcr) !== 'pending') return { done: true };
    const started = this.#ctx.clock.now();
    const verdict = judgePcr(
      {
        namespace: pcr.metadata?.namespace ?? '',
        serviceAccountName: pcr.spec.serviceAccountName,
        maxExpirationSeconds: pcr.spec.maxExpirationSeconds,
        unverifiedUserAnnotations: pcr.spec.unverifiedUserAnnotations,
        pkixPublicKey: pcr.spec.pkixPublicKey,
        stubPKCS10Request: pcr.spec.stubPKCS10Request,
      },
      { trustDomain: this.#ctx.trustDomain, maxTtlSeconds: this.#ctx.maxTtlSeconds },
    );
    if (verdict.kind === 'denied') return this.#conclude(pcr, 'Denied', verdict.reason, verdict.message);
    if (!this.#ctx.ca.ready) return { done: false, why: 'ca-not-ready' };
    let signed: SignedChain;
    try {
      if (verdict.key.kind === 'stub') {
        signed = await this.#ctx.ca.sign({ csrPem: pemEncode('CERTIFICATE REQUEST', verdict.key.csrDer), spiffeId: verdict.spiffeId, ttlSeconds: verdict.ttlSeconds });
      } else if (this.#ctx.ca.signPublicKey) {
        signed = await this.#ctx.ca.signPublicKey({ spkiDer: verdict.key.spkiDer, spiffeId: verdict.spiffeId, ttlSeconds: verdict.ttlSeconds });
      } else {
        return this.#conclude(pcr, 'Failed', 'SigningFailed', `the CA (${this.#ctx.ca.description}) cannot certify a bare public key; send stubPKCS10Request`);
      }
    } catch (err) {
      if (isCertbrokerError(err) && err.status === 'unavailable') return { done: false, why: 'ca-unavailable' };
      this.#ctx.logger.warn('PCR signing failed', { pcr: key, err: describeError(err) });
      return this.#conclude(pcr, 'Failed', 'SigningFailed', 'the CA failed to sign the request');
    }
    const outcome = await this.#issue(pcr, signed, verdict.spiffeId);
    if (outcome.done) this.metrics.observeIssue(PCR_CONTROLLER, (this.#ctx.clock.now() - started) / 1000);
    return outcome;
  }

  /** Writes the chain (leaf and intermediates; the roots are the trust bundle's) with the three times and the Issued condition. */
  async #issue(pcr: PcrObject, signed: SignedChain, spiffeId: string): Promise<HandleOutcome> {
    const leaf = new X509Certificate(signed.certChain[0]!);
    const notBeforeMs = Date.parse(leaf.validFrom);
    const notAfterMs = Date.parse(leaf.validTo);
    if (notAfterMs - notBeforeMs < MIN_PCR_LIFETIME_MS) {
      return this.#conclude(pcr, 'Failed', 'SigningFailed', 'the CA certificate expires within the hour: no leaf of at least 1 hour can be issued');
    }
    const now = rfc3339(this.#ctx.clock.now());
    const issued: PcrCondition = { type: 'Issued', status: 'True', reason: 'Issued', message: `issued ${spiffeId}`, lastTransitionTime: now };
    const written = await this.#write(pcr, {
      conditions: [...(pcr.status?.conditions ?? []), issued],
      certificateChain: signed.certChain.slice(0, -1).join(''),
      notBefore: rfc3339(notBeforeMs),
      beginRefreshAt: rfc3339(beginRefreshAtMs(notBeforeMs, notAfterMs)),
      notAfter: rfc3339(notAfterMs),
    });
    // The API server refused the issuance itself (422): retrying the same leaf cannot help.
    if (!written.done && written.why.startsWith('invalid')) return this.#conclude(pcr, 'Failed', 'SigningFailed', `the API server refused the issued certificate: ${written.why}`);
    if (written.done) {
      this.metrics.count(PCR_CONTROLLER, 'issued', 'svid');
      this.#ctx.logger.info('PCR issued', { pcr: keyOf(pcr), pod: pcr.spec.podName, node: pcr.spec.nodeName, identity: spiffeId, serial: signed.serialHex, notAfter: rfc3339(notAfterMs) });
    }
    return written;
  }

  async #conclude(pcr: PcrObject, type: 'Denied' | 'Failed', reason: PcrRefusalReason | 'SigningFailed', message: string): Promise<HandleOutcome> {
    const condition: PcrCondition = { type, status: 'True', reason, message, lastTransitionTime: rfc3339(this.#ctx.clock.now()) };
    const written = await this.#write(pcr, { conditions: [...(pcr.status?.conditions ?? []), condition] });
    if (written.done) {
      this.metrics.count(PCR_CONTROLLER, 'refused', reason);
      this.#ctx.logger.warn(`PCR ${type.toLowerCase()}`, { pcr: keyOf(pcr), pod: pcr.spec.podName, reason, message });
    }
    return written;
  }

  async #write(pcr: PcrObject, status: NonNullable<PcrObject['status']>): Promise<HandleOutcome> {
    try {
      await withDeadline(PCR_WRITE_TIMEOUT_MS, { what: `PUT podcertificaterequests/${keyOf(pcr)}/status`, parent: this.queue.signal, clock: this.#ctx.clock }, (signal) => this.#client.writeStatus(pcr, status, signal));
      return { done: true };
    } catch (err) {
      const code = (err as { httpStatus?: unknown }).httpStatus;
      if (code === 422) return { done: false, why: `invalid: ${describeError(err)}` };
      return { done: false, why: code === 409 ? 'conflict' : `status-write: ${describeError(err)}` };
    }
  }
}

export const pcrController: SignerControllerFactory = (ctx) => new PcrController(ctx);
