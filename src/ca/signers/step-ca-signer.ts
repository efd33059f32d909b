/**
 * A smallstep step-ca as the CA's signer. The CA authenticates and node-authorizes the caller as
 * with every signer; this one then checks the CSR itself, makes a one-time token for the identity
 * with the JWK provisioner's key (step-ca-token.ts), sends CSR and token to step-ca's
 * `POST /1.0/sign` (step-ca-client.ts) and checks the leaf it gets (csr-answer.ts, as for the
 * kubernetes-csr signer: an X509-SVID for that identity, with the CSR's key, chaining to the
 * configured roots; ERR_CA_CSR_BAD_CERTIFICATE otherwise) before answering
 * `[leaf, ...intermediates, roots]`. The leaf's shape is step-ca's: its provisioner's
 * X.509 template (docs/ca.md, "step-ca") must issue SPIFFE leaves from the token's `sans`.
 *
 * The CA's own serving certificate comes from step-ca the same way (a fresh P-256 key, the DNS
 * names as `sans`, at most STEP_CA_SERVING_TTL_SECONDS). Ready once the root file and the provisioner key are loaded; whether step-ca
 * answers is per request (UNAVAILABLE while it is down), so an outage does not take the CA out of
 * its Service.
 */
import { readFile } from 'node:fs/promises';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { Listeners } from '../../core/listeners.js';
import { createCsr, exportPkcs8Pem, exportSpkiDer, generateKeyPair, parseCsrAsync, x509 } from '../../pki/index.js';
import { CaError } from '../errors.js';
import type { ServingCertificate, SignedChain, Signer, SignRequest } from '../signer.js';
import { chainFromCsrAnswer } from './csr-answer.js';
import { RootsFile } from './roots-file.js';
import type { StepCaSettings } from './step-ca-config.js';
import { DEFAULT_STEP_CA_TIMEOUT_MS, StepCaClient, type StepCaChain } from './step-ca-client.js';
import { readProvisionerKey, signToken, type ProvisionerKey } from './step-ca-token.js';

/**
 * The longest serving certificate asked of step-ca: its JWK provisioners' default
 * maxTLSCertDuration (24 h). The CA renews at half-life, so a shorter one only renews more often.
 */
export const STEP_CA_SERVING_TTL_SECONDS = 24 * 3600;

/** The configured settings (step-ca-config.ts) and what the process gives it. */
export interface StepCaSignerOptions extends StepCaSettings {
  /** How often `rootFile` is re-read for a root rotation (default ROOTS_FILE_POLL_MS, roots-file.ts). */
  readonly rootsPollIntervalMs?: number;
  readonly clock: Clock;
  readonly logger: Logger;
}

interface Loaded {
  readonly client: StepCaClient;
  readonly key: ProvisionerKey;
  readonly roots: readonly x509.X509Certificate[];
  readonly rootsPem: readonly string[];
}

export class StepCaSigner implements Signer {
  readonly description: string;
  /** Its sign() gives up the step-ca request when the caller stops waiting. */
  readonly cancellable = true;
  readonly #o: StepCaSignerOptions;
  #loaded: Loaded | undefined;
  #rootsFile: RootsFile | undefined;
  #notReady = 'step-ca root and provisioner key not loaded yet';
  readonly #listeners = new Listeners<void>();

  constructor(options: StepCaSignerOptions) {
    this.#o = options;
    this.description = `step-ca:${options.url}`;
  }

  get ready(): boolean {
    return this.#loaded !== undefined;
  }

  get notReadyReason(): string | undefined {
    return this.#loaded ? undefined : this.#notReady;
  }

  roots(): readonly string[] {
    return this.#loaded?.rootsPem ?? [];
  }

  /**
   * Reads the root file and the provisioner key; throws (ERR_CA_SIGNER_MATERIAL_INVALID) when
   * either is unusable: a CA that cannot sign with its configured step-ca should not start. Then
   * asks step-ca's /health once, for the log, without waiting (it may come up later).
   */
  async start(): Promise<void> {
    const o = this.#o;
    let rootsText: string;
    let keyText: string;
    let password: Uint8Array | undefined;
    try {
      rootsText = await readFile(o.rootFile, 'utf8');
      keyText = await readFile(o.provisionerKeyFile, 'utf8');
      if (o.provisionerKeyPasswordFile !== undefined) password = new TextEncoder().encode((await readFile(o.provisionerKeyPasswordFile, 'utf8')).trimEnd());
    } catch (err) {
      throw this.#unusable(`cannot read a configured file: ${describeError(err)}`, err);
    }
    // The file's roots, parsed once here and followed from now on (a root rotation: both roots in
    // the file for the overlap, then the new one alone; each change goes out as the answers' last
    // element and is what step-ca's TLS is verified with).
    let rootsFile: RootsFile;
    try {
      rootsFile = new RootsFile({ path: o.rootFile, clock: o.clock, logger: o.logger, ...(o.rootsPollIntervalMs !== undefined ? { pollIntervalMs: o.rootsPollIntervalMs } : {}) }, rootsText);
    } catch (err) {
      throw this.#unusable(`${o.rootFile} holds no usable certificate: ${describeError(err)}`, err);
    }
    const roots = rootsFile.roots.certs;
    const key = await readProvisionerKey(o.provisioner, keyText, password);
    const loaded = (this.#loaded = this.#withRoots(key, roots));
    o.logger.info('step-ca signer loaded', { url: o.url, provisioner: o.provisioner, kid: key.kid, roots: roots.length });
    this.#changed();
    this.#rootsFile = rootsFile;
    rootsFile.watch((next) => {
      const current = this.#loaded;
      if (!current) return;
      this.#loaded = this.#withRoots(current.key, next.certs);
      // Requests already sent finish on the old connections (closed after one request deadline).
      void o.clock.sleep(o.timeoutMs ?? DEFAULT_STEP_CA_TIMEOUT_MS).then(() => current.client.close());
      this.#changed();
    });
    void loaded.client.health().then(
      () => o.logger.info('step-ca is healthy', { url: o.url }),
      (err: unknown) => o.logger.warn('step-ca does not answer yet; signing answers UNAVAILABLE until it does', { url: o.url, err: describeError(err) }),
    );
  }

  async sign(request: SignRequest): Promise<SignedChain> {
    const loaded = this.#require();
    const csr = await parseCsrAsync(request.csrPem);
    const servingNames = request.servingNames ?? [];
    const chain = await this.#askStepCa(loaded, { csrPem: request.csrPem, subject: request.spiffeId, sans: [request.spiffeId, ...servingNames], ttlSeconds: request.ttlSeconds, signal: request.signal });
    return this.#checked(loaded, chain, csr.spki, { spiffeId: request.spiffeId, ...(servingNames.length > 0 ? { servingNames } : {}) });
  }

  async issueServingCertificate(request: { readonly dnsNames: readonly string[]; readonly ttlSeconds: number }): Promise<ServingCertificate> {
    const loaded = this.#require();
    if (request.dnsNames.length === 0) throw new CaError('ERR_CA_SIGNING_FAILED', 'a serving certificate needs at least one DNS name', { status: 'internal' });
    const { privateKey } = await generateKeyPair();
    const csrPem = createCsr({ privateKey, servingNames: request.dnsNames }).pem;
    const ttlSeconds = Math.min(request.ttlSeconds, STEP_CA_SERVING_TTL_SECONDS);
    const chain = await this.#askStepCa(loaded, { csrPem, subject: request.dnsNames[0]!, sans: request.dnsNames, ttlSeconds });
    const signed = this.#checked(loaded, chain, exportSpkiDer(privateKey), { servingNames: request.dnsNames });
    return { certChainPem: signed.certChain.slice(0, -1).join(''), privateKeyPem: exportPkcs8Pem(privateKey), notAfterMs: signed.notAfterMs };
  }

  onChange(listener: () => void): () => void {
    return this.#listeners.add(listener);
  }

  async close(): Promise<void> {
    const loaded = this.#loaded;
    this.#loaded = undefined;
    this.#notReady = 'signer closed';
    this.#rootsFile?.close();
    loaded?.client.close();
    if (loaded) this.#changed();
  }

  async #askStepCa(loaded: Loaded, ask: { csrPem: string; subject: string; sans: readonly string[]; ttlSeconds: number; signal?: AbortSignal | undefined }): Promise<StepCaChain> {
    const ott = await signToken(loaded.key, { audience: loaded.client.signAudience, subject: ask.subject, sans: ask.sans, nowMs: this.#o.clock.now() });
    return loaded.client.sign({ csr: ask.csrPem, ott, notAfter: `${ask.ttlSeconds}s` }, ask.signal);
  }

  /** The answer as the CA sends it (leaf, intermediates on the verified path, roots), once checked. */
  #checked(loaded: Loaded, chain: StepCaChain, csrSpki: Buffer, expect: Parameters<typeof chainFromCsrAnswer>[0]['expect']): SignedChain {
    const ended = (pem: string) => (pem.endsWith('\n') ? pem : `${pem}\n`);
    return chainFromCsrAnswer({
      certificatePem: [chain.leafPem, ...chain.intermediatePems].map(ended).join(''),
      roots: loaded.roots,
      rootsPem: loaded.rootsPem.join(''),
      csrSpki,
      nowMs: this.#o.clock.now(),
      expect,
      csrName: `sent to ${this.description}`,
    });
  }

  #withRoots(key: ProvisionerKey, roots: readonly x509.X509Certificate[]): Loaded {
    const o = this.#o;
    const rootsPem = roots.map((r) => r.toString('pem') + '\n');
    const client = new StepCaClient({ url: o.url, rootsPem: rootsPem.join(''), clock: o.clock, ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}) });
    return { client, key, roots, rootsPem };
  }

  #require(): Loaded {
    if (this.#loaded) return this.#loaded;
    throw new CaError('ERR_CA_SIGNER_NOT_READY', `signer not ready: ${this.#notReady}`, { status: 'unavailable', publicMessage: 'CA is not ready' });
  }

  #unusable(why: string, cause?: unknown): CaError {
    this.#notReady = why;
    return new CaError('ERR_CA_SIGNER_MATERIAL_INVALID', `step-ca signer: ${why}`, { status: 'failed-precondition', cause });
  }

  #changed(): void {
    this.#listeners.emit(undefined, (err) => this.#o.logger.error('signer change listener threw', { err: describeError(err) }));
  }
}
